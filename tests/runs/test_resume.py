"""Where a run's attempt starts: after what an earlier attempt stored, no call left dangling.

The runners of ``agentstore.runs.builders`` are called here as the worker calls
them — inside the run's ``writing_under`` — twice for one run where an attempt
"crashed" (ended without the run being settled), and on sessions that hold a
tool call without its output.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from langchain_core.messages import AIMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from pydantic_ai.messages import ModelRequest, ModelResponse, ToolCallPart, ToolReturnPart

from agentstore import runs
from agentstore.integrations.conversation import RUN_MEMBER
from agentstore.integrations.openai_agents import AgentStoreSession
from agentstore.integrations.pydantic_ai import MessageHistory
from agentstore.runs import builders
from agentstore.runs.execution import RunContext, hold_token
from agentstore.runs.resume import INTERRUPTED, dangling_openai_calls
from agentstore.stores.hold_context import writing_under
from agentstore.stores.sessions import SessionStore
from agentstore.tasks import TaskRepository
from agentstore.tasks.handlers import Job
from tests.integrations import agents_fakes, pydantic_fakes

pytestmark = pytest.mark.django_db(transaction=True)


def context(session_id: str, value: Any, run_id: str = "") -> RunContext:
    """The context the worker would hand a runner for a (queued, real) run on the session."""
    if not run_id:
        run_id = runs.start("echo", value, session_id=session_id).id
    task = TaskRepository().get(run_id)
    assert task is not None
    job = Job(task=task, worker_id="worker-t", tasks=TaskRepository())
    return RunContext(
        id=run_id, runner="t", session_id=session_id, input=value, overrides={},
        attempt=1, using="default", _job=job,
    )  # fmt: skip


def attempt(runner: Any, ctx: RunContext) -> Any:
    """One attempt, as the worker makes it (the run's hold, the run's marks)."""
    with writing_under(ctx.session_id, hold_token(ctx.id), run_id=ctx.id):
        return async_to_sync(runner)(ctx)


def test_dangling_openai_calls_get_one_interrupted_output_each() -> None:
    items = [
        {"role": "user", "content": "q"},
        {"type": "function_call", "call_id": "a", "name": "f", "arguments": "{}"},
        {"type": "function_call", "call_id": "b", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "a", "output": "done"},
        {"type": "custom_tool_call", "call_id": "c", "name": "g", "input": "x"},
    ]
    assert dangling_openai_calls(items) == [
        {"type": "function_call_output", "call_id": "b", "output": INTERRUPTED},
        {"type": "custom_tool_call_output", "call_id": "c", "output": INTERRUPTED},
    ]
    assert dangling_openai_calls(items[:1] + items[1:2] + items[3:4]) == []


def test_an_sdk_turn_stored_whole_is_not_run_again() -> None:
    agents_fakes.offline()
    model = agents_fakes.WeatherModel()
    runner = builders.openai_agents(agents_fakes.weather_agent(model))
    ctx = context("conv-whole", "Weather in Oslo")
    first = attempt(runner, ctx)  # the worker "died" before settling it
    calls = len(model.inputs)
    again = attempt(runner, ctx)
    assert len(model.inputs) == calls  # no model call the second time
    assert again["output"] == first["output"] == "The weather: snow, -3°C."
    items = AgentStoreSession("conv-whole").get_items_sync()
    assert len(items) == 4  # user, call, output, answer: stored once
    entries = AgentStoreSession("conv-whole").log.read(None, types={"item"})
    assert {e.data[RUN_MEMBER] for e in entries} == {ctx.id}  # every one marked as the run's


def test_an_sdk_history_with_a_dangling_call_is_repaired_before_the_model_sees_it() -> None:
    agents_fakes.offline()
    session = AgentStoreSession("conv-dangling")
    session.add_items_sync(
        [
            {"role": "user", "content": "Weather in Paris"},
            {"type": "function_call", "call_id": "call_x", "name": "get_weather",
             "arguments": '{"city": "Paris"}', "id": "fc_x", "status": "completed"},
        ]
    )  # fmt: skip
    model = agents_fakes.WeatherModel()
    runner = builders.openai_agents(agents_fakes.weather_agent(model))
    attempt(runner, context("conv-dangling", "Weather in Oslo"))
    first_call = model.inputs[0]
    assert first_call[2] == {"type": "function_call_output", "call_id": "call_x",
                             "output": INTERRUPTED}  # fmt: skip
    items = AgentStoreSession("conv-dangling").get_items_sync()
    outputs = [i["call_id"] for i in items if i.get("type") == "function_call_output"]
    assert sorted(outputs) == sorted(
        {i["call_id"] for i in items if i.get("type") == "function_call"}
    )


def test_a_pydantic_ai_turn_stored_whole_is_not_run_again() -> None:
    seen: list[int] = []
    runner = builders.pydantic_ai(pydantic_fakes.weather_agent(seen))
    ctx = context("chat-whole", "Weather in Paris")
    first = attempt(runner, ctx)
    again = attempt(runner, ctx)
    assert seen == [1, 3]  # the model was called by the first attempt only
    assert again == first == {"output": "The weather: sunny, 21°C."}
    assert len(MessageHistory("chat-whole").load()) == 4


def test_a_pydantic_ai_history_with_a_dangling_call_is_repaired() -> None:
    history = MessageHistory("chat-dangling")
    history.save(
        [
            ModelRequest.user_text_prompt("Weather in Paris"),
            ModelResponse(
                parts=[ToolCallPart("get_weather", {"city": "Paris"}, tool_call_id="c1")]
            ),
        ]
    )
    seen: list[int] = []
    runner = builders.pydantic_ai(pydantic_fakes.weather_agent(seen))
    done = attempt(runner, context("chat-dangling", "Weather in Oslo"))
    assert done == {"output": "The weather: snow, -3°C."}
    messages = MessageHistory("chat-dangling").load()
    returns = [p for m in messages if isinstance(m, ModelRequest) for p in m.parts
               if isinstance(p, ToolReturnPart)]  # fmt: skip
    assert returns[0].tool_call_id == "c1" and returns[0].content == INTERRUPTED


def test_a_graph_run_that_stopped_mid_way_resumes_from_its_checkpoint() -> None:
    calls = {"a": 0, "b": 0}

    def a(state: MessagesState) -> dict[str, Any]:
        calls["a"] += 1
        return {"messages": [AIMessage("step a")]}

    def b(state: MessagesState) -> dict[str, Any]:
        calls["b"] += 1
        if calls["b"] == 1:
            raise RuntimeError("the worker died here")
        return {"messages": [AIMessage("step b")]}

    graph = StateGraph(MessagesState)
    graph.add_node("a", a)
    graph.add_node("b", b)
    graph.add_edge(START, "a")
    graph.add_edge("a", "b")
    graph.add_edge("b", END)
    runner = builders.langgraph(graph.compile())
    SessionStore().create("graph", session_id="thread-1")
    ctx = context("thread-1", {"messages": [{"role": "user", "content": "hi"}]})
    with pytest.raises(RuntimeError):
        attempt(runner, ctx)
    done = attempt(runner, ctx)
    said = [m["content"] for m in done["output"]["messages"]]
    assert said == ["hi", "step a", "step b"]  # the input once, step a not run again
    assert calls == {"a": 1, "b": 2}
    # A later run of the thread starts a new turn with its input.
    later = attempt(
        runner, context("thread-1", {"messages": [{"role": "user", "content": "more"}]})
    )
    assert [m["content"] for m in later["output"]["messages"]][-3:] == ["more", "step a", "step b"]


def test_nothing_outside_a_run_is_marked() -> None:
    session = AgentStoreSession("conv-plain")
    asyncio.run(session.add_items([{"role": "user", "content": "hi"}]))
    entries = session.log.read(None, types={"item"})
    assert [RUN_MEMBER in e.data for e in entries] == [False]
