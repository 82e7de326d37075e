"""Durable runs: one agent turn on one session, executed by the worker, stored as a task.

A *runner* is a named callable that continues a session by one agent turn (or
one graph invocation); the worker calls it with a run context and stores what
it returns as the run's output::

    AGENTSTORE = {"RUNNERS": {"support": "myapp.agents.support"}}

    def support(run):                   # run.session_id, run.input, run.overrides, run.attempt
        ...                             # e.g. Runner.run(agent, run.input, session=...)
        return {"text": answer}

    from agentstore import runs

    r = runs.start("support", input="hello")          # a new session unless session_id=
    runs.get_run(r.id).state     # queued → running → succeeded / failed / canceled
    runs.get_run(r.id).output    # {"text": ...} once succeeded
    runs.cancel_run(r.id)        # queued: canceled; running: stops at its next step
    r = await runs.astart("support", input="and then?", session_id=r.session_id)
    runs.start("support", "stop, do this", session_id=r.session_id, if_busy="interrupt")

Ready-made runners for the three integrations are in
:mod:`agentstore.runs.builders` (``openai_agents(agent)``, ``pydantic_ai(agent)``,
``langgraph(graph)``): one line per agent. ``manage.py agentstore worker``
executes runs with the session held for the run's duration only
(:mod:`agentstore.runs.execution`); ``manage.py agentstore runs`` and the
API's ``/api/v1/runs`` start and show them. docs/runs.md says what is
guaranteed.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import DEFAULT_DB_ALIAS

from agentstore.db.thread import run as run_on_thread
from agentstore.db.thread import run_to_end
from agentstore.runs.execution import RunContext
from agentstore.runs.registry import RUN_KIND, runner, runner_names
from agentstore.runs.repository import RunRepository
from agentstore.types.runs import Run

__all__ = [
    "RUN_KIND",
    "Run",
    "RunContext",
    "RunRepository",
    "acancel_run",
    "aget_run",
    "alist_runs",
    "astart",
    "cancel_run",
    "get_run",
    "list_runs",
    "runner",
    "runner_names",
    "start",
]


def start(
    runner: str,
    input: Any = None,  # noqa: A002 - the run's input, as the API names it
    *,
    session_id: str = "",
    owner: Any = None,
    overrides: dict[str, Any] | None = None,
    queue: str = "default",
    priority: int = 0,
    run_after: datetime | None = None,
    max_attempts: int = 1,
    if_busy: str = "enqueue",
    using: str = DEFAULT_DB_ALIAS,
) -> Run:
    """Queue a run of ``runner`` (see :meth:`RunRepository.start`); returns it, ``queued``."""
    return RunRepository(using=using).start(
        runner,
        input,
        session_id=session_id,
        owner=owner,
        overrides=overrides,
        queue=queue,
        priority=priority,
        run_after=run_after,
        max_attempts=max_attempts,
        if_busy=if_busy,
    )


def get_run(run_id: str, *, using: str = DEFAULT_DB_ALIAS) -> Run | None:
    """The run with this id, or ``None``."""
    return RunRepository(using=using).get(run_id)


def cancel_run(run_id: str, *, using: str = DEFAULT_DB_ALIAS) -> Run | None:
    """Cancel a queued run or ask a running one to stop (:meth:`RunRepository.cancel`)."""
    return RunRepository(using=using).cancel(run_id)


def list_runs(session_id: str, *, limit: int = 50, using: str = DEFAULT_DB_ALIAS) -> list[Run]:
    """The session's runs, newest first (at most 100)."""
    return RunRepository(using=using).list_for_session(session_id, limit)


async def astart(runner: str, input: Any = None, **options: Any) -> Run:  # noqa: A002
    """:func:`start` from async code (the write runs off the event loop, to its end)."""
    return await run_to_end(lambda: start(runner, input, **options))


async def aget_run(run_id: str, *, using: str = DEFAULT_DB_ALIAS) -> Run | None:
    """:func:`get_run` from async code."""
    return await run_on_thread(lambda: get_run(run_id, using=using))


async def acancel_run(run_id: str, *, using: str = DEFAULT_DB_ALIAS) -> Run | None:
    """:func:`cancel_run` from async code."""
    return await run_to_end(lambda: cancel_run(run_id, using=using))


async def alist_runs(
    session_id: str, *, limit: int = 50, using: str = DEFAULT_DB_ALIAS
) -> list[Run]:
    """:func:`list_runs` from async code."""
    return await run_on_thread(lambda: list_runs(session_id, limit=limit, using=using))
