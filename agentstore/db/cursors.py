"""The one cursor every agentstore statement is sent on, and what it reports.

Every hand-written statement (``agentstore/sql/``) goes through a cursor made
here, inside a write transaction of :func:`agentstore.db.driver` or on its own
for a read::

    from agentstore import db

    with db.cursor("default") as cursor:               # a read
        cursor.execute(steps_sql.LAST_N, [session_id, 50])
        rows = cursor.fetchall()

    db.write(lambda cursor: cursor.execute(INSERT, params))   # a write: the driver's cursor

It takes ``%s`` placeholders on both backends (SQLite's ``?`` are made once per
statement text and cached), raises ``django.db``'s exceptions, and is a
:class:`~django.db.backends.utils.CursorWrapper` to its callers. The statement
itself always runs in one place, :meth:`Cursor._execute` (Django's name for a
cursor's innermost executor), on the DB-API cursor under Django's connection.

What watches the statements changes only what *reports* them, never what runs:

* nothing watching — the cursor sends the statement straight to the DB-API
  cursor; Django's per-statement bookkeeping (about 6 µs a statement, more
  than a one-row INSERT costs SQLite) is what is left out;
* an ``execute_wrapper()`` (OpenTelemetry's and Sentry's Django
  instrumentations, sqlcommenter), a patched ``CursorWrapper.execute`` — the
  cursor's ``execute`` is Django's own ``CursorWrapper.execute``, which runs
  the wrappers and patches around :meth:`Cursor._execute`;
* ``connection.queries`` (``DEBUG``, ``assertNumQueries``,
  ``CaptureQueriesContext``) — Django's ``CursorDebugWrapper.execute``, which
  also logs each statement with its time;
* a tool that replaced ``connection.cursor`` on the connection (the debug
  toolbar) — the cursor is ``connection.cursor()``, the tool's own wrapping of
  Django's cursor, on the same connection and in the same transaction.

So ``assertNumQueries``, the debug toolbar and tracers see exactly the
statements production sends, in the same transactions. What watches is looked
at once per cursor (once per write transaction): a watcher installed while a
transaction runs sees the statements of the next one.

On PostgreSQL a cursor made with ``prepare=True`` binds its statements on the
server and asks psycopg to prepare them, so PostgreSQL plans each statement once
per connection: the task worker's per-task statements spent about five times
longer being planned than run. ``AGENTSTORE["POSTGRES_PREPARE"] = False`` (for
PgBouncer in transaction mode before 1.21, docs/operations.md) turns it off.
"""

from __future__ import annotations

import re
from asyncio import _get_running_loop
from collections.abc import Sequence
from contextlib import suppress
from functools import lru_cache
from typing import Any, Protocol

from django.db import connections
from django.db.backends import utils as backend_utils
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.backends.utils import CursorDebugWrapper, CursorWrapper
from django.utils.asyncio import async_unsafe

from agentstore.conf import agentstore_settings

__all__ = ["Cursor", "SqlCursor", "cursor", "cursor_on", "qmark", "watched"]


class SqlCursor(Protocol):
    """What a body of hand-written statements may use of its cursor (``%s`` placeholders)."""

    @property
    def rowcount(self) -> int: ...

    @property
    def db(self) -> BaseDatabaseWrapper: ...

    def execute(self, sql: str, params: Sequence[Any] | None = ..., /) -> Any: ...

    def executemany(self, sql: str, param_list: Sequence[Sequence[Any]], /) -> Any: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


#: Django's own rewrite of ``%s`` to SQLite's ``?`` (``SQLiteCursorWrapper.convert_query``).
_FORMAT = re.compile(r"(?<!%)%s")


@lru_cache(maxsize=1024)
def qmark(statement: str) -> str:
    """``statement`` with SQLite's ``?`` marks: Django's own rewrite, once per statement text."""
    return _FORMAT.sub("?", statement).replace("%%", "%")


class Cursor(CursorWrapper):
    """The DB-API cursor under Django's connection, taking ``%s`` SQL (see the module docstring).

    Unwatched, ``execute`` *is* :meth:`_execute`. Its subclasses made by
    :func:`cursor_on` for watched connections put Django's reporting around it.
    """

    # Errors are mapped by re-raising inside ``wrap_database_errors`` only when
    # something raised: a ``try`` costs nothing until then, a ``with`` two
    # Python calls per statement.

    #: Whether the statements go to ``connection.queries`` (the write driver
    #: logs its ``COMMIT`` there too, as Django logs its own).
    logged = False

    def __init__(self, cursor: Any, db: BaseDatabaseWrapper) -> None:
        self.cursor = cursor  # what CursorWrapper.__init__ sets, without the call
        self.db = db
        self._sqlite = db.vendor == "sqlite"

    def __exit__(self, type: Any, value: Any, traceback: Any) -> None:
        self.close()

    def close(self) -> None:
        """Close the DB-API cursor, ignoring the driver's errors (as ``CursorWrapper`` does)."""
        # Defined here: CursorWrapper would find it through __getattr__, a
        # Python call more for every write.
        try:  # noqa: SIM105
            self.cursor.close()
        except self.db.Database.Error:
            pass

    def _execute(self, sql: Any, params: Any = None, *ignored_wrapper_args: Any) -> Any:
        """Send one statement: the one place every agentstore statement runs."""
        try:
            if params is None:
                return self.cursor.execute(sql)
            return self.cursor.execute(qmark(sql) if self._sqlite else sql, params)
        except BaseException:
            with self.db.wrap_database_errors:
                raise

    def _executemany(self, sql: Any, param_list: Any, *ignored_wrapper_args: Any) -> Any:
        try:
            return self.cursor.executemany(qmark(sql) if self._sqlite else sql, param_list)
        except BaseException:
            with self.db.wrap_database_errors:
                raise

    execute = _execute
    executemany = _executemany

    def fetchone(self) -> Any:
        try:
            return self.cursor.fetchone()
        except BaseException:
            with self.db.wrap_database_errors:
                raise

    def fetchall(self) -> list[Any]:
        try:
            return list(self.cursor.fetchall())
        except BaseException:
            with self.db.wrap_database_errors:
                raise

    @property
    def rowcount(self) -> int:
        return int(self.cursor.rowcount)


#: A ``prepare_threshold`` no count reaches: while a :class:`PreparedCursor`
#: statement runs, only the statements it asks to prepare are prepared.
_ONLY_WHEN_ASKED = 2**62


class PreparedCursor(Cursor):
    """A :class:`Cursor` on a server-binding psycopg cursor that prepares its statements.

    psycopg prepares a statement on its first ``execute(..., prepare=True)`` and
    afterwards sends only its name and parameters (the connection keeps up to
    ``prepared_max`` of them). Django opens its connections with
    ``prepare_threshold=None``, which makes psycopg ignore ``prepare=True``; so
    around each statement the threshold is lifted to a count nothing reaches
    and put back, and Django's own queries stay unprepared. A threshold the
    project set in its ``OPTIONS`` is left alone. Statements bind on the server:
    ``%s`` becomes ``$n``, so every parameter needs a type PostgreSQL can infer
    or a cast (``%s::text[]``).
    """

    def _execute(self, sql: Any, params: Any = None, *ignored_wrapper_args: Any) -> Any:
        raw = self.db.connection
        lift = raw.prepare_threshold is None
        try:
            if lift:
                raw.prepare_threshold = _ONLY_WHEN_ASKED
            if params is None:
                return self.cursor.execute(sql)
            return self.cursor.execute(sql, params, prepare=True)
        except BaseException:
            with self.db.wrap_database_errors:
                raise
        finally:
            if lift:
                raw.prepare_threshold = None

    def _executemany(self, sql: Any, param_list: Any, *ignored_wrapper_args: Any) -> Any:
        # psycopg's executemany always asks to prepare: it needs only the threshold.
        raw = self.db.connection
        lift = raw.prepare_threshold is None
        try:
            if lift:
                raw.prepare_threshold = _ONLY_WHEN_ASKED
            return self.cursor.executemany(sql, param_list)
        except BaseException:
            with self.db.wrap_database_errors:
                raise
        finally:
            if lift:
                raw.prepare_threshold = None

    execute = _execute
    executemany = _executemany


class _Reported:
    """``execute`` by Django's ``CursorWrapper``: its ``execute_wrappers`` (and patches) run.

    Looked up on the class at every call, so a tracer that patches
    ``CursorWrapper.execute`` after this module was imported is still called.
    """

    def execute(self, sql: Any, params: Any = None) -> Any:
        return CursorWrapper.execute(self, sql, params)  # type: ignore[arg-type]

    def executemany(self, sql: Any, param_list: Any) -> Any:
        return CursorWrapper.executemany(self, sql, param_list)  # type: ignore[arg-type]


class _Logged:
    """``execute`` by Django's ``CursorDebugWrapper``: logged in ``connection.queries`` too."""

    logged = True

    def execute(self, sql: Any, params: Any = None) -> Any:
        return CursorDebugWrapper.execute(self, sql, params)  # type: ignore[arg-type]

    def executemany(self, sql: Any, param_list: Any) -> Any:
        return CursorDebugWrapper.executemany(self, sql, param_list)  # type: ignore[arg-type]


class _ReportedCursor(_Reported, Cursor):
    pass


class _LoggedCursor(_Logged, Cursor, CursorDebugWrapper):
    pass


class _ReportedPreparedCursor(_Reported, PreparedCursor):
    pass


class _LoggedPreparedCursor(_Logged, PreparedCursor, CursorDebugWrapper):
    def debug_sql(
        self,
        sql: Any = None,
        params: Any = None,
        use_last_executed_query: bool = False,
        many: bool = False,
    ) -> Any:
        # Django reads the logged text back from the DB-API cursor, but a
        # server-binding psycopg cursor keeps none (psycopg 3.3 clears it): the
        # log would hold None. Compose it as Django does when the whole
        # connection binds on the server.
        if use_last_executed_query and params is not None:
            # On a DataError the statement's own text is logged, as for executemany.
            with suppress(self.db.Database.DataError):
                sql = self.db.ops.compose_sql(sql, params)
        return CursorDebugWrapper.debug_sql(self, sql, params, False, many)


#: (prepared, how it reports) -> the class; "" is unwatched.
_CLASSES: dict[tuple[bool, str], type[Cursor]] = {
    (False, ""): Cursor,
    (False, "reported"): _ReportedCursor,
    (False, "logged"): _LoggedCursor,
    (True, ""): PreparedCursor,
    (True, "reported"): _ReportedPreparedCursor,
    (True, "logged"): _LoggedPreparedCursor,
}


def _django_code(name: str) -> Any:
    """The code of Django's own ``CursorWrapper.<name>`` (a patch replaces it)."""
    code = getattr(CursorWrapper, name).__code__
    # A tracer may have patched the class before this module was imported.
    return code if code.co_filename == backend_utils.__file__ else None


_DJANGO_EXECUTE = _django_code("execute")
_DJANGO_EXECUTEMANY = _django_code("executemany")


def watched(connection: BaseDatabaseWrapper) -> bool:
    """Whether something watches ``connection``'s statements through Django.

    ``connection.queries`` (``DEBUG``, ``assertNumQueries``, ``CaptureQueriesContext``),
    an ``execute_wrapper()``, a ``cursor`` replaced on the connection (the debug
    toolbar) or a patched ``CursorWrapper.execute``. It decides only how a
    cursor *reports* its statements (the module docstring).
    """
    return (
        connection.queries_logged
        or bool(connection.execute_wrappers)
        or "cursor" in vars(connection)
        or CursorWrapper.execute.__code__ is not _DJANGO_EXECUTE
        or CursorWrapper.executemany.__code__ is not _DJANGO_EXECUTEMANY
    )


#: Django's own refusal of a synchronous call from a running event loop (the
#: ``SynchronousOnlyOperation``, ``DJANGO_ALLOW_ASYNC_UNSAFE``), reached only
#: when :func:`cursor_on` finds a loop running.
@async_unsafe
def _refuse_in_async() -> None:
    """Nothing: its decorator raises when called from a running event loop."""


def cursor_on(connection: BaseDatabaseWrapper, *, prepare: bool = False) -> CursorWrapper:
    """A cursor for ``%s`` statements on a connection object (use it in a ``with``).

    The connection is opened (or replaced, when ``CONN_HEALTH_CHECKS`` finds it
    broken) first, as Django's ``cursor()`` does. ``prepare``: on PostgreSQL with
    psycopg 3 and ``POSTGRES_PREPARE`` on, a :class:`PreparedCursor`; elsewhere
    ignored. Refused in a running event loop, as Django's ``cursor()``.
    """
    # async_unsafe's test, without its wrapper and the RuntimeError it raises
    # and catches on every call outside a loop: _get_running_loop is the
    # low-level half of asyncio.get_running_loop (None instead of raising).
    if _get_running_loop() is not None:
        _refuse_in_async()
    if "cursor" in vars(connection):
        # A tool wraps the connection's cursors: its wrapping of Django's own.
        return connection.cursor()
    # What Django's cursor() does first: a connection that failed its health
    # check (CONN_HEALTH_CHECKS) is replaced, a missing one opened. (The
    # check's own first test, inline: it runs at most once a request.)
    if connection.health_check_enabled and not connection.health_check_done:  # type: ignore[attr-defined]
        connection.close_if_health_check_failed()
    if connection.connection is None:
        connection.ensure_connection()
    # watched(), in the order that costs least when nothing watches (the
    # query log's test reads Django's lazy settings).
    if connection.queries_logged:
        mode = "logged"
    elif (
        connection.execute_wrappers
        or CursorWrapper.execute.__code__ is not _DJANGO_EXECUTE
        or CursorWrapper.executemany.__code__ is not _DJANGO_EXECUTEMANY
    ):
        mode = "reported"
    else:
        mode = ""
    sqlite = connection.vendor == "sqlite"
    if sqlite:
        # The plain sqlite3 cursor: Cursor converts (and caches) the
        # placeholders itself; Django's cursor class would convert every time.
        raw_cursor = connection.connection.cursor()
    elif prepare and _can_prepare(connection):
        from psycopg import Cursor as ServerCursor  # noqa: PLC0415 - PostgreSQL projects only

        # A plain psycopg Cursor binds on the server (Django's is a ClientCursor,
        # which never prepares); it shares the connection's adapters and loaders.
        return _CLASSES[(True, mode)](ServerCursor(connection.connection), connection)
    else:
        # The backend's own cursor (on PostgreSQL it carries the connection's time zone).
        raw_cursor = connection.create_cursor()
    return _CLASSES[(False, mode)](raw_cursor, connection)


def _can_prepare(connection: BaseDatabaseWrapper) -> bool:
    return (
        connection.vendor == "postgresql"
        and bool(agentstore_settings.POSTGRES_PREPARE)
        # psycopg2 has no prepared statements.
        and hasattr(connection.connection, "prepare_threshold")
    )


def cursor(using: str, *, prepare: bool = False) -> CursorWrapper:
    """:func:`cursor_on` of this thread's connection of ``using``: for reads outside a write."""
    return cursor_on(connections[using], prepare=prepare)
