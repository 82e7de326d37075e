"""Starting runs and reading them back: ``RunRepository``, behind ``agentstore.runs.start``.

    runs = RunRepository()
    run = runs.start("support", "hello")                  # a new session of the runner's kind
    run = runs.start("support", "and now?", session_id=run.session_id)
    runs.get(run.id).state                                # queued → running → succeeded …
    runs.list_for_session(run.session_id)                 # newest first

A run is a task of kind ``run`` (so the worker's queue, lease, retries, crash
recovery and event log are the tasks' own, written once) whose owner session
is the session the run continues, with a :class:`~agentstore.models.RunTask`
detail row inserted in the same transaction.

Starting a run without ``session_id`` creates the session first — a log
session (header ``harness.name`` from the runner) or a LangGraph thread, as the
runner says (:mod:`agentstore.runs.registry`) — owned by ``owner``, so the
caller can read and follow it before a worker picks the run up. With
``session_id``, a missing session is created the same way (an SDK
conversation's own id is a valid session id); an existing one is continued
whatever its kind, and with ``owner`` it must be the owner's (``NoSession``
otherwise: "not yours" and "missing" answer alike). Everything is checked
before anything is written, and a new session is inserted in the run's own
transaction: the session and its run appear together or not at all.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from django.db import DEFAULT_DB_ALIAS

from agentstore import exceptions, sql
from agentstore.db import SqlCursor
from agentstore.ids import new_id
from agentstore.models import RunTask, Task
from agentstore.models.sessions import SessionKind
from agentstore.runs.registry import RUN_KIND, Runner, get_runner
from agentstore.selectors.sessions import visible_session
from agentstore.sql import runs as run_sql
from agentstore.stores.base import Clock, StoreBase, lookup, none, nothing
from agentstore.stores.log import LogStore
from agentstore.stores.sessions import SessionStore
from agentstore.tasks.lifecycle.vocabulary import TASK_FIELDS, clamp_limit, task_from_values
from agentstore.tasks.repository import TaskRepository
from agentstore.types.runs import Run
from agentstore.types.tasks import TaskEntity
from agentstore.validation import require_json_value, require_storable_text

__all__ = [
    "ENQUEUE",
    "IF_BUSY",
    "INTERRUPT",
    "MAX_INPUT_CHARS",
    "REJECT",
    "RUN_KIND",
    "RunRepository",
    "run_of",
]

#: What ``start`` does when another run of the session is queued or going on.
ENQUEUE, REJECT, INTERRUPT = "enqueue", "reject", "interrupt"
IF_BUSY = (ENQUEUE, REJECT, INTERRUPT)
#: Largest input (and overrides), as JSON text: a run's input is the next user
#: message or a graph's input, not a file.
MAX_INPUT_CHARS = 1_000_000

_RUN_VALUES = ("run__runner", "run__input_json", "run__overrides_json")


def _json_text(value: Any, field: str) -> str:
    require_json_value(value, field)
    text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    if len(text) > MAX_INPUT_CHARS:
        raise exceptions.ValidationError(
            f"{field} is larger than {MAX_INPUT_CHARS:,} characters as JSON", field=field
        )
    return text


def run_of(task: TaskEntity, runner: str, input_json: str, overrides_json: str) -> Run:
    """The :class:`Run` a task of kind ``run`` and its detail make."""
    output = None
    if task.state == "succeeded" and task.result:
        output = json.loads(task.result)
    return Run(
        id=task.id,
        runner=runner,
        session_id=task.owner_session_id,
        state=task.state,
        input=json.loads(input_json),
        overrides=json.loads(overrides_json),
        output=output,
        error_code=task.error_code,
        error_message=task.error_message,
        queue_name=task.queue_name,
        attempts=task.attempts,
        max_attempts=task.max_attempts,
        created_at=task.created_at,
        started_at=task.started_at,
        finished_at=task.finished_at,
        updated_at=task.updated_at,
        run_after=task.run_after,
    )


class RunRepository(StoreBase):
    """Start runs (tasks of kind ``run``) and read them back."""

    def __init__(self, *, using: str = DEFAULT_DB_ALIAS, clock: Clock | None = None) -> None:
        super().__init__(using=using, clock=clock)
        self.tasks = TaskRepository(using=using, clock=clock)
        self.sessions = SessionStore(using=using, clock=clock)

    def start(
        self,
        runner: str,
        input: Any = None,  # noqa: A002 - the run's input, as the API names it
        *,
        session_id: str = "",
        owner: Any = None,
        overrides: Mapping[str, Any] | None = None,
        queue: str = "default",
        priority: int = 0,
        run_after: datetime | None = None,
        max_attempts: int = 1,
        if_busy: str = ENQUEUE,
    ) -> Run:
        """Queue a run of ``runner`` on ``session_id`` (a new session when empty).

        ``input`` and ``overrides`` (a JSON object: ``model``, ``instructions``,
        whatever the runner honours) must be JSON values of at most
        :data:`MAX_INPUT_CHARS` characters. ``queue``, ``priority`` (-100..100),
        ``run_after`` and ``max_attempts`` (failed attempts allowed; a crash
        does not spend one) are the task's. ``if_busy`` says what happens when
        another run of the session is queued or going on (:data:`IF_BUSY`):
        ``enqueue`` (this one runs after it), ``reject`` (``SessionBusy``,
        nothing written) or ``interrupt`` (it is canceled — a running one stops
        at its next step — and this one continues the session from there),
        decided in the transaction that inserts the run. Raises
        ``ValidationError`` (an unknown runner included) and ``NoSession``.
        """
        spec = get_runner(runner)
        if if_busy not in IF_BUSY:
            raise exceptions.ValidationError(
                f"if_busy must be one of {', '.join(IF_BUSY)}", field="if_busy"
            )
        input_json = _json_text(input, "input")
        if overrides is None:
            overrides = {}
        if not isinstance(overrides, Mapping):
            raise exceptions.ValidationError("overrides must be a JSON object", field="overrides")
        overrides_json = _json_text(dict(overrides), "overrides")
        if session_id:
            require_storable_text(session_id, "session_id", 255)
            if not session_id.strip():
                raise exceptions.ValidationError("session_id is blank", field="session_id")
        sid = session_id or new_id()
        # Everything checked before the session is made.
        clean = self.tasks.check_enqueue(
            TaskEntity(
                kind=RUN_KIND,
                owner_session_id=sid,
                queue_name=queue,
                priority=priority,
                run_after=run_after,
                max_attempts=max_attempts,
            )
        )
        make = self._session(spec, sid, owner, given=bool(session_id))
        task_id, event_id, now = new_id(), new_id(), self.now()
        rows = self.tasks.queued_rows(
            clean,
            task_id,
            event_id,
            now,
            queue=clean.queue_name,
            run_after=clean.run_after,
            max_attempts=clean.max_attempts,
            priority=clean.priority,
        )
        detail = sql.row(
            RunTask,
            task_id=task_id,
            runner=spec.name,
            input_json=input_json,
            overrides_json=overrides_json,
        )
        payload = json.dumps({"interrupted_by": task_id})

        def insert(cursor: SqlCursor) -> None:
            if make is not None:
                make(cursor)  # the run's new session, in the run's transaction
            if if_busy != ENQUEUE:
                lock, active = run_sql.active_runs(cursor.db.vendor)
                cursor.execute(lock, [sid])
                cursor.execute(active, [sid])
                going = [str(row[0]) for row in cursor.fetchall()]
                if going and if_busy == REJECT:
                    raise exceptions.SessionBusy(
                        f"session {sid} has {len(going)} run(s) queued or going on, "
                        f"the oldest {going[0]} (if_busy=reject)"
                    )
                for other in going:  # interrupt
                    self.tasks.cancel_row(cursor, other, payload, new_id(), now)
            self.tasks.insert_queued(cursor, rows, (run_sql.INSERT_RUN, detail))

        try:
            self.write(insert)
        except exceptions.SessionExists:
            if make is None or not session_id:
                raise
            # Another start (or writer) created this id meanwhile: continue it instead.
            return self.start(
                runner, input, session_id=session_id, owner=owner, overrides=overrides,
                queue=queue, priority=priority, run_after=run_after,
                max_attempts=max_attempts, if_busy=if_busy,
            )  # fmt: skip
        return run_of(rows.entity, spec.name, input_json, overrides_json)

    def _session(
        self, spec: Runner, session_id: str, owner: Any, *, given: bool
    ) -> Callable[[SqlCursor], object] | None:
        """``None`` when the run continues an existing session (``owner``'s, if given);
        else the statements that create it, as ``spec`` says, owned by ``owner``."""
        if given and self.sessions.kind_of(session_id) is not None:
            if owner is not None and visible_session(owner, session_id, using=self.using) is None:
                raise exceptions.NoSession(f"no such session: {session_id}")
            return None
        if spec.session_kind == SessionKind.GRAPH:
            now = self.now()
            return lambda cursor: self.sessions.insert(
                cursor, SessionKind.GRAPH, session_id, created_at=now, updated_at=now,
                owner_id=owner,
            )  # fmt: skip
        header = {"id": session_id, "harness": {"name": spec.harness}}
        return LogStore(using=self.using, holds=False).creation(header, owner=owner)

    @lookup("run_id", missing=none)
    def get(self, run_id: str) -> Run | None:
        """The run, or ``None`` (no run has this id)."""
        row = (
            Task.objects.using(self.using)
            .filter(pk=run_id, kind=RUN_KIND)
            .values(*TASK_FIELDS, *_RUN_VALUES)
            .first()
        )
        return None if row is None else _run_from_values(row)

    @lookup("run_id", missing=none)
    def cancel(self, run_id: str, *, by: str = "") -> Run | None:
        """Cancel a queued run, or ask a running one to stop; the run as it is now.

        A queued run is ``canceled`` at once; a running one becomes ``canceling``
        and its runner stops at its next step (the builders check before each
        model and tool call), ending ``canceled``. A run that is over is left
        as it is. ``None``: no run has this id. ``by`` is recorded on the event.
        """
        if self.get(run_id) is None:
            return None
        self.tasks.cancel(run_id, json.dumps({"canceled_by": by} if by else {}))
        return self.get(run_id)

    @lookup("run_ids", missing=nothing)
    def get_many(self, run_ids: Sequence[str]) -> list[Run]:
        """The runs with these ids, in the order given (ids of no run are left out)."""
        rows = (
            Task.objects.using(self.using)
            .filter(pk__in=list(run_ids), kind=RUN_KIND)
            .values(*TASK_FIELDS, *_RUN_VALUES)
        )
        by_id = {row["id"]: _run_from_values(row) for row in rows}
        return [by_id[run_id] for run_id in run_ids if run_id in by_id]

    @lookup("session_id", missing=nothing)
    def list_for_session(self, session_id: str, limit: int = 50) -> list[Run]:
        """The session's runs, newest first (``limit`` ≤ 0 or above 100: 100)."""
        rows = (
            Task.objects.using(self.using)
            .filter(owner_session_id=session_id, kind=RUN_KIND)
            .order_by("-created_at", "-id")
            .values(*TASK_FIELDS, *_RUN_VALUES)[: clamp_limit(limit)]
        )
        return [_run_from_values(row) for row in rows]


def _run_from_values(row: dict[str, Any]) -> Run:
    return run_of(
        task_from_values(row),
        row["run__runner"] or "",
        row["run__input_json"] or "null",
        row["run__overrides_json"] or "{}",
    )
