"""Ready-made runners for the three integrations: one line per agent.

    # myapp/agents.py
    from agentstore.runs import builders

    support = builders.openai_agents(support_agent)        # an OpenAI Agents SDK Agent
    triage = builders.pydantic_ai(triage_agent)            # a Pydantic AI Agent
    planner = builders.langgraph(planner_graph)            # a compiled LangGraph graph

    # settings.py
    AGENTSTORE = {"RUNNERS": {"support": "myapp.agents.support", ...}}

Each returns a runner (:mod:`agentstore.runs.registry`) that continues the
run's session by one turn with the framework's own memory on agentstore —
:class:`~agentstore.integrations.openai_agents.AgentStoreSession`,
:class:`~agentstore.integrations.pydantic_ai.MessageHistory` or
:class:`~agentstore.integrations.langgraph.AgentStoreSaver` — and returns
``{"output": …}``: the turn's final output made JSON (:func:`jsonable`).
The run's ``overrides`` change ``model`` and ``instructions`` for that run
(OpenAI Agents SDK and Pydantic AI); a LangGraph run passes them to the graph
as ``configurable`` values. A rerun after a crash starts where the earlier
attempt stopped, with no tool call left without an output
(:mod:`agentstore.runs.resume`).

A framework is imported only when its builder is called, so this module
imports with none of them installed.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any

from agentstore.conf import agentstore_settings
from agentstore.db.thread import run_to_end
from agentstore.integrations.conversation import RUN_MEMBER
from agentstore.models.sessions import SessionKind
from agentstore.runs.execution import RunContext
from agentstore.runs.resume import openai_agents_start, pydantic_ai_start

__all__ = ["jsonable", "langgraph", "openai_agents", "pydantic_ai"]

Runner = Callable[[RunContext], Any]


def jsonable(value: Any, _depth: int = 0) -> Any:
    """``value`` as plain JSON: models dumped, dataclasses as objects, anything else as text.

    Non-finite floats and what nests deeper than ``JSON_MAX_DEPTH`` become text too.
    """
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if _depth >= agentstore_settings.JSON_MAX_DEPTH:
        return str(value)
    deeper = _depth + 1
    if isinstance(value, Mapping):
        return {str(key): jsonable(item, deeper) for key, item in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(item, deeper) for item in value]
    dump = getattr(value, "model_dump", None)
    if callable(dump) and not isinstance(value, type):
        return jsonable(dump(mode="json"), deeper)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(dataclasses.asdict(value), deeper)
    return str(value)


def _changes(overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The ``model`` and ``instructions`` overrides, as text."""
    return {key: str(overrides[key]) for key in ("model", "instructions") if overrides.get(key)}


def openai_agents(agent: Any, **run_options: Any) -> Runner:
    """A runner that runs ``agent`` (``agents.Agent``) for one turn on the run's session.

    ``run_options`` go to ``Runner.run`` (``max_turns``, ``run_config``, ``context`` …).
    """
    from agents import Runner as SDKRunner

    from agentstore.integrations.openai_agents import HARNESS, AgentStoreSession

    async def run(context: RunContext) -> dict[str, Any]:
        changes = _changes(context.overrides)
        chosen = agent.clone(**changes) if changes else agent
        session = AgentStoreSession(context.session_id, using=context.using)
        start = await run_to_end(openai_agents_start, session, context.id)
        if start.finished:  # stored whole by an earlier attempt: not run again
            return {"output": start.output, "agent": chosen.name}
        given = [] if start.resume else context.input  # a turn begun: continue it
        result = await SDKRunner.run(chosen, given, session=session, **run_options)
        return {"output": jsonable(result.final_output), "agent": result.last_agent.name}

    run.session_kind = SessionKind.LOG.value  # type: ignore[attr-defined]
    run.harness = HARNESS  # type: ignore[attr-defined]
    return run


def pydantic_ai(agent: Any, **run_options: Any) -> Runner:
    """A runner that runs ``agent`` (``pydantic_ai.Agent``) for one turn on the run's session.

    ``run_options`` go to ``Agent.run`` (``deps``, ``model_settings``, ``usage_limits`` …).
    """
    from agentstore.integrations.pydantic_ai import HARNESS, MessageHistory

    async def run(context: RunContext) -> dict[str, Any]:
        history = MessageHistory(context.session_id, using=context.using)
        start = await run_to_end(pydantic_ai_start, history, context.id)
        if start.finished:  # stored whole by an earlier attempt: not run again
            return {"output": start.output}
        options = {**run_options, **_changes(context.overrides)}
        result = await agent.run(context.input, message_history=await history.aload(), **options)
        await history.asave(result)
        return {"output": jsonable(result.output)}

    run.session_kind = SessionKind.LOG.value  # type: ignore[attr-defined]
    run.harness = HARNESS  # type: ignore[attr-defined]
    return run


def langgraph(graph: Any) -> Runner:
    """A runner that invokes ``graph`` (compiled) once on the run's thread (its session).

    A graph compiled without a checkpointer gets an
    :class:`~agentstore.integrations.langgraph.AgentStoreSaver`; one compiled
    with another checkpointer keeps it (the run then stores only its output).
    """
    from agentstore.integrations.langgraph import AgentStoreSaver

    if getattr(graph, "checkpointer", None) is None:
        graph = graph.copy(update={"checkpointer": AgentStoreSaver()})

    async def run(context: RunContext) -> dict[str, Any]:
        configurable = {**context.overrides, "thread_id": context.session_id}
        # Every checkpoint this run writes carries its id in the metadata.
        config = {"configurable": configurable, "metadata": {RUN_MEMBER: context.id}}
        state = await graph.aget_state(config)
        ours = (state.metadata or {}).get(RUN_MEMBER) == context.id
        # The thread's newest checkpoint is this run's: an earlier attempt stopped
        # after it. None resumes from there (a no-op when that attempt had finished).
        output = await graph.ainvoke(None if ours else context.input, config)
        return {"output": jsonable(output)}

    run.session_kind = SessionKind.GRAPH.value  # type: ignore[attr-defined]
    return run
