"""LangGraph's stored values read without LangGraph: decoded as data, never constructed.

The thread page (``selectors.checkpoints``) reads channel values with
``agentstore.formats.langgraph_values``: the bytes LangGraph's own
``JsonPlusSerializer`` wrote come back as readable JSON-like text, LangChain
messages as conversation items, in a process without ``langgraph``,
``langchain_core`` or ``ormsgpack`` (the demo's venv); a value naming a class
never runs it, and damaged or hostile bytes are reported, not fatal.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import uuid

import ormsgpack
import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.types import Interrupt

from agentstore.formats.agentsession.describe import describe
from agentstore.formats.langgraph_values import Constructed, NotDecoded, decode, message_items, show
from agentstore.integrations.langgraph import AgentStoreSaver
from agentstore.selectors.checkpoints import checkpoint_detail
from tests.conftest import REPO_ROOT
from tests.integrations.graphs import chat_graph

SERDE = JsonPlusSerializer()

CONVERSATION = [
    SystemMessage("You are a weather bot."),
    HumanMessage("Weather in Paris?"),
    AIMessage("", tool_calls=[{"name": "get_weather", "args": {"city": "Paris"}, "id": "c1"}]),
    ToolMessage("sunny, 21°C", tool_call_id="c1"),
    AIMessage("It is sunny in Paris."),
]


def shown(value: object) -> str:
    return show(decode(*SERDE.dumps_typed(value)))


def test_values_langgraph_writes_read_as_json_like_text() -> None:
    assert shown(None) == "null" and shown(True) == "true" and shown(2**40) == "1099511627776"
    assert shown("é ☀") == '"é ☀"'
    assert shown({"n": [1, 2.5, None], "k": {"deep": "yes"}}) == (
        '{"n": [1, 2.5, null], "k": {"deep": "yes"}}'
    )
    assert shown(dt.date(2026, 1, 2)) == "date(2026, 1, 2)"
    assert shown(uuid.UUID(int=1)) == 'UUID("00000000000000000000000000000001")'
    assert shown(Interrupt(value={"question": "ok?"}, id="i1")).startswith(
        'Interrupt {"value": {"question": "ok?"}, "id": "i1"'
    )
    assert shown(b"\x00\x01") == "<2 bytes>"
    long = shown({"log": ["entry " * 20, "second"]})
    assert long.splitlines()[0] == "{" and '  "log": [' in long  # one member a line
    numbers = shown(list(range(1000)))
    assert len(numbers) < 4100 and numbers.endswith("…")  # bounded by what is shown
    wide = show(decode(*SERDE.dumps_typed({f"key-{n}": "v" * 30 for n in range(100)})), 500)
    assert wide.startswith('{\n  "key-0": "vvv') and len(wide) <= 500


def test_langchain_messages_read_like_conversation_items() -> None:
    items = message_items(decode(*SERDE.dumps_typed(CONVERSATION)))
    assert items is not None
    words = [describe({"type": "item", "item": item}) for item in items]
    assert [(w.kind, w.role) for w in words] == [
        ("message", "system"),
        ("message", "user"),
        ("tool call", ""),
        ("tool output", ""),
        ("message", "assistant"),
    ]
    assert words[1].text == "Weather in Paris?"
    assert (words[2].tool, words[2].arguments, words[2].call_id) == (
        "get_weather",
        '{"city": "Paris"}',
        "c1",
    )
    assert words[3].text == "sunny, 21°C" and words[3].call_id == "c1"
    assert message_items(decode(*SERDE.dumps_typed(["just", "strings"]))) is None
    # Older savers' JSON: LangChain's constructor objects.
    legacy = {
        "lc": 1,
        "type": "constructor",
        "id": ["langchain", "schema", "messages", "HumanMessage"],
        "kwargs": {"content": "hello", "type": "human"},
    }
    value = decode("json", json.dumps([legacy]).encode())
    assert value == [
        Constructed("langchain.schema.messages", "HumanMessage", legacy["kwargs"], "kwargs")
    ]
    assert message_items(value) == [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hello"}]}
    ]


def test_a_value_naming_a_class_never_runs_it(tmp_path: object) -> None:
    marker = f"{tmp_path}/ran"
    hostile = ormsgpack.packb(
        ormsgpack.Ext(1, ormsgpack.packb(["os", "system", [f"touch {marker}"]]))
    )
    value = decode("msgpack", hostile)
    assert value == Constructed("os", "system", [f"touch {marker}"], "args")
    assert show(value) == f'system(\n  "touch {marker}"\n)'
    assert show(Constructed("os", "system", ["ls"], "args")) == 'system("ls")'
    assert not os.path.exists(marker)


@pytest.mark.parametrize(
    ("type_", "blob", "why"),
    [
        ("pickle", b"\x80\x04K\x01.", "never unpickled"),
        ("msgpack", SERDE.dumps_typed({"a": "b" * 50})[1][:-5], "not MessagePack"),
        ("msgpack", b"\x91" * 500 + b"\xc0", "nested deeper"),
        ("msgpack", b"\xc1", "starts no MessagePack value"),
        ("msgpack", b"\x01\x02", "trailing bytes"),
        ("json", b"{not json", "not JSON"),
        ("msgpack+aes", b"\x00" * 16, "unknown serializer type"),
    ],
)
def test_damaged_or_foreign_values_are_reported(type_: str, blob: bytes, why: str) -> None:
    with pytest.raises(NotDecoded, match=why):
        decode(type_, blob)


@pytest.mark.django_db(transaction=True)
def test_the_thread_page_shows_messages_as_items_and_state_as_data() -> None:
    graph = chat_graph(AgentStoreSaver())
    graph.invoke(
        {"messages": [("human", "Weather in Paris?")]}, {"configurable": {"thread_id": "t"}}
    )
    detail = checkpoint_detail("t")
    assert detail is not None
    (messages,) = [c for c in detail.channels if c.name == "messages"]
    assert [(m.kind, m.role, m.text) for m in messages.messages] == [
        ("message", "user", "Weather in Paris?"),
        ("message", "assistant", "#1 echo: Weather in Paris?"),
    ]
    assert messages.preview.startswith("[\n  HumanMessage {")
    assert "HumanMessage(content=" not in messages.preview  # not Python's repr


#: Run in a fresh interpreter where LangGraph, LangChain and ormsgpack cannot be
#: imported — the demo's venv — reading the thread the test stored.
WITHOUT_LANGGRAPH = """
import json, sys
for name in ("langgraph", "langchain_core", "ormsgpack", "langchain"):
    sys.modules[name] = None  # import raises ImportError
import django
django.setup()
from agentstore.selectors.checkpoints import checkpoint_detail
import agentstore.admin  # the admin's modules import without LangGraph too
detail = checkpoint_detail(sys.argv[1])
print(json.dumps({c.name: [c.preview, [(m.kind, m.role, m.text) for m in c.messages]]
                  for c in detail.channels}))
"""


@pytest.mark.slow
def test_values_decode_where_langgraph_is_not_installed(test_database_url: str) -> None:
    graph = chat_graph(AgentStoreSaver())
    for text in ("Weather in Paris?", "And in Oslo?"):
        graph.invoke({"messages": [("human", text)]}, {"configurable": {"thread_id": "no-lg"}})
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_LANGGRAPH, "no-lg"],
        cwd=REPO_ROOT,
        env={
            **os.environ,
            "DATABASE_URL": test_database_url,
            "DJANGO_SETTINGS_MODULE": "project.settings",
        },
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    channels = json.loads(done.stdout.strip().splitlines()[-1])
    preview, words = channels["messages"]
    assert "HumanMessage {" in preview and "not decoded" not in preview
    assert [tuple(w) for w in words] == [
        ("message", "user", "Weather in Paris?"),
        ("message", "assistant", "#1 echo: Weather in Paris?"),
        ("message", "user", "And in Oslo?"),
        ("message", "assistant", "#2 echo: And in Oslo?"),
    ]
