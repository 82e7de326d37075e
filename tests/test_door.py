"""One door for every statement: what watches the connection sees what production runs.

Every store write is one body over the cursor :func:`agentstore.db.write` gives
it, and what watches the connection — ``DEBUG``'s query log
(``CaptureQueriesContext``, ``assertNumQueries``), an ``execute_wrapper`` (the
OpenTelemetry and Sentry Django instrumentations), a patched
``CursorWrapper.execute``, a replaced ``connection.cursor`` (the debug toolbar)
— changes only who is told about each statement, never which statements run or
how the transaction opens. These tests hold each store's hot path to that:

* on SQLite, the statements SQLite itself executes (its trace callback) are the
  same, ``BEGIN IMMEDIATE`` to ``COMMIT``, watched or not;
* on both databases, an ``execute_wrapper`` and the query log see each
  statement of the tree, loop and log appends, the task claims and finishes and
  the LangGraph saver's writes — the same list, in the same order.

They run outside a test transaction (``transaction=True``): inside one, every
write joins Django's transaction, watched or not.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection, connections
from django.db.backends.utils import CursorWrapper
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agentstore import db
from agentstore.ids import new_id
from agentstore.stores import LogStore, LoopStore, SessionStore, TreeStore
from agentstore.stores.checkpoints import CheckpointStore
from agentstore.tasks import TaskRepository
from agentstore.types import MessageEntity, RunStep
from agentstore.types.checkpoints import ChannelBlob, PendingWriteRow
from agentstore.types.tasks import TaskEntity, TaskFinish

pytestmark = pytest.mark.django_db(transaction=True)

Operation = Callable[[], Any]


# -- the store operations under test ---------------------------------------------------


def _tree() -> Operation:
    store = TreeStore()
    session = store.create_session("/door")
    parent = [store.append_message(session.id, None, MessageEntity(role="user", content="a")).id]

    def append() -> None:
        entry = store.append_message(
            session.id, parent[0], MessageEntity(role="assistant", content="b")
        )
        parent[0] = entry.id

    return append


def _loop() -> Operation:
    store = LoopStore()
    sid = new_id()
    store.append(RunStep(session_id=sid, step_index=0, step_type="user", content="hi"))
    return lambda: store.append(
        RunStep(session_id=sid, step_index=1, step_type="assistant", content="hello")
    )


def _log() -> Operation:
    store = LogStore()
    sid = store.create({"id": new_id()}).id
    item = {"type": "item", "item": {"type": "message", "role": "user", "content": "hi"}}
    store.append(sid, item)
    return lambda: store.append(sid, item)


def _tasks() -> Operation:
    repo = TaskRepository()
    owner = SessionStore().create("tree").id

    def claim_and_finish() -> None:
        task = repo.enqueue(TaskEntity(kind="door", owner_session_id=owner))
        expires = timezone.now() + timedelta(minutes=5)
        claimed = repo.claim_next_queued("door", "worker-1", expires)
        assert claimed == task.id
        assert repo.finish(
            TaskFinish(
                task_id=task.id,
                event_kind="task_succeeded",
                payload_json="{}",
                target_state="succeeded",
                from_states=("running",),
                lease_owner="worker-1",
            )
        )

    return claim_and_finish


def _saver() -> Operation:
    store = CheckpointStore()
    thread = f"door-{new_id()}"
    count = [0]

    def put() -> None:
        count[0] += 1
        checkpoint_id = f"{count[0]:08d}"
        blobs = [ChannelBlob(channel="c", version=str(count[0]), type="json", blob=b"1" * 300)]
        store.put(thread, "", checkpoint_id, None, "json", b"{}", {}, {"c": count[0]}, blobs)
        writes = [
            PendingWriteRow(task_id="t", task_path="", idx=0, channel="c", type="json", blob=b"1")
        ]
        store.put_writes(thread, "", checkpoint_id, writes)

    put()  # the thread's session exists from here on
    return put


OPERATIONS = {
    "tree-append": _tree,
    "loop-append": _loop,
    "log-append": _log,
    "task-enqueue-claim-finish": _tasks,
    "saver-put": _saver,
}


# -- watchers --------------------------------------------------------------------------


def _passthrough(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
    return execute(sql, params, many, context)


class _Seen:
    """An ``execute_wrapper`` that records each statement's text."""

    def __init__(self) -> None:
        self.statements: list[str] = []

    def __call__(self, execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        self.statements.append(sql)
        return execute(sql, params, many, context)


def _watchers() -> dict[str, Callable[[], Any]]:
    """Each kind of watcher, as a context manager factory."""

    def query_log() -> Any:
        return CaptureQueriesContext(connection)

    def wrapper() -> Any:
        return connection.execute_wrapper(_passthrough)

    return {"nothing": lambda: _Nothing(), "query-log": query_log, "execute-wrapper": wrapper}


class _Nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *args: Any) -> None:
        return None


#: SQLite's trace gives statements with their values bound: compare their shapes.
_LITERAL = re.compile(r"'(?:[^']|'')*'|X'[0-9A-Fa-f]*'|\b\d+(?:\.\d+)?\b|\bNULL\b")


def _shape(statement: str) -> str:
    return _LITERAL.sub("?", statement)


@pytest.fixture
def traced() -> Iterator[list[str]]:
    """What SQLite itself executes on Django's connection, in order (trigger lines dropped)."""
    seen: list[str] = []
    connection.ensure_connection()
    raw = connection.connection
    raw.set_trace_callback(seen.append)
    yield seen
    raw.set_trace_callback(None)


def _executed(seen: list[str]) -> list[str]:
    # A trigger program traces as "-- …" lines, and repeats its statement;
    # Django's query log quotes each logged statement's values with a
    # "SELECT QUOTE(…)" of its own: the watcher's statement, not the store's.
    kept = [s for s in seen if not s.startswith(("--", "SELECT QUOTE("))]
    return [_shape(s) for n, s in enumerate(kept) if n == 0 or s != kept[n - 1]]


@pytest.mark.sqlite_only
@pytest.mark.parametrize("operation", OPERATIONS)
def test_watching_never_changes_what_sqlite_executes(operation: str, traced: list[str]) -> None:
    run = OPERATIONS[operation]()
    run()  # warm: first-time set-up statements (the saver's thread) are behind us
    runs: dict[str, list[str]] = {}
    for name, watcher in _watchers().items():
        traced.clear()
        with watcher():
            run()
        runs[name] = _executed(traced)
    assert runs["nothing"], runs
    # The driver opens its own transaction, watched or not.
    writes = [s for s in runs["nothing"] if s.startswith(("INSERT", "UPDATE", "WITH"))]
    assert writes, runs["nothing"]
    if not operation.startswith("saver"):
        assert runs["nothing"][0].startswith("BEGIN IMMEDIATE"), runs["nothing"]
        assert "COMMIT" in runs["nothing"]
    for name in ("query-log", "execute-wrapper"):
        assert runs[name] == runs["nothing"], name


@pytest.mark.parametrize("operation", OPERATIONS)
def test_an_execute_wrapper_and_the_query_log_see_every_statement(operation: str) -> None:
    run = OPERATIONS[operation]()
    run()
    seen = _Seen()
    with connection.execute_wrapper(seen):
        run()
    with CaptureQueriesContext(connection) as captured:
        run()
    # The query log shows the transaction's control too, as for Django's own
    # transactions: COMMIT, and on PostgreSQL psycopg's implicit BEGIN. (The
    # saver's writes on PostgreSQL are single statements in autocommit.)
    logged = [q["sql"] for q in captured.captured_queries]
    assert "COMMIT" in logged or operation.startswith("saver"), logged
    logged = [s for s in logged if s not in ("BEGIN", "COMMIT")]
    writes = [s for s in seen.statements if s.lstrip().upper().startswith(("INSERT", "UPDATE"))]
    assert writes, seen.statements
    # The same statements reach both watchers (the log shows values bound).
    assert len(logged) == len(seen.statements), (logged, seen.statements)
    for text, shown in zip(seen.statements, logged, strict=True):
        # An executemany is logged as "N times: <statement>".
        shown = re.sub(r"^\d+ times: ", "", shown)
        assert shown.split()[0] == text.split()[0]
    if connection.vendor == "sqlite" and not operation.startswith("saver"):
        assert seen.statements[0].startswith("BEGIN"), seen.statements


@pytest.mark.sqlite_only
def test_the_wrapper_sees_exactly_what_sqlite_executes(traced: list[str]) -> None:
    run = OPERATIONS["tree-append"]()
    run()
    seen = _Seen()
    traced.clear()
    with connection.execute_wrapper(seen):
        run()
    executed = _executed(traced)
    # Everything SQLite ran but the driver's COMMIT (Django never reports its
    # own commit either) went past the wrapper, in order.
    assert [s for s in executed if s != "COMMIT"] == [
        _shape(s.replace("%s", "?")) for s in seen.statements
    ]


def test_a_patched_cursor_wrapper_sees_the_statements(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tracer that patches ``CursorWrapper.execute`` (as APM agents do) is called."""
    run = OPERATIONS["loop-append"]()
    run()
    real = CursorWrapper.execute
    seen: list[str] = []

    def traced_execute(self: CursorWrapper, sql: Any, params: Any = None) -> Any:
        seen.append(str(sql))
        return real(self, sql, params)

    monkeypatch.setattr(CursorWrapper, "execute", traced_execute)
    run()
    assert any(s.startswith("INSERT INTO agentstore_step") for s in seen), seen


def test_a_replaced_connection_cursor_is_used() -> None:
    """A tool that wraps ``connection.cursor`` (the debug toolbar) gets every cursor."""
    run = OPERATIONS["tree-append"]()
    run()
    own = connections["default"]
    made: list[Any] = []
    original = own.cursor

    def cursor() -> Any:
        made.append(original())
        return made[-1]

    own.cursor = cursor  # type: ignore[method-assign]
    try:
        run()
    finally:
        del own.cursor
    assert made, "the tool's cursor was never asked for"


# -- the cursor ----------------------------------------------------------------------


def test_the_cursor_takes_percent_s_on_both_databases() -> None:
    with db.cursor("default") as cursor:
        assert isinstance(cursor, db.Cursor)
        cursor.execute("SELECT %s, %s", [1, "a"])
        assert cursor.fetchone() == (1, "a")
        cursor.execute("SELECT 2")
        assert cursor.fetchall() == [(2,)]


def test_watching_picks_how_the_cursor_reports_not_what_it_is() -> None:
    with db.cursor("default") as plain:
        assert type(plain) is db.Cursor
    with CaptureQueriesContext(connection), db.cursor("default") as logged:
        assert isinstance(logged, db.Cursor) and type(logged) is not db.Cursor
    with connection.execute_wrapper(_passthrough), db.cursor("default") as reported:
        assert isinstance(reported, db.Cursor) and type(reported) is not db.Cursor
    assert not db.watched(connection)


def test_cursor_errors_are_djangos_and_close_quietly() -> None:
    from django.db import OperationalError, ProgrammingError

    with db.cursor("default") as cursor:
        with pytest.raises((OperationalError, ProgrammingError)):
            cursor.execute("SELECT * FROM no_such_table WHERE x = %s", [1])
        with pytest.raises((OperationalError, ProgrammingError)):
            cursor.executemany("INSERT INTO no_such_table VALUES (%s)", [[1]])


def test_the_cursor_refuses_a_running_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """As Django's ``cursor()``: ``SynchronousOnlyOperation`` unless explicitly allowed."""
    import asyncio

    from django.core.exceptions import SynchronousOnlyOperation

    async def open_cursor() -> None:
        try:
            db.cursor("default").close()
        finally:
            # Django's connections live in a context-local store: one opened in
            # this coroutine belongs to asyncio.run's context and would outlive
            # it unclosed (PostgreSQL then cannot drop the test database).
            connections["default"].close()

    monkeypatch.delenv("DJANGO_ALLOW_ASYNC_UNSAFE", raising=False)
    with pytest.raises(SynchronousOnlyOperation):
        asyncio.run(open_cursor())
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    asyncio.run(open_cursor())


def test_a_write_on_a_connection_object_not_the_threads_own_must_be_lent() -> None:
    """Where Django opens the transaction, the connection must be the thread's own."""
    shared = db.SharedConnection("default")
    try:
        with shared.lock:
            other = shared.ready()
            if other.vendor == "sqlite":
                # SQLite: the driver opens it on the object itself.
                db.write(lambda c: c.execute("SELECT 1"), connection=other)
            else:
                with pytest.raises(RuntimeError, match="borrowed"):
                    db.write(lambda c: c.execute("SELECT 1"), connection=other)
        with shared.borrowed() as lent:
            db.write(lambda c: c.execute("SELECT 1"), connection=lent)
    finally:
        shared.close()
