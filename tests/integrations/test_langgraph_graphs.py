"""Real LangGraph graphs end to end on AgentStoreSaver, offline.

Conversation memory across process restarts, human-in-the-loop interrupts,
time travel (forks), subgraph namespaces, and the pending writes of a failed
super-step being replayed on resume — each the way LangGraph users rely on a
checkpointer. The rows behind them are checked too: threads are ``graph``
sessions and the checkpoints' parent links form the forked tree.
"""

from __future__ import annotations

import json
import operator
import os
import subprocess
import sys
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from agentstore.integrations.langgraph import AgentStoreSaver
from agentstore.models import Checkpoint, CheckpointWrite, Session
from tests.conftest import REPO_ROOT
from tests.integrations.graphs import approval_graph, chat_graph


def _config(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


def _run(database_url: str, *args: str) -> Any:
    env = {**os.environ, "DATABASE_URL": database_url, "DJANGO_SETTINGS_MODULE": "project.settings"}
    done = subprocess.run(
        [sys.executable, *args], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_messages_state_survives_process_restarts(test_database_url: str) -> None:
    for turn, text in enumerate(["hello", "how are you", "bye"], start=1):
        messages = _run(
            test_database_url,
            "-m",
            "tests.workers.langgraph_chat",
            "--thread",
            "chat-1",
            "--say",
            text,
        )
        # Each new process sees every earlier turn: memory came from the database.
        assert len(messages) == 2 * turn
        assert messages[-1] == ["ai", f"#{turn} echo: {text}"]
    state = chat_graph().get_state(_config("chat-1"))
    assert [m.content for m in state.values["messages"]][::2] == ["hello", "how are you", "bye"]
    session = Session.objects.get(pk="chat-1")
    assert session.kind == "graph"


@pytest.mark.slow
def test_docs_example_interrupts_and_resumes_in_another_process(test_database_url: str) -> None:
    example = "docs/examples/langgraph_interrupt.py"
    started = _run(test_database_url, example, "start", "refund-7", "refund order 7")
    assert started["next"] == ["review"]
    assert started["waiting_for"] == [{"question": "Approve 'refund order 7'?"}]
    resumed = _run(test_database_url, example, "resume", "refund-7", "yes")
    assert resumed["values"] == {
        "request": "refund order 7",
        "approved": True,
        "outcome": "refunded",
    }
    assert resumed["next"] == [] and resumed["waiting_for"] == []


#: The example as ``pip install "agentstore[langgraph]"`` leaves it: no Django project,
#: and the demo's extras (drf-spectacular-sidecar) cannot be imported.
STANDALONE = """
import runpy, sys
sys.modules["drf_spectacular_sidecar"] = None  # import raises ImportError
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""


@pytest.mark.slow
def test_docs_example_runs_in_the_documented_install(tmp_path: Any) -> None:
    example = str(REPO_ROOT / "docs/examples/langgraph_interrupt.py")
    env = {
        k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE", "DATABASE_URL")
    }
    env["PYTHONPATH"] = str(REPO_ROOT)  # this checkout's agentstore, as if installed

    def run(*args: str) -> Any:
        done = subprocess.run(
            [sys.executable, "-c", STANDALONE, example, *args],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.strip().splitlines()[-1])

    assert run("start", "refund-8", "refund order 8")["next"] == ["review"]
    # A new process: the thread comes from the example's own SQLite file.
    resumed = run("resume", "refund-8", "no")
    assert resumed["values"]["outcome"] == "declined" and resumed["next"] == []
    assert (tmp_path / "langgraph_refunds.sqlite3").exists()


@pytest.mark.django_db(transaction=True)
def test_interrupt_then_resume_with_command() -> None:
    graph = approval_graph(AgentStoreSaver())
    config = _config("approve-1")
    first = graph.invoke({"request": "refund"}, config)
    assert first["__interrupt__"][0].value == {"question": "approve refund?"}
    state = graph.get_state(config)
    assert state.next == ("review",)
    assert [i.value for i in state.interrupts] == [{"question": "approve refund?"}]
    # The open interrupt is a pending write of the review task.
    assert CheckpointWrite.objects.filter(session_id="approve-1", channel="__interrupt__").exists()

    # A new graph object and saver: nothing is carried over in memory.
    final = approval_graph(AgentStoreSaver()).invoke(Command(resume="yes"), config)
    assert final["log"] == ["drafted refund", "reviewed: yes", "done"]
    assert graph.get_state(config).next == ()


@pytest.mark.django_db(transaction=True)
def test_time_travel_forks_from_an_old_checkpoint() -> None:
    graph = chat_graph()
    config = _config("travel-1")
    for text in ("one", "two", "three"):
        graph.invoke({"messages": [("human", text)]}, config)
    history = list(graph.get_state_history(config))
    # Newest first; find the checkpoint right after the first turn finished.
    after_first = next(
        s for s in reversed(history) if len(s.values.get("messages", [])) == 2 and not s.next
    )
    forked = graph.update_state(
        after_first.config, {"messages": [("human", "instead")]}, as_node="bot"
    )
    graph.invoke(None, forked)  # nothing to run: update_state as_node=bot ends the step
    result = graph.invoke({"messages": [("human", "again")]}, forked)
    contents = [m.content for m in result["messages"]]
    assert contents == ["one", "#1 echo: one", "instead", "again", "#2 echo: again"]

    # The old branch is intact and the latest state is the fork's.
    assert [m.content for m in graph.get_state(config).values["messages"]] == contents
    old_branch = graph.get_state(history[0].config).values["messages"]
    assert [m.content for m in old_branch][-1] == "#3 echo: three"

    # In the rows, the forked checkpoint has two children: a tree, not a chain.
    parents = list(
        Checkpoint.objects.filter(session_id="travel-1", checkpoint_ns="").values_list(
            "parent_checkpoint_id", flat=True
        )
    )
    fork_point = after_first.config["configurable"]["checkpoint_id"]
    assert parents.count(fork_point) == 2


class Outer(TypedDict, total=False):
    topic: str
    notes: Annotated[list[str], operator.add]


@pytest.mark.django_db(transaction=True)
def test_subgraph_checkpoints_live_in_their_namespace() -> None:
    def research(state: Outer) -> Outer:
        answer = interrupt("which source?")
        return {"notes": [f"read {answer} on {state['topic']}"]}

    sub = StateGraph(Outer)
    sub.add_node("research", research)
    sub.add_edge(START, "research")
    sub.add_edge("research", END)

    def summarize(state: Outer) -> Outer:
        return {"notes": [f"summary of {len(state['notes'])} note(s)"]}

    outer = StateGraph(Outer)
    outer.add_node("investigate", sub.compile())
    outer.add_node("summarize", summarize)
    outer.add_edge(START, "investigate")
    outer.add_edge("investigate", "summarize")
    outer.add_edge("summarize", END)
    graph = outer.compile(checkpointer=AgentStoreSaver())
    config = _config("nested-1")

    graph.invoke({"topic": "otters"}, config)
    state = graph.get_state(config, subgraphs=True)
    (task,) = state.tasks
    assert task.name == "investigate" and task.state is not None
    sub_ns = task.state.config["configurable"]["checkpoint_ns"]
    assert sub_ns.startswith("investigate:")
    assert task.state.next == ("research",)
    namespaces = set(
        Checkpoint.objects.filter(session_id="nested-1").values_list("checkpoint_ns", flat=True)
    )
    assert namespaces == {"", sub_ns}

    result = graph.invoke(Command(resume="the wiki"), config)
    assert result["notes"] == ["read the wiki on otters", "summary of 1 note(s)"]


class Parallel(TypedDict, total=False):
    done: Annotated[list[str], operator.add]


@pytest.mark.django_db(transaction=True)
def test_pending_writes_of_a_failed_step_are_replayed_on_resume() -> None:
    calls = {"slow": 0, "flaky": 0}

    def slow(state: Parallel) -> Parallel:
        calls["slow"] += 1
        return {"done": ["slow"]}

    def flaky(state: Parallel) -> Parallel:
        calls["flaky"] += 1
        if calls["flaky"] == 1:
            raise ConnectionError("tool down")
        return {"done": ["flaky"]}

    builder = StateGraph(Parallel)
    builder.add_node("slow", slow)
    builder.add_node("flaky", flaky)
    builder.add_edge(START, "slow")
    builder.add_edge(START, "flaky")
    builder.add_edge("slow", END)
    builder.add_edge("flaky", END)
    graph = builder.compile(checkpointer=AgentStoreSaver())
    config = _config("flaky-1")

    with pytest.raises(ConnectionError):
        graph.invoke({"done": []}, config)
    # The step failed, but the task that succeeded saved its write, and the
    # error was saved for the failed one.
    channels = set(
        CheckpointWrite.objects.filter(session_id="flaky-1").values_list("channel", flat=True)
    )
    assert {"done", "__error__"} <= channels

    result = graph.invoke(None, config)
    assert sorted(result["done"]) == ["flaky", "slow"]
    # "slow" was not run again: its write was replayed from the database.
    assert calls == {"slow": 1, "flaky": 2}


@pytest.mark.django_db(transaction=True)
def test_async_graph_runs_on_the_async_methods() -> None:
    import asyncio

    async def run() -> list[str]:
        graph = chat_graph()
        await graph.ainvoke({"messages": [("human", "a")]}, _config("async-1"))
        result = await graph.ainvoke({"messages": [("human", "b")]}, _config("async-1"))
        history = [s async for s in graph.aget_state_history(_config("async-1"), limit=2)]
        assert len(history) == 2
        return [m.content for m in result["messages"]]

    assert asyncio.run(run()) == ["a", "#1 echo: a", "b", "#2 echo: b"]
