"""AgentStoreSession: the OpenAI Agents SDK's session protocol over a LogStore session.

The real SDK runs offline (``tests/integrations/agents_fakes.py``: a scripted
model, a dummy key, tracing off). Every test is transactional because the
session's coroutines do their database work on another thread
(``agentstore.db.thread``), which has its own connection.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from agents import Runner
from agents.memory import Session as SessionProtocol
from agents.memory import SessionABC, SessionSettings
from django.contrib.auth.models import User

from agentstore import exceptions
from agentstore.integrations.openai_agents import HARNESS, MARK, AgentStoreSession
from agentstore.models import Entry, Holder
from agentstore.models import Session as SessionRow
from agentstore.stores import LogStore, TreeStore
from tests.integrations.agents_fakes import WeatherModel, offline, weather_agent

pytestmark = pytest.mark.django_db(transaction=True)

USER = {"role": "user", "content": "Weather in Paris?"}
CALL = {
    "type": "function_call",
    "id": "fc_1",
    "call_id": "call_1",
    "name": "get_weather",
    "arguments": '{"city": "Paris"}',
    "status": "completed",
}
OUTPUT = {"type": "function_call_output", "call_id": "call_1", "output": "sunny, 21°C"}
ANSWER = {
    "type": "message",
    "id": "msg_1",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "output_text", "text": "Sunny — 21 °C ☀", "annotations": []}],
}
REASONING = {
    "type": "reasoning",
    "id": "rs_1",
    "summary": [{"type": "summary_text", "text": "look up"}],
    "encrypted_content": None,
    "extra": {"score": 0.5, "big": 2**40, "list": [1, 2.25, True, None]},
}


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def item_entries(session_id: str) -> list[str]:
    return list(
        Entry.objects.filter(session_id=session_id, type="item")
        .order_by("seq")
        .values_list("entry_id", flat=True)
    )


@pytest.fixture(autouse=True)
def _offline() -> None:
    offline()


def test_it_is_an_sdk_session() -> None:
    session = AgentStoreSession("proto", session_settings={"limit": 3})
    assert isinstance(session, SessionABC)
    assert isinstance(session, SessionProtocol)
    assert session.session_id == "proto"
    assert session.session_settings == SessionSettings(limit=3)


def test_runner_keeps_a_multi_turn_conversation_with_tool_calls() -> None:
    model = WeatherModel()

    async def conversation() -> tuple[list[str], list[Any]]:
        async with AgentStoreSession("conv-1") as session:
            first = await Runner.run(weather_agent(model), "Weather in Paris?", session=session)
            second = await Runner.run(weather_agent(model), "Weather in Oslo?", session=session)
            return [str(first.final_output), str(second.final_output)], await session.get_items()

    outputs, items = run(conversation())
    assert outputs == ["The weather: sunny, 21°C.", "The weather: snow, -3°C."]
    # Each model call saw the whole history: the second turn starts from 4 items.
    assert [len(i) for i in model.inputs] == [1, 3, 5, 7]
    assert model.inputs[2][:4] == items[:4]
    assert [i.get("type") for i in items] == [
        None,
        "function_call",
        "function_call_output",
        "message",
    ] * 2
    assert items[0] == {"role": "user", "content": "Weather in Paris?"}
    assert items[6]["output"] == "snow, -3°C"
    # One item entry per item, in order, in a log session the SDK's id names.
    row = SessionRow.objects.get(pk="conv-1")
    assert row.kind == "log" and '"harness":{"name":"openai-agents"}' in row.header
    assert len(item_entries("conv-1")) == 8
    stored = LogStore().read("conv-1")
    stored.verify()
    assert [e.data["item"].get("call_id") for e in stored.entries][1:3] == ["call_1", "call_1"]


def test_items_come_back_exactly_and_limit_takes_the_newest() -> None:
    added = [USER, CALL, OUTPUT, REASONING, ANSWER]
    session = AgentStoreSession("exact")
    run(session.add_items(added))
    # A fresh store (a new process, in effect) reads them back equal.
    again = AgentStoreSession("exact", store=LogStore())
    assert run(again.get_items()) == added
    assert run(again.get_items(limit=2)) == [REASONING, ANSWER]
    assert run(again.get_items(limit=99)) == added
    assert run(again.get_items(limit=0)) == []
    assert run(again.get_items(limit=-1)) == added  # SQLiteSession's negative LIMIT
    limited = AgentStoreSession("exact", store=LogStore(), session_settings={"limit": 1})
    assert run(limited.get_items()) == [ANSWER]
    # The typeless user message is stored as a message and marked so.
    first = LogStore().read("exact").entries[0]
    assert first.data["item"]["type"] == "message" and first.data[MARK] == {"typeless": True}
    for s in (session, again, limited):
        s.close()


def test_add_items_is_one_transaction_and_all_or_nothing() -> None:
    session = AgentStoreSession("tx")
    store = session.store
    assert not store.holds  # its own store keeps no hold between writes
    session.add_items_sync([USER])
    writes: list[int] = []
    original = store.write

    def counting(fn: Any, **options: Any) -> Any:
        writes.append(1)
        return original(fn, **options)

    store.write = counting  # type: ignore[method-assign]
    session.add_items_sync([CALL, OUTPUT, ANSWER])
    assert len(writes) == 1
    assert len(item_entries("tx")) == 4
    # A refused item (a reused call id) stores none of the batch.
    with pytest.raises(exceptions.CallIDRepeated):
        session.add_items_sync([{**USER, "content": "again"}, CALL])
    with pytest.raises(exceptions.ValidationError, match=r"items\[1\]"):
        session.add_items_sync([USER, "not an item"])  # type: ignore[list-item]
    assert len(item_entries("tx")) == 4
    assert session.get_items_sync() == [USER, CALL, OUTPUT, ANSWER]
    session.add_items_sync([])  # nothing to write
    assert len(writes) == 1  # refused batches never reached the database
    session.close()


def test_pop_item_keeps_the_item_on_an_abandoned_branch() -> None:
    session = AgentStoreSession("pop")
    session.add_items_sync([USER, CALL, OUTPUT, ANSWER])
    before = item_entries("pop")
    assert session.pop_item_sync() == ANSWER
    assert session.get_items_sync() == [USER, CALL, OUTPUT]
    assert item_entries("pop") == before  # nothing deleted
    retry = {**ANSWER, "id": "msg_2", "content": [{"type": "output_text", "text": "Sunny."}]}
    session.add_items_sync([retry])
    session.close()
    # A new store (as after a restart) sees the same branch: the move was durable.
    stored = LogStore().read("pop")
    popped, new = stored.entry(before[3]), stored.entry(item_entries("pop")[4])
    assert popped is not None and new is not None
    assert new.parent == popped.parent == before[2]  # the retry continued from the new leaf
    assert popped.id not in {e.id for e in stored.path(stored.leaf)}
    assert AgentStoreSession("pop").get_items_sync() == [USER, CALL, OUTPUT, retry]


def test_popping_every_item_then_adding_starts_an_empty_root() -> None:
    session = AgentStoreSession("pop-all")
    session.add_items_sync([USER, ANSWER])
    assert session.pop_item_sync() == ANSWER
    assert session.pop_item_sync() == USER  # the root item: an empty root takes the leaf
    assert session.pop_item_sync() is None
    assert session.get_items_sync() == []
    session.add_items_sync([{"role": "user", "content": "fresh"}])
    session.close()
    assert AgentStoreSession("pop-all").get_items_sync() == [{"role": "user", "content": "fresh"}]
    assert len(item_entries("pop-all")) == 3


def test_clear_session_hides_every_item_and_keeps_them_stored() -> None:
    session = AgentStoreSession("clear")
    session.clear_session_sync()  # nothing there: nothing created
    assert not SessionRow.objects.filter(pk="clear").exists()
    session.add_items_sync([USER, CALL, OUTPUT, ANSWER])
    run(session.clear_session())
    assert run(session.get_items()) == []
    assert session.pop_item_sync() is None
    count = Entry.objects.filter(session_id="clear").count()
    session.clear_session_sync()  # already clear: writes nothing
    assert Entry.objects.filter(session_id="clear").count() == count
    session.add_items_sync([{"role": "user", "content": "new topic"}])
    session.close()
    stored = LogStore().read("clear")
    assert len(item_entries("clear")) == 5  # the old items are all still there
    path = stored.path(stored.leaf)
    assert [e.type for e in path] == ["info", "item"]
    assert path[0].parent is None and path[0].data[MARK] == "clear_session"
    assert AgentStoreSession("clear").get_items_sync() == [{"role": "user", "content": "new topic"}]


def test_owner_scopes_the_session() -> None:
    alice = User.objects.create_user("alice")
    bob = User.objects.create_user("bob")
    mine = AgentStoreSession("owned", owner=alice)
    mine.add_items_sync([USER])
    mine.close()
    assert SessionRow.objects.get(pk="owned").owner_id == alice.pk
    assert AgentStoreSession("owned", owner=alice).get_items_sync() == [USER]
    theirs = AgentStoreSession("owned", owner=bob)
    with pytest.raises(exceptions.NoSession):
        theirs.get_items_sync()
    with pytest.raises(exceptions.NoSession):
        theirs.add_items_sync([ANSWER])
    assert LogStore().lock_holder("owned") is None  # the refused open let go at once
    assert len(item_entries("owned")) == 1


def test_a_session_of_another_kind_is_refused() -> None:
    tree_id = TreeStore().create_session("/t").id
    session = AgentStoreSession(tree_id)
    with pytest.raises(exceptions.WrongSessionKind, match="tree session"):
        session.add_items_sync([USER])
    with pytest.raises(exceptions.WrongSessionKind):
        session.get_items_sync()


def test_objects_never_closed_serve_one_conversation_turn_after_turn() -> None:
    # The SDK's documented use: one object per conversation, never closed —
    # and a server has one per worker process. Each turn reads, then writes.
    first = AgentStoreSession("many-objects")
    second = AgentStoreSession("many-objects")  # its own LogStore: another process
    turns: list[Any] = []
    for turn in range(6):
        serving = (first, second)[turn % 2]
        assert serving.get_items_sync() == turns
        said = {"role": "user", "content": f"turn {turn}"}
        serving.add_items_sync([said])
        turns.append(said)
    assert first.get_items_sync() == second.get_items_sync() == turns
    assert LogStore().lock_holder("many-objects") is None  # nobody holds it between turns
    LogStore().read("many-objects").verify()


def test_a_session_another_store_holds_refuses_the_write() -> None:
    harness = LogStore()  # a store that takes holds: it opened the session to write
    harness.create({"id": "held"})
    session = AgentStoreSession("held")
    assert session.get_items_sync() == []  # reads never wait for a hold
    with pytest.raises(exceptions.SessionLocked, match="held by pid"):
        session.add_items_sync([USER])
    harness.release("held")
    session.add_items_sync([USER])
    assert session.get_items_sync() == [USER]
    # The harness opens it again and appends: the object's next turn sees it.
    harness.append("held", {"type": "item", "item": ANSWER})
    harness.release("held")
    assert session.get_items_sync() == [USER, ANSWER]


def test_a_dead_processs_hold_does_not_block_the_conversation() -> None:
    AgentStoreSession("orphan").add_items_sync([USER])
    since = datetime(2026, 1, 1, tzinfo=UTC)
    Holder.objects.create(  # a process of this host that no longer exists held it
        session_id="orphan",
        pid=2147483000,
        host=socket.gethostname(),
        token="gone",
        since=since,
        heartbeat=since,
    )
    session = AgentStoreSession("orphan")
    session.get_items_sync()
    session.add_items_sync([ANSWER])  # the dead hold is cleared, as open would
    assert not Holder.objects.filter(session_id="orphan").exists()
    assert session.get_items_sync() == [USER, ANSWER]


def test_a_shared_store_that_takes_holds_holds_only_during_the_write() -> None:
    store = LogStore()  # holds=True: a hold for each write, released after it
    first = AgentStoreSession("shared-held", store=store)
    other = AgentStoreSession("shared-held")
    first.add_items_sync([USER])
    assert store.lock_holder("shared-held") is None
    other.get_items_sync()
    other.add_items_sync([ANSWER])
    first.get_items_sync()
    first.add_items_sync([{**ANSWER, "id": "msg_3"}])
    assert store.lock_holder("shared-held") is None
    assert len(item_entries("shared-held")) == 3


def test_the_event_loop_keeps_running_during_database_work() -> None:
    # The store's clock runs inside add_items' database work. It waits for an
    # event that only a coroutine on the loop sets: were the work on the loop,
    # the coroutine could never run and the wait would time out.
    released = threading.Event()
    ticks: list[str] = []

    def clock() -> datetime:
        if not released.wait(timeout=30):
            raise AssertionError("the event loop was blocked")
        return datetime(2026, 6, 1, tzinfo=UTC) + timedelta(seconds=len(ticks))

    async def main() -> list[Any]:
        session = AgentStoreSession("loop", store=LogStore(clock=clock))

        async def ticker() -> None:
            await asyncio.sleep(0)
            ticks.append("tick")
            released.set()

        await asyncio.gather(session.add_items([USER, ANSWER]), ticker())
        items = await session.get_items()
        await session.aclose()
        return items

    assert run(main()) == [USER, ANSWER]
    assert ticks == ["tick"]


def test_a_cancelled_add_items_still_completes_the_write() -> None:
    # The write runs in a thread that cancellation cannot stop: the caller's
    # cancellation is delivered only once the write has ended, and the items
    # are stored.
    started, release = threading.Event(), threading.Event()

    async def main() -> tuple[bool, list[Any]]:
        session = AgentStoreSession("cancelled")
        real = session.add_items_sync

        def blocked(items: Any) -> None:
            started.set()
            if not release.wait(timeout=30):
                raise AssertionError("never released")
            real(items)

        session.add_items_sync = blocked  # type: ignore[method-assign]
        task = asyncio.ensure_future(session.add_items([USER]))
        await asyncio.to_thread(started.wait, 30)
        task.cancel()
        for _ in range(5):
            await asyncio.sleep(0)  # let the cancellation reach the waiting caller
        waited = not task.done()
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        items = await session.get_items()
        await session.aclose()
        return waited, items

    waited, items = run(main())
    assert waited  # the cancelled caller was still waiting for the write
    assert items == [USER]


def test_harness_and_header_members() -> None:
    session = AgentStoreSession("hdr", header={"cwd": "/srv/app"})
    session.add_items_sync([USER])
    session.close()
    row = SessionRow.objects.get(pk="hdr")
    assert row.cwd == "/srv/app" and HARNESS in row.header
    with pytest.raises(exceptions.ValidationError):
        AgentStoreSession("  ")


def test_a_turn_computed_from_stale_history_is_refused() -> None:
    first = AgentStoreSession("stale")
    first.add_items_sync([USER])
    first.close()
    reader = AgentStoreSession("stale")
    assert reader.get_items_sync() == [USER]  # reads take no hold
    other = AgentStoreSession("stale")
    other.add_items_sync([ANSWER])  # the conversation moves on meanwhile
    other.close()
    with pytest.raises(exceptions.ConcurrentWriter, match="moved since it was read"):
        reader.add_items_sync([{**ANSWER, "id": "msg_9"}])
    assert len(item_entries("stale")) == 2
    assert reader.get_items_sync() == [USER, ANSWER]  # read again, then it may write
    reader.add_items_sync([{**ANSWER, "id": "msg_9"}])
    reader.close()
    assert len(item_entries("stale")) == 3


def test_a_read_racing_the_sessions_creation_reads_it_empty(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Two processes start one conversation: this one's read snapshot finds no
    # session, and the other creates it before this one looks again. The read
    # came first, so it is empty — not NoSession (a race seen in CI).
    session = AgentStoreSession("raced")
    store = session.log.store
    real_tail = store.tail

    def tail_while_another_creates(*args: Any, **kwargs: Any) -> Any:
        LogStore().create({"id": "raced"})
        monkeypatch.setattr(store, "tail", real_tail)
        raise exceptions.NoSession("no such session: raced")

    monkeypatch.setattr(store, "tail", tail_while_another_creates)
    assert session.get_items_sync() == []
    # A tree session under the id is still refused.
    tree = TreeStore().create_session("/w", "")
    with pytest.raises(exceptions.WrongSessionKind):
        AgentStoreSession(tree.id).get_items_sync()
