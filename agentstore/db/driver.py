"""The write driver: the one way into a write transaction, on both databases.

Every store write is one *body* — a function of the transaction's cursor
(:class:`~agentstore.db.cursors.SqlCursor`, ``%s`` statements from
``agentstore/sql/``) — handed to :func:`write`::

    from agentstore import db

    stamp, entry_id = now(), new_id()        # ids and "now" outside: a retry
    db.write(lambda cursor: insert(cursor, entry_id, stamp), using="default")  # writes the same

The driver, not the body, decides everything about the transaction:

* **how it opens.** On SQLite, outside any ``atomic()`` block, it sends
  ``BEGIN IMMEDIATE`` (the connection's ``transaction_mode``) and ``COMMIT`` on
  the ``sqlite3`` connection itself: Django's transaction layer costs more than
  the statements of a one-item append. A body that uses the ORM (``orm=True``:
  ORM writes, nested ``atomic()``, ``on_commit``) needs Django to know a
  transaction is open, so for it Django's ``atomic()`` opens it. On PostgreSQL,
  and inside a caller's ``atomic()`` block, it is Django's ``atomic()`` always.
  ``single=True`` declares a body of exactly one statement: outside any
  transaction it is sent in autocommit, where it is its own transaction
  (PostgreSQL: one round trip instead of three).
* **the writer queue** (:mod:`agentstore.db.queue`): on a SQLite file every
  agentstore writer queues on a lock file before ``BEGIN``.
* **the one busy retry.** When SQLite answers SQLITE_BUSY anyway (another
  program holds its lock), the whole body runs again after a short jittered
  pause, at most ``WRITE_ATTEMPTS`` times, then
  :class:`~agentstore.exceptions.DatabaseBusy`. So a body must generate nothing
  that has to stay stable across attempts: make ids and timestamps first.
* **reporting.** The body's cursor reports every statement to Django's
  instrumentation when something watches (:mod:`agentstore.db.cursors`), and
  the ``BEGIN`` is sent on that cursor too, as Django's ``atomic()`` sends it.
  What watches never changes how the transaction opens or which body runs.

The transaction is *durable*: a write inside a caller's ``atomic()`` block
raises ``RuntimeError`` instead of silently widening the lock window (Django's
test cases are the one exception and simply join).
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import TypeVar

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections, transaction
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.utils import CursorWrapper, debug_transaction

from agentstore.conf import agentstore_settings
from agentstore.db import queue
from agentstore.db.cursors import SqlCursor, cursor_on
from agentstore.db.errors import is_busy_error
from agentstore.exceptions import DatabaseBusy

__all__ = ["backoff_delay", "write"]

T = TypeVar("T")

logger = logging.getLogger("agentstore.db")

#: ``BEGIN`` for each ``transaction_mode`` Django's SQLite backend accepts.
_BEGIN = {None: "BEGIN", "DEFERRED": "BEGIN DEFERRED", "IMMEDIATE": "BEGIN IMMEDIATE"}
_BEGIN["EXCLUSIVE"] = "BEGIN EXCLUSIVE"


def write(
    body: Callable[[SqlCursor], T],
    *,
    using: str = DEFAULT_DB_ALIAS,
    orm: bool = False,
    single: bool = False,
    prepare: bool = False,
    connection: BaseDatabaseWrapper | None = None,
) -> T:
    """Run ``body(cursor)`` as one write transaction on ``using`` and return its result.

    ``orm``: the body uses the ORM (or ``atomic()``, ``on_commit``), so Django
    opens the transaction. ``single``: the body sends exactly one statement,
    which autocommit makes its own transaction. ``prepare``: PostgreSQL plans
    the body's statements once per connection (:func:`~agentstore.db.cursors.cursor_on`).
    ``connection``: a connection object already in hand (a
    :class:`~agentstore.db.SharedConnection`'s) instead of this thread's
    ``connections[using]``; where Django must open the transaction the object
    must be installed as the thread's connection (``SharedConnection.borrowed``).
    """
    if connection is None:
        connection = connections[using]
    if connection.vendor == "sqlite" and not connection.in_atomic_block:
        return _sqlite(connection, using, body, orm=orm, single=single)
    if single and not connection.in_atomic_block:
        # Autocommit: one statement is its own durable transaction.
        with cursor_on(connection, prepare=prepare) as cursor:
            return body(cursor)
    if connections[using] is not connection:
        raise RuntimeError(
            "a write that Django opens needs the connection installed as the thread's own "
            "(SharedConnection.borrowed)"
        )
    # PostgreSQL needs no retry loop; inside a (test) transaction we already
    # own the write lock and a retry could not roll back to a clean state.
    with (
        transaction.atomic(using=using, durable=True),
        cursor_on(connection, prepare=prepare) as cursor,
    ):
        return body(cursor)


def _sqlite(
    connection: BaseDatabaseWrapper,
    using: str,
    body: Callable[[SqlCursor], T],
    *,
    orm: bool,
    single: bool,
) -> T:
    """One SQLite write: the writer queue, the transaction, and again on SQLITE_BUSY."""
    if connection.connection is None:
        # Opened first: Django's ``autocommit`` is only set when it connects.
        connection.ensure_connection()
    slot = queue.slot_of(connection)
    # The cursor of a transaction the driver opens itself is made before the
    # queue is taken, as everything but the statements: other writers wait
    # while the queue is held. It serves every attempt.
    cursor = None if orm or not connection.autocommit else cursor_on(connection)
    started = time.monotonic()
    number = 0
    try:
        while True:
            number += 1
            try:
                fd = queue.take(slot, connection)
                try:
                    if cursor is None:
                        # Django's transaction (Django's manual mode may
                        # already have one open: atomic() then knows what to do).
                        with (
                            transaction.atomic(using=using, durable=True),
                            cursor_on(connection) as orm_cursor,
                        ):
                            result = body(orm_cursor)
                        changed = True
                    else:
                        result, changed = _transaction(connection, cursor, body, single)
                finally:
                    queue.release(fd)
                if fd >= 0 and connection.connection is not None:
                    # The WAL's checkpoint once the queue is free (queue.WalLog).
                    queue.after_commit(slot, connection.connection, changed=changed)
                return result
            except DatabaseBusy:
                # The writer queue's deadline passed: waiting again would only
                # multiply the caller's wait (docs/operations.md, "Writer queue deadline").
                raise
            except DatabaseError as exc:
                if not is_busy_error(exc):
                    raise
                _pause(exc, number, started, using)
    finally:
        if cursor is not None:
            cursor.close()


def _transaction(
    connection: BaseDatabaseWrapper,
    cursor: CursorWrapper,
    body: Callable[[SqlCursor], T],
    single: bool,
) -> tuple[T, bool]:
    """``BEGIN`` … ``COMMIT`` on the ``sqlite3`` connection; the result and whether rows changed.

    Rolled back on any failure. Reported as Django reports its own: ``BEGIN``
    goes through the body's cursor (the query log and the ``execute_wrappers``
    see it), ``COMMIT`` and ``ROLLBACK`` only to the query log
    (``debug_transaction``). One flat function: it runs once per append.
    """
    raw = connection.connection
    if not single:
        mode = connection.transaction_mode  # type: ignore[attr-defined]
        cursor.execute(_BEGIN.get(mode) or f"BEGIN {mode}")
    changes = raw.total_changes
    try:
        result = body(cursor)
        if not single:
            try:
                if getattr(cursor, "logged", True):
                    # The query log shows it, as it shows Django's own COMMIT
                    # (debug_transaction: only when something logs queries).
                    with debug_transaction(connection, "COMMIT"):
                        raw.execute("COMMIT")
                else:
                    raw.execute("COMMIT")
            except BaseException:
                with connection.wrap_database_errors:
                    raise
    except BaseException:
        _rollback(connection)
        raise
    return result, raw.total_changes != changes


def _rollback(connection: BaseDatabaseWrapper) -> None:
    """Roll back a transaction :func:`_transaction` began; a connection that cannot is closed."""
    try:
        if connection.connection.in_transaction:
            with debug_transaction(connection, "ROLLBACK"):
                connection.connection.execute("ROLLBACK")
    except Exception:
        # Never leave a half-open transaction on a connection Django believes
        # is in autocommit: the next request would write into it.
        logger.exception("could not roll back a write transaction; closing the connection")
        connection.close()


def _pause(exc: DatabaseError, number: int, started: float, using: str) -> None:
    """After busy attempt ``number`` (``exc``): wait :func:`backoff_delay`, or give up.

    The last busy attempt (``WRITE_ATTEMPTS``) raises
    :class:`~agentstore.exceptions.DatabaseBusy`.
    """
    # Read only after a busy attempt: the first attempt nearly always commits.
    attempts = max(1, int(agentstore_settings.WRITE_ATTEMPTS))
    if number >= attempts:
        waited = time.monotonic() - started
        logger.warning(
            "write transaction on %r busy, exhausted after %d attempts (%.3fs)",
            using,
            attempts,
            waited,
        )
        raise DatabaseBusy(
            f"database {using!r} is busy: write transaction exhausted after "
            f"{attempts} attempts ({waited:.3f}s)",
            attempts=attempts,
        ) from exc
    logger.debug("write transaction on %r busy (attempt %d), retrying", using, number)
    time.sleep(backoff_delay(number))


def backoff_delay(attempt: int) -> float:
    """Return the jittered wait after failed ``attempt`` (1-based), in seconds.

    Uniform in ``[d/2, d]`` with ``d = min(base << (attempt - 1), max)``: with the
    defaults 2.5–5 ms after the first attempt and 5–10 ms after the second.
    """
    base = float(agentstore_settings.WRITE_BACKOFF_BASE)
    ceiling = min(base * (1 << (attempt - 1)), float(agentstore_settings.WRITE_BACKOFF_MAX))
    return random.uniform(ceiling / 2, ceiling)
