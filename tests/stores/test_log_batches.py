"""LogStore.append_many (one transaction, all or nothing), tail (last N on the branch),
Session.truncate, and the item projection log entries get for the admin."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from django.db import connections
from django.test.utils import CaptureQueriesContext

from agentstore import exceptions
from agentstore.formats.agentsession import Session
from agentstore.models import Entry
from agentstore.stores import LogStore, log_open
from tests.stores.test_log_support import Harness, assistant, user

pytestmark = pytest.mark.django_db


@pytest.fixture
def h() -> Iterator[Harness]:
    harness = Harness()
    yield harness
    harness.close()


def call(call_id: str, name: str = "lookup") -> dict[str, Any]:
    return {
        "type": "item",
        "item": {"type": "function_call", "call_id": call_id, "name": name, "arguments": "{}"},
    }


def count(sid: str) -> int:
    return Entry.objects.filter(session_id=sid).count()


def test_append_many_chains_entries_in_one_transaction(h: Harness) -> None:
    store = h.new()
    sid = store.create({"id": "batch"}).id
    writes: list[int] = []
    original = store.write

    def counting(fn: Any, **options: Any) -> Any:
        writes.append(1)
        return original(fn, **options)

    store.write = counting  # type: ignore[method-assign]
    ids = store.append_many(sid, [user("a"), call("c1"), assistant("b")])
    assert len(writes) == 1 and len(ids) == 3
    session = store.read(sid)
    assert [e.id for e in session.path(session.leaf)] == ids  # each hung from the previous
    assert store.append_many(sid, []) == []
    assert len(writes) == 1


def test_append_many_is_all_or_nothing(h: Harness) -> None:
    store = h.new()
    s = store.create({"id": "atomic"})
    first = store.append("atomic", user("a"))
    before_leaf, before_len = s.leaf, len(s)
    # The third entry repeats a call id: nothing of the batch is stored or kept in memory.
    with pytest.raises(exceptions.CallIDRepeated):
        store.append_many("atomic", [call("c1"), user("b"), call("c1")])
    assert (s.leaf, len(s)) == (before_leaf, before_len) == (first, 1)
    assert count("atomic") == 1
    assert store.append_many("atomic", [call("c1")])  # the call id was never taken
    with pytest.raises(exceptions.ValidationError, match="entries must be a list"):
        store.append_many("atomic", user("x"))  # type: ignore[arg-type]


def test_append_many_undoes_memory_when_the_transaction_fails(h: Harness) -> None:
    store = h.new()
    s = store.create({"id": "undo"})
    store.append("undo", user("a"))
    # Another writer bypassing the hold takes seq 2: the batch's INSERT fails.
    other = store.read("undo")
    sneaked = other.append(user("sneaked")).entry
    Entry.objects.create(
        session_id="undo",
        seq=2,
        entry_id=sneaked.id,
        parent_id=sneaked.parent,
        type=sneaked.type,
        line=sneaked.line,
        created_at=datetime.now(UTC),
    )
    with pytest.raises(exceptions.ConcurrentWriter):
        store.append_many("undo", [user("b"), call("c9")])
    assert len(s) == 1  # the caller's object is as it was (truncated back)
    store.release("undo")
    assert store.append_many("undo", [call("c9")])  # its call id was released too


def test_expected_leaf_makes_the_append_conditional(h: Harness) -> None:
    store = h.new()
    sid = store.create({"id": "cas"}).id
    assert store.tail(sid).leaf == ""
    a = store.append_many(sid, [user("a")], expected_leaf="")[0]
    with pytest.raises(exceptions.ConcurrentWriter, match="moved since it was read"):
        store.append_many(sid, [user("b")], expected_leaf="")
    assert count(sid) == 1
    b = store.append_many(sid, [user("b")], expected_leaf=a)[0]
    assert store.tail(sid).leaf == b  # not refused: the session stays writable


def test_tail_is_the_newest_entries_on_the_branch(h: Harness) -> None:
    store = h.new()
    sid = store.create({"id": "tail"}).id
    a, b, c = store.append_many(sid, [user("a"), assistant("b"), user("c")])
    cfg = store.append(sid, {"type": "config", "model": "m"})
    d = store.append(sid, assistant("d"))
    assert [e.id for e in store.tail(sid, 2).entries] == [cfg, d]
    assert [e.id for e in store.tail(sid, 2, types={"item"}).entries] == [c, d]
    assert [e.id for e in store.tail(sid, types={"item"}).entries] == [a, b, c, d]
    assert store.tail(sid, 0).entries == [] and store.tail(sid, 0).leaf == d
    # A branch from b: the tail follows the leaf, not the file order.
    session = store.open(sid)
    session.branch(b)
    e = store.append(sid, user("e"))
    assert [x.id for x in store.tail(sid, 9, types={"item"}).entries] == [a, b, e]
    # Another store reads the durable leaf (the unmarked branch is the file's
    # last entry) and takes no hold doing so.
    other = LogStore()
    tail = other.tail(sid, 2, types={"item"})
    assert [x.id for x in tail.entries] == [b, e] and tail.leaf == e
    store.release(sid)
    assert other.lock_holder(sid) is None
    with pytest.raises(exceptions.NoSession):
        store.tail("missing", 1)
    with pytest.raises(exceptions.ValidationError):
        store.tail(sid, -1)


def test_tail_walks_only_what_it_returns(h: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    # O(limit): a session opened from its head reads a few more lines than
    # wanted in one query and decodes only the kept ones; the entries a store
    # appended itself are walked in memory.
    store = h.new()
    sid = store.create({"id": "walk"}).id
    store.append_many(sid, [user(f"m{i}") for i in range(300)])
    store.close()
    store = h.new()
    store.open(sid)
    decoded: list[str] = []
    original = log_open._entry

    def spy(line: str) -> Any:
        decoded.append(line)
        return original(line)

    monkeypatch.setattr(log_open, "_entry", spy)
    with CaptureQueriesContext(connections["default"]) as queries:
        assert len(store.tail(sid, 5).entries) == 5
    assert len(decoded) == 5 and len(queries) == 1
    store.append_many(sid, [user(f"n{i}") for i in range(5)])
    with CaptureQueriesContext(connections["default"]) as queries:
        assert [e.data["item"]["content"][0]["text"] for e in store.tail(sid, 5).entries] == [
            f"n{i}" for i in range(5)
        ]
    assert len(queries) == 0


def test_session_truncate_undoes_commits() -> None:
    session = Session.new({"id": "t"})
    a = session.append(user("a")).id
    session.append(call("c1"))
    session.append(user("b"))
    session.truncate(1, a)
    assert len(session) == 1 and session.leaf == a and session.children(a) == []
    session.append(call("c1"))  # the call id is free again
    with pytest.raises(exceptions.ValidationError):
        session.truncate(5, a)
    with pytest.raises(exceptions.NoEntry):
        session.truncate(1, "sha256:" + "0" * 64)


def test_item_entries_project_role_text_and_tool(h: Harness) -> None:
    store = h.new()
    sid = store.create({"id": "proj"}).id
    store.append_many(
        sid,
        [
            user("hello\x00there"),
            {
                "type": "item",
                "item": {
                    "type": "function_call",
                    "call_id": "c1",
                    "name": "get_weather",
                    "arguments": '{"city":"Paris"}',
                },
            },
            {
                "type": "item",
                "item": {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
            },
            {"type": "config", "model": "m"},
        ],
    )
    rows = list(Entry.objects.filter(session_id=sid).order_by("seq"))
    assert [(r.role, r.content, r.tool_name) for r in rows] == [
        ("user", "hellothere", ""),  # NUL dropped: PostgreSQL text cannot hold it
        ("", 'get_weather({"city":"Paris"})', "get_weather"),  # describe.searchable
        ("", "sunny", ""),
        ("", "", ""),
    ]
    assert '"text":"hello\\u0000there"' in rows[0].line  # the line keeps everything
