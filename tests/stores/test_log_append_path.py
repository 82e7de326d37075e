"""The log store's append path: the statements, the fence, the heartbeat.

An append is one body of hand-written statements for ``agentstore.db.write``.
These tests check that a watcher sees them, that the fence in the session touch
refuses an append whose hold is gone, and that the heartbeat and the session's
``updated_at`` move at most once a second while the head moves with every
append. They run outside a test transaction (``transaction=True``), where the
driver opens the transaction itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agentstore import exceptions
from agentstore.models import Entry
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
    from agentstore.formats.agentsession import appending as format_appending

    # A system clock that repeats a reading (stepped back to the same nanosecond):
    # the unique index refuses the second row.
    monkeypatch.setattr(format_appending, "_now_ts", lambda: "2026-06-01T12:00:00.5Z")
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
