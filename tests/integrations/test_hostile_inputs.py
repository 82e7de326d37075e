"""Every integration door refuses what the HTTP API refuses, before anything is written.

The hostile probe of the three integrations: ``AgentStoreSession`` (OpenAI
Agents SDK), ``MessageHistory`` (Pydantic AI) and ``AgentStoreSaver`` (LangGraph,
sync and async). Each bad input is agentstore's ``ValidationError`` naming the
field — never a raw ``DataError``/``UnicodeEncodeError``, never stored on SQLite
and refused on PostgreSQL — and the database is unchanged afterwards. Database
errors the saver and the conversation objects meet are agentstore's exceptions
(``agentstore.integrations.errors``). Runs on SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from django.db import DataError, IntegrityError, OperationalError
from django.test import override_settings
from langgraph.checkpoint.base import empty_checkpoint
from pydantic_ai.messages import (
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)

from agentstore import exceptions
from agentstore.integrations.langgraph import AgentStoreSaver
from agentstore.integrations.openai_agents import AgentStoreSession
from agentstore.integrations.pydantic_ai import MessageHistory
from agentstore.models import Checkpoint, CheckpointWrite, Entry, Session
from agentstore.stores.checkpoints import CheckpointStore
from agentstore.stores.log import LogStore

pytestmark = pytest.mark.django_db(transaction=True)


def deep(levels: int) -> Any:
    value: Any = "bottom"
    for _ in range(levels):
        value = [value]
    return value


#: Session/thread ids the API refuses (docs/api.md "Names"): each must be refused here too.
BAD_IDS = [
    "../../x",
    "a/b",
    "a\\b",
    "..",
    ".",
    "",
    "   ",
    "x" * 256,
    "nul\x00id",
    "tab\tid",
    "lone\ud800surrogate",
]

#: Values the API's parser or serializers refuse inside a body.
BAD_VALUES = {
    "depth past JSON_MAX_DEPTH": deep(300),
    "NUL": "a\x00b",
    "lone surrogate": "a\udc00b",
    "infinity": float("inf"),
    "NaN": float("nan"),
    "not JSON": object(),
}


def nothing_stored() -> None:
    assert not Session.objects.exists()
    assert not Entry.objects.exists()
    assert not Checkpoint.objects.exists()
    assert not CheckpointWrite.objects.exists()


# -- the OpenAI Agents SDK session ------------------------------------------------------


@pytest.mark.parametrize("session_id", BAD_IDS)
def test_openai_session_refuses_the_ids_the_api_refuses(session_id: str) -> None:
    with pytest.raises(exceptions.ValidationError) as caught:
        AgentStoreSession(session_id)
    assert caught.value.field == "session_id"
    nothing_stored()


@pytest.mark.parametrize("name", list(BAD_VALUES))
def test_openai_session_refuses_bad_items_and_writes_none_of_the_batch(name: str) -> None:
    session = AgentStoreSession("chat")
    good = {"role": "user", "content": "hello"}
    bad = {"type": "message", "role": "user", "content": [{"type": "input_text", "x": 1}]}
    bad["content"][0]["text"] = BAD_VALUES[name]  # type: ignore[index]
    with pytest.raises(exceptions.ValidationError) as caught:
        session.add_items_sync([good, bad])
    assert caught.value.field == "items[1]"
    with pytest.raises(exceptions.ValidationError):
        asyncio.run(session.add_items([bad]))
    session.close()
    nothing_stored()


def test_openai_session_refuses_bad_keys_headers_and_limits() -> None:
    with pytest.raises(exceptions.ValidationError) as caught:
        AgentStoreSession("chat").add_items_sync([{"role": "user", "content": "x", "k\x00": 1}])
    assert caught.value.field == "items[0]"
    with pytest.raises(exceptions.ValidationError) as caught:
        AgentStoreSession("chat", header={"cwd": "/srv\x00"})
    assert caught.value.field == "header"
    with pytest.raises(exceptions.ValidationError):
        AgentStoreSession("chat").get_items_sync(limit="5")  # type: ignore[arg-type]
    nothing_stored()


def test_openai_session_depth_follows_the_setting() -> None:
    item = {"type": "message", "role": "user", "content": deep(20)}
    with (
        override_settings(AGENTSTORE={"JSON_MAX_DEPTH": 10}),
        pytest.raises(exceptions.ValidationError, match="JSON_MAX_DEPTH"),
    ):
        AgentStoreSession("chat").add_items_sync([item])
    nothing_stored()
    with AgentStoreSession("chat") as session:
        session.add_items_sync([item])  # within the default 100 levels
        assert session.get_items_sync() == [item]


# -- Pydantic AI's message history ---------------------------------------------------------


@pytest.mark.parametrize("session_id", BAD_IDS)
def test_message_history_refuses_the_ids_the_api_refuses(session_id: str) -> None:
    with pytest.raises(exceptions.ValidationError) as caught:
        MessageHistory(session_id)
    assert caught.value.field == "session_id"
    nothing_stored()


@pytest.mark.parametrize("name", list(BAD_VALUES))
def test_message_history_refuses_bad_messages_and_writes_none(name: str) -> None:
    good = ModelRequest(parts=[UserPromptPart("Weather in Paris?")])
    bad = ModelResponse(parts=[ToolCallPart("get_weather", {"city": BAD_VALUES[name]})])
    with MessageHistory("chat") as history:
        with pytest.raises(exceptions.ValidationError) as caught:
            history.save([good, bad])
        assert caught.value.field.startswith("messages")
        with pytest.raises(exceptions.ValidationError):
            asyncio.run(history.asave([bad]))
    nothing_stored()


def test_message_history_refuses_what_would_not_come_back() -> None:
    # Pydantic AI writes inf as null in JSON: stored, load() would not give it back.
    inf = ModelRequest(parts=[ToolReturnPart("measure", {"ratio": float("inf")}, "call_1")])
    with MessageHistory("chat") as history:
        with pytest.raises(exceptions.ValidationError, match="not finite"):
            history.save([inf])
        for wrong in ("a string", {"kind": "request"}, [{"kind": "request", "parts": []}], 42):
            with pytest.raises(exceptions.ValidationError):
                history.save(wrong)
        with pytest.raises(exceptions.ValidationError):
            history.load(limit="all")  # type: ignore[arg-type]
    nothing_stored()
    with MessageHistory("chat") as history:
        history.save([ModelResponse(parts=[TextPart("fine")])])
    assert Entry.objects.filter(session_id="chat").count() == 1


# -- the LangGraph saver, sync and async ------------------------------------------------------


def config(thread_id: Any = "thread-1", checkpoint_ns: Any = "", **extra: Any) -> Any:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns, **extra}}


def put(saver: AgentStoreSaver, cfg: Any, metadata: Any = None, **checkpoint: Any) -> Any:
    return saver.put(cfg, {**empty_checkpoint(), **checkpoint}, metadata or {"step": 0}, {})


async def aput(saver: AgentStoreSaver, cfg: Any, metadata: Any = None, **checkpoint: Any) -> Any:
    return await saver.aput(cfg, {**empty_checkpoint(), **checkpoint}, metadata or {"step": 0}, {})


@pytest.mark.parametrize("thread_id", BAD_IDS)
def test_saver_refuses_the_thread_ids_the_api_refuses(thread_id: str) -> None:
    saver = AgentStoreSaver()
    # A valid thread in the root namespace first: what the saver remembers as
    # checked (the namespace "") must not let the thread id "" through.
    put(saver, config("ok-thread"))
    Checkpoint.objects.all().delete()
    Session.objects.all().delete()
    calls = [
        lambda: put(saver, config(thread_id)),
        lambda: saver.get_tuple(config(thread_id)),
        lambda: list(saver.list(config(thread_id))),
        lambda: saver.put_writes(config(thread_id, checkpoint_id="c1"), [("ch", 1)], "task-1"),
        lambda: saver.delete_thread(thread_id),
        lambda: saver.copy_thread(thread_id, "target"),
        lambda: saver.prune([thread_id]),
        lambda: asyncio.run(aput(saver, config(thread_id))),
        lambda: asyncio.run(saver.aget_tuple(config(thread_id))),
    ]
    for call in calls:
        with pytest.raises(exceptions.ValidationError) as caught:
            call()
        assert caught.value.field == "thread_id"

    async def alist() -> None:
        async for _ in saver.alist(config(thread_id)):
            pass

    with pytest.raises(exceptions.ValidationError):
        asyncio.run(alist())
    nothing_stored()


def test_saver_refuses_bad_namespaces_ids_and_channels() -> None:
    saver = AgentStoreSaver()
    cases = [
        ("checkpoint_ns", lambda: put(saver, config(checkpoint_ns="sub\x00graph"))),
        ("checkpoint_ns", lambda: put(saver, config(checkpoint_ns="sub\ud800"))),
        ("checkpoint_ns", lambda: put(saver, config(checkpoint_ns=["not", "text"]))),
        ("checkpoint.id", lambda: put(saver, config(), id="c" * 65)),
        ("checkpoint.id", lambda: put(saver, config(), id="c\x00")),
        ("checkpoint.id", lambda: put(saver, config(), id="")),
        ("checkpoint_id", lambda: put(saver, config(checkpoint_id="p\x00"))),
        ("checkpoint_id", lambda: saver.get_tuple(config(checkpoint_id="x" * 65))),
        ("thread_id", lambda: put(saver, {"configurable": {}})),
        ("thread_id", lambda: put(saver, config(thread_id={"a": 1}))),
        ("config", lambda: put(saver, {"thread_id": "t"})),
        ("metadata.run_id", lambda: put(saver, config(), {"run_id": "r" * 256})),
        ("run_ids[1]", lambda: saver.delete_for_runs(["ok", "r\x00"])),
        ("thread_ids", lambda: saver.prune("thread-1")),
        ("filter", lambda: list(saver.list(None, filter={"k": "v\x00"}))),
        ("limit", lambda: list(saver.list(None, limit="3"))),  # type: ignore[arg-type]
    ]
    for field, call in cases:
        with pytest.raises(exceptions.ValidationError) as caught:
            call()
        assert caught.value.field == field, (field, caught.value)
    # put_writes: the checkpoint, the task and each channel.
    stored = put(saver, config())
    Checkpoint.objects.all().delete()
    Session.objects.all().delete()
    for field, args in [
        ("task_id", ([("ch", 1)], "t\x00")),
        ("task_id", ([("ch", 1)], "t" * 256)),
        ("task_id", ([("ch", 1)], "")),
        ("task_path", ([("ch", 1)], "task", "p\ud800")),
        ("writes[].channel", ([("c\x00h", 1)], "task")),
    ]:
        with pytest.raises(exceptions.ValidationError) as caught:
            saver.put_writes(stored, *args)
        assert caught.value.field == field
    with pytest.raises(exceptions.ValidationError) as caught:
        saver.put_writes(config(), [("ch", 1)], "task")  # no checkpoint id
    assert caught.value.field == "checkpoint_id"
    nothing_stored()


@pytest.mark.parametrize("name", [n for n in BAD_VALUES if n != "NUL"])
def test_saver_refuses_unstorable_metadata_sync_and_async(name: str) -> None:
    # (LangGraph itself strips NUL characters from metadata strings.)
    saver = AgentStoreSaver()
    metadata = {"step": 0, "note": BAD_VALUES[name]}
    with pytest.raises(exceptions.ValidationError) as caught:
        put(saver, config(), metadata)
    assert caught.value.field == "metadata"
    with pytest.raises(exceptions.ValidationError):
        asyncio.run(aput(saver, config(), metadata))
    with pytest.raises(exceptions.ValidationError) as caught:
        put(saver, config(), {"step": 0, "k\x00": 1})
    nothing_stored()


def test_saver_thread_ids_of_other_types_are_their_text() -> None:
    import uuid

    saver = AgentStoreSaver()
    tid = uuid.UUID("01234567-89ab-7def-8123-456789abcdef")
    stored = put(saver, config(tid))
    assert stored["configurable"]["thread_id"] == str(tid)
    assert saver.get_tuple(config(str(tid))) is not None
    put(saver, config(42))
    assert Session.objects.filter(pk="42", kind="graph").exists()
    with pytest.raises(exceptions.ValidationError):
        put(saver, config(True))


# -- database errors never escape raw -------------------------------------------------------


@pytest.mark.parametrize(
    ("raised", "expected"),
    [
        (OperationalError("disk I/O error"), exceptions.DatabaseUnavailable),
        (IntegrityError("FOREIGN KEY constraint failed"), exceptions.StorageConflict),
        (DataError("value too long for type character varying(64)"), exceptions.ValidationError),
    ],
)
def test_saver_maps_database_errors(
    raised: Exception, expected: type[Exception], monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing(*args: Any, **kwargs: Any) -> None:
        raise raised

    def failing_generator(*args: Any, **kwargs: Any) -> Any:
        raise raised
        yield  # a generator function, as CheckpointStore.list is

    saver = AgentStoreSaver()
    stored = put(saver, config())
    for name in ("_commit", "get", "delete_thread", "prune"):
        monkeypatch.setattr(CheckpointStore, name, failing)
    monkeypatch.setattr(CheckpointStore, "list", failing_generator)
    calls = [
        lambda: put(saver, config()),
        lambda: saver.put_writes(stored, [("ch", 1)], "task"),
        lambda: saver.get_tuple(config()),
        lambda: list(saver.list(config())),
        lambda: saver.delete_thread("thread-1"),
        lambda: saver.prune(["thread-1"]),
        lambda: asyncio.run(aput(saver, config())),
        lambda: asyncio.run(saver.aget_tuple(config())),
    ]
    for call in calls:
        with pytest.raises(expected) as caught:
            call()
        assert isinstance(caught.value, exceptions.AgentStoreError)
        assert caught.value.__cause__ is raised
    if expected is not exceptions.ValidationError:
        assert isinstance(caught.value, type(raised))  # code catching Django's still does


def test_saver_lets_a_busy_database_verdict_through(monkeypatch: pytest.MonkeyPatch) -> None:
    busy = exceptions.DatabaseBusy("database is busy", attempts=3)

    def failing(*args: Any, **kwargs: Any) -> None:
        raise busy

    monkeypatch.setattr(CheckpointStore, "_commit", failing)
    with pytest.raises(exceptions.DatabaseBusy) as caught:
        put(AgentStoreSaver(), config())
    assert caught.value is busy


@pytest.mark.parametrize(
    ("raised", "expected"),
    [
        (OperationalError("no such table: agentstore_entry"), exceptions.DatabaseUnavailable),
        (IntegrityError("CHECK constraint failed"), exceptions.StorageConflict),
    ],
)
def test_conversations_map_database_errors(
    raised: Exception, expected: type[Exception], monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing(*args: Any, **kwargs: Any) -> None:
        raise raised

    monkeypatch.setattr(LogStore, "append_many", failing)
    monkeypatch.setattr(LogStore, "tail", failing)
    session = AgentStoreSession("chat")
    history = MessageHistory("talk")
    for call in (
        lambda: session.add_items_sync([{"role": "user", "content": "hi"}]),
        lambda: session.get_items_sync(),
        lambda: asyncio.run(session.get_items()),
        lambda: history.save([ModelRequest(parts=[UserPromptPart("hi")])]),
        lambda: history.load(),
    ):
        with pytest.raises(expected) as caught:
            call()
        assert caught.value.__cause__ is raised
    session.close()
    history.close()
