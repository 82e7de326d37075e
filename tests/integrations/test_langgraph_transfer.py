"""A LangGraph thread moved with export and import carries on where it stopped.

The rows are compared field by field in tests/commands/test_transfer.py; here
the proof is LangGraph's own: a graph interrupted for a human's approval is
exported, deleted and imported, and a new saver resumes it from the imported
rows (its open interrupt is a pending write, its state in blobs and inline values).
"""

from __future__ import annotations

from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from langgraph.types import Command

from agentstore.integrations.langgraph import AgentStoreSaver
from agentstore.stores import SessionStore
from tests.integrations.graphs import approval_graph, chat_graph


def _config(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


def _move(thread_id: str, tmp_path: Path) -> None:
    """Export the thread to a file, delete it, import the file."""
    call_command("agentstore", "export", thread_id, "--out", str(tmp_path), stderr=StringIO())
    SessionStore().delete(thread_id)
    call_command("agentstore", "import", str(tmp_path / f"{thread_id}.jsonl"), stderr=StringIO())


@pytest.mark.django_db(transaction=True)
def test_an_interrupted_graph_resumes_after_the_move(tmp_path: Path) -> None:
    config = _config("moved-approval")
    first = approval_graph(AgentStoreSaver()).invoke({"request": "refund"}, config)
    assert first["__interrupt__"][0].value == {"question": "approve refund?"}
    history = [s.config for s in approval_graph(AgentStoreSaver()).get_state_history(config)]

    _move("moved-approval", tmp_path)

    graph = approval_graph(AgentStoreSaver())
    state = graph.get_state(config)
    assert state.next == ("review",)
    assert [i.value for i in state.interrupts] == [{"question": "approve refund?"}]
    assert [s.config for s in graph.get_state_history(config)] == history
    final = graph.invoke(Command(resume="yes"), config)
    assert final["log"] == ["drafted refund", "reviewed: yes", "done"]


@pytest.mark.django_db(transaction=True)
def test_a_conversation_keeps_its_memory_after_the_move(tmp_path: Path) -> None:
    config = _config("moved-chat")
    graph = chat_graph(AgentStoreSaver())
    for text in ("one", "two"):
        graph.invoke({"messages": [("user", text)]}, config)

    _move("moved-chat", tmp_path)

    reply = chat_graph(AgentStoreSaver()).invoke({"messages": [("user", "three")]}, config)
    assert [m.content for m in reply["messages"]][-1] == "#3 echo: three"
    assert len(reply["messages"]) == 6
