"""Executing a run: the worker's handler of kind ``run``, and what a runner is handed.

The worker (``manage.py agentstore worker``) claims a run like any task and
calls :func:`execute_run`, which

1. reads the run's runner, input and overrides;
2. holds the run's session for the run's duration — the hold's token is the
   run's own (``run:<id>``), not the worker's, so a rerun after a crash, on any
   worker, continues under it, and a second run of the same session waits
   (:class:`~agentstore.tasks.handlers.Postpone`: back to the queue, no attempt
   spent) until the first is over;
3. calls the runner with a :class:`RunContext`, inside
   :func:`~agentstore.stores.hold_context.writing_under`, so what the runner
   writes through the framework integrations passes the run's own hold while
   every other writer of the session gets ``SessionLocked`` (the API: 423);
4. releases the hold, and returns the runner's value as JSON: the run's output.

A runner may be a coroutine function; it is run to its end on this thread's
own event loop (``async_to_sync``), whose database work stays on this thread.
A runner that raises fails the attempt, retried while the run has attempts
left (``max_attempts``); a worker that dies mid-run has the run rerun (at least
once, within the crash budget: docs/tasks.md, "Retries and recovery").

A hold a dead worker left is taken over by the run's next attempt (same
token); one left by a run that is over is cleared by the next run of the
session (``sql.runs.CLEAR_FINISHED_RUN_HOLD``).
"""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import async_to_sync

from agentstore import db, exceptions
from agentstore.runs.registry import RUN_KIND, get_runner
from agentstore.sql import runs as run_sql
from agentstore.stores.hold_context import writing_under
from agentstore.stores.sessions import SessionStore
from agentstore.tasks.handlers import Canceled, Job, NotRetryable, Postpone, handler

__all__ = ["BUSY_DELAY", "RunCanceled", "RunContext", "execute_run", "hold_token"]

#: Seconds a run whose session is busy (another run holds it) waits before it is tried again.
BUSY_DELAY = 1.0


def hold_token(run_id: str) -> str:
    """The token a run holds its session with (the same for every attempt of the run)."""
    return run_sql.HOLD_PREFIX + run_id


@dataclass(frozen=True)
class RunContext:
    """What a runner is called with: the run, its session, its input and overrides."""

    id: str
    runner: str
    session_id: str
    #: The run's input (decoded JSON): the next user message, a graph's input …
    input: Any
    #: What the starter asked to change for this run: ``model``, ``instructions`` …
    overrides: dict[str, Any]
    #: 1 for the first attempt; a retry or a rerun after a crash counts up.
    attempt: int
    #: The database alias the run is stored in (pass it on to the integrations).
    using: str
    _job: Job = field(repr=False, compare=False)

    def cancel_requested(self) -> bool:
        """Whether this run was asked to stop (``runs.cancel``, or a run that interrupts it).

        A runner checks between steps — the builders do before each model call
        and tool call (LangGraph: after each step) — and stops with
        :meth:`stop_if_canceled`. One read of the run's row.
        """
        task = self._job.tasks.get(self.id)
        return task is None or task.state == "canceling"

    def stop_if_canceled(self) -> None:
        """Raise :class:`RunCanceled` if the run was asked to stop: the run ends ``canceled``."""
        if self.cancel_requested():
            raise RunCanceled(f"run {self.id} was canceled before attempt {self.attempt} ended")

    def event(self, kind: str, payload: Any = None) -> bool:
        """Record a progress event on the run (``False`` once this worker lost the run)."""
        text = json.dumps({} if payload is None else payload, allow_nan=False)
        return self._job.event(kind, text)


class RunCanceled(Canceled):
    """The runner stopped because the run was asked to stop; the run ends ``canceled``."""


def _read(job: Job) -> tuple[str, str, str]:
    # Hand-written, as the function kind's: the ORM would cost more than the read.
    with db.cursor(job.tasks.using) as cursor:
        cursor.execute(run_sql.SELECT_RUN, [job.task.id])
        found = cursor.fetchone()
    if found is None:
        raise NotRetryable(f"run {job.task.id} has no run details")
    runner, input_json, overrides_json = (str(value) for value in found)
    return runner, input_json, overrides_json


def _hold(sessions: SessionStore, session_id: str, token: str) -> None:
    """Hold the session for the run, clearing a finished run's leftover hold once."""
    for _ in range(2):
        try:
            sessions.claim_hold(session_id, token)
            return
        except exceptions.SessionLocked as busy:
            cleared = sessions.write(
                lambda cursor: _clear_finished(cursor, session_id), single=True
            )
            if not cleared:
                raise Postpone(f"session {session_id} is busy: {busy}", BUSY_DELAY) from busy
        except exceptions.NoSession as gone:
            raise NotRetryable(f"run {token}: its session is gone") from gone
    raise Postpone(f"session {session_id} is busy", BUSY_DELAY)


def _clear_finished(cursor: db.SqlCursor, session_id: str) -> int:
    cursor.execute(run_sql.CLEAR_FINISHED_RUN_HOLD, [session_id])
    return int(cursor.rowcount)


async def _awaited(value: Any) -> Any:
    return await value


@handler(RUN_KIND)
def execute_run(job: Job) -> str:
    """The built-in handler of kind ``run``: call the runner under the run's hold; JSON output.

    Registered when the app loads (``AgentStoreConfig.ready``), so every worker runs runs.
    """
    task = job.task
    name, input_json, overrides_json = _read(job)
    try:
        spec = get_runner(name)
    except exceptions.ValidationError as error:
        raise NotRetryable(str(error)) from error
    session_id = task.owner_session_id
    if not session_id:
        raise NotRetryable(f"run {task.id} has no session")
    context = RunContext(
        id=task.id,
        runner=name,
        session_id=session_id,
        input=json.loads(input_json),
        overrides=json.loads(overrides_json),
        attempt=task.attempts,
        using=job.tasks.using,
        _job=job,
    )
    sessions = SessionStore(using=job.tasks.using)
    token = hold_token(task.id)
    _hold(sessions, session_id, token)
    try:
        with writing_under(session_id, token, run_id=task.id):
            value = spec.fn(context)
            if inspect.isawaitable(value):
                value = async_to_sync(_awaited)(value)
    finally:
        sessions.release_hold(session_id, token)
    try:
        # ASCII: a NUL or lone surrogate the runner returned stays an escape, which
        # every database can hold as text.
        return json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise NotRetryable(f"runner {name!r} returned a value that is not JSON: {error}") from error
