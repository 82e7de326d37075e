"""Short write transactions and lock-free read snapshots for agentstore's stores.

Every store write goes through :func:`atomic_write`; every multi-query read
through :func:`read_only` (or the :func:`read_snapshot` context manager)::

    from agentstore.db import atomic_write, read_only

    entry_id = new_id()                        # ids and "now" outside: a retry
    atomic_write(lambda: insert(entry_id), using="default")   # writes the same
    rows = read_only(lambda: list(Entry.objects.filter(session_id=sid)))

Why this module exists
----------------------
On SQLite, one writer at a time holds the database. Django's
``transaction_mode="IMMEDIATE"`` makes every outermost ``atomic()`` take the
write lock at ``BEGIN``, so a read-then-write transaction never fails on lock
upgrade; the connection ``timeout`` makes ``BEGIN IMMEDIATE`` wait. That is not
enough under load: SQLite's busy handler *sleeps and polls*, so a waiting writer
can lose the race to newcomers again and again until its timeout expires and
"database is locked" escapes to the caller (measured: 1–4 escapes a run at 4–8
processes, single waits of several seconds). So on a file-backed SQLite database
agentstore's writers first queue on an OS file lock beside the database
(``fcntl.flock``), which the kernel hands over to a sleeping waiter when it is
released — no polling, no starvation — and only then run ``BEGIN IMMEDIATE``.
SQLite's own lock still protects the data against every other writer (Django's
admin, ``manage.py shell``, other programs); against those the busy timeout and
a short, jittered retry of the whole transaction apply (``WRITE_ATTEMPTS``).

Reads must never take the write lock: with ``IMMEDIATE`` globally, a plain
``atomic()`` around reads would. :func:`read_snapshot` begins a *deferred*
transaction with ``PRAGMA query_only`` on SQLite, and a ``REPEATABLE READ, READ
ONLY`` transaction on PostgreSQL, so several queries see one consistent snapshot
while writers carry on.

On PostgreSQL :func:`atomic_write` is a plain durable ``atomic()``: row locks and
MVCC do what the file lock does for SQLite.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import queue
import random
import sqlite3
import struct
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from django.core.signals import setting_changed
from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections, transaction
from django.db.backends import utils as backend_utils
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.utils import CursorWrapper

from agentstore import walcopy
from agentstore.conf import agentstore_settings
from agentstore.exceptions import DatabaseBusy

__all__ = [
    "SharedConnection",
    "atomic_write",
    "backoff_delay",
    "bare_connection",
    "bare_execute",
    "bare_or_lean_write",
    "bare_sqlite",
    "bare_write",
    "bare_write_on",
    "is_busy_error",
    "is_unique_violation",
    "lean_write",
    "read_only",
    "read_snapshot",
    "sqlite_lock_path",
    "watched",
]

T = TypeVar("T")

logger = logging.getLogger("agentstore.db")

#: SQLite's primary result code for "the database file is locked by another connection".
SQLITE_BUSY = 5


def atomic_write(fn: Callable[[], T], *, using: str = DEFAULT_DB_ALIAS) -> T:
    """Run ``fn`` in one short write transaction on ``using`` and return its result.

    The transaction is *durable*: calling this inside a caller's ``atomic()``
    block raises ``RuntimeError`` instead of silently widening the lock window
    (Django's test cases are the one exception and simply join). On SQLite the
    whole ``fn`` is re-run when the database answers SQLITE_BUSY, at most
    ``WRITE_ATTEMPTS`` times, so ``fn`` must generate nothing that has to stay
    stable across attempts (make ids and timestamps before calling). After the
    last busy attempt :class:`~agentstore.exceptions.DatabaseBusy` is raised,
    and at once when the SQLite writer queue is not granted within
    ``WRITE_QUEUE_TIMEOUT`` seconds.
    """
    connection = connections[using]
    if connection.vendor != "sqlite" or connection.in_atomic_block:
        # PostgreSQL needs no retry loop; inside a (test) transaction we already
        # own the write lock and a retry could not roll back to a clean state.
        with transaction.atomic(using=using, durable=True):
            return fn()

    def attempt() -> T:
        with transaction.atomic(using=using, durable=True):
            return fn()

    return _sqlite_attempts(connection, using, attempt)


def _lean(connection: BaseDatabaseWrapper) -> BaseDatabaseWrapper | None:
    """``connection``, opened, when a write may skip Django's layers; else ``None``.

    The one rule (decision 300) behind :func:`lean_write`, :func:`bare_sqlite`
    and :func:`bare_or_lean_write`: SQLite, outside any ``atomic()`` block,
    nothing watching the statements (:func:`watched`), and in autocommit —
    Django's manual-transaction mode may already have a transaction open.
    """
    if connection.vendor != "sqlite" or connection.in_atomic_block or watched(connection):
        return None
    if connection.connection is None:
        connection.ensure_connection()
    return connection if connection.autocommit else None


class _Open(threading.local):
    """The lean transaction this thread is running, as ``(alias, connection object)``.

    Set by :func:`lean_write` while its body runs, so that the body's
    :func:`agentstore.sql.cursor` calls reuse the connection object it looked
    up and the "nothing watches" answer it got at ``BEGIN`` instead of asking
    ``connections[alias]`` (an ``asgiref`` look-up) and :func:`watched` again
    for every cursor (decision 390).
    """

    current: tuple[str, BaseDatabaseWrapper] | None = None


_open = _Open()


def in_lean_write(using: str) -> BaseDatabaseWrapper | None:
    """The connection object of the :func:`lean_write` this thread runs on ``using``, else ``None``.

    Non-``None`` only inside the body of a lean transaction: SQLite, the
    connection is this thread's ``connections[using]`` (nothing lent over it,
    :meth:`SharedConnection.borrowed`) and nothing watched it when the
    transaction began (:func:`watched`). What watches a connection is decided
    once per transaction: a watcher installed *inside* a running lean body
    sees the statements from the next transaction on (decision 390).
    """
    current = _open.current
    if current is not None and current[0] == using:
        return current[1]
    return None


def lean_write(fn: Callable[[], T], *, using: str = DEFAULT_DB_ALIAS) -> T:
    """:func:`atomic_write` for a body of hand-written statements: the append hot paths.

    ``fn`` may only run statements on :func:`agentstore.sql.cursor` and plain
    ORM reads: no ORM write, no nested ``atomic()``, no ``on_commit`` (all of
    which need Django to know a transaction is open). On a SQLite connection in
    autocommit, outside any ``atomic()`` block and with nothing watching its
    statements (:func:`watched`), the transaction is the sqlite3 connection's
    own ``BEGIN IMMEDIATE`` … ``COMMIT`` — inside the same writer queue and the
    same busy retry as :func:`atomic_write`, without Django's transaction layer,
    which cost more than the statements of a one-item append (decision 291).
    Everywhere else it *is* :func:`atomic_write`.
    """
    connection = connections[using]
    if _lean(connection) is None:
        return atomic_write(fn, using=using)
    return _lean_sqlite(connection, using, fn, bare=False, own=True)


#: ``BEGIN`` for each ``transaction_mode`` Django's SQLite backend accepts.
_BEGIN = {None: "BEGIN", "DEFERRED": "BEGIN DEFERRED", "IMMEDIATE": "BEGIN IMMEDIATE"}
_BEGIN["EXCLUSIVE"] = "BEGIN EXCLUSIVE"


def _lean_sqlite(
    connection: BaseDatabaseWrapper,
    using: str,
    fn: Callable[..., T],
    *,
    bare: bool,
    own: bool = False,
) -> T:
    """The lean transaction itself, once the caller has checked that it may run it.

    ``BEGIN`` … ``COMMIT`` on the ``sqlite3`` connection in the writer queue,
    rolled back on any failure, run again on SQLITE_BUSY (as
    :func:`_sqlite_attempts`). ``bare``: ``fn`` receives the ``sqlite3``
    connection and its ``sqlite3`` errors are raised as Django's; else ``fn()``
    runs on :func:`agentstore.sql.cursor`, which raises Django's itself.
    ``own``: ``connection`` is this thread's ``connections[using]``, published
    to the body through :func:`in_lean_write`.

    One flat function rather than a transaction closure inside a retry helper
    inside context managers: it runs once per append, and each layer cost a
    few µs (decision 390). ``try``/``except`` blocks cost nothing until
    something raises, so the errors are mapped to Django's by re-raising
    inside ``wrap_database_errors`` only then.
    """
    slot = _slot(connection)
    mode = connection.transaction_mode  # type: ignore[attr-defined]
    begin = _BEGIN.get(mode) or f"BEGIN {mode}"
    started = time.monotonic()
    number = 0
    while True:
        number += 1
        try:
            fd = _queue(slot, connection)
            try:
                raw: sqlite3.Connection = connection.connection
                try:
                    raw.execute(begin)
                except BaseException:
                    with connection.wrap_database_errors:
                        raise
                changes = raw.total_changes
                try:
                    if bare:
                        try:
                            result = fn(raw)
                        except BaseException:
                            with connection.wrap_database_errors:  # sqlite3's as Django's
                                raise
                    elif own:
                        outer = _open.current
                        _open.current = (using, connection)
                        try:
                            result = fn()
                        finally:
                            _open.current = outer
                    else:
                        result = fn()
                    try:
                        raw.execute("COMMIT")
                    except BaseException:
                        with connection.wrap_database_errors:
                            raise
                except BaseException:
                    _rollback(connection)
                    raise
            finally:
                if fd >= 0:
                    fcntl.flock(fd, fcntl.LOCK_UN)
            if fd >= 0:
                # The WAL's checkpoint once the queue is free (decision 380).
                _checkpoint_after_queue(slot, raw, changed=raw.total_changes != changes)
            return result
        except DatabaseBusy:
            # The writer queue's deadline passed: waiting again would only
            # multiply the caller's wait (docs/operations.md, "Writer queue deadline").
            raise
        except DatabaseError as exc:
            if not is_busy_error(exc):
                raise
            _busy_pause(exc, number, started, using)


def bare_sqlite(using: str = DEFAULT_DB_ALIAS) -> sqlite3.Connection | None:
    """The ``sqlite3`` connection of ``using`` when a write may bypass Django's cursor.

    That is: SQLite in autocommit, outside any ``atomic()`` block, and nothing
    watching the statements (:func:`watched`). Otherwise ``None``, and the
    caller takes its Django path, so whatever observes statements still sees
    every one.
    """
    return bare_connection(connections[using])


def bare_connection(connection: BaseDatabaseWrapper) -> sqlite3.Connection | None:
    """:func:`bare_sqlite` of a connection object already in hand (no ``connections[…]``)."""
    if _lean(connection) is None:
        return None
    raw: sqlite3.Connection = connection.connection
    return raw


def bare_write(fn: Callable[[sqlite3.Connection], T], *, using: str = DEFAULT_DB_ALIAS) -> T:
    """:func:`lean_write` of ``fn(raw)``: statements sent on the ``sqlite3`` connection itself.

    The same transaction as :func:`atomic_write` — the writer queue, ``BEGIN
    IMMEDIATE``, ``COMMIT``, the busy retries, errors raised as Django's —
    without Django's cursor around each statement (decision 295). ``fn`` uses
    ``?`` placeholders; the caller checked :func:`bare_sqlite`.
    """
    connection = connections[using]
    if _lean(connection) is not None:
        return _lean_sqlite(connection, using, fn, bare=True)

    def body() -> T:
        with connection.wrap_database_errors:  # sqlite3's errors raised as Django's
            return fn(connection.connection)

    return atomic_write(body, using=using)


def bare_execute(
    connection: BaseDatabaseWrapper, statement: str, params: Sequence[Any], *, using: str
) -> bool:
    """Send one ``?`` statement as its own transaction on ``connection``'s ``sqlite3`` connection.

    :func:`bare_connection`'s test and the writer queue in one call — the
    LangGraph saver's per-call write (decision 352). SQLite's autocommit makes
    one statement its own transaction — atomic, durable, its deferred foreign
    keys checked at its end — so no ``BEGIN IMMEDIATE`` and ``COMMIT`` are sent
    (decision 350); inside the writer queue no agentstore writer competes for
    SQLite's lock, anyone else meets the busy timeout and the retries, as a
    ``BEGIN IMMEDIATE`` would. ``False``, with nothing sent, where the bare
    path does not apply (PostgreSQL, inside ``atomic()``, something
    watching): the caller then takes Django's path, so a watcher sees the
    statement.
    """
    if _lean(connection) is None:
        return False
    # _sqlite_attempts written out, without its closure and a context manager
    # per statement: this is the saver's every write (decision 401). sqlite3's
    # errors are raised as Django's by re-raising inside wrap_database_errors
    # only when something raised, as _lean_sqlite does.
    slot = _slot(connection)
    started = time.monotonic()
    number = 0
    while True:
        number += 1
        try:
            fd = _queue(slot, connection)
            try:
                raw: sqlite3.Connection = connection.connection
                try:
                    raw.execute(statement, params)
                except BaseException:
                    with connection.wrap_database_errors:
                        raise
            finally:
                if fd >= 0:
                    fcntl.flock(fd, fcntl.LOCK_UN)
            if fd >= 0:
                # The WAL's checkpoint once the queue is free (decision 380).
                _checkpoint_after_queue(slot, raw)
            return True
        except DatabaseBusy:
            raise
        except DatabaseError as exc:
            if not is_busy_error(exc):
                raise
            _busy_pause(exc, number, started, using)


def bare_write_on(
    connection: BaseDatabaseWrapper,
    fn: Callable[[sqlite3.Connection], T],
    *,
    using: str,
) -> T:
    """:func:`bare_write` on ``connection``, for which :func:`bare_connection` just said yes.

    The same transaction — the writer queue, ``BEGIN IMMEDIATE``, ``COMMIT``,
    the busy retries, errors raised as Django's — without looking the
    connection up or checking it again: the LangGraph saver's store holds
    its connection object and has just checked it (decision 352).
    """
    return _lean_sqlite(connection, using, fn, bare=True)


def bare_or_lean_write(
    bare: Callable[[sqlite3.Connection], T],
    lean: Callable[[], T],
    *,
    using: str = DEFAULT_DB_ALIAS,
    connection: BaseDatabaseWrapper | None = None,
) -> T:
    """``bare_write(bare)`` where :func:`bare_sqlite` allows it, else ``lean_write(lean)``.

    One check of the connection instead of two (``bare_sqlite`` then
    ``bare_write``), for a per-call path like the loop store's append
    (decision 315). ``bare`` sends ``?`` statements on the ``sqlite3``
    connection; ``lean`` the same statements on :func:`agentstore.sql.cursor`.
    ``connection``: ``connections[using]`` when the caller has just looked it
    up on this thread, so it is not looked up again (decision 390).
    """
    if connection is None:
        connection = connections[using]
    if _lean(connection) is None:
        return atomic_write(lean, using=using)
    return _lean_sqlite(connection, using, bare, bare=True)


class SharedConnection:
    """One Django connection object of an alias, lent to one thread at a time.

    LangGraph calls a checkpointer from short-lived executor threads — a new set
    for every ``invoke`` — and Django opens one connection per thread, which
    those threads never close (measured: 507 connections for 200 invocations).
    So the LangGraph savers keep one connection object of their own (as
    ``SqliteSaver`` keeps one ``sqlite3`` connection behind a lock) and use it
    from whichever thread calls, holding :attr:`lock`:

    * a hot path that needs only the connection object (statements on it, or
      on its ``sqlite3`` connection) takes :attr:`lock` and :meth:`ready` —
      nothing else, since Django's per-thread machinery (``connections[alias]``,
      ``asgiref.local``) was a fifth of the saver's time per call (decision 352);
    * anything that goes through ``connections[alias]`` (the ORM,
      ``atomic_write``) runs inside :meth:`borrowed`, which installs the object
      as the calling thread's connection for the alias while it runs, then
      puts the thread's own back.

    A transaction the caller has open lives on the caller's connection, so
    work on this one never joins it. ``settings(alias)`` gives the settings
    the connection (re)connects with, read at each reconnect (a test run
    renames the database after import); by default Django's own.
    """

    def __init__(
        self, using: str, *, settings: Callable[[str], dict[str, Any]] | None = None
    ) -> None:
        self.using = using
        self.pid = os.getpid()
        self.lock = threading.RLock()
        self.settings = settings or (lambda alias: connections.settings[alias])
        self.connection: BaseDatabaseWrapper = connections.create_connection(using)
        # Used from whichever thread holds the lock; Django checks the owner.
        self.connection.inc_thread_sharing()

    def ready(self) -> BaseDatabaseWrapper:
        """The connection object, for the thread that holds :attr:`lock`."""
        connection = self.connection
        if connection.connection is None:
            # (Re)connecting: read the settings now, as Django's own
            # connections do (a test run renames the database after import).
            connection.settings_dict = self.settings(self.using)
        return connection

    @contextlib.contextmanager
    def borrowed(self) -> Iterator[BaseDatabaseWrapper]:
        """Hold :attr:`lock`, the connection installed as the thread's ``connections[alias]``."""
        with self.lock:
            # The thread's own connection object, if it has one: LangGraph's
            # executor threads are new at every invoke, and making them one
            # (connections[alias]) would cost 50 µs per thread for nothing.
            own = next(
                (c for c in connections.all(initialized_only=True) if c.alias == self.using),
                None,
            )
            if own is self.connection:  # a nested call on the same thread
                yield own
                return
            self.ready()
            connections[self.using] = self.connection
            # A lean transaction this thread runs on the alias is on its own
            # connection object, not this one: hidden while this one is lent.
            outer = _open.current
            if outer is not None and outer[0] == self.using:
                _open.current = None
            try:
                yield self.connection
            finally:
                _open.current = outer
                if own is None:
                    del connections[self.using]
                else:
                    connections[self.using] = own

    def close(self) -> None:
        """Close the connection (the next use opens a new one)."""
        with self.lock:
            self.connection.close()


def _rollback(connection: BaseDatabaseWrapper) -> None:
    """Roll back a :func:`lean_write` transaction; a connection that cannot is closed."""
    try:
        if connection.connection.in_transaction:
            connection.connection.execute("ROLLBACK")
    except Exception:
        # Never leave a half-open transaction on a connection Django believes
        # is in autocommit: the next request would write into it.
        logger.exception("could not roll back a write transaction; closing the connection")
        connection.close()


def watched(connection: BaseDatabaseWrapper) -> bool:
    """Whether something watches ``connection``'s statements through Django.

    ``connection.queries`` (``DEBUG``, ``assertNumQueries``, ``CaptureQueriesContext``),
    an ``execute_wrapper()``, a ``cursor`` replaced on the connection (the debug
    toolbar, tracers that patch connections) or a patched ``CursorWrapper.execute``
    (tracers that patch the class). The lean paths (:func:`lean_write`,
    :func:`agentstore.sql.cursor`) then step aside, so every statement is seen.
    ``AGENTSTORE["LEAN_SQL"] = False`` makes them step aside always.
    """
    return (
        connection.queries_logged
        or bool(connection.execute_wrappers)
        or "cursor" in vars(connection)
        or CursorWrapper.execute.__code__ is not _DJANGO_EXECUTE
        or CursorWrapper.executemany.__code__ is not _DJANGO_EXECUTEMANY
        or not agentstore_settings.LEAN_SQL
    )


def _django_code(name: str) -> Any:
    """The code of Django's own ``CursorWrapper.<name>`` (a patch replaces it)."""
    code = getattr(CursorWrapper, name).__code__
    # A tracer may have patched the class before this module was imported.
    return code if code.co_filename == backend_utils.__file__ else None


_DJANGO_EXECUTE = _django_code("execute")
_DJANGO_EXECUTEMANY = _django_code("executemany")


def _sqlite_attempts(connection: BaseDatabaseWrapper, using: str, attempt: Callable[[], T]) -> T:
    """Run ``attempt`` (one transaction) in the writer queue; again on SQLITE_BUSY."""
    slot = _slot(connection)
    started = time.monotonic()
    number = 0
    while True:
        number += 1
        try:
            # The writer slot inline rather than through _sqlite_writer_slot's
            # generator: this runs once per append.
            fd = _queue(slot, connection)
            try:
                result = attempt()
            finally:
                if fd >= 0:
                    fcntl.flock(fd, fcntl.LOCK_UN)
            if fd >= 0 and connection.connection is not None:
                # The WAL's checkpoint once the queue is free (decision 380).
                _checkpoint_after_queue(slot, connection.connection)
            return result
        except DatabaseBusy:
            # The writer queue's deadline passed: waiting again would only
            # multiply the caller's wait (docs/operations.md, "Writer queue deadline").
            raise
        except DatabaseError as exc:
            if not is_busy_error(exc):
                raise
            _busy_pause(exc, number, started, using)


def _busy_pause(exc: DatabaseError, number: int, started: float, using: str) -> None:
    """After busy attempt ``number`` (``exc``): wait, or give up.

    The last busy attempt (``WRITE_ATTEMPTS``) raises
    :class:`~agentstore.exceptions.DatabaseBusy`; before it, this sleeps
    :func:`backoff_delay` and the caller tries again.
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
    delay = backoff_delay(number)
    logger.debug("write transaction on %r busy (attempt %d), retrying", using, number)
    time.sleep(delay)


def backoff_delay(attempt: int) -> float:
    """Return the jittered wait after failed ``attempt`` (1-based), in seconds.

    Uniform in ``[d/2, d]`` with ``d = min(base << (attempt - 1), max)``: with the
    defaults 2.5–5 ms after the first attempt and 5–10 ms after the second.
    """
    base = float(agentstore_settings.WRITE_BACKOFF_BASE)
    ceiling = min(base * (1 << (attempt - 1)), float(agentstore_settings.WRITE_BACKOFF_MAX))
    return random.uniform(ceiling / 2, ceiling)


def is_busy_error(exc: BaseException) -> bool:
    """Tell whether ``exc`` (or what it wraps) is SQLite's SQLITE_BUSY.

    Only the *primary* result code counts (``code & 0xFF``), so BUSY_SNAPSHOT
    and BUSY_RECOVERY are busy too, while SQLITE_LOCKED (a conflict inside one
    connection, which waiting cannot fix) is not.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, DatabaseBusy):
            return True
        code = getattr(current, "sqlite_errorcode", None)
        if isinstance(code, int):
            return code & 0xFF == SQLITE_BUSY
        if isinstance(current, sqlite3.OperationalError):
            message = str(current).lower()
            if message.startswith(("database is locked", "database is busy")):
                return True
        current = current.__cause__ or current.__context__
    return False


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
    with transaction.atomic(using=using), connection.cursor() as cursor:
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
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA query_only = ON")
        yield


def _restore_query_only(connection: BaseDatabaseWrapper) -> None:
    # Runs after COMMIT/ROLLBACK of the snapshot. A connection left read-only
    # would break every later write on this thread, so if the reset fails the
    # connection is thrown away rather than reused.
    try:
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA query_only = OFF")
    except Exception:
        logger.exception("could not reset PRAGMA query_only; closing the connection")
        connection.close()


# -- the SQLite writer queue -------------------------------------------------


_lock_paths: dict[tuple[str, str, bool, str], str | None] = {}


def sqlite_lock_path(connection: BaseDatabaseWrapper) -> str | None:
    """Return the writer lock file of a file-backed SQLite connection, else ``None``."""
    if connection.vendor != "sqlite":
        return None
    # Cached: this runs on every write transaction, and the settings lookups
    # and path resolution cost more than the lock itself.
    key = (
        connection.alias,
        str(connection.settings_dict["NAME"] or ""),
        bool(agentstore_settings.SQLITE_WRITE_LOCK),
        str(agentstore_settings.SQLITE_LOCK_SUFFIX),
    )
    if key not in _lock_paths:
        _lock_paths[key] = _resolve_lock_path(connection)
    return _lock_paths[key]


def _resolve_lock_path(connection: BaseDatabaseWrapper) -> str | None:
    if not agentstore_settings.SQLITE_WRITE_LOCK:
        return None
    name = str(connection.settings_dict["NAME"] or "")
    if connection.is_in_memory_db() or not name:  # type: ignore[attr-defined]
        return None
    if name.startswith("file:"):
        name = name[len("file:") :].split("?", 1)[0]
    return os.path.abspath(name) + str(agentstore_settings.SQLITE_LOCK_SUFFIX)


class _LockFile:
    """One open description of a lock file, owned by one connection of one process.

    ``flock`` locks belong to the open file description, and descriptions opened
    separately conflict even inside one process — so giving every connection
    (every thread's, see ``_files``) its own description lets the kernel queue
    threads and processes alike. A description
    inherited through ``fork`` is shared with the parent, so a child opens anew.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.pid = os.getpid()
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        #: The helper thread of contended waits with a deadline, started at the first.
        self.waiter: _Waiter | None = None

    def detach(self) -> int:
        """Hand the descriptor to someone else (it is no longer closed here)."""
        fd, self.fd = self.fd, -1
        self.waiter = None  # it ends after the abandoned wait it runs
        return fd

    def __del__(self) -> None:
        if os.getpid() != self.pid:
            return
        if self.waiter is not None:
            self.waiter.stop()
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)


# Each connection object's lock descriptions. A Django connection object
# belongs to one thread, or is lent to one thread at a time under a lock (the
# LangGraph savers' shared connection), so one description per connection
# queues exactly the parties a description per thread did — without opening
# the file again for every short-lived thread that borrows a shared connection
# (an open is ~50 µs; LangGraph's executor threads are new at every invoke).
_files: weakref.WeakKeyDictionary[BaseDatabaseWrapper, dict[str, _LockFile]] = (
    weakref.WeakKeyDictionary()
)
_unavailable: set[str] = set()


def _lock_files(connection: BaseDatabaseWrapper) -> dict[str, _LockFile]:
    files = _files.get(connection)
    if files is None:
        files = _files[connection] = {}
    return files


def _lock_file(connection: BaseDatabaseWrapper, path: str) -> _LockFile | None:
    files = _lock_files(connection)
    lock = files.get(path)
    if lock is None or lock.pid != os.getpid():
        if path in _unavailable:
            return None
        try:
            lock = _LockFile(path)
        except OSError as exc:
            # A read-only directory, say: fall back to SQLite's own locking.
            _unavailable.add(path)
            logger.warning("cannot open writer lock file %s (%s); writers not queued", path, exc)
            return None
        files[path] = lock
    return lock


@contextlib.contextmanager
def _sqlite_writer_slot(connection: BaseDatabaseWrapper) -> Iterator[None]:
    """Hold the database's writer lock file for the duration of the block.

    Waits at most ``WRITE_QUEUE_TIMEOUT`` seconds for it, then raises
    :class:`~agentstore.exceptions.DatabaseBusy`: a holder that is frozen
    (``SIGSTOP``, a debugger) must not stall every other writer forever.
    """
    fd = _take_writer_slot(connection)
    try:
        yield
    finally:
        if fd >= 0:
            fcntl.flock(fd, fcntl.LOCK_UN)


class _Slot:
    """What :func:`_take_writer_slot` resolved for one connection object, kept between writes.

    The lock file's path (settings and the database's name), its open
    description and the queue's deadline cost more to look up than the
    ``flock`` itself (decision 351); they are resolved again when the
    database's name, the process or the ``AGENTSTORE`` settings change.
    """

    __slots__ = ("lock", "name", "path", "pid", "timeout", "wal")

    def __init__(self, connection: BaseDatabaseWrapper) -> None:
        self.name = connection.settings_dict["NAME"]
        self.pid = os.getpid()
        self.path = sqlite_lock_path(connection)
        self.lock = _lock_file(connection, self.path) if self.path else None
        self.timeout = float(agentstore_settings.WRITE_QUEUE_TIMEOUT or 0)
        #: The WAL of the connection's current ``sqlite3`` connection (set after its first write).
        self.wal: _WalLog | None = None


# The wal-index header (https://www.sqlite.org/walformat.html, "The WAL-Index
# Format"): the first copy of ``WalIndexHdr`` holds ``mxFrame``, the frames in
# the log, at byte 16; ``WalCkptInfo`` follows both 48-byte copies and begins
# with ``nBackfill``, the frames already copied into the database. Native byte
# order. Processes of different SQLite versions share this file, so its layout
# does not change between versions.
_WAL_INDEX = struct.Struct("=16xI76xI")

#: The writer copies the rest itself, so that the log starts over, once the log
#: holds ``RESTART_FACTOR`` times the threshold (16 MB at SQLite's defaults).
RESTART_FACTOR = 4

#: A writer connection whose WAL :mod:`agentstore.walcopy` keeps short checkpoints
#: by itself only past this many frames (SQLite's default is 1,000): the safety
#: net if the copier stalls.
DEFERRED_AUTOCHECKPOINT = 10_000


class _WalLog:
    """The WAL of one ``sqlite3`` connection, checkpointed off the writer's path.

    In WAL mode SQLite checkpoints inside the ``COMMIT`` that takes the log
    past ``wal_autocheckpoint`` frames, and at ``synchronous=NORMAL`` that
    commit waits for two fsyncs (5–20 ms on the bench disk). Behind
    agentstore's writer queue that wait holds the queue, so every other
    writer waits for it too; and even after the queue, the writer's caller
    waits for a disk it does not need. So the connection's own threshold is
    raised to :data:`DEFERRED_AUTOCHECKPOINT` (the safety net) and the
    writer, once it has released the queue, reads how many frames the log
    holds and how many are copied — from the wal-index (``-shm``) file, one
    ``pread`` — and at its old threshold not yet copied asks
    :mod:`agentstore.walcopy`'s thread for a ``PASSIVE`` checkpoint, with the
    connection's ``synchronous`` level. Once the log holds
    :data:`RESTART_FACTOR` times the threshold, the writer copies the few
    frames left itself, so its next write starts the log over. Where
    that cannot be done (not in WAL mode, no ``-shm`` file — exclusive
    locking —, automatic checkpoints off) nothing is changed.
    """

    __slots__ = ("caught_up", "fd", "path", "raw", "synchronous", "threshold")

    def __init__(self, raw: sqlite3.Connection) -> None:
        # A strong reference: sqlite3 connections take no weak ones; the slot
        # drops it when the Django connection opens its next one.
        self.raw = raw
        self.fd, self.threshold, self.path, self.synchronous = -1, 0, "", 1
        #: The log's frame count at the writer's last catch-up (:meth:`checkpoint_if_due`).
        self.caught_up = 0
        try:
            if str(raw.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                return
            threshold = int(raw.execute("PRAGMA wal_autocheckpoint").fetchone()[0])
            path = next(str(r[2]) for r in raw.execute("PRAGMA database_list") if r[1] == "main")
            if threshold <= 0 or not path:
                return
            self.synchronous = int(raw.execute("PRAGMA synchronous").fetchone()[0])
            self.fd = os.open(f"{path}-shm", os.O_RDONLY | os.O_CLOEXEC)
            if threshold < DEFERRED_AUTOCHECKPOINT:
                raw.execute(f"PRAGMA wal_autocheckpoint = {DEFERRED_AUTOCHECKPOINT}")
            self.threshold, self.path = threshold, path
        except (sqlite3.Error, OSError, StopIteration):
            logger.debug("WAL checkpoints stay inside the commit", exc_info=True)

    def __del__(self) -> None:
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)

    def checkpoint_if_due(self) -> None:
        """Hand the WAL's copy to the copier; start the log over now and then (see the class)."""
        if self.threshold <= 0:
            return
        try:
            frames, copied = _WAL_INDEX.unpack(os.pread(self.fd, _WAL_INDEX.size, 0))
        except (OSError, struct.error):
            return
        uncopied = frames - copied
        if not uncopied:
            return
        if frames < self.caught_up:
            self.caught_up = 0  # the log started over since
        if (
            frames >= self.caught_up + self.threshold * RESTART_FACTOR
            and not walcopy.busy(self.path)
            and not self.raw.in_transaction
        ):
            # SQLite starts the log over only at a write that begins with every
            # frame copied, and the copier's runs overlap the writes, so that
            # moment seldom comes by itself: the log would grow to the safety
            # net (40 MB at 4 KB pages). So once it holds RESTART_FACTOR times
            # the threshold, the writer copies what is left (what was committed
            # during the copier's last run) itself — the one wait left on its
            # path — and its next write starts the log over (decision 345).
            self.caught_up = frames
            try:
                self.raw.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            except sqlite3.Error:
                logger.debug("WAL catch-up skipped", exc_info=True)
        elif uncopied >= self.threshold:
            walcopy.request(self.path, self.synchronous)


def _checkpoint_after_queue(slot: _Slot, raw: sqlite3.Connection, *, changed: bool = True) -> None:
    """Checkpoint ``raw``'s WAL when due, its writer queue released (:class:`_WalLog`).

    ``changed``: whether the transaction just committed changed a row
    (``total_changes`` moved). One that changed none wrote no page, so it
    added no frame to the log and cannot have taken it past the threshold:
    the ``pread`` is skipped (decision 392). Frames only grow through writes
    that change rows, and each of those checks; a statement that writes pages
    without changing a row (DDL, a ``PRAGMA`` that writes the header) leaves
    its frames to the next write's check, or to the safety net.
    """
    wal = slot.wal
    if wal is None or wal.raw is not raw:
        wal = slot.wal = _WalLog(raw)
    elif not changed:
        return
    wal.checkpoint_if_due()


_slots: weakref.WeakKeyDictionary[BaseDatabaseWrapper, _Slot] = weakref.WeakKeyDictionary()

#: This process's id, for :func:`_slot`'s check (``os.getpid()`` is a system
#: call on every read); updated in a forked child by :func:`_reset_after_fork`.
_pid = os.getpid()


def _settings_changed(*, setting: str, **kwargs: Any) -> None:
    if setting in ("AGENTSTORE", "DATABASES"):
        _slots.clear()


setting_changed.connect(_settings_changed)


def _slot(connection: BaseDatabaseWrapper) -> _Slot:
    """The connection object's :class:`_Slot`, resolved again when it no longer holds."""
    slot = _slots.get(connection)
    if (
        slot is None
        or slot.name != connection.settings_dict["NAME"]
        or slot.pid != _pid
        or (slot.lock is not None and slot.lock.fd < 0)
    ):
        slot = _slots[connection] = _Slot(connection)
    return slot


def _take_writer_slot(connection: BaseDatabaseWrapper) -> int:
    """Take the writer lock file (see :func:`_sqlite_writer_slot`); its descriptor, or -1 if none.

    The caller releases it with ``flock(fd, LOCK_UN)``.
    """
    return _queue(_slot(connection), connection)


def _queue(slot: _Slot, connection: BaseDatabaseWrapper) -> int:
    """:func:`_take_writer_slot` of a slot already resolved (once per transaction)."""
    lock = slot.lock
    if lock is None:
        return -1
    try:
        # The free queue (nearly always, in one process) without _acquire's call.
        fcntl.flock(lock.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return lock.fd
    except BlockingIOError:
        pass
    if not _acquire(lock, slot.timeout):
        # The abandoned wait owns the old descriptor now (it releases and closes
        # it when the kernel finally grants it): this connection opens a fresh one.
        timeout, path = slot.timeout, lock.path
        _slots.pop(connection, None)
        _lock_files(connection).pop(path, None)
        logger.warning("writer queue %s not granted within %.3fs", path, timeout)
        raise DatabaseBusy(
            f"database {connection.alias!r} is busy: the writer queue ({path}) was not "
            f"granted within WRITE_QUEUE_TIMEOUT={timeout:g}s (another process holds it)",
        )
    return lock.fd


class _QueueWait:
    """A blocking ``flock`` in a helper thread, so the caller can stop waiting.

    Blocking (rather than polling ``LOCK_NB``) is what keeps the queue fair:
    the kernel grants the lock to a sleeping waiter when it is released. Only
    :func:`_spin`'s bounded poll (a few hundred µs) comes first. The
    wait itself cannot be cancelled, so a caller that gives up *abandons* it:
    the helper keeps waiting, and releases and closes the descriptor as soon as
    the kernel grants it, so an abandoned wait never holds the queue.

    ``waiter``: the long-lived thread of the lock's description that runs the
    wait (:class:`_Waiter`); without one, a thread of its own.
    """

    def __init__(self, fd: int, waiter: _Waiter | None = None) -> None:
        self.fd = fd
        self.granted = threading.Event()
        self.abandoned = False
        self.mutex = threading.Lock()
        if waiter is not None:
            waiter.requests.put(self)
            return
        self.thread = threading.Thread(target=self.run, name="agentstore-writer-queue", daemon=True)
        self.thread.start()

    def run(self) -> None:
        """Block until the kernel grants the lock; then hand it over, or drop it if abandoned."""
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        except OSError:  # pragma: no cover - the descriptor went away
            return
        with self.mutex:
            if not self.abandoned:
                self.granted.set()
                return
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)

    def wait(self, timeout: float) -> bool:
        """Whether the lock was granted within ``timeout`` (if not, the wait is abandoned)."""
        if self.granted.wait(timeout):
            return True
        with self.mutex:
            if self.granted.is_set():
                return True
            self.abandoned = True
            return False


class _Waiter:
    """One lock description's helper thread, kept for all its contended waits (decision 318).

    Starting a thread for every wait cost ~65 µs of CPU (~150 µs of wall time),
    paid by nearly every write when several processes take turns. The thread
    runs one :class:`_QueueWait` at a time — a description is one connection's,
    used by one thread at a time — and ends after an abandoned one (its
    descriptor is gone; the connection opens a new description, with a new
    waiter) or when its description is dropped.
    """

    def __init__(self) -> None:
        self.requests: queue.SimpleQueue[_QueueWait | None] = queue.SimpleQueue()
        threading.Thread(
            target=self._serve, args=(self.requests,), name="agentstore-writer-queue", daemon=True
        ).start()

    @staticmethod
    def _serve(requests: queue.SimpleQueue[_QueueWait | None]) -> None:
        # Holds only the queue, so a dropped _LockFile (and its _Waiter) can be
        # collected; its __del__ sends the None that ends this loop.
        while (wait := requests.get()) is not None:
            wait.run()
            if wait.abandoned:
                return

    def stop(self) -> None:
        self.requests.put(None)


#: How long a contended wait with a deadline polls ``LOCK_NB`` before it blocks
#: (decision 370): the measured best of 50, 100 (adaptive) and 200 µs.
SPIN_SECONDS = 200e-6

# The spin's yield between tries, a name of its own so a test can act inside the spin.
_spin_yield = os.sched_yield


def _spin(fd: int, budget: float) -> bool:
    """Poll ``LOCK_NB`` on ``fd`` for up to ``budget`` seconds; whether it was granted.

    A holder's transaction often ends within a couple of hundred µs: taking
    the lock while still running saves the blocking wait's two wake-ups (the
    kernel's of the helper thread, the helper's of the caller). The yield lets
    a preempted holder on this core run first.
    """
    end = time.monotonic() + budget
    while True:
        _spin_yield()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            pass
        if time.monotonic() >= end:
            return False


def _acquire(lock: _LockFile, timeout: float) -> bool:
    """Take ``lock`` exclusively, waiting at most ``timeout`` seconds (≤ 0: forever).

    With a deadline, a short spin (:data:`SPIN_SECONDS`, counted against
    ``timeout``) comes before the blocking wait in the helper thread.
    """
    try:
        fcntl.flock(lock.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        pass
    if timeout <= 0:
        fcntl.flock(lock.fd, fcntl.LOCK_EX)
        return True
    started = time.monotonic()
    if _spin(lock.fd, min(SPIN_SECONDS, timeout)):
        return True
    if lock.waiter is None:
        lock.waiter = _Waiter()
    remaining = max(0.0, timeout - (time.monotonic() - started))
    if _QueueWait(lock.fd, lock.waiter).wait(remaining):
        return True
    lock.detach()  # the abandoned wait closes it (and its waiter ends)
    return False


def _reset_after_fork() -> None:
    # Descriptions inherited from the parent must not be used by the child.
    global _pid
    _pid = os.getpid()
    _files.clear()
    _slots.clear()


os.register_at_fork(after_in_child=_reset_after_fork)


def describe_connection(using: str = DEFAULT_DB_ALIAS) -> dict[str, Any]:
    """Return the live SQLite pragmas of ``using`` (for checks, docs and tests)."""
    connection = connections[using]
    if connection.vendor != "sqlite":
        return {"vendor": connection.vendor}
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA journal_mode")
        journal_mode = cursor.fetchone()[0]
        cursor.execute("PRAGMA synchronous")
        synchronous = cursor.fetchone()[0]
        cursor.execute("PRAGMA busy_timeout")
        busy_timeout = cursor.fetchone()[0]
        cursor.execute("PRAGMA foreign_keys")
        foreign_keys = cursor.fetchone()[0]
    return {
        "vendor": "sqlite",
        "journal_mode": str(journal_mode).lower(),
        "synchronous": int(synchronous),
        "busy_timeout_ms": int(busy_timeout),
        "foreign_keys": bool(foreign_keys),
        "transaction_mode": getattr(connection, "transaction_mode", None),
        "write_lock": sqlite_lock_path(connection),
    }


# -- checkpoints off the writer's path ---------------------------------------------


# -- classifying integrity errors ----------------------------------------------

#: SQLite extended result codes of uniqueness failures.
_SQLITE_UNIQUE_CODES = frozenset({2067, 1555})  # CONSTRAINT_UNIQUE, CONSTRAINT_PRIMARYKEY
#: PostgreSQL's SQLSTATE for unique_violation.
_PG_UNIQUE_VIOLATION = "23505"


def is_unique_violation(exc: BaseException) -> bool:
    """Tell whether ``exc`` is a UNIQUE/PRIMARY KEY failure (not NOT NULL, CHECK, FK …).

    Insert-first idempotency ("insert, and on a duplicate look the row up") must
    swallow only this kind of failure; every other constraint error is a bug or
    bad input and has to surface.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        code = getattr(current, "sqlite_errorcode", None)
        if isinstance(code, int):
            return code in _SQLITE_UNIQUE_CODES
        sqlstate = getattr(current, "sqlstate", None) or getattr(current, "pgcode", None)
        if isinstance(sqlstate, str):
            return sqlstate == _PG_UNIQUE_VIOLATION
        current = current.__cause__ or current.__context__
    return "unique constraint" in str(exc).lower()
