"""Read snapshots that never take SQLite's write lock.

Every multi-query read runs inside :func:`read_snapshot` (or :func:`read_only`)::

    rows = read_only(lambda: list(Entry.objects.filter(session_id=sid)), using="default")

With ``transaction_mode="IMMEDIATE"`` (agentstore's SQLite setting) a plain
``atomic()`` around reads would take the write lock. :func:`read_snapshot`
begins a *deferred* transaction with ``PRAGMA query_only`` on SQLite, and a
``REPEATABLE READ, READ ONLY`` transaction on PostgreSQL, so several queries
see one consistent snapshot while writers carry on.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from typing import TypeVar

from django.db import DEFAULT_DB_ALIAS, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper

from agentstore.db.cursors import cursor_on

__all__ = ["read_only", "read_snapshot"]

T = TypeVar("T")

logger = logging.getLogger("agentstore.db")


def read_only(fn: Callable[[], T], *, using: str = DEFAULT_DB_ALIAS) -> T:
    """Run ``fn`` inside :func:`read_snapshot` and return its result."""
    with read_snapshot(using):
        return fn()


@contextlib.contextmanager
def read_snapshot(using: str = DEFAULT_DB_ALIAS) -> Iterator[None]:
    """Give the queries in the block one consistent snapshot without the write lock.

    Inside an existing transaction the block simply joins it (it already has a
    snapshot). Writing inside the block fails on both backends.
    """
    connection = connections[using]
    if connection.in_atomic_block:
        yield
        return
    if connection.vendor == "sqlite":
        with _sqlite_read_transaction(connection, using):
            yield
        return
    with transaction.atomic(using=using), cursor_on(connection) as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        yield


@contextlib.contextmanager
def _sqlite_read_transaction(connection: BaseDatabaseWrapper, using: str) -> Iterator[None]:
    connection.ensure_connection()
    with contextlib.ExitStack() as stack:
        # Django begins every outermost atomic() with BEGIN <transaction_mode>;
        # swap in DEFERRED for this one BEGIN so the snapshot takes only a read
        # lock (in WAL mode: none that blocks writers).
        saved_mode = getattr(connection, "transaction_mode", None)
        connection.transaction_mode = "DEFERRED"  # type: ignore[attr-defined]
        try:
            stack.enter_context(transaction.atomic(using=using))
        finally:
            connection.transaction_mode = saved_mode  # type: ignore[attr-defined]
        stack.callback(_restore_query_only, connection)
        with cursor_on(connection) as cursor:
            cursor.execute("PRAGMA query_only = ON")
        yield


def _restore_query_only(connection: BaseDatabaseWrapper) -> None:
    # Runs after COMMIT/ROLLBACK of the snapshot. A connection left read-only
    # would break every later write on this thread, so if the reset fails the
    # connection is thrown away rather than reused.
    try:
        with cursor_on(connection) as cursor:
            cursor.execute("PRAGMA query_only = OFF")
    except Exception:
        logger.exception("could not reset PRAGMA query_only; closing the connection")
        connection.close()
