"""An offline Pydantic AI agent for the tests: a ``FunctionModel`` that calls a tool.

For a user prompt naming a city the model calls ``get_weather``; for the tool's
return it answers in text. It counts the messages it was sent, so a test can
tell the history an agent run was given.
"""

from __future__ import annotations

from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    RetryPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

WEATHER = {"Paris": "sunny, 21°C", "Oslo": "snow, -3°C"}


def weather_agent(seen: list[int]) -> Agent[None, str]:
    """The agent; ``seen`` receives the number of messages of every model call."""

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(len(messages))
        part = messages[-1].parts[-1]
        if isinstance(part, ToolReturnPart):
            return ModelResponse(parts=[TextPart(f"The weather: {part.content}.")])
        assert isinstance(part, UserPromptPart) and isinstance(part.content, str)
        city = part.content.rsplit(" ", 1)[-1].strip("?")
        return ModelResponse(
            parts=[
                ToolCallPart("get_weather", {"city": city}, tool_call_id=f"call_{len(messages)}")
            ]
        )

    agent: Agent[None, str] = Agent(
        FunctionModel(respond), instructions="Answer about the weather."
    )

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return WEATHER.get(city, "fog, 9°C")

    return agent


def thoughtful_weather_agent() -> Agent[None, str]:
    """A weather agent whose conversation has every part the admin must show.

    System prompt and instructions, the user prompt, the model's thinking and
    text beside its tool call, a call with wrong arguments (Pydantic AI answers
    with a retry prompt naming the validation error), the corrected call, the
    tool's return and the final answer.
    """

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        part = messages[-1].parts[-1]
        refused = isinstance(part, RetryPromptPart) or (
            isinstance(part, ToolReturnPart) and part.outcome != "success"
        )
        if refused:  # the arguments were wrong (Pydantic AI 2 returns the errors)
            city = part.tool_call_id[5:]
            return ModelResponse(
                parts=[ToolCallPart("get_weather", {"city": city}, tool_call_id=f"good_{city}")]
            )
        if isinstance(part, ToolReturnPart):
            return ModelResponse(
                parts=[TextPart(f"In {part.tool_call_id[5:]} it is {part.content}.")]
            )
        assert isinstance(part, UserPromptPart) and isinstance(part.content, str)
        city = part.content.rsplit(" ", 1)[-1].strip("?")
        return ModelResponse(
            parts=[
                ThinkingPart("The user wants the weather; the tool knows it."),
                TextPart("Let me look that up."),
                ToolCallPart("get_weather", {"town": city}, tool_call_id=f"bad__{city}"),
            ]
        )

    agent: Agent[None, str] = Agent(
        FunctionModel(respond),
        system_prompt="You are a weather bot.",
        instructions="Answer about the weather.",
    )

    @agent.tool_plain
    def get_weather(city: str) -> str:
        """The weather in a city."""
        return WEATHER.get(city, "fog, 9°C")

    return agent
