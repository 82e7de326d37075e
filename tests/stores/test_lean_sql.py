"""The lean append path: the DB-API cursor, the lean transaction, the fence, the heartbeat.

An append's statements skip Django's cursor and (on SQLite) its transaction
layer only while nothing watches the connection (decision 291): these tests
check both sides of that switch, that the lean transaction commits, rolls back
and raises ``django.db``'s exceptions like ``atomic_write``, that the fence in
the session touch refuses an append whose hold is gone, and that the heartbeat
and the session's ``updated_at`` move at most once a second while the head
moves with every append (decisions 290 and 355). They run outside a test
transaction (``transaction=True``), where the lean path is taken.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import IntegrityError, connection
from django.db.backends.utils import CursorWrapper
from django.test.utils import CaptureQueriesContext, override_settings

from agentstore import exceptions, sql
from agentstore.db import lean_write, watched
from agentstore.models import Entry, Holder
from agentstore.models import Session as SessionRow
from agentstore.stores import LogStore

pytestmark = pytest.mark.django_db(transaction=True)

USER = {"type": "item", "item": {"type": "message", "role": "user", "content": "hi"}}


def user(text: str) -> dict[str, Any]:
    return {"type": "item", "item": {"type": "message", "role": "user", "content": text}}


@pytest.fixture
def store() -> Iterator[LogStore]:
    made = LogStore()
    yield made
    made.close()


def test_a_lean_cursor_only_while_nothing_watches() -> None:
    assert not watched(connection)
    with sql.cursor("default") as cursor:
        assert isinstance(cursor, sql.LeanCursor)
        cursor.execute("SELECT %s, %s", [1, "a"])
        assert cursor.fetchone() == (1, "a")
    with CaptureQueriesContext(connection):
        assert watched(connection)
        with sql.cursor("default") as cursor:
            assert not isinstance(cursor, sql.LeanCursor)

    def passthrough(execute: Any, *args: Any) -> Any:
        return execute(*args)

    with connection.execute_wrapper(passthrough):
        assert watched(connection)
        assert not isinstance(sql.cursor("default"), sql.LeanCursor)
    with override_settings(AGENTSTORE={"LEAN_SQL": False}):
        assert watched(connection)
    assert not watched(connection)


def test_a_patched_cursor_wrapper_counts_as_watching(monkeypatch: pytest.MonkeyPatch) -> None:
    real = CursorWrapper.execute

    def traced(self: CursorWrapper, *args: Any, **kwargs: Any) -> Any:
        return real(self, *args, **kwargs)

    monkeypatch.setattr(CursorWrapper, "execute", traced)
    assert watched(connection)


def test_watched_appends_show_every_statement(store: LogStore) -> None:
    sid = store.create({"id": "seen"}).id
    store.append(sid, USER)
    with CaptureQueriesContext(connection) as captured:
        store.append(sid, user("again"))
    statements = [q["sql"] for q in captured.captured_queries]
    assert any(s.startswith("INSERT INTO agentstore_entry") for s in statements)
    assert any(s.startswith("UPDATE agentstore_session") for s in statements)
    if connection.vendor == "sqlite":
        assert any(s.startswith("BEGIN") for s in statements)


def test_lean_write_commits_and_rolls_back() -> None:
    store = LogStore()
    sid = store.create({"id": "tx"}).id
    store.close()
    insert = "INSERT INTO agentstore_holder (session_id, pid, host, token, since, heartbeat) "
    insert += "VALUES (%s, 1, 'h', %s, %s, %s)"
    stamp = connection.ops.adapt_datetimefield_value(datetime(2026, 1, 1, tzinfo=UTC))

    def write(token: str) -> None:
        with sql.cursor("default") as cursor:
            cursor.execute(insert, [sid, token, stamp, stamp])

    def write_then_fail() -> None:
        write("second")
        raise RuntimeError("after the statement")

    with pytest.raises(RuntimeError):
        lean_write(write_then_fail)
    assert not Holder.objects.filter(session_id=sid).exists()  # rolled back
    lean_write(lambda: write("first"))
    assert Holder.objects.get(session_id=sid).token == "first"  # committed
    with pytest.raises(IntegrityError):  # django.db's, as atomic_write raises
        lean_write(lambda: write("third"))
    assert Holder.objects.get(session_id=sid).token == "first"
    lean_write(lambda: None)  # the connection is usable after each failure


def test_the_fence_refuses_an_append_whose_hold_is_gone(store: LogStore) -> None:
    sid = store.create({"id": "fenced"}).id
    store.append(sid, USER)
    assert store.break_lock(sid) is True
    with pytest.raises(exceptions.SessionLocked, match="no holder"):
        store.append(sid, user("lost"))
    assert Entry.objects.filter(session_id=sid).count() == 1  # nothing of it stored
    other = LogStore()
    try:
        other.open(sid)  # the new holder
        with pytest.raises(exceptions.SessionLocked):
            store.append(sid, user("still lost"))  # refused until release
        store.release(sid)
        with pytest.raises(exceptions.SessionLocked, match="held by pid"):
            store.append(sid, user("held elsewhere"))
    finally:
        other.close()


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def test_the_heartbeat_moves_at_most_once_a_second() -> None:
    clock = Clock()
    store = LogStore(clock=clock)
    try:
        sid = store.create({"id": "beat"}).id

        def heartbeat() -> datetime:
            info = store.lock_holder(sid)
            assert info is not None and info.heartbeat is not None
            return info.heartbeat

        clock.now += timedelta(milliseconds=10)
        store.append(sid, user("first"))  # the first append of this store writes it
        first = heartbeat()
        assert first == clock.now
        clock.now += timedelta(milliseconds=500)
        store.append(sid, user("half a second later"))
        assert heartbeat() == first  # fresh enough: left alone
        clock.now += timedelta(milliseconds=600)
        store.append(sid, user("a second after the first"))
        assert heartbeat() == clock.now
        clock.now -= timedelta(minutes=1)  # a clock that went back writes it too
        store.append(sid, user("earlier"))
        assert heartbeat() == clock.now
        assert Entry.objects.filter(session_id=sid).count() == 4
    finally:
        store.close()


def test_updated_at_moves_at_most_once_a_second_and_the_head_every_append() -> None:
    clock = Clock()
    store = LogStore(clock=clock)
    try:
        sid = store.create({"id": "touch"}).id

        def row() -> tuple[datetime, str]:
            session = SessionRow.objects.get(pk=sid)
            return session.updated_at, session.log_head

        clock.now += timedelta(milliseconds=10)
        store.append(sid, user("first"))  # the first append of this store writes it
        first, head = row()
        assert first == clock.now
        clock.now += timedelta(milliseconds=500)
        store.append(sid, user("half a second later"))
        updated, moved = row()
        assert updated == first  # within a second of the last append: left alone
        assert moved != head  # the head the next open trusts moves every time
        assert store.lock_holder(sid).heartbeat == first  # type: ignore[union-attr]
        clock.now += timedelta(milliseconds=600)
        store.append(sid, user("a second after the first"))
        assert row()[0] == clock.now
        clock.now -= timedelta(minutes=1)  # a clock that went back writes it too
        store.append(sid, user("earlier"))
        assert row()[0] == clock.now
        # A name (an ``info``) is written at once, whatever the second.
        clock.now += timedelta(milliseconds=1)
        store.append(sid, {"type": "info", "name": "renamed"})
        assert SessionRow.objects.get(pk=sid).name == "renamed"
        # What reopening trusts is the head: a fresh store sees every line.
        store.close()
        other = LogStore()
        try:
            assert len(other.open(sid)) == 5
        finally:
            other.close()
    finally:
        store.close()


def probes(captured: CaptureQueriesContext) -> list[str]:
    """The held-entry look-ups among the captured statements (parameters filled in)."""
    return [
        q["sql"]
        for q in captured.captured_queries
        if q["sql"].startswith("SELECT seq, line FROM agentstore_entry")
        and "entry_id =" in q["sql"]
    ]


def test_an_entry_stamped_now_skips_the_held_entry_probe() -> None:
    made = LogStore()
    clocked = LogStore(clock=Clock())
    try:
        sid = made.create({"id": "fresh"}).id
        made.append(sid, USER)
        made.release(sid)  # the next append opens it afresh: nothing known in memory
        with CaptureQueriesContext(connection) as captured:
            made.append(sid, user("stamped now"))
        assert captured.captured_queries and not probes(captured)
        made.release(sid)
        # A ts from an injected clock (or given by the caller) may repeat: looked up.
        with CaptureQueriesContext(connection) as captured:
            clocked.append(sid, user("stamped by a clock"))
        assert len(probes(captured)) == 1
    finally:
        made.close()
        clocked.close()


def test_a_repeated_fresh_stamp_is_refused_not_stored_twice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agentstore.formats.agentsession import session as format_session

    # A system clock that repeats a reading (stepped back to the same nanosecond):
    # the unique index refuses the second row.
    monkeypatch.setattr(format_session, "_now_ts", lambda: "2026-06-01T12:00:00.5Z")
    made = LogStore()
    try:
        sid = made.create({"id": "repeat"}).id
        root = {**user("same"), "parent": None}  # the same root twice: the same id
        first = made.append(sid, root)
        assert made.append(sid, root) == first  # known in memory: a no-op
        made.release(sid)  # opened afresh, the store knows nothing in memory
        with pytest.raises(exceptions.ConcurrentWriter):
            made.append(sid, root)
        assert Entry.objects.filter(session_id=sid).count() == 1
    finally:
        made.close()


def test_a_lean_body_reuses_its_transactions_connection() -> None:
    """Decision 390: the body's cursors take the connection lean_write looked up."""
    from django.db import connections

    from agentstore.db import in_lean_write

    seen: list[Any] = []

    def body() -> None:
        seen.append(in_lean_write("default"))
        seen.append(in_lean_write("other"))
        with sql.cursor("default") as cursor:
            cursor.execute("SELECT %s", [1])
            seen.append(cursor)

    assert in_lean_write("default") is None
    lean_write(body)
    own = connections["default"]
    if connection.vendor == "sqlite":
        assert seen[:2] == [own, None]
    else:  # PostgreSQL: lean_write is atomic_write, nothing is published
        assert seen[:2] == [None, None]
    assert isinstance(seen[2], sql.LeanCursor) and seen[2].db is own
    assert in_lean_write("default") is None  # only while the body runs

    def failing() -> None:
        raise RuntimeError("inside")

    with pytest.raises(RuntimeError):
        lean_write(failing)
    assert in_lean_write("default") is None  # not left behind by a failure
    # Watched at BEGIN: Django's transaction and cursor, every statement seen.
    with CaptureQueriesContext(connection) as captured:
        seen.clear()
        lean_write(body)
    assert seen[:2] == [None, None]
    assert not isinstance(seen[2], sql.LeanCursor)
    assert any(q["sql"] == "SELECT 1" for q in captured.captured_queries)


def test_a_lent_shared_connection_hides_the_lean_transaction() -> None:
    """Inside ``SharedConnection.borrowed`` the alias is another object: its own cursor."""
    from agentstore.db import SharedConnection, in_lean_write

    shared = SharedConnection("default")
    seen: list[Any] = []

    def body() -> None:
        outer = in_lean_write("default")
        with shared.borrowed() as lent:
            seen.append(in_lean_write("default"))
            with sql.cursor("default") as cursor:
                seen.append(cursor.db is lent)
        seen.append(in_lean_write("default") is outer)

    try:
        lean_write(body)
    finally:
        shared.close()
    assert seen == [None, True, True]


def test_the_lean_cursor_refuses_a_running_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """As Django's ``cursor()``: ``SynchronousOnlyOperation`` unless explicitly allowed."""
    import asyncio

    from django.core.exceptions import SynchronousOnlyOperation

    async def open_cursor() -> None:
        try:
            sql.cursor("default").close()
        finally:
            # Django's connections live in a context-local store: one opened in
            # this coroutine belongs to asyncio.run's context and would outlive
            # it unclosed (PostgreSQL then cannot drop the test database).
            from django.db import connections

            connections["default"].close()

    monkeypatch.delenv("DJANGO_ALLOW_ASYNC_UNSAFE", raising=False)
    with pytest.raises(SynchronousOnlyOperation):
        asyncio.run(open_cursor())
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    asyncio.run(open_cursor())


def test_lean_cursor_errors_are_djangos_and_close_quietly() -> None:
    from django.db import OperationalError, ProgrammingError

    with sql.cursor("default") as cursor:
        with pytest.raises((OperationalError, ProgrammingError)):
            cursor.execute("SELECT * FROM no_such_table WHERE x = %s", [1])
        with pytest.raises((OperationalError, ProgrammingError)):
            cursor.executemany("INSERT INTO no_such_table VALUES (%s)", [[1]])
