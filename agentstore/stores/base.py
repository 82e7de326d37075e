"""What every store and repository shares: the database alias, the clock, the transactions.

    class DocumentStore(StoreBase):
        def put(self, doc):
            stamp = self.now()                      # outside the transaction: retries
            return self.write(lambda cursor: ...)   # rewrite the same values

:meth:`StoreBase.write` runs on :func:`agentstore.db.write`, the one write driver:
the body gets the transaction's cursor for its hand-written statements, and one
that uses the ORM says so (``orm=True``: Django opens the transaction).
A method whose whole body is one ORM write transaction says so with
:func:`retrying_write` instead of wrapping a closure::

    def update_ref(self, name, expected, next, reason=""):
        ...                                          # validate, read the clock
        self._update_ref(name, want, target, reason, self.now())

    @retrying_write
    def _update_ref(self, name, want, target, reason, now):
        ...                                          # plain statements, plain methods

``using`` picks the database alias; ``clock`` is a callable returning an aware
datetime (tests inject a fixed or advancing one). Every timestamp a store writes
comes from :meth:`StoreBase.now`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Concatenate, ParamSpec, TypeVar

from django.db import DEFAULT_DB_ALIAS

from agentstore import db
from agentstore.db import SqlCursor
from agentstore.validation import require_aware

T = TypeVar("T")
P = ParamSpec("P")
S = TypeVar("S", bound="StoreBase")

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

    def write(
        self,
        body: Callable[[SqlCursor], T],
        *,
        orm: bool = False,
        single: bool = False,
        prepare: bool = False,
    ) -> T:
        """Run ``body(cursor)`` as one short write transaction (:func:`agentstore.db.write`).

        ``body`` sends hand-written statements on ``cursor``; on SQLite the driver
        then opens the transaction on the ``sqlite3`` connection itself. ``orm``:
        the body also uses the ORM (writes, ``atomic()`` savepoints), so Django
        opens it. ``single``: the body is one statement, its own transaction in
        autocommit. ``prepare``: PostgreSQL plans the statements once per connection.
        """
        return db.write(body, using=self.using, orm=orm, single=single, prepare=prepare)

    def read(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` in a read snapshot that never takes the write lock."""
        return db.read_only(fn, using=self.using)


def retrying_write(method: Callable[Concatenate[S, P], T]) -> Callable[Concatenate[S, P], T]:
    """Run the decorated method as one ORM write transaction (``StoreBase.write(orm=True)``).

    On SQLite a busy database makes the write driver run the body again, so the
    body must be re-runnable: take the clock and new ids in the caller and
    pass them in, as arguments. The body can then be ordinary code split into
    ordinary methods rather than a long closure.
    """

    @functools.wraps(method)
    def wrapper(self: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self.write(lambda cursor: method(self, *args, **kwargs), orm=True)

    return wrapper
