"""LogStore against agentsession's ``storetest`` catalogue, on SQLite and PostgreSQL.

The behaviour is described in docs/log-store.md.

Each group is the Go test of the same name; ``Harness`` gives the storetest
options (``new``, ``reopen``, ``second`` — another store, another token —
and ``read_only``). Following is driven in the test's own thread: after an
append, the follower's next poll finds the rows.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from agentstore import exceptions
from agentstore.formats.agentsession import CURRENT_FORMAT, CURRENT_PAYLOAD, dumps, entry_id
from agentstore.formats.agentsession import canonical_json as cj
from agentstore.models import Session as SessionRow
from agentstore.stores import LogStore
from agentstore.types import Change, ListFilter
from tests.stores.test_log_support import Harness, assistant, user

pytestmark = pytest.mark.django_db


@pytest.fixture
def h() -> Iterator[Harness]:
    harness = Harness()
    yield harness
    harness.close()


def next_change(it: Iterator[Change]) -> Change:
    return next(it)


# -- CreateAndOpen -------------------------------------------------------------


def test_create_and_open(h: Harness) -> None:
    store = h.new()
    s = store.create({"cwd": "/p", "harness": {"name": "test"}})
    assert s.id
    assert s.header["format"] == CURRENT_FORMAT
    assert s.header["payload"] == CURRENT_PAYLOAD
    assert s.header["created_at"]

    other = h.reopen(store)
    again = other.open(s.id)
    assert again.header == s.header

    with pytest.raises(exceptions.NoSession):
        other.open("missing")
    with pytest.raises(exceptions.SessionExists):
        other.create({"id": s.id})
    assert other.create({"id": "given-id"}).id == "given-id"


def test_create_exists_in_another_store(h: Harness) -> None:
    a, b = h.new(), h.second()
    a.create({"id": "twice"})
    with pytest.raises(exceptions.SessionExists):
        b.create({"id": "twice"})


# -- Append --------------------------------------------------------------------


def test_append_rules(h: Harness) -> None:
    store = h.new()
    s = store.create({"cwd": "/p"})
    cfg = store.append(s.id, {"type": "config", "model": "m"})
    hi = store.append(s.id, user("hi"))
    assert cfg and len(s) == 2 and s.leaf == hi
    assert s.entry(hi).parent == cfg  # type: ignore[union-attr]

    s.branch(cfg)
    other = store.append(s.id, user("other"))
    assert s.children(cfg) == [hi, other]

    s.reset_leaf()
    info = store.append(s.id, {"type": "info", "name": "n"})
    assert s.roots() == [cfg, info]

    ext = store.append(s.id, {"type": "acme:note", "text": "x"})
    assert s.entry(ext).type == "acme:note"  # type: ignore[union-attr]

    with pytest.raises(exceptions.NoSession):
        store.append("missing", user("x"))
    with pytest.raises(exceptions.BadID):
        store.append(s.id, {"type": "info", "name": "x", "id": cfg})
    with pytest.raises(exceptions.NoEntry):
        store.append(s.id, {"type": "info", "name": "x", "parent": "ghost"})
    with pytest.raises(exceptions.ValidationError):
        store.append(s.id, {"type": "item"})
    assert len(s) == 5
    assert len(h.reopen(store).open(s.id)) == 5

    s2 = h.stores[-1].open(s.id)
    s2.branch(hi)
    assert s2.context().settings["model"] == "m"
    assert len(s2.context().items) == 1


def test_held_append(h: Harness) -> None:
    store = h.new()
    s = store.create({})
    root = store.append(s.id, user("root"))
    entry = user("once", parent=root, ts="2026-09-17T16:00:00Z")
    first = store.append(s.id, entry)
    assert store.append(s.id, dict(entry)) == first
    assert len(s) == 2
    again = h.reopen(store).open(s.id)
    assert len(again) == 2
    assert len({e.id for e in again.entries}) == 2


def test_read_line_keeps_line(h: Harness) -> None:
    store = h.new()
    s = store.create({})
    root = store.append(s.id, user("root"))
    texts = [
        '{"type":"link","rel":"subagent","parent":"ROOT","ts":"2026-09-17T16:00:01Z"}',
        '{"type":"label","label":"x","target":"ROOT","parent":"ROOT","ts":"2026-09-17T16:00:02Z"}',
    ]
    ids = []
    for text in texts:
        obj = json.loads(text.replace("ROOT", root))
        obj["id"] = entry_id(obj)
        assert store.append(s.id, obj) == obj["id"]
        ids.append(obj["id"])
    for session in (store.open(s.id), h.reopen(store).open(s.id)):
        for eid in ids:
            e = session.entry(eid)
            assert e is not None and entry_id(e.data) == eid


# -- List ----------------------------------------------------------------------


def _list_fixture(store: LogStore) -> None:
    t0 = datetime(2026, 9, 17, 12, tzinfo=UTC)
    store.create(
        {
            "id": "one",
            "cwd": "/a",
            "created_at": "2026-09-17T12:00:00Z",
            "harness": {"name": "nightly", "version": "2"},
            "acme:platform": "telegram",
            "acme:user": {"name": "u1", "id": 7},
        }
    )
    store.create(
        {
            "id": "two",
            "cwd": "/b",
            "created_at": (t0 + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "harness": {"name": "cli"},
            "acme:platform": "telegram",
        }
    )
    store.create(
        {
            "id": "three",
            "cwd": "/a",
            "created_at": (t0 + timedelta(hours=2)).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "parent_session": "one",
            "spawned_by": "call_1",
            "harness": {"name": "nightly", "version": "2"},
        }
    )
    for name in ("first name", "", "Two"):
        store.append("two", {"type": "info", "name": name})


def ids(store: LogStore, **kw: Any) -> list[str]:
    return [s.id for s in store.list(ListFilter(**kw))]


def test_list_filters(h: Harness) -> None:
    store = h.new()
    _list_fixture(store)
    t12 = datetime(2026, 9, 17, 12, tzinfo=UTC)
    assert ids(store) == ["three", "two", "one"]
    assert ids(store, cwd="/a") == ["three", "one"]
    assert ids(store, parent_session="one") == ["three"]
    assert ids(store, after=t12) == ["three", "two"]
    assert ids(store, before=t12 + timedelta(hours=2)) == ["two", "one"]
    assert ids(store, limit=2) == ["three", "two"]
    names = {s.id: s.name for s in store.list(ListFilter(with_names=True))}
    assert names == {"three": "", "two": "Two", "one": ""}
    assert ids(store, with_names=True, cwd="/b") == ["two"]
    assert ids(store, cwd="/z") == []
    assert ids(store, harness="nightly") == ["three", "one"]
    assert ids(store, harness="cron") == []
    assert ids(store, top_level=True) == ["two", "one"]
    assert ids(store, harness="nightly", top_level=True) == ["one"]
    assert ids(store, extra={"acme:platform": "telegram"}) == ["two", "one"]
    assert ids(store, extra={"acme:user": {"id": 7, "name": "u1"}}) == ["one"]
    both = {"acme:platform": "telegram", "acme:user": {"id": 7, "name": "u1"}}
    assert ids(store, extra=both) == ["one"]
    assert ids(store, extra={"acme:platform": "slack"}) == []
    assert ids(store, extra={"acme:nothing": 1}) == []
    assert ids(store, with_names=True, extra={"acme:platform": "telegram"}, cwd="/b") == ["two"]
    # limit applies after the header-level filters, not before them
    assert ids(store, harness="nightly", limit=1) == ["three"]
    assert ids(store, top_level=True, limit=1) == ["two"]
    it = store.list()
    assert next(it).id == "three"  # stopping early is fine


def test_list_size_is_the_jsonl_size(h: Harness) -> None:
    store = h.new()
    s = store.create({"cwd": "/size"})
    store.append(s.id, user("héllo wörld ✓"))
    store.append(s.id, {"type": "info", "name": "naïve"})
    [summary] = store.list(ListFilter(cwd="/size"))
    assert summary.size == len(store.export_jsonl(s.id).encode("utf-8"))
    assert summary.modified == SessionRow.objects.get(pk=s.id).updated_at
    empty = store.create({"cwd": "/empty"})
    [summary] = store.list(ListFilter(cwd="/empty"))
    assert summary.size == len(store.export_jsonl(empty.id).encode("utf-8"))


def test_list_after_is_exclusive_at_nanoseconds(h: Harness) -> None:
    store = h.new()
    store.create({"id": "ns", "created_at": "2026-09-17T12:00:00.000000500Z"})
    at = datetime(2026, 9, 17, 12, tzinfo=UTC)
    assert ids(store, after=at) == ["ns"]
    assert ids(store, before=at) == []
    assert ids(store, after=at + timedelta(microseconds=1)) == []


# -- Continue and Delete ---------------------------------------------------------


def test_continue(h: Harness) -> None:
    store = h.new()
    old = store.create({"cwd": "/p"})
    store.append(old.id, {"type": "config", "model": "gpt-5", "instructions": "Be brief."})
    store.append(old.id, {"type": "info", "name": "main"})
    store.append(old.id, user("hello"))
    summary = {
        "type": "message",
        "role": "developer",
        "content": [{"type": "input_text", "text": "s"}],
    }
    new = store.continue_session(old.id, summary)
    assert new.header["parent_session"] == old.id
    assert new.header["cwd"] == "/p"
    assert new.name() == "main"
    ctx = new.context()
    assert ctx.settings["model"] == "gpt-5"
    assert ctx.settings["instructions"] == "Be brief."
    assert len(ctx.items) == 1
    assert new.entries[0].type == "config"
    assert old.superseded_by() == new.id
    listed = {s.id: s.superseded_by for s in store.list(ListFilter(with_names=True))}
    assert listed == {old.id: new.id, new.id: ""}
    assert ids(store, current=True) == [new.id]


def test_delete(h: Harness) -> None:
    store = h.new()
    s = store.create({"id": "gone"})
    store.append(s.id, {"type": "info", "name": "x"})
    store.delete(s.id)
    with pytest.raises(exceptions.NoSession):
        store.open(s.id)
    with pytest.raises(exceptions.NoSession):
        store.delete(s.id)
    assert ids(store) == []
    assert store.create({"id": "gone"}).id == "gone"


# -- Fork ------------------------------------------------------------------------


def _origin(store: LogStore) -> tuple[str, list[str]]:
    o = store.create({"id": "origin"})
    got = [
        store.append(o.id, {"type": "config", "model": "m"}),
        store.append(o.id, user("q")),
        store.append(o.id, assistant("a")),
        store.append(o.id, user("later")),
    ]
    return o.id, got


def test_fork(h: Harness) -> None:
    store = h.new()
    origin, e = _origin(store)
    f1 = store.create({"id": "fork-1", "parent_session": origin, "base": e[2]})
    assert f1.header["base"] == e[2] and f1.header["parent_session"] == origin
    assert f1.leaf == e[2] and len(f1) == 3
    assert f1.is_prefix(e[2]) and f1.is_prefix(e[0])
    own = store.append("fork-1", user("instead"))
    assert f1.entry(own).parent == e[2] and f1.leaf == own and not f1.is_prefix(own)  # type: ignore[union-attr]
    with pytest.raises(exceptions.BaseRule):
        store.append("fork-1", user("above", parent=e[0]))
    with pytest.raises(exceptions.NoEntry):
        store.append("fork-1", user("above", parent=e[0]))
    f1.reset_leaf()
    with pytest.raises(exceptions.BaseRule):
        store.append("fork-1", user("root"))
    f1.branch(own)

    f2 = store.create({"id": "fork-2", "base": e[1]})
    assert len(f2) == 2 and f2.leaf == e[1] and f2.header["parent_session"] == origin
    f3 = store.create({"id": "fork-3", "parent_session": "fork-1", "base": e[1]})
    assert len(f3) == 2
    store.append("fork-3", user("on three"))

    with pytest.raises(exceptions.NoEntry):
        store.create({"id": "bad-1", "base": "sha256:" + "0" * 64})
    with pytest.raises(exceptions.ValidationError):
        store.create({"id": "bad-2", "base": e[1], "parent_session": origin, "media": "sidecar"})
    label = store.append(origin, {"type": "label", "target": e[3], "label": "leaf"})
    with pytest.raises(exceptions.ValidationError):
        store.create({"id": "bad-3", "base": label, "parent_session": origin})
    assert [s for s in ids(store) if s.startswith("bad")] == []

    o = store.open(origin)
    assert len(o) == 5 and o.leaf == e[3] and "base" not in o.header

    other = h.reopen(store)
    f1 = other.open("fork-1")
    assert f1.header["base"] == e[2] and len(f1) == 4 and f1.leaf == own
    store2 = other
    store2.append("fork-1", user("more"))
    f4 = store2.create({"id": "fork-4", "base": e[0]})
    assert len(f4) == 1
    assert other.lock_holder(origin) is None  # creating the fork did not claim the origin
    assert len(other.read(origin)) == 5
    other.append(origin, user("still"))


def test_fork_prefix_convergence(h: Harness) -> None:
    store = h.new()
    o = store.create({"id": "o", "payload": "openresponses/2020-01-01"})
    u = store.append("o", user("u"))
    a = store.append("o", assistant("a"))
    b = store.append("o", assistant("b", parent=u))
    o.branch(b)
    j = store.append("o", {"type": "info", "name": "j", "parents": [{"entry": a}]})
    fb = store.create({"id": "fb", "base": b})
    assert fb.header["payload"] == "openresponses/2020-01-01"
    with pytest.raises(exceptions.BadConvergence):
        store.create({"id": "fj", "base": j})
    assert "fj" not in ids(store)
    assert h.reopen(store).open("fb").header["payload"] == "openresponses/2020-01-01"


# -- Read ----------------------------------------------------------------------


def test_read(h: Harness) -> None:
    store = h.new()
    with pytest.raises(exceptions.NoSession):
        store.read("no-such-session")
    s = store.create({})
    got = [store.append(s.id, user(str(i))) for i in range(3)]
    copy = store.read(s.id)
    assert copy is not s and [e.id for e in copy.entries] == got and copy.leaf == s.leaf
    copy.branch(got[0])
    assert s.leaf == got[2]
    s.branch(got[1])
    assert copy.leaf == got[0]
    assert store.read(s.id).leaf == got[2]  # an unrecorded branch is not stored
    s.branch(got[2])
    store.append(s.id, user("3"))
    assert len(copy) == 3 and len(store.read(s.id)) == 4

    second = h.second()
    with pytest.raises(exceptions.SessionLocked):
        second.open(s.id)
    assert len(second.read(s.id)) == 4
    store.append(s.id, user("4"))


def test_read_takes_no_hold(h: Harness) -> None:
    store = h.new()
    s = store.create({})
    store.append(s.id, user("a"))
    store = h.reopen(store)
    assert len(store.read(s.id)) == 1
    other = h.second()
    other.append(s.id, user("b"))
    with pytest.raises(exceptions.SessionLocked):
        store.open(s.id)
    assert len(store.read(s.id)) == 2


# -- Follow ----------------------------------------------------------------------


def seeded(store: LogStore, n: int) -> tuple[str, list[str]]:
    s = store.create({})
    return s.id, [store.append(s.id, user(f"u{i}")) for i in range(n)]


def changes(store: LogStore, sid: str, cursor: str = "") -> Iterator[Change]:
    return store.follow(sid, cursor)


def test_follow_snapshot_then_appends(h: Harness) -> None:
    store = h.new(follow_interval=0.01)
    sid, got = seeded(store, 2)
    it = changes(store, sid)
    snap = next(it)
    assert snap.kind == "snapshot" and snap.cursor
    assert [e.id for e in snap.session.entries] == got  # type: ignore[union-attr]
    assert snap.session is not store.open(sid) and snap.session.leaf == got[-1]  # type: ignore[union-attr]
    cursors = {snap.cursor}
    for i in range(3):
        eid = store.append(sid, user(f"more {i}"))
        c = next(it)
        assert c.kind == "appended" and c.entry_id == eid
        assert len(c.session) == 3 + i and c.session.leaf == eid  # type: ignore[arg-type, union-attr]
        assert c.cursor not in cursors
        cursors.add(c.cursor)
    store.open(sid).branch(got[0])  # unrecorded: nothing to see
    eid = store.append(sid, {"type": "info", "name": "after"})
    assert next(it).entry_id == eid


def test_follow_branch_then_head(h: Harness) -> None:
    store = h.new(follow_interval=0.01)
    sid, got = seeded(store, 2)
    it = changes(store, sid)
    next(it)
    b = store.append(sid, user("b", parent=got[0]))
    c = next(it)
    assert c.kind == "appended" and c.entry.parent == got[0]  # type: ignore[union-attr]
    assert len(c.session.path(b)) == 2  # type: ignore[union-attr]
    s = store.open(sid)
    s.branch(got[0])
    label = store.append(sid, s.mark_leaf())
    c = next(it)
    assert c.kind == "appended" and c.entry_id == label
    head = next(it)
    assert head.kind == "head" and head.leaf == got[0] and head.cursor


def test_follow_side_branch_keeps_the_live_leaf(h: Harness) -> None:
    # A line hung off a side branch moves neither the writer's leaf nor a live
    # follower's; only a follower that starts (or resets) from the stored lines
    # takes the read rule, which lands on the last line.
    store = h.new(follow_interval=0.01)
    sid, got = seeded(store, 2)
    it = changes(store, sid)
    next(it)
    side = store.append(sid, user("side", parent=got[0]))
    c = next(it)
    assert c.kind == "appended" and c.entry_id == side
    assert store.open(sid).leaf == got[-1]
    assert c.leaf == got[-1] and c.session.leaf == got[-1]  # type: ignore[union-attr]
    on = store.append(sid, user("on"))
    c = next(it)
    assert c.entry.parent == got[-1] and c.leaf == on  # type: ignore[union-attr]
    it.close()
    fresh = next(changes(store, sid))
    assert fresh.kind == "snapshot" and fresh.leaf == on
    store.append(sid, user("side 2", parent=side))
    assert next(changes(store, sid)).leaf != on  # the read rule: the last line


def test_follow_second_and_read_only_store(h: Harness) -> None:
    writer = h.new()
    sid, got = seeded(writer, 1)
    for follower in (h.read_only(), h.second()):
        it = follower.follow(sid)
        next(it)
        eid = writer.append(sid, user("x"))
        assert next(it).entry_id == eid
        s = writer.open(s_id := sid)
        s.branch(got[0])
        writer.append(s_id, s.mark_leaf())
        assert next(it).kind == "appended"
        assert next(it).kind == "head"
        it.close()
    assert writer.lock_holder(sid).pid == writer.pid  # type: ignore[union-attr]
    writer.append(sid, user("still mine"))


def test_follow_resume(h: Harness) -> None:
    store = h.new(follow_interval=0.01)
    sid, _ = seeded(store, 1)
    it = changes(store, sid)
    next(it)
    store.append(sid, user("a"))
    saved = next(it).cursor
    it.close()
    missed = [store.append(sid, user("b")), store.append(sid, user("c"))]
    it = changes(store, sid, saved)
    got = [next(it), next(it)]
    assert [c.kind for c in got] == ["appended", "appended"]
    assert [c.entry_id for c in got] == missed and len(got[1].session) == 4  # type: ignore[arg-type]
    it.close()
    # A cursor at the end is quiet until the next append.
    stop_cursor = got[1].cursor
    it = store.follow(sid, stop_cursor)
    eid = store.append(sid, user("d"))
    assert next(it).entry_id == eid


def test_follow_resume_stale(h: Harness) -> None:
    store = h.new(follow_interval=0.01)
    sid, _ = seeded(store, 3)
    reset = next(store.follow(sid, "not-a-cursor"))
    assert reset.kind == "reset" and len(reset.session) == 3  # type: ignore[arg-type]
    old_cursor = reset.cursor
    store.delete(sid)
    store.create({"id": sid, "created_at": "2030-01-01T13:00:00Z"})
    fresh = store.append(sid, user("new"))
    reset = next(store.follow(sid, old_cursor))
    assert reset.kind == "reset" and [e.id for e in reset.session.entries] == [fresh]  # type: ignore[union-attr]


def test_follow_delete_and_recreate(h: Harness) -> None:
    store = h.new(follow_interval=0.01)
    sid, _ = seeded(store, 1)
    it = store.follow(sid)
    next(it)
    store.delete(sid)
    with pytest.raises(exceptions.NoSession):
        next(it)

    sid, _ = seeded(store, 1)
    it = store.follow(sid)
    next(it)
    store.delete(sid)
    store.create({"id": sid})
    for i in range(3):
        store.append(sid, user(f"n{i}"))
    with pytest.raises(exceptions.NoSession):
        next(it)


def test_follow_missing_and_stop(h: Harness) -> None:
    import threading

    store = h.new(follow_interval=0.01)
    with pytest.raises(exceptions.NoSession):
        next(store.follow("no-such-session"))
    sid, _ = seeded(store, 1)
    stop = threading.Event()
    it = store.follow(sid, stop=stop)
    next(it)
    stop.set()
    assert list(it) == []  # ends quietly


def test_follow_break_many_times(h: Harness) -> None:
    store = h.new(follow_interval=0.01)
    sid, _ = seeded(store, 2)
    for _ in range(10):
        it = store.follow(sid)
        next(it)
        it.close()
    assert store._hub._waiters == {}
    store.append(sid, user("x"))
    assert len(next(store.follow(sid)).session) == 3  # type: ignore[arg-type]


def test_follow_fork(h: Harness) -> None:
    store = h.new(follow_interval=0.01)
    _origin_id, e = _origin(store)
    store.create({"id": "ff", "base": e[1]})
    it = store.follow("ff")
    snap = next(it)
    assert len(snap.session) == 2 and snap.session.leaf == e[1]  # type: ignore[arg-type, union-attr]
    own = store.append("ff", user("own"))
    c = next(it)
    assert c.entry_id == own and c.entry.parent == e[1] and len(c.session) == 3  # type: ignore[arg-type, union-attr]


def test_follow_burst(h: Harness) -> None:
    store = h.new(follow_interval=0.01)
    sid, _ = seeded(store, 0)
    it = store.follow(sid)
    next(it)
    sent = [store.append(sid, user(f"burst {i}")) for i in range(60)]
    seen, lengths = [], []
    for _ in range(60):
        change = next(it)
        seen.append(change.entry_id)
        lengths.append(len(change.session))  # type: ignore[arg-type]
    assert seen == sent
    assert lengths == list(range(1, 61))


# -- Persistence, durable leaf, convergence ---------------------------------------


def test_persistence(h: Harness) -> None:
    store = h.new()
    s = store.create({"cwd": "/p", "harness": {"name": "h", "version": "1"}})
    store.append(s.id, {"type": "config", "model": "m", "instructions": "i"})
    hi = store.append(s.id, user("hi"))
    store.append(s.id, {"type": "acme:note", "text": "<x>", "z": [1, 2]})
    store.append(s.id, assistant("yo", response="resp_1"))
    resp = store.append(
        s.id,
        {
            "type": "response",
            "response_id": "resp_1",
            "model": "m",
            "status": "completed",
            "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2},
        },
    )
    text = store.export_jsonl(s.id)
    store = h.reopen(store)
    again = store.open(s.id)
    assert again.header == s.header and len(again) == 5 and again.leaf == resp
    ctx = again.context_at(hi)
    assert ctx.settings["model"] == "m" and ctx.settings["instructions"] == "i"
    assert len(ctx.items) == 1 and len(ctx.entries) == 2
    assert again.entries[0].type == "config"
    assert again.entry(resp).data["usage"]["total_tokens"] == 2  # type: ignore[union-attr]
    nxt = store.append(s.id, user("next"))
    assert again.entry(nxt).parent == resp  # type: ignore[union-attr]
    assert s.id in ids(store, cwd="/p")
    assert dumps(store.read(s.id)).startswith(text)
    store.delete(s.id)
    with pytest.raises(exceptions.NoSession):
        h.reopen(store).open(s.id)


def test_durable_leaf(h: Harness) -> None:
    store = h.new()
    s = store.create({})
    a = store.append(s.id, user("a"))
    store.append(s.id, user("b"))
    s.branch(a)
    store.append(s.id, s.mark_leaf())
    store.append(s.id, user("c"))
    d = store.append(s.id, user("d"))
    again = h.reopen(store).open(s.id)
    assert again.leaf == d
    assert len(again.context().items) == 3


def test_convergence(h: Harness) -> None:
    store = h.new()
    s = store.create({})
    store.append(s.id, {"type": "config", "model": "m"})
    kept = store.append(s.id, user("kept"))
    s.branch(s.entries[0].id)
    abandoned = store.append(s.id, user("abandoned"))
    s.branch(kept)
    other = "01995b2a-0000-7000-8000-0000000000ff"
    join = store.append(
        s.id,
        assistant(
            "join", parents=[{"session": other, "entry": "child-leaf"}, {"entry": abandoned}]
        ),
    )
    again = h.reopen(store).open(s.id)
    e = again.entry(join)
    assert e is not None and e.parent == kept
    assert list(e.parents) == [{"entry": abandoned}, {"session": other, "entry": "child-leaf"}]
    ctx = again.context_at(join)
    assert len(ctx.items) == 2 and abandoned not in ctx.entries


# -- Export / import -------------------------------------------------------------


def test_export_import_round_trip(h: Harness) -> None:
    store = h.new()
    s = store.create({"id": "src", "cwd": "/x"})
    store.append(s.id, {"type": "config", "model": "m"})
    store.append(s.id, user("héllo"))
    store.append(s.id, {"type": "info", "name": "named"})
    text = store.export_jsonl(s.id)
    assert text == dumps(s)
    copy_text = text.replace('"id":"src"', '"id":"copy"', 1)
    imported = store.import_jsonl(copy_text)
    assert imported.id == "copy"
    assert store.export_jsonl("copy") == copy_text
    assert {x.id: x.name for x in store.list()}["copy"] == "named"
    with pytest.raises(exceptions.SessionExists):
        store.import_jsonl(copy_text)
    tampered = text.replace('"id":"src"', '"id":"bad"', 1).replace("héllo", "hello")
    with pytest.raises(exceptions.BadID):
        store.import_jsonl(tampered)
    with pytest.raises(exceptions.NoSession):
        store.open("bad")
    store.append("copy", user("more"))  # the imported session is an ordinary one
    holder = store.lock_holder("copy")
    assert holder is not None and (holder.pid, holder.host) == (store.pid, store.host)


def test_import_refuses_an_unresolved_migration(h: Harness) -> None:
    legacy = Path(__file__).resolve().parent.parent / "data" / "agentsession" / "sessions" / "v0.4"
    store = h.new()
    with pytest.raises(exceptions.UnresolvedMigration):
        store.import_jsonl((legacy / "extensions.jsonl").read_text(encoding="utf-8"))
    assert list(store.list()) == []
    # A legacy file the migration fully rewrites is stored as migrated.
    imported = store.import_jsonl((legacy / "basic.jsonl").read_text(encoding="utf-8"))
    assert store.export_jsonl(imported.id) == dumps(imported)


def test_label_without_target_is_stored(h: Harness) -> None:
    store = h.new()
    s = store.create({})
    store.append(s.id, user("a"))
    label = store.append(s.id, {"type": "label", "label": "note"})
    assert store.read(s.id).entry(label).data.get("target") is None  # type: ignore[union-attr]
    with pytest.raises(exceptions.NoEntry):
        store.append(s.id, {"type": "label", "label": "x", "target": "sha256:" + "0" * 64})


# -- Kinds and read-only -----------------------------------------------------------


def test_other_kinds_are_refused(h: Harness) -> None:
    from agentstore.stores import TreeStore

    tree = TreeStore().create_session("/t")
    store = h.new()
    with pytest.raises(exceptions.WrongSessionKind, match="tree session"):
        store.open(tree.id)
    with pytest.raises(exceptions.WrongSessionKind, match="tree session"):
        store.append(tree.id, user("x"))
    with pytest.raises(exceptions.WrongSessionKind):
        store.read(tree.id)
    with pytest.raises(exceptions.WrongSessionKind):
        store.delete(tree.id)
    assert store.lock_holder(tree.id) is None
    assert tree.id not in ids(store)


def test_read_only_store_refuses_writes(h: Harness) -> None:
    writer = h.new()
    s = writer.create({})
    writer.append(s.id, {"type": "info", "name": "live"})
    reader = h.read_only()
    assert reader.open(s.id).name() == "live"
    for call in (
        lambda: reader.create({}),
        lambda: reader.append(s.id, user("x")),
        lambda: reader.delete(s.id),
        lambda: reader.break_lock(s.id),
        lambda: reader.import_jsonl(writer.export_jsonl(s.id)),
        lambda: reader.continue_session(s.id),
    ):
        with pytest.raises(exceptions.ReadOnly):
            call()
    assert writer.lock_holder(s.id).pid == writer.pid  # type: ignore[union-attr]


def test_store_clock_stamps_entries() -> None:
    clock_at = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    store = LogStore(clock=lambda: clock_at)
    try:
        s = store.create({})
        eid = store.append(s.id, user("x"))
        assert s.entry(eid).ts == "2026-01-02T03:04:05.678901Z"  # type: ignore[union-attr]
        from agentstore.models import Entry

        row = Entry.objects.get(session_id=s.id, entry_id=eid)
        assert row.created_at == clock_at and row.seq == 1 and row.parent_id is None
        assert cj(s.header)  # header stays canonical JSON
    finally:
        store.close()


def test_follow_resume_from_an_empty_sessions_cursor(h: Harness) -> None:
    store = h.new(follow_interval=0.01)
    sid, _ = seeded(store, 0)
    snap = next(store.follow(sid))
    assert len(snap.session) == 0  # type: ignore[arg-type]
    sent = [store.append(sid, user("a")), store.append(sid, user("b"))]
    it = store.follow(sid, snap.cursor)
    assert [next(it).entry_id, next(it).entry_id] == sent  # silent resume, no reset


def test_list_refuses_bad_filters(h: Harness) -> None:
    store = h.new()
    with pytest.raises(exceptions.ValidationError, match="filter.after"):
        store.list(ListFilter(after=datetime(2026, 1, 1)))  # noqa: DTZ001
    with pytest.raises(exceptions.ValidationError, match="filter.limit"):
        store.list(ListFilter(limit=-1))
