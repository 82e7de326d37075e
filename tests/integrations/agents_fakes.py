"""A scripted, offline model for the OpenAI Agents SDK, and the agent the tests run.

``WeatherModel`` answers like a tool-using model without any network: when the
newest input item is a user message naming a city it calls the ``get_weather``
tool, when it is that tool's output it answers in text. The call id is derived
from the conversation length, so every turn of a conversation gets a new one
(the agentsession format wants call ids unique in a session). It records the
input of every call, so a test can tell the history the SDK loaded.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from typing import Any

from agents import Agent, function_tool, set_tracing_disabled
from agents.items import ModelResponse, TResponseInputItem, TResponseStreamEvent
from agents.models.interface import Model
from agents.usage import Usage
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)


def offline() -> None:
    """No network: a dummy key (never used) and no trace export."""
    os.environ.setdefault("OPENAI_API_KEY", "sk-test-offline")
    set_tracing_disabled(True)


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city (a fixed table: the tests need determinism)."""
    return {"Paris": "sunny, 21°C", "Oslo": "snow, -3°C"}.get(city, "fog, 9°C")


class WeatherModel(Model):
    """Tool call for a user message, then a text answer for the tool's output."""

    def __init__(self) -> None:
        self.inputs: list[list[Any]] = []

    async def get_response(  # type: ignore[override]
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        *args: Any,
        **kwargs: Any,
    ) -> ModelResponse:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else list(input)
        self.inputs.append(items)
        last = dict(items[-1])
        if last.get("type") == "function_call_output":
            text = f"The weather: {last['output']}."
            output: list[Any] = [
                ResponseOutputMessage(
                    id=f"msg_{len(items)}",
                    type="message",
                    role="assistant",
                    status="completed",
                    content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
                )
            ]
        else:
            content = last.get("content")
            city = content.rsplit(" ", 1)[-1].strip("?") if isinstance(content, str) else "?"
            output = [
                ResponseFunctionToolCall(
                    id=f"fc_{len(items)}",
                    call_id=f"call_{len(items)}",
                    type="function_call",
                    name="get_weather",
                    arguments=f'{{"city": "{city}"}}',
                    status="completed",
                )
            ]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(  # type: ignore[override]
        self, *a: Any, **k: Any
    ) -> AsyncIterator[TResponseStreamEvent]:
        raise NotImplementedError("the tests do not stream")


def weather_agent(model: Model) -> Agent[Any]:
    return Agent(
        name="weather", instructions="Answer about the weather.", model=model, tools=[get_weather]
    )
