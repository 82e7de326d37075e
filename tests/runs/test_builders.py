"""The ready-made runners: an OpenAI Agents SDK agent, a Pydantic AI agent, a LangGraph graph.

Each runs offline (the integration tests' scripted models and graphs) through
the worker, twice on one session: the second run sees the first one's history,
so the run continues the conversation with the framework's own memory on
agentstore.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings

from agentstore import runs
from agentstore.integrations.openai_agents import AgentStoreSession
from agentstore.integrations.pydantic_ai import MessageHistory
from agentstore.models import Session
from agentstore.runs import builders
from agentstore.tasks.worker import TaskWorker
from tests.integrations import agents_fakes, graphs, pydantic_fakes

pytestmark = pytest.mark.django_db(transaction=True)


class InstructedModel(agents_fakes.WeatherModel):
    """The weather model, remembering the instructions of every call."""

    def __init__(self) -> None:
        super().__init__()
        self.instructions: list[str | None] = []

    async def get_response(self, system_instructions: str | None, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        self.instructions.append(system_instructions)
        return await super().get_response(system_instructions, *args, **kwargs)


@pytest.fixture
def registered() -> Iterator[dict[str, Any]]:
    agents_fakes.offline()
    model = InstructedModel()
    seen: list[int] = []
    made = {
        "openai": builders.openai_agents(agents_fakes.weather_agent(model)),
        "pydantic": builders.pydantic_ai(pydantic_fakes.weather_agent(seen)),
        "graph": builders.langgraph(graphs.chat_graph()),
    }
    with override_settings(AGENTSTORE={**settings.AGENTSTORE, "RUNNERS": made}):
        yield {"model": model, "seen": seen}


def twice(runner: str, first: Any, second: Any, **options: Any) -> tuple[runs.Run, runs.Run]:
    one = runs.start(runner, first, **options)
    TaskWorker(once=True).run()
    two = runs.start(runner, second, session_id=one.session_id)
    TaskWorker(once=True).run()
    done = runs.get_run(one.id), runs.get_run(two.id)
    assert done[0] is not None and done[1] is not None
    assert (done[0].state, done[1].state) == ("succeeded", "succeeded"), done
    return done[0], done[1]


def test_an_openai_agents_runner_continues_the_sdk_session(registered: dict[str, Any]) -> None:
    one, two = twice(
        "openai", "Weather in Paris", "And in Oslo", overrides={"instructions": "Be brief."}
    )
    assert one.output == {"output": "The weather: sunny, 21°C.", "agent": "weather"}
    assert two.output == {"output": "The weather: snow, -3°C.", "agent": "weather"}
    items = AgentStoreSession(one.session_id).get_items_sync()
    assert [i.get("type", "message") for i in items] == ["message", "function_call",
        "function_call_output", "message"] * 2  # fmt: skip
    model = registered["model"]
    assert model.inputs[-2][0]["content"] == "Weather in Paris"  # the second run saw the first
    assert model.instructions[:2] == ["Be brief."] * 2  # the override, for that run only
    assert model.instructions[2:] == ["Answer about the weather."] * 2
    assert Session.objects.get(pk=one.session_id).kind == "log"


def test_a_pydantic_ai_runner_continues_the_message_history(registered: dict[str, Any]) -> None:
    one, two = twice("pydantic", "Weather in Paris", "And in Oslo")
    assert one.output == {"output": "The weather: sunny, 21°C."}
    assert two.output == {"output": "The weather: snow, -3°C."}
    assert registered["seen"] == [1, 3, 5, 7]  # the second run was given the first's 4 messages
    assert len(MessageHistory(one.session_id).load()) == 8


def test_a_langgraph_runner_invokes_the_graph_on_the_runs_thread(
    registered: dict[str, Any],
) -> None:
    message = {"messages": [{"role": "user", "content": "hi"}]}
    one, two = twice("graph", message, {"messages": [{"role": "user", "content": "again"}]})
    assert Session.objects.get(pk=one.session_id).kind == "graph"
    said = [(m["type"], m["content"]) for m in two.output["output"]["messages"]]
    assert said == [
        ("human", "hi"),
        ("ai", "#1 echo: hi"),
        ("human", "again"),
        ("ai", "#2 echo: again"),
    ]


@dataclasses.dataclass
class Point:
    x: float
    label: str


def test_jsonable_makes_any_output_json() -> None:
    from pydantic import BaseModel

    class Answer(BaseModel):
        text: str
        points: list[int]

    value = {
        "a": (1, 2),
        3: Answer(text="t", points=[1]),
        "p": Point(float("inf"), "l"),
        "o": object,
    }
    made = builders.jsonable(value)
    assert made["a"] == [1, 2] and made["3"] == {"text": "t", "points": [1]}
    assert made["p"] == {"x": "inf", "label": "l"} and made["o"] == "<class 'object'>"
    deep: Any = []
    for _ in range(200):
        deep = [deep]
    flattened = builders.jsonable(deep)
    depth = 0
    while isinstance(flattened, list):
        flattened, depth = flattened[0] if flattened else None, depth + 1
    assert depth <= settings.AGENTSTORE.get("JSON_MAX_DEPTH", 100) + 1
