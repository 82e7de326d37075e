"""Stopping runs: cancel one, and what a second run does to a busy session (``if_busy``).

A queued run is canceled at once. A running one is asked to stop
(``canceling``) and its runner stops at its next step — the builders check
before each model and tool call (Pydantic AI and LangGraph: between steps) —
ending ``canceled``, with nothing half-written: no tool call without its
output, the hold released. The cancel is asked here from inside the model
call, as another process would while the turn is going on.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.test import override_settings
from langchain_core.messages import AIMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, ToolCallPart
from pydantic_ai.models.function import FunctionModel

from agentstore import exceptions, runs
from agentstore.integrations.openai_agents import AgentStoreSession
from agentstore.integrations.pydantic_ai import MessageHistory
from agentstore.models import Holder, Task
from agentstore.runs import builders
from agentstore.tasks import TaskRepository
from agentstore.tasks.worker import TaskWorker
from agentstore.types import TaskClaim
from tests.integrations import agents_fakes
from tests.runs.names import RUNNERS

pytestmark = pytest.mark.django_db(transaction=True)

#: The run the models below cancel on their first call.
target: dict[str, str] = {}


class CancelingModel(agents_fakes.WeatherModel):
    """Asks for the run's cancel during its first call, then answers with a tool call."""

    async def get_response(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        if not self.inputs:
            await sync_to_async(runs.cancel_run)(target["run"])
        return await super().get_response(*args, **kwargs)


def canceling_graph() -> Any:
    def first(state: MessagesState) -> dict[str, Any]:
        runs.cancel_run(target["run"])
        return {"messages": [AIMessage("first")]}

    def second(state: MessagesState) -> dict[str, Any]:
        raise AssertionError("a canceled run must stop before this step")

    graph = StateGraph(MessagesState)
    graph.add_node("first", first)
    graph.add_node("second", second)
    graph.add_edge(START, "first")
    graph.add_edge("first", "second")
    graph.add_edge("second", END)
    return graph.compile()


def canceling_pydantic_agent() -> Agent[None, str]:
    def respond(messages: Any, info: Any) -> ModelResponse:
        runs.cancel_run(target["run"])
        return ModelResponse(
            parts=[ToolCallPart("get_weather", {"city": "Oslo"}, tool_call_id="c")]
        )

    agent: Agent[None, str] = Agent(FunctionModel(respond))

    @agent.tool_plain
    def get_weather(city: str) -> str:
        raise AssertionError("a canceled run must stop before its tool call")

    return agent


@pytest.fixture(autouse=True)
def _runners() -> Iterator[None]:
    agents_fakes.offline()
    made = {
        **RUNNERS,
        "sdk": builders.openai_agents(agents_fakes.weather_agent(CancelingModel())),
        "pydantic": builders.pydantic_ai(canceling_pydantic_agent()),
        "graph": builders.langgraph(canceling_graph()),
    }
    with override_settings(AGENTSTORE={**settings.AGENTSTORE, "RUNNERS": made}):
        yield


def test_a_queued_run_canceled_never_runs() -> None:
    run = runs.start("say", "never said")
    canceled = runs.cancel_run(run.id)
    assert canceled is not None and canceled.state == "canceled"
    TaskWorker(once=True).run()
    assert runs.get_run(run.id).state == "canceled"  # type: ignore[union-attr]
    kinds = [e.event.kind for e in TaskRepository().list_events(run.id)]
    assert kinds == ["task_queued", "task_canceled"]
    assert runs.cancel_run(run.id).state == "canceled"  # type: ignore[union-attr]  # again: as is
    assert runs.cancel_run("01a2524c-0000-7000-8000-000000000000") is None


@pytest.mark.parametrize("runner", ["sdk", "pydantic", "graph"])
def test_a_running_run_canceled_stops_at_its_next_step(runner: str) -> None:
    value: Any = (
        {"messages": [{"role": "user", "content": "hi"}]}
        if runner == "graph"
        else "Weather in Oslo"
    )
    run = runs.start(runner, value)
    target["run"] = run.id
    TaskWorker(once=True).run()
    done = runs.get_run(run.id)
    assert done is not None and done.state == "canceled", (done.error_code, done.error_message)
    assert done.error_code == "canceled" and done.output is None
    kinds = [e.event.kind for e in TaskRepository().list_events(run.id)]
    assert kinds == ["task_queued", "task_started", "task_canceling", "task_canceled"]
    assert not Holder.objects.filter(session_id=run.session_id).exists()
    if runner == "sdk":  # the SDK stored the input; the tool call never started: none stored
        items = AgentStoreSession(run.session_id).get_items_sync()
        assert items == [{"role": "user", "content": "Weather in Oslo"}]
    if runner == "pydantic":  # the turn is saved whole or not at all: not at all
        assert MessageHistory(run.session_id).load() == []


def test_reject_refuses_a_second_run_while_one_is_queued_or_going_on() -> None:
    first = runs.start("say", "first")
    before = Task.objects.count()
    with pytest.raises(exceptions.SessionBusy):
        runs.start("say", "second", session_id=first.session_id, if_busy="reject")
    assert Task.objects.count() == before
    TaskWorker(once=True).run()
    second = runs.start("say", "second", session_id=first.session_id, if_busy="reject")
    assert second.state == "queued"  # the first is over: nothing to reject for


def test_interrupt_cancels_the_runs_going_on_and_continues_after_them() -> None:
    queued = runs.start("say", "queued one")
    running = runs.start("say", "running one", session_id=queued.session_id)
    TaskRepository().claim_queued(  # as a worker elsewhere would have
        TaskClaim(task_id=running.id, lease_owner="w-1", lease_expires_at=_later(),
                  event_kind="task_started")
    )  # fmt: skip
    third = runs.start("say", "third", session_id=queued.session_id, if_busy="interrupt")
    assert runs.get_run(queued.id).state == "canceled"  # type: ignore[union-attr]
    assert runs.get_run(running.id).state == "canceling"  # type: ignore[union-attr]
    events = TaskRepository().list_events(running.id)
    assert events[-1].event.kind == "task_canceling"
    assert third.id in events[-1].event.payload_json  # who interrupted it
    assert runs.get_run(third.id).state == "queued"  # type: ignore[union-attr]


def test_if_busy_must_be_known() -> None:
    with pytest.raises(exceptions.ValidationError) as raised:
        runs.start("say", "x", if_busy="rollback")
    assert raised.value.field == "if_busy"


def _later() -> Any:
    from datetime import timedelta

    from django.utils import timezone

    return timezone.now() + timedelta(minutes=5)
