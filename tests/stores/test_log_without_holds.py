"""A ``LogStore(holds=False)``: views checked against the head row, appends fenced by it.

What the framework integrations run on (docs/log-store.md, "Writing without a
hold"): nothing is claimed, so any number of stores — processes — write one
session turn after turn; a view is used only while the session row's head is
the one it was opened at or wrote; each append is a compare-and-set on that
head; a store that does hold the session refuses the others' appends.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agentstore import exceptions
from agentstore.models import Holder
from agentstore.models import Session as SessionRow
from agentstore.sql.log import FENCED_ROWS
from agentstore.stores import LogStore
from agentstore.stores.log_sessions import MAX_VIEWS
from agentstore.types import LockInfo

pytestmark = pytest.mark.django_db(transaction=True)


def item(text: str) -> dict[str, object]:
    return {"type": "item", "item": {"type": "message", "role": "user", "content": text}}


@pytest.fixture
def stores() -> Iterator[tuple[LogStore, LogStore]]:
    a, b = LogStore(holds=False), LogStore(holds=False)
    yield a, b
    a.close()
    b.close()


def texts(store: LogStore, session_id: str) -> list[object]:
    return [e.data["item"]["content"] for e in store.tail(session_id, None).entries]


def test_two_stores_take_turns_on_one_session(stores: tuple[LogStore, LogStore]) -> None:
    a, b = stores
    sid = a.create({"id": "turns"}).id
    assert not Holder.objects.exists()  # creating claimed nothing
    for turn in range(6):
        writer = (a, b)[turn % 2]
        leaf = writer.tail(sid, 10).leaf
        writer.append_many(sid, [item(f"t{turn}")], expected_leaf=leaf)
    assert texts(a, sid) == texts(b, sid) == [f"t{n}" for n in range(6)]
    assert not Holder.objects.exists()
    LogStore().read(sid).verify()


def test_a_current_view_costs_one_read_and_a_stale_one_is_reopened(
    stores: tuple[LogStore, LogStore],
) -> None:
    a, b = stores
    sid = a.create({"id": "views"}).id
    a.append(sid, item("one"))
    with CaptureQueriesContext(connection) as reads:
        assert texts(a, sid) == ["one"]
    assert len(reads) == 1  # the head row only: the view is current
    b.append(sid, item("two"))  # another store moves the head
    assert texts(a, sid) == ["one", "two"]  # a saw it changed and reopened
    # A leaf seen before the other store's append is refused, nothing written.
    old_leaf = a.tail(sid, 1).leaf
    b.append(sid, item("three"))
    with pytest.raises(exceptions.ConcurrentWriter, match="moved since it was read"):
        a.append_many(sid, [item("stale")], expected_leaf=old_leaf)
    # Nothing is refused for later: read again, write.
    a.append_many(sid, [item("four")], expected_leaf=a.tail(sid, 1).leaf)
    assert texts(b, sid) == ["one", "two", "three", "four"]


def test_a_stale_view_never_writes(stores: tuple[LogStore, LogStore]) -> None:
    a, b = stores
    sid = a.create({"id": "stale-view"}).id
    a.append(sid, item("one"))
    b.append(sid, item("between"))  # a's view is now stale; a does not read first
    # Unconditional: the head's fence refuses the stale view's write, and the
    # append runs again on the session as it is — after b's entry.
    a.append(sid, item("two"))
    assert texts(b, sid) == ["one", "between", "two"]
    b.append(sid, item("three"))
    # Conditional on a leaf that moved: refused, nothing written, nothing refused later.
    leaf = a.known_leaf(sid)
    with pytest.raises(exceptions.ConcurrentWriter, match="moved since it was read"):
        a.append_many(sid, [item("late")], expected_leaf=leaf)
    assert texts(a, sid) == ["one", "between", "two", "three"]
    LogStore().read(sid).verify()


def test_a_turn_reads_the_head_once(stores: tuple[LogStore, LogStore]) -> None:
    a, _b = stores
    sid = a.create({"id": "one-read"}).id
    a.append(sid, item("one"))
    with CaptureQueriesContext(connection) as turn:
        leaf = a.tail(sid, 50).leaf
        a.append_many(sid, [item("two")], expected_leaf=leaf)
    heads = [q for q in turn.captured_queries if "log_head FROM" in q["sql"]]
    assert len(heads) == 1  # the read's; the write trusts its fence


def test_a_store_that_holds_the_session_refuses_the_others(
    stores: tuple[LogStore, LogStore],
) -> None:
    a, _b = stores
    harness = LogStore()  # holds=True: opening claims the session
    sid = harness.create({"id": "held"}).id
    harness.append(sid, item("harness"))
    assert texts(a, sid) == ["harness"]  # reads never wait for a hold
    with pytest.raises(exceptions.SessionLocked, match="held by pid"):
        a.append(sid, item("no"))
    harness.close()
    a.append(sid, item("yes"))
    assert texts(a, sid) == ["harness", "yes"]
    # The harness opens it again: it sees a's append and goes on after it.
    harness.append(sid, item("harness again"))
    harness.close()
    assert texts(a, sid) == ["harness", "yes", "harness again"]


def test_a_dead_processs_hold_is_cleared_and_reported() -> None:
    reports: list[LockInfo] = []
    store = LogStore(holds=False, stale_lock_report=reports.append)
    sid = store.create({"id": "orphan"}).id
    since = datetime(2026, 1, 1, tzinfo=UTC)
    Holder.objects.create(
        session_id=sid,
        pid=2147483000,
        host=socket.gethostname(),
        token="dead",
        since=since,
        heartbeat=since,
    )
    store.append(sid, item("after"))
    assert [(r.pid, r.since) for r in reports] == [(2147483000, since)]
    assert not Holder.objects.exists()
    Holder.objects.create(
        session_id=sid, pid=2147483000, host="elsewhere", token="t", since=since, heartbeat=since
    )
    with pytest.raises(exceptions.SessionLocked, match="elsewhere"):
        store.append(sid, item("refused"))  # another host's process may be alive
    store.close()


def test_views_are_bounded() -> None:
    store = LogStore(holds=False)
    writer = LogStore(holds=False)
    ids = [writer.create({"id": f"v{n}"}).id for n in range(MAX_VIEWS + 5)]
    writer.close()
    for sid in ids:
        store.tail(sid, 1)
    assert store.known_leaf(ids[0]) is None  # the least recently used went
    assert store.known_leaf(ids[-1]) == ""
    assert sum(store.known_leaf(s) is not None for s in ids) == MAX_VIEWS
    store.close()


def test_updated_at_and_head_follow_appends() -> None:
    store = LogStore(holds=False)
    sid = store.create({"id": "head"}).id
    store.append(sid, item("a"))
    row = SessionRow.objects.get(pk=sid)
    assert '"lines":1' in row.log_head
    fresh = LogStore()  # a holding store opens from that head in O(1)
    assert fresh.tail(sid, 5).leaf == store.known_leaf(sid)
    fresh.close()
    store.close()


def call(call_id: str) -> dict[str, object]:
    return {
        "type": "item",
        "item": {"type": "function_call", "call_id": call_id, "name": "f", "arguments": "{}"},
    }


@pytest.mark.postgres_only
def test_on_postgresql_an_append_is_one_statement_after_the_call_id_look_up() -> None:
    store = LogStore(holds=False)
    sid = store.create({"id": "round-trips"}).id
    store.append(sid, item("one"))
    with CaptureQueriesContext(connection) as sent:
        store.append_many(sid, [item("q"), call("c1"), call("c2"), call("c3"), item("a")])
    statements = [q["sql"] for q in sent.captured_queries]
    assert len(statements) == 2, statements
    assert statements[0].startswith("SELECT call_id") and "IN (" in statements[0]
    assert statements[1].startswith("WITH fence AS MATERIALIZED (UPDATE")
    with CaptureQueriesContext(connection) as sent:
        store.append(sid, item("no calls"))
    assert len(sent.captured_queries) == 1
    LogStore().read(sid).verify()
    store.close()


def test_a_repeated_call_id_is_refused_in_a_batch_and_across_batches() -> None:
    store = LogStore(holds=False)
    sid = store.create({"id": "calls"}).id
    store.append_many(sid, [call("c1"), call("c2")])
    with pytest.raises(exceptions.CallIDRepeated):
        store.append_many(sid, [call("c3"), call("c1")])
    with pytest.raises(exceptions.CallIDRepeated):
        store.append_many(sid, [call("c4"), call("c4")])
    store.append_many(sid, [call("c3"), call("c4")])
    assert len(LogStore().read(sid).entries) == 4
    store.close()


def test_a_batch_beyond_one_statement_is_stored_whole() -> None:
    store = LogStore(holds=False)
    sid = store.create({"id": "big-batch"}).id
    store.append(sid, item("first"))
    store.append_many(sid, [item(f"m{n}") for n in range(FENCED_ROWS + 37)])
    assert len(texts(store, sid)) == FENCED_ROWS + 38
    LogStore().read(sid).verify()
    other = LogStore(holds=False)
    other.append(sid, item("after"))  # the head the big batch wrote is what others read
    assert texts(store, sid)[-1] == "after"
    store.close()
    other.close()
