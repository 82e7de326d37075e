"""LogStore against agentsession's ``sqlite`` package tests that translate to Django.

The behaviour is described in docs/log-store.md.

Left out on purpose: the schema-migration tests (``TestMigrateAddsName``,
``TestForeignTable``, ``TestRefTablesOnAnOldDatabase``,
``TestRefTableOfAnotherProgram``) — Django migrations own the schema here — and
"open under a missing directory" (there is no path to open). Multi-process
tests are in ``test_log_processes.py``.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import connection, connections

from agentstore import exceptions
from agentstore.formats.agentsession import CURRENT_FORMAT, canonical_json, loads, parse_json
from agentstore.models import Entry, Holder
from agentstore.models import Session as SessionRow
from agentstore.sql import log as log_sql
from agentstore.stores import LogStore, TreeStore
from agentstore.types import Change, LockInfo
from tests.stores.test_log_support import Harness, user


@pytest.fixture
def h(db: None) -> Iterator[Harness]:
    harness = Harness()
    yield harness
    harness.close()


@pytest.mark.sqlite_only
def test_pragmas(h: Harness) -> None:
    h.new()
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA journal_mode")
        assert cursor.fetchone()[0].lower() == "wal"


def test_rows(h: Harness) -> None:
    store = h.new()
    s = store.create({})
    cfg = store.append(s.id, {"type": "config", "model": "m"})
    store.append(s.id, user("hi"))
    rows = list(Entry.objects.filter(session_id=s.id).order_by("seq"))
    assert [r.seq for r in rows] == [1, 2]
    assert (rows[0].entry_id, rows[0].type, rows[0].parent_id) == (cfg, "config", None)
    assert [r.line for r in rows] == s.lines
    row = SessionRow.objects.get(id=s.id)
    assert row.kind == "log" and row.header == s.header_line and row.incarnation
    store.release(s.id)
    again = store.open(s.id)
    assert again is not s and len(again) == 2
    store.delete(s.id)
    assert Entry.objects.filter(session_id=s.id).count() == 0
    assert Holder.objects.filter(session_id=s.id).count() == 0


def test_corrupt_row(h: Harness) -> None:
    store = h.new()
    s = store.create({})
    eid = store.append(s.id, user("hi"))
    Entry.objects.filter(session_id=s.id, entry_id=eid).update(
        line='{"type":"info","id":"x","parent":"ghost","ts":"2026-01-01T00:00:00Z"}'
    )
    store.release(s.id)
    with pytest.raises((exceptions.NoEntry, exceptions.BadID)):
        store.open(s.id)
    assert store.lock_holder(s.id) is None  # the hold taken for the failed open is given back
    with pytest.raises((exceptions.NoEntry, exceptions.BadID)):
        store.read(s.id)


def _edit_format(session_id: str, fmt: str) -> None:
    row = SessionRow.objects.get(id=session_id)
    header = parse_json(row.header)
    header["format"] = fmt
    row.header = canonical_json(header).decode("utf-8")
    row.save(update_fields=["header"])


def test_raise_format(h: Harness) -> None:
    store = h.new()
    s = store.create({"id": "old"})
    for i in range(3):
        store.append(s.id, user(str(i)))
    store.close()
    _edit_format("old", "agentsession/0.7")

    h.read_only().open("old")
    writer = h.new()
    assert writer.open("old").header["format"] == "agentsession/0.7"
    assert "0.7" in SessionRow.objects.get(id="old").header  # opening alone leaves it
    eid = writer.append("old", user("3"))
    assert parse_json(SessionRow.objects.get(id="old").header)["format"] == CURRENT_FORMAT
    assert writer.open("old").header["format"] == CURRENT_FORMAT
    text = writer.export_jsonl("old")
    again = loads(text)
    assert len(again) == 4 and again.entries[-1].id == eid
    assert [e.id for e in again.entries] == [e.id for e in writer.read("old").entries]

    current = writer.create({"id": "current"})
    line = SessionRow.objects.get(id="current").header
    writer.append(current.id, user("x"))
    assert SessionRow.objects.get(id="current").header == line


def test_session_hold(h: Harness) -> None:
    a, b = h.new(), h.second()
    a.create({"id": "shared"})
    with pytest.raises(exceptions.SessionLocked):
        b.open("shared")
    with pytest.raises(exceptions.SessionLocked):
        b.append("shared", user("b"))
    info = a.lock_holder("shared")
    assert info is not None and info.pid == os.getpid() and info.host == socket.gethostname()
    assert b.lock_holder("shared") == info
    a.release("shared")
    a.open("shared")  # re-opening its own session is fine
    a.release("shared")
    assert a.lock_holder("shared") is None
    b.open("shared")
    b.append("shared", user("b"))


def test_hold_lost(h: Harness) -> None:
    a, b = h.new(), h.second()
    a.create({"id": "lost"})
    a.append("lost", user("a"))
    assert b.break_lock("lost") is True
    assert b.break_lock("lost") is False
    b.open("lost")
    b.append("lost", user("b"))
    with pytest.raises(exceptions.SessionLocked, match="lost to lost held by pid"):
        a.append("lost", user("a2"))
    with pytest.raises(exceptions.SessionLocked):
        a.append("lost", user("a3"))
    with pytest.raises(exceptions.SessionLocked):
        a.open("lost")
    b.release("lost")
    a.release("lost")
    assert len(a.open("lost")) == 2
    a.append("lost", user("a4"))


def test_delete_is_hold_blind(h: Harness) -> None:
    a, b = h.new(), h.second()
    a.create({"id": "blind"})
    b.delete("blind")
    with pytest.raises(exceptions.SessionLocked, match="no holder"):
        a.append("blind", user("x"))
    b.create({"id": "blind"})
    a.release("blind")
    with pytest.raises(exceptions.SessionLocked):
        a.open("blind")


def test_stale_hold(h: Harness) -> None:
    writer = h.new()
    writer.create({"id": "stale"})
    writer.close()
    since = datetime(2026, 1, 1, tzinfo=UTC)
    Holder.objects.create(
        session_id="stale",
        pid=2147483000,
        host=socket.gethostname(),
        token="dead",
        since=since,
        heartbeat=since,
    )
    reports: list[LockInfo] = []
    store = h.new(stale_lock_report=reports.append)
    store.open("stale")
    assert [(r.pid, r.since) for r in reports] == [(2147483000, since)]
    assert store.lock_holder("stale").pid == os.getpid()  # type: ignore[union-attr]


def test_holder_on_another_host_is_not_taken_over(h: Harness) -> None:
    writer = h.new()
    writer.create({"id": "remote"})
    writer.close()
    since = datetime(2026, 1, 1, tzinfo=UTC)
    Holder.objects.create(
        session_id="remote",
        pid=2147483000,
        host="elsewhere",
        token="t",
        since=since,
        heartbeat=since,
    )
    with pytest.raises(exceptions.SessionLocked, match="on elsewhere since 2026-01-01"):
        h.new().open("remote")
    h.new().break_lock("remote")
    h.new().open("remote")


def test_read_only_store(h: Harness) -> None:
    writer = h.new()
    writer.create({"id": "live"})
    writer.append("live", {"type": "info", "name": "live"})
    reader = h.read_only()
    holder = writer.lock_holder("live")
    assert reader.open("live").name() == "live"
    assert writer.lock_holder("live") == holder
    for call in (
        lambda: reader.create({}),
        lambda: reader.append("live", user("x")),
        lambda: reader.delete("live"),
    ):
        with pytest.raises(exceptions.ReadOnly):
            call()
    writer.append("live", {"type": "info", "name": "still writing"})
    assert reader.open("live").name() == "live"  # cached view
    reader.release("live")
    assert reader.open("live").name() == "still writing"
    after = writer.lock_holder("live")
    assert holder is not None and after is not None
    assert (after.pid, after.since) == (holder.pid, holder.since)  # still the writer's hold


def test_holder_timestamps(h: Harness) -> None:
    a, b = h.new(), h.second()
    a.create({"id": "stamps"})
    a.append("stamps", user("x"))
    with pytest.raises(exceptions.SessionLocked) as locked:
        b.open("stamps")
    text = str(locked.value)
    assert "0001-01-01" not in text and f"since {datetime.now(UTC).year}" in text
    info = a.lock_holder("stamps")
    assert info is not None and info.since and info.heartbeat
    assert info.heartbeat >= info.since


def test_heartbeat_moves_on_append(h: Harness) -> None:
    ticks = iter(datetime(2026, 3, 1, 12, 0, s, tzinfo=UTC) for s in range(60))
    store = h.new(clock=lambda: next(ticks))
    store.create({"id": "beat"})
    first = store.lock_holder("beat")
    store.append("beat", user("x"))
    after = store.lock_holder("beat")
    assert first is not None and after is not None
    assert after.since == first.since and after.heartbeat > first.heartbeat  # type: ignore[operator]


def test_concurrent_writer(h: Harness) -> None:
    a = h.new()
    s = a.create({"id": "cw"})
    a.append("cw", user("first"))
    # Another writer that bypassed the hold (an old client, a manual insert)
    # appended since this store loaded the session.
    other = a.read("cw")
    other_entry = other.append(user("sneaked in")).entry
    Entry.objects.create(
        session_id="cw",
        seq=2,
        entry_id=other_entry.id,
        parent_id=other_entry.parent,
        type=other_entry.type,
        line=other_entry.line,
        created_at=datetime.now(UTC),
    )
    with pytest.raises(exceptions.ConcurrentWriter, match="seq 2"):
        a.append("cw", user("mine"))
    assert len(s) == 1  # nothing re-parented, the caller's object is unchanged
    with pytest.raises(exceptions.ConcurrentWriter):
        a.append("cw", user("again"))
    with pytest.raises(exceptions.ConcurrentWriter):
        a.open("cw")
    assert len(a.read("cw")) == 2  # Read works on a refused session
    a.release("cw")
    assert len(a.open("cw")) == 2
    a.append("cw", user("after release"))
    assert Entry.objects.filter(session_id="cw").count() == 3


def test_holds_work_for_every_kind(h: Harness) -> None:
    tree = TreeStore().create_session("/t")
    now = datetime.now(UTC)
    Holder.objects.create(
        session_id=tree.id, pid=1, host="worker-7", token="x", since=now, heartbeat=now
    )
    store = h.new()
    info = store.lock_holder(tree.id)
    assert info is not None and info.host == "worker-7"
    assert store.break_lock(tree.id) is True
    assert store.lock_holder(tree.id) is None


def test_close_releases_every_hold(h: Harness) -> None:
    store = h.new()
    ids = [store.create({}).id for _ in range(3)]
    store.close()
    assert Holder.objects.filter(session_id__in=ids).count() == 0
    other = h.second()
    for sid in ids:
        other.append(sid, user("x"))


def test_failed_append_keeps_the_hold_until_release(
    h: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = h.new()
    s = store.create({"id": "fail"})
    from agentstore.stores import log_rows

    def boom(*args: object, **kwargs: object) -> None:
        raise RuntimeError("database went away")

    monkeypatch.setattr("agentstore.stores.log_appends.insert_entries", boom)
    with pytest.raises(RuntimeError):
        store.append("fail", user("x"))
    monkeypatch.setattr("agentstore.stores.log_appends.insert_entries", log_rows.insert_entries)
    assert len(s) == 0
    assert store.lock_holder("fail") is not None  # still ours
    store.close()
    assert store.lock_holder("fail") is None  # released although no longer cached


def test_follow_reset_on_rebuild(h: Harness) -> None:
    writer = h.new()
    s = writer.create({})
    got = [writer.append(s.id, user(str(i))) for i in range(3)]
    follower = h.read_only()
    follower.follow_interval = 0.005
    it = follower.follow(s.id)
    next(it)
    Entry.objects.filter(session_id=s.id, seq__gt=1).delete()
    reset = next(it)
    assert reset.kind == "reset"
    assert [e.id for e in reset.session.entries] == got[:1]  # type: ignore[union-attr]


def test_follow_across_raised_format(h: Harness) -> None:
    writer = h.new()
    s = writer.create({"id": "raise"})
    for i in range(3):
        writer.append(s.id, user(str(i)))
    writer.close()
    _edit_format("raise", "agentsession/0.10")
    it = h.read_only().follow("raise")
    next(it)
    h.second().append("raise", user("3"))
    change = next(it)
    assert change.kind == "appended" and len(change.session) == 4  # type: ignore[arg-type]
    assert parse_json(SessionRow.objects.get(id="raise").header)["format"] == CURRENT_FORMAT


@pytest.mark.django_db(transaction=True)
def test_follow_woken_by_append() -> None:
    store = LogStore(follow_interval=3600)
    s = store.create({})
    arrived: list[Change] = []
    idle = threading.Event()
    stop = threading.Event()

    def watch(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        result = execute(sql, params, many, context)
        if sql == log_sql.FOLLOW_PROBE:
            idle.set()  # the follower's poll found nothing: next, its one-hour wait
        return result

    def follow() -> None:
        try:
            # Django's execute_wrapper hook on the follower thread's own
            # connection: it sees the follower's statements, and only those.
            with connections["default"].execute_wrapper(watch):
                for change in store.follow(s.id, stop=stop):
                    arrived.append(change)
                    if change.kind == "appended":
                        return
        finally:
            connections.close_all()

    thread = threading.Thread(target=follow)
    thread.start()
    # Append only once the follower's first poll has run (and found nothing):
    # from then on it looks again only after its one-hour wait, so only the
    # same-store wake-up (not a poll) can deliver the append. The append rings
    # whether the follower is already parked or a moment from it: the wake-up
    # is registered before the snapshot, and a rung wake-up skips the wait.
    assert idle.wait(30), "the follower never polled"
    eid = store.append(s.id, user("wake up"))
    thread.join(60)  # a bound on a hang, not a timing: no poll comes for an hour
    finished_by_itself = not thread.is_alive()
    stop.set()
    thread.join(5)
    assert finished_by_itself
    assert arrived[-1].kind == "appended" and arrived[-1].entry_id == eid
    store.close()


@pytest.mark.django_db(transaction=True)
def test_many_threads_append_through_one_store() -> None:
    store = LogStore()
    s = store.create({})
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for i in range(10):
                store.append(s.id, user(f"{n}-{i}"))
        except BaseException as exc:  # asserted below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    seqs = list(Entry.objects.filter(session_id=s.id).order_by("seq").values_list("seq", flat=True))
    assert seqs == list(range(1, 61))
    assert len(store.read(s.id)) == 60
    store.close()


@pytest.mark.django_db(transaction=True)
def test_afollow() -> None:
    store = LogStore(follow_interval=3600)
    s = store.create({})
    first = store.append(s.id, user("one"))

    async def scenario() -> list[Change]:
        seen: list[Change] = []

        async def consume() -> None:
            async for change in store.afollow(s.id):
                seen.append(change)

        task = asyncio.create_task(consume())
        # Bounded, and watching the consumer: if it fails before its first
        # change, the failure is the test's answer (not an endless wait).
        deadline = time.monotonic() + 30.0
        while not seen and not task.done() and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        if task.done():
            task.result()  # raises what the consumer raised
        assert seen, "no snapshot within 30 s"
        await asyncio.wait_for(asyncio.to_thread(store.append, s.id, user("two")), 60)
        deadline = time.monotonic() + 2.0
        while len(seen) < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return seen

    seen = asyncio.run(scenario())
    assert [c.kind for c in seen] == ["snapshot", "appended"]
    assert seen[0].session.entries[0].id == first  # type: ignore[union-attr]
    assert store._hub._waiters == {}  # nothing left registered after cancellation
    store.close()
    connections.close_all()
