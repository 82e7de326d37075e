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
from agentstore.db.thread import run as run_on_thread
from agentstore.db.thread import run_to_end
from agentstore.integrations.conversation import RUN_MEMBER
from agentstore.models.sessions import SessionKind
from agentstore.runs.execution import RunCanceled, RunContext
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


async def _stop_if_canceled(context: RunContext) -> None:
    """Between two steps: end the run ``canceled`` if it was asked to stop (one read)."""
    await run_on_thread(context.stop_if_canceled)


def _canceled_in(error: BaseException) -> RunCanceled | None:
    """The :class:`RunCanceled` ``error`` is, or was raised from (a bounded walk)."""
    seen: BaseException | None = error
    for _ in range(8):
        if seen is None or isinstance(seen, RunCanceled):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _cancel_hooks(base: type, context: RunContext, inner: Any) -> Any:
    """``RunHooks`` that stop the run before a model call or a tool call once it is canceled.

    Every callback goes on to ``inner`` (the caller's own hooks, if any).
    """

    class CancelHooks(base):  # type: ignore[misc]
        async def on_llm_start(self, *args: Any, **kwargs: Any) -> None:
            await _stop_if_canceled(context)
            await inner.on_llm_start(*args, **kwargs)

        async def on_tool_start(self, *args: Any, **kwargs: Any) -> None:
            await _stop_if_canceled(context)
            await inner.on_tool_start(*args, **kwargs)

        async def on_llm_end(self, *args: Any, **kwargs: Any) -> None:
            await inner.on_llm_end(*args, **kwargs)

        async def on_tool_end(self, *args: Any, **kwargs: Any) -> None:
            await inner.on_tool_end(*args, **kwargs)

        async def on_agent_start(self, *args: Any, **kwargs: Any) -> None:
            await inner.on_agent_start(*args, **kwargs)

        async def on_agent_end(self, *args: Any, **kwargs: Any) -> None:
            await inner.on_agent_end(*args, **kwargs)

        async def on_handoff(self, *args: Any, **kwargs: Any) -> None:
            await inner.on_handoff(*args, **kwargs)

    return CancelHooks()


def openai_agents(agent: Any, **run_options: Any) -> Runner:
    """A runner that runs ``agent`` (``agents.Agent``) for one turn on the run's session.

    ``run_options`` go to ``Runner.run`` (``max_turns``, ``run_config``, ``context``,
    ``hooks`` …). A canceled run stops before its next model or tool call.
    """
    from agents import RunHooks
    from agents import Runner as SDKRunner

    from agentstore.integrations.openai_agents import HARNESS, AgentStoreSession

    options = dict(run_options)
    caller_hooks = options.pop("hooks", None) or RunHooks()

    async def run(context: RunContext) -> dict[str, Any]:
        changes = _changes(context.overrides)
        chosen = agent.clone(**changes) if changes else agent
        session = AgentStoreSession(context.session_id, using=context.using)
        start = await run_to_end(openai_agents_start, session, context.id)
        if start.finished:  # stored whole by an earlier attempt: not run again
            return {"output": start.output, "agent": chosen.name}
        given = [] if start.resume else context.input  # a turn begun: continue it
        hooks = _cancel_hooks(RunHooks, context, caller_hooks)
        try:
            result = await SDKRunner.run(chosen, given, session=session, hooks=hooks, **options)
        except Exception as error:
            # The SDK wraps what a hook raises around a tool call in a UserError.
            stopped = _canceled_in(error)
            if stopped is None:
                raise
            raise stopped from error
        return {"output": jsonable(result.final_output), "agent": result.last_agent.name}

    run.session_kind = SessionKind.LOG.value  # type: ignore[attr-defined]
    run.harness = HARNESS  # type: ignore[attr-defined]
    return run


def pydantic_ai(agent: Any, **run_options: Any) -> Runner:
    """A runner that runs ``agent`` (``pydantic_ai.Agent``) for one turn on the run's session.

    ``run_options`` go to ``Agent.iter`` (``deps``, ``model_settings``, ``usage_limits`` …).
    A canceled run stops between two steps and saves nothing of its turn.
    """
    from agentstore.integrations.pydantic_ai import HARNESS, MessageHistory

    async def run(context: RunContext) -> dict[str, Any]:
        history = MessageHistory(context.session_id, using=context.using)
        start = await run_to_end(pydantic_ai_start, history, context.id)
        if start.finished:  # stored whole by an earlier attempt: not run again
            return {"output": start.output}
        options = {**run_options, **_changes(context.overrides)}
        given = await history.aload()
        # Step by step (agent.iter): a canceled run stops between two steps, and
        # saves nothing of its turn (the history is saved whole at the end).
        async with agent.iter(context.input, message_history=given, **options) as steps:
            async for _ in steps:
                await _stop_if_canceled(context)
        result = steps.result
        assert result is not None  # the iteration ran to its end
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
    A canceled run stops after its current step (its checkpoint kept).
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
        output: Any = None
        # Step by step: a canceled run stops after a step (its checkpoint kept).
        given = None if ours else context.input
        async for values in graph.astream(given, config, stream_mode="values"):
            output = values
            await _stop_if_canceled(context)
        if output is None:  # nothing left to run: the thread's state as it is
            output = (await graph.aget_state(config)).values
        return {"output": jsonable(output)}

    run.session_kind = SessionKind.GRAPH.value  # type: ignore[attr-defined]
    return run
