"""What every store and repository shares: the database alias, the clock, the transactions.

    class DocumentStore(StoreBase):
        def put(self, doc):
            stamp = self.now()                      # outside the transaction: retries
            return self.write(lambda: ...)          # rewrite the same values

``using`` picks the database alias; ``clock`` is a callable returning an aware
datetime (tests inject a fixed or advancing one). Every timestamp a store writes
comes from :meth:`StoreBase.now`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import TypeVar

from django.db import DEFAULT_DB_ALIAS

from agentstore.db import atomic_write, read_only
from agentstore.validation import require_aware

T = TypeVar("T")

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


class StoreBase:
    """Base class of the stores and task repositories."""

    def __init__(self, *, using: str = DEFAULT_DB_ALIAS, clock: Clock | None = None) -> None:
        self.using = using
        self.clock: Clock = clock or utc_now

    def now(self) -> datetime:
        """Return the clock's time in UTC (refusing a naive clock)."""
        return require_aware(self.clock(), "clock()")

    def write(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` in one short write transaction (see ``agentstore.db.atomic_write``)."""
        return atomic_write(fn, using=self.using)

    def read(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` in a read snapshot that never takes the write lock."""
        return read_only(fn, using=self.using)
