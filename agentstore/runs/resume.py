"""Where an attempt of a run starts: after what an earlier attempt stored, with no dangling call.

A run is executed at least once: a worker that dies mid-turn has the run rerun
(:mod:`agentstore.runs.execution`). What the first attempt had stored stays,
and every entry a run's code writes through the integrations is marked with
the run's id (``agentstore.integrations.conversation.RUN_MEMBER``). From those
marks each runner of :mod:`agentstore.runs.builders` decides, before it calls
the framework, where this attempt starts:

* **nothing of this run is stored** — the turn starts with the run's input;
* **the turn was stored whole** (the worker died after the turn, before the run
  was settled) — the turn is not run again: its stored answer is the output;
* **the turn was stored in part** — it is continued from there, its input not
  stored a second time (OpenAI Agents SDK: ``Runner.run`` with no new input;
  LangGraph: the thread resumed from its last checkpoint with ``None``).

And whatever the case, a tool call stored without its output — a crash between
the two, or any earlier writer's — gets one, saying the call was interrupted,
before the model sees the history again: providers refuse a history with a
call and no output, and the model can react to an interruption it is told of.
Each function returns what the builder needs and writes only the repairs (one
transaction, marked as the run's).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from agentstore.integrations.conversation import RUN_MEMBER

__all__ = [
    "INTERRUPTED",
    "WINDOW",
    "Start",
    "dangling_openai_calls",
    "openai_agents_start",
    "pydantic_ai_start",
]

#: How many of the session's newest items an attempt looks at. A run's own entries
#: and a turn's unanswered calls are at the end of the history; reading all of a
#: 100,000-item session cost as much as the SDK's whole-history read again (1.2 s).
#: A window that is a suffix sees every output of a call inside it.
WINDOW = 1000
#: The output a repaired tool call gets.
INTERRUPTED = (
    "Interrupted: this tool call did not finish (the run executing it stopped). "
    "Its effects, if any, are unknown."
)
#: A Responses tool-call item type → the type of its output item.
_OUTPUT_OF = {
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
}


@dataclass(frozen=True, slots=True)
class Start:
    """Where an attempt starts: ``finished`` with ``output``, else ``resume`` or not."""

    #: The turn was stored whole by an earlier attempt: do not run it again.
    finished: bool = False
    #: Its output then (the stored answer).
    output: Any = None
    #: Part of the turn is stored: continue it (no new input).
    resume: bool = False
    #: Tool calls that were given an interrupted output now.
    repaired: int = 0


def dangling_openai_calls(items: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Output items for the tool calls among ``items`` that have none (in call order)."""
    answered = {item.get("call_id") for item in items if item.get("type") in _OUTPUT_OF.values()}
    repairs = []
    for item in items:
        kind = item.get("type")
        call_id = item.get("call_id")
        if kind in _OUTPUT_OF and isinstance(call_id, str) and call_id not in answered:
            repairs.append({"type": _OUTPUT_OF[kind], "call_id": call_id, "output": INTERRUPTED})
            answered.add(call_id)
    return repairs


def _answer_text(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    parts = content if isinstance(content, list) else []
    return "".join(str(part.get("text", "")) for part in parts if isinstance(part, dict))


def openai_agents_start(session: Any, run_id: str) -> Start:
    """Where a run's attempt on an ``AgentStoreSession`` starts (repairs written first)."""
    from agentstore.integrations.openai_agents import entry_item

    entries = session.log.read(WINDOW, types={"item"})
    items: list[dict[str, Any]] = [cast(dict[str, Any], entry_item(entry)) for entry in entries]
    mine = [item for entry, item in zip(entries, items, strict=True)
            if entry.data.get(RUN_MEMBER) == run_id]  # fmt: skip
    repairs = dangling_openai_calls(items)
    if repairs:
        session.add_items_sync(repairs)
    if not mine:
        return Start(repaired=len(repairs))
    last = mine[-1]
    if not repairs and last.get("type", "message") == "message" and last.get("role") == "assistant":
        return Start(finished=True, output=_answer_text(last))
    return Start(resume=True, repaired=len(repairs))


def pydantic_ai_start(history: Any, run_id: str) -> Start:
    """Where a run's attempt on a ``MessageHistory`` starts (repairs written first).

    A run's messages are saved in one transaction at its end, so any of them
    stored means the whole turn is: its last response is the output.
    """
    from pydantic_ai.messages import (
        ModelRequest,
        ModelResponse,
        RetryPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )

    from agentstore.integrations.pydantic_ai import ENTRY_TYPE

    entries = history.log.read(WINDOW, types={ENTRY_TYPE})
    mine = any(entry.data.get(RUN_MEMBER) == run_id for entry in entries)
    messages = history.load(WINDOW)
    answered = {
        part.tool_call_id
        for message in messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, ToolReturnPart | RetryPromptPart)
    }
    dangling = [
        part
        for message in messages
        if isinstance(message, ModelResponse)
        for part in message.parts
        if isinstance(part, ToolCallPart) and part.tool_call_id not in answered
    ]
    if dangling:
        returns = [
            ToolReturnPart(part.tool_name, INTERRUPTED, tool_call_id=part.tool_call_id)
            for part in dangling
        ]
        history.save([ModelRequest(parts=returns)])
    if mine:
        last = next((m for m in reversed(messages) if isinstance(m, ModelResponse)), None)
        text = (
            ""
            if last is None
            else "".join(p.content for p in last.parts if isinstance(p, TextPart))
        )
        return Start(finished=True, output=text)
    return Start(repaired=len(dangling))
