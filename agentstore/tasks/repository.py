"""The generic durable task lifecycle: create, claim with a lease, heartbeat, finish, recover.

A task is work an agent spawned that must survive a crash. A worker claims a
queued task with a *lease* (an owner string and an expiry), renews the lease
while it works, appends progress events, and finishes the task; a recovery
sweep settles tasks whose worker went away::

    tasks = TaskRepository()
    task = tasks.create(TaskEntity(kind="tool", owner_session_id=sid))
    claim = TaskClaim(task_id=task.id, lease_owner="worker-1",
                      lease_expires_at=now + timedelta(seconds=30), event_kind="task_started")
    if tasks.claim_queued(claim):
        tasks.append_running_event(task.id, "worker-1", "progress", '{"percent": 50}')
        tasks.finish(TaskFinish(task_id=task.id, lease_owner="worker-1",
                                from_states=["running", "canceling"], target_state="succeeded",
                                event_kind="task_succeeded", payload_json="{}"))

How exclusivity works (read this before changing anything)
---------------------------------------------------------
Every conditional change is **one short write transaction**: a guarded
``UPDATE … WHERE id = … AND state IN (…) AND <lease fence>``, its row count, and
the event in the same transaction. A row count of 0 means "nothing changed" and
the method returns ``False`` — the caller lost a race, the lease expired or was
taken, or the task does not exist. The UPDATE *is* the fence: a worker whose
lease expired or was taken can write nothing, because every write it makes
(``renew_lease``, ``append_running_events``, owner ``finish``) re-checks owner
and liveness (``lease_expires_at > now``) in the same statement or transaction.

Event sequences are task-local (1..n, ``task_queued`` is 1) and computed as
``max(sequence) + 1`` inside the write transaction. On SQLite the transaction
holds the database's write lock from ``BEGIN IMMEDIATE`` (behind agentstore's
writer queue), so nobody else can append in between. On PostgreSQL the
transaction is a plain ``atomic()``: every path that appends an event first
locks the task row (the guarded UPDATE does; the unguarded paths use
``SELECT … FOR UPDATE``), so appends to one task are serialised by that row
lock and never compute the same ``max + 1``. ``UNIQUE(task, sequence)`` is only
the last line of defence. ``FOR UPDATE`` never decides *who wins*; the
conditional UPDATE and its row count do.

The hot paths (claims, renewals, running events, finish, recovery) are
hand-written SQL on agentstore.db's cursor: the ORM would cost several
times the transaction itself. Datetimes pass through the backend's own
adapter, so rows written here read back through the ORM unchanged (SQLite
stores fixed-width UTC text, which compares correctly as text). Ids and "now"
are made before the transaction because a busy SQLite write may be re-run.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import datetime
from functools import partial
from typing import Any, NamedTuple

from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, IntegrityError, connections

from agentstore import db, notify, sql
from agentstore.conf import agentstore_settings
from agentstore.db import SqlCursor
from agentstore.exceptions import NoSession, TaskCrashed, ValidationError
from agentstore.ids import new_id
from agentstore.models import Session, Task, TaskEvent
from agentstore.models.tasks import TaskState
from agentstore.sql import tasks as task_sql
from agentstore.stores.base import Clock, StoreBase
from agentstore.types.tasks import (
    EventEntity,
    TaskClaim,
    TaskEntity,
    TaskEventDraft,
    TaskEventEntity,
    TaskFinish,
    TaskRecovery,
)
from agentstore.validation import (
    require_aware,
    require_json,
    require_max_length,
    require_name,
    require_text,
    require_uuid7,
)

__all__ = ["TaskRepository"]

QUEUED, RUNNING, CANCELING = "queued", "running", "canceling"
ALL_STATES = frozenset(str(s) for s in TaskState.values)
TERMINAL = frozenset({"succeeded", "failed", "canceled", "interrupted"})
LEASED = (RUNNING, CANCELING)

#: Largest page of the owner and queue listings (librecode's cap).
LIST_LIMIT = 100
#: Tasks recovered per write transaction (keeps each transaction short).
RECOVERY_BATCH = task_sql.BATCH

TASK_FIELDS = task_sql.TASK_FIELDS
EVENT_FIELDS = task_sql.EVENT_FIELDS


def _finish_params(finish: TaskFinish, at: Any) -> list[Any]:
    """The parameters of :func:`agentstore.sql.tasks.finish`'s guarded UPDATE for ``finish``."""
    params: list[Any] = [
        finish.target_state,
        finish.result,
        finish.error_code,
        finish.error_message,
        at,
        at,
        finish.task_id,
        *finish.from_states,
    ]
    if finish.lease_owner:
        params += [finish.lease_owner, at]
    return params


class Crash(NamedTuple):
    """A leased task whose worker went away, as recovery found it (``rescue_kind``)."""

    task_id: str
    state: str
    #: The lease owner that went away.
    worker_id: str
    #: The task's crashes, this one included.
    crashes: int


class DetailInsert(NamedTuple):
    """One detail row inserted with a task (:meth:`TaskRepository.enqueue`).

    ``statement`` is a single-row ``INSERT … VALUES`` (``%s`` placeholders);
    ``params(task_id)`` its parameters once the task's id is known.
    """

    statement: str
    params: Callable[[str], Sequence[Any]]


def crash_budget() -> int:
    """``AGENTSTORE["TASK_MAX_CRASHES"]``: how many crashes a task survives (0: none)."""
    value = agentstore_settings.TASK_MAX_CRASHES
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ImproperlyConfigured(
            f"AGENTSTORE['TASK_MAX_CRASHES'] must be an integer ≥ 0, not {value!r}"
        )
    return value


#: ``exception_class_path`` of a crash in a failure event (docs/tasks.md, "Retries and recovery").
CRASH_CLASS_PATH = f"{TaskCrashed.__module__}.{TaskCrashed.__qualname__}"


def crash_error(message: str) -> dict[str, str]:
    """The ``exception_class_path``/``traceback`` pair of an event that records a crash.

    The framework's ``TaskResult.errors`` reads these from failure events, so a
    crash is listed beside the task's own exceptions; a crash has no Python
    traceback, only what happened.
    """
    return {
        "exception_class_path": CRASH_CLASS_PATH,
        "traceback": f"{CRASH_CLASS_PATH}: {message}\n",
    }


def task_from_values(row: dict[str, Any]) -> TaskEntity:
    """Build a :class:`TaskEntity` from a ``values(*TASK_FIELDS)`` row."""
    return TaskEntity(
        id=row["id"],
        kind=row["kind"],
        state=row["state"],
        parent_task_id=row["parent_task_id"] or "",
        owner_session_id=row["owner_session_id"] or "",
        concurrency_key=row["concurrency_key"],
        result=row["result"],
        error_code=row["error_code"],
        error_message=row["error_message"],
        created_at=row["created_at"],
        started_at=row["started_at"],
        finished_at=row["finished_at"],
        updated_at=row["updated_at"],
        lease_owner=row["lease_owner"] or "",
        lease_expires_at=row["lease_expires_at"],
        queue_name=row["queue_name"],
        priority=row["priority"],
        run_after=row["run_after"],
        attempts=row["attempts"],
        max_attempts=row["max_attempts"],
        crashes=row["crashes"],
    )


def task_from_model(task: Task) -> TaskEntity:
    """Build a :class:`TaskEntity` from a loaded ``Task``."""
    return task_from_values({name: getattr(task, name) for name in TASK_FIELDS})


def event_from_values(row: dict[str, Any]) -> TaskEventEntity:
    return TaskEventEntity(
        event=EventEntity(
            id=row["event_id"],
            kind=row["kind"],
            payload_json=row["payload_json"],
            created_at=row["created_at"],
        ),
        task_id=row["task_id"],
        sequence=row["sequence"],
    )


def clamp_limit(limit: int, *, cap: int | None = LIST_LIMIT) -> int:
    """``limit`` ≤ 0 (or above ``cap``) becomes the default page of :data:`LIST_LIMIT`."""
    if limit <= 0 or (cap is not None and limit > cap):
        return LIST_LIMIT
    return limit


def require_states(states: Iterable[str], field: str) -> list[str]:
    """Return ``states`` as plain strings, refusing anything that is not a task state."""
    values = [str(s) for s in states]
    for value in values:
        if value not in ALL_STATES:
            raise ValidationError(f"{field} has an unknown task state {value!r}", field=field)
    return values


def require_event(kind: str, payload_json: str, field: str = "event") -> None:
    """Check an event's kind (non-blank) and payload (valid JSON; ``""`` is invalid)."""
    require_text(kind, f"{field}.kind")
    require_max_length(kind, 64, f"{field}.kind")
    require_json(payload_json, f"{field}.payload_json")


def coded(error: ValidationError, code: str) -> ValidationError:
    """Give ``error`` librecode's specific code (``nil_task_claim`` …); still a ValidationError."""
    error.code = code
    return error


class TaskRepository(StoreBase):
    """Generic task lifecycle and ordered task events (shared by the composite repositories)."""

    def __init__(self, *, using: str = DEFAULT_DB_ALIAS, clock: Clock | None = None) -> None:
        super().__init__(using=using, clock=clock)
        self._vendors: dict[str, str] = {}
        # The last datetime _db_time adapted and its database value: a
        # settle-and-claim adapts the same "now" for every statement it sends.
        self._last_time: tuple[datetime | None, Any] = (None, None)

    # -- the internal API of the composite repositories -------------------------
    #
    # AgentTaskRepository, ToolTaskRepository and WorkflowRepository compose
    # their writes from these pieces, inside one write transaction they open
    # with write(): a tool task's finish is ``finish_row`` plus its outcome row,
    # an agent task's insert is ``insert_task`` plus its agent row. They are
    # public so no class reaches into another's privates, but they are not
    # for application code: nothing here opens a transaction or validates
    # input (``validated_task``/``validated_finish`` do that first).
    # docs/tasks.md, "Composite repositories", lists them.

    @property
    def vendor(self) -> str:
        # Cached per alias: the hot paths ask on every call.
        vendor = self._vendors.get(self.using)
        if vendor is None:
            vendor = self._vendors[self.using] = str(connections[self.using].vendor)
        return vendor

    def _db_time(self, value: datetime | None) -> Any:
        """Adapt an aware datetime the way the ORM would, for hand-written SQL."""
        last, adapted = self._last_time
        if value is not None and value is last:
            return adapted
        adapted = connections[self.using].ops.adapt_datetimefield_value(value)
        self._last_time = (value, adapted)
        return adapted

    def lock_task(self, cursor: SqlCursor, task_id: str) -> str | None:
        """Return the task's state, row-locked on PostgreSQL; ``None`` when missing."""
        cursor.execute(task_sql.lock_task(self.vendor), [task_id])
        row = cursor.fetchone()
        return None if row is None else str(row[0])

    def _append_next_event(
        self, cursor: SqlCursor, task_id: str, event_id: str, kind: str, payload: str, now: Any
    ) -> None:
        cursor.execute(task_sql.INSERT_NEXT_EVENT, [task_id, event_id, kind, payload, now, task_id])

    def insert_task(
        self, cursor: SqlCursor, task: TaskEntity, task_id: str, event_id: str, now: datetime
    ) -> None:
        """Insert a queued task and its ``task_queued`` event (inside a write)."""
        if not Session.objects.using(self.using).filter(pk=task.owner_session_id).exists():
            raise NoSession(f"insert task: owner session {task.owner_session_id} does not exist")
        if (
            task.parent_task_id
            and not Task.objects.using(self.using).filter(pk=task.parent_task_id).exists()
        ):
            raise ValidationError(
                f"insert task: task.parent_task_id {task.parent_task_id} names no task",
                field="task.parent_task_id",
            )
        Task.objects.using(self.using).create(
            id=task_id,
            kind=task.kind,
            state=QUEUED,
            parent_task_id=task.parent_task_id or None,
            owner_session_id=task.owner_session_id,
            concurrency_key=task.concurrency_key,
            created_at=now,
            updated_at=now,
        )
        TaskEvent.objects.using(self.using).create(
            task_id=task_id,
            sequence=1,
            event_id=event_id,
            kind="task_queued",
            payload_json="{}",
            created_at=now,
        )
        notify.notify(self.using, notify.queue_key("default"))  # idle workers look

    def finish_row(
        self,
        cursor: SqlCursor,
        finish: TaskFinish,
        event_id: str,
        now: datetime,
    ) -> bool:
        """Run the guarded terminal UPDATE and its event; ``True`` iff one row changed.

        The fence (docs/tasks.md, "At least once, fenced"): no owner → the task
        must hold no lease; an owner → that owner's lease must still be live (an
        expired owner cannot settle, even before recovery ran).
        """
        at = self._db_time(now)
        statement = task_sql.finish(len(finish.from_states), bool(finish.lease_owner))
        cursor.execute(statement, _finish_params(finish, at))
        if cursor.rowcount != 1:
            return False
        self._append_next_event(
            cursor, finish.task_id, event_id, finish.event_kind, finish.payload_json, at
        )
        return True

    def transition_row(
        self,
        cursor: SqlCursor,
        task_id: str,
        from_states: Sequence[str],
        target_state: str,
        kind: str,
        payload_json: str,
        event_id: str,
        now: datetime,
        *,
        lease_owner: str = "",
    ) -> bool:
        at = self._db_time(now)
        sets = ["state = %s", "updated_at = %s"]
        params: list[Any] = [target_state, at]
        if target_state == RUNNING:
            sets.append("started_at = COALESCE(started_at, %s)")
            params.append(at)
        terminal = target_state in TERMINAL
        if terminal:
            sets += ["finished_at = %s", "lease_owner = NULL", "lease_expires_at = NULL"]
            params.append(at)
        elif target_state == QUEUED:
            # A queued task holds no lease: whoever claims it next sets one.
            sets += ["lease_owner = NULL", "lease_expires_at = NULL"]
        params += [task_id, *from_states]
        fence = ""
        if lease_owner:
            # The lease holder moves its own task: fenced like renew/finish
            # (owner and liveness in the same statement).
            fence = " AND lease_owner = %s AND lease_expires_at > %s"
            params += [lease_owner, at]
        elif terminal:
            # A transition never settles leased work: that is the owner's finish
            # (or recovery after the lease expired).
            fence = " AND lease_owner IS NULL"
        elif target_state != CANCELING:
            # Anyone else may not take a task away from a live lease (running →
            # queued under a working worker); only the cancel *request* goes
            # through, because canceling keeps the lease and the worker settles.
            fence = " AND (lease_owner IS NULL OR lease_expires_at <= %s)"
            params.append(at)
        cursor.execute(task_sql.transition(tuple(sets), len(from_states), fence), params)
        if cursor.rowcount != 1:
            return False
        self._append_next_event(cursor, task_id, event_id, kind, payload_json, at)
        return True

    def recover_kind(
        self,
        *,
        kind: str,
        expires_before: datetime,
        finish_template: TaskFinish,
        after_each: Callable[[SqlCursor, str], None] | None = None,
    ) -> list[str]:
        """Settle expired leased tasks of ``kind`` in batches; return their ids in order."""
        return self.rescue_kind(
            kind=kind,
            expires_before=expires_before,
            finish_template=finish_template,
            after_each=after_each,
        )[1]

    def rescue_kind(
        self,
        *,
        kind: str,
        expires_before: datetime,
        finish_template: TaskFinish,
        after_each: Callable[[SqlCursor, str], None] | None = None,
        max_crashes: int | None = None,
        crashed: Callable[[Crash, TaskFinish], TaskFinish] | None = None,
    ) -> tuple[list[str], list[str]]:
        """:meth:`recover_kind`, rerunning crashes within a budget: (requeued, settled) ids.

        With ``max_crashes``, a running task whose worker went away is queued
        again while its crashes so far are fewer (as :meth:`requeue_expired`),
        decided row by row in the same transaction that settles the rest, so a
        task is never settled for want of a budget it still has. ``crashed``
        rewrites the finish of a settled task whose worker went away, knowing
        the crash (its count includes this one): how the budget's end is named.
        """
        requeued: list[str] = []
        settled: list[str] = []
        select = task_sql.expired_of_kind(self.vendor)
        while True:
            event_ids = [new_id() for _ in range(RECOVERY_BATCH)]
            selected, again, done = self.write(
                partial(
                    self._recover_batch,
                    select,
                    kind,
                    expires_before,
                    finish_template,
                    after_each,
                    max_crashes,
                    crashed,
                    event_ids,
                    self.now(),
                ),
                orm=True,
            )
            requeued += again
            settled += done
            if selected < RECOVERY_BATCH or not (again or done):
                return requeued, settled

    def _recover_batch(
        self,
        select: str,
        kind: str,
        expires_before: datetime,
        finish_template: TaskFinish,
        after_each: Callable[[SqlCursor, str], None] | None,
        max_crashes: int | None,
        crashed: Callable[[Crash, TaskFinish], TaskFinish] | None,
        event_ids: list[str],
        now: datetime,
        cursor: SqlCursor,
    ) -> tuple[int, list[str], list[str]]:
        """One batch of :meth:`rescue_kind` (one write transaction): selected, requeued, settled."""
        before = self._db_time(expires_before)
        cursor.execute(select, [kind, before])
        candidates = cursor.fetchall()
        requeued: list[str] = []
        settled: list[str] = []
        at = self._db_time(now)
        for (task_id, owner, crashes, state), event_id in zip(candidates, event_ids, strict=False):
            # Only a running task that had a worker crashed; one being canceled is settled.
            budget = max_crashes if owner is not None and state == RUNNING else None
            if (
                budget is not None
                and crashes < budget
                and self._requeue_row(cursor, task_id, owner, crashes, budget, before, event_id, at)
            ):
                requeued.append(task_id)
                continue
            # Recovery keeps the task's result and has no lease to fence on.
            finish = replace(
                finish_template, task_id=task_id, from_states=LEASED, result="", lease_owner=""
            )
            if crashed is not None and owner is not None:
                finish = crashed(Crash(task_id, state, str(owner), int(crashes) + 1), finish)
            if self._finish_keeping_result(cursor, finish, event_id, now, expires_before, owner):
                if after_each is not None:
                    after_each(cursor, task_id)
                settled.append(task_id)
        return len(candidates), requeued, settled

    def _finish_keeping_result(
        self,
        cursor: SqlCursor,
        finish: TaskFinish,
        event_id: str,
        now: datetime,
        expires_before: datetime,
        owner: str | None,
    ) -> bool:
        # Recovery leaves ``result`` alone (a worker may have stored partial output).
        at = self._db_time(now)
        params: list[Any] = [
            finish.target_state,
            finish.error_code,
            finish.error_message,
            at,
            at,
            finish.task_id,
            self._db_time(expires_before),
        ]
        if owner is None:
            statement = task_sql.RECOVER_ONE_UNOWNED
        else:
            statement = task_sql.RECOVER_ONE_OWNED
            params.append(owner)
        cursor.execute(statement, params)
        if cursor.rowcount != 1:
            return False
        self._append_next_event(
            cursor, finish.task_id, event_id, finish.event_kind, finish.payload_json, at
        )
        return True

    # -- validation --------------------------------------------------------------

    @staticmethod
    def validated_task(task: TaskEntity | None, what: str = "task") -> TaskEntity:
        if task is None:
            raise coded(ValidationError(f"{what} is required", field=what), f"nil_{what}")
        kind = require_text(task.kind, "task.kind")
        require_max_length(kind, 64, "task.kind")
        owner = require_uuid7(task.owner_session_id, "task.owner_session_id")
        parent = ""
        if task.parent_task_id.strip():
            parent = require_uuid7(task.parent_task_id, "task.parent_task_id")
        require_max_length(task.concurrency_key, 255, "task.concurrency_key")
        return TaskEntity(
            kind=kind.strip(),
            owner_session_id=owner,
            parent_task_id=parent,
            concurrency_key=task.concurrency_key,
        )

    @staticmethod
    def validated_finish(finish: TaskFinish | None) -> TaskFinish:
        if finish is None:
            raise coded(
                ValidationError("task finish is required", field="finish"), "nil_task_finish"
            )
        states = require_states(finish.from_states, "finish.from_states")
        if not states or str(finish.target_state) not in TERMINAL:
            raise ValidationError(
                "task finish requires source states and a terminal target",
                field="finish.target_state" if states else "finish.from_states",
            )
        require_event(finish.event_kind, finish.payload_json)
        return TaskFinish(
            task_id=finish.task_id,
            event_kind=finish.event_kind,
            result=finish.result,
            error_code=finish.error_code,
            error_message=finish.error_message,
            payload_json=finish.payload_json,
            lease_owner=finish.lease_owner,
            target_state=str(finish.target_state),
            from_states=tuple(states),
        )

    # -- creating and reading ----------------------------------------------------

    def create(self, task: TaskEntity | None) -> TaskEntity:
        """Persist a queued task and its ``task_queued`` event (sequence 1) atomically.

        Only kind, owner, parent and concurrency key are taken from ``task``;
        the id, state (queued), timestamps (now) are forced, and lease,
        started/finished and result fields start empty.
        """
        clean = self.validated_task(task)
        task_id, event_id, now = new_id(), new_id(), self.now()
        self.write(lambda cursor: self.insert_task(cursor, clean, task_id, event_id, now), orm=True)
        created = self.get(task_id)
        assert created is not None
        return created

    def get(self, task_id: str) -> TaskEntity | None:
        """Return the task (any kind), or ``None``."""
        row = Task.objects.using(self.using).filter(pk=task_id).values(*TASK_FIELDS).first()
        return None if row is None else task_from_values(row)

    def list_owned(
        self,
        owner_session_id: str,
        kinds: Sequence[str] = (),
        states: Sequence[str] = (),
        limit: int = 0,
    ) -> list[TaskEntity]:
        """Return the owner's tasks, newest first (``updated_at``, ``id``); empty filters match all.

        ``limit`` ≤ 0 or above 100 gives 100.
        """
        qs = Task.objects.using(self.using).owned_by_session(owner_session_id)
        if kinds:
            qs = qs.filter(kind__in=list(kinds))
        if states:
            qs = qs.filter(state__in=require_states(states, "states"))
        rows = qs.newest_first().values(*TASK_FIELDS)[: clamp_limit(limit)]
        return [task_from_values(row) for row in rows]

    def list_by_owner(self, kind: str, owner_session_id: str, limit: int = 0) -> list[TaskEntity]:
        """Return the owner's tasks of one kind, newest first."""
        return self.list_owned(owner_session_id, [kind], (), limit)

    def list_by_states(self, kind: str, states: Sequence[str], limit: int = 0) -> list[TaskEntity]:
        """Return tasks of ``kind`` in any of ``states``, oldest first; ``limit`` ≤ 0 is unlimited.

        An empty ``states`` returns nothing (it is not "any state").
        """
        if not states:
            return []
        qs = (
            Task.objects.using(self.using)
            .filter(kind=kind, state__in=require_states(states, "states"))
            .order_by("created_at", "id")
            .values(*TASK_FIELDS)
        )
        if limit > 0:
            qs = qs[:limit]
        return [task_from_values(row) for row in qs]

    def list_queued_excluding(self, kinds: Sequence[str] = (), limit: int = 0) -> list[TaskEntity]:
        """Return queued tasks whose kind is not in ``kinds``, oldest first, across owners.

        For a runtime to fail work nobody handles. ``limit`` ≤ 0 or above 100 gives 100.
        """
        qs = Task.objects.using(self.using).filter(state=QUEUED)
        if kinds:
            qs = qs.exclude(kind__in=list(kinds))
        rows = qs.order_by("created_at", "id").values(*TASK_FIELDS)[: clamp_limit(limit)]
        return [task_from_values(row) for row in rows]

    # -- claims and leases -------------------------------------------------------

    def claim_queued(self, claim: TaskClaim | None) -> bool:
        """Move a queued task to running under ``claim``'s lease; ``False`` if it was not queued.

        The expiry may already be past (the lease is then dead on arrival).
        """
        return self._claim(claim, QUEUED)

    def claim_interrupted(self, claim: TaskClaim | None) -> bool:
        """Resume an interrupted task as running under a new lease (e.g. ``task_resumed``)."""
        return self._claim(claim, "interrupted")

    def _claim(self, claim: TaskClaim | None, source: str) -> bool:
        if claim is None:
            raise coded(ValidationError("task claim is required", field="claim"), "nil_task_claim")
        if not claim.lease_owner.strip() or claim.lease_expires_at is None:
            raise ValidationError(
                "task claim requires an owner and expiry",
                field="claim.lease_owner" if claim.lease_expires_at else "claim.lease_expires_at",
            )
        require_max_length(claim.lease_owner, 255, "claim.lease_owner")
        require_text(claim.event_kind, "event.kind")
        expires = self._db_time(require_aware(claim.lease_expires_at, "claim.lease_expires_at"))
        event_id, at = new_id(), self._db_time(self.now())

        def claim_it(cursor: SqlCursor) -> bool:
            cursor.execute(
                task_sql.CLAIM, [at, claim.lease_owner, expires, at, claim.task_id, source]
            )
            if cursor.rowcount != 1:
                return False
            self._append_next_event(cursor, claim.task_id, event_id, claim.event_kind, "{}", at)
            return True

        return self.write(claim_it)

    def claim_next_queued(
        self,
        kind: str,
        lease_owner: str,
        lease_expires_at: datetime,
        event_kind: str = "task_started",
    ) -> str | None:
        """Claim the oldest queued task of ``kind``; return its id, or ``None`` when none is queued.

        Not in librecode: the pick-and-claim a worker loop needs, in one write
        transaction, so workers do not all race for the same oldest task. On
        PostgreSQL the pick skips rows other claimers have locked.
        """
        require_text(kind, "task.kind")
        return self._claim_next(kind, lease_owner, lease_expires_at, event_kind)

    def _claim_next(
        self, kind: str, lease_owner: str, lease_expires_at: datetime, event_kind: str
    ) -> str | None:
        if not lease_owner.strip() or lease_expires_at is None:
            raise ValidationError("task claim requires an owner and expiry", field="lease_owner")
        require_text(event_kind, "event.kind")
        expires = self._db_time(require_aware(lease_expires_at, "lease_expires_at"))
        event_id, at = new_id(), self._db_time(self.now())
        claim = task_sql.claim_next(self.vendor)

        def claim_it(cursor: SqlCursor) -> str | None:
            # Pick and claim in one statement; the guard in it still decides.
            cursor.execute(claim, [at, lease_owner, expires, at, kind])
            row = cursor.fetchone()
            if row is None:
                return None
            task_id = str(row[0])
            self._append_next_event(cursor, task_id, event_id, event_kind, "{}", at)
            return task_id

        return self.write(claim_it)

    def renew_lease(
        self, task_id: str, lease_owner: str, lease_expires_at: datetime | None
    ) -> bool:
        """Set a new expiry while ``lease_owner`` still holds a live lease; no event.

        An expired lease cannot be revived. Renewal bumps ``updated_at``.
        :meth:`renew_leases` of one id: one statement serves both (decision 280).
        """
        return bool(self.renew_leases([task_id], lease_owner, lease_expires_at))

    # -- state changes -----------------------------------------------------------

    def transition(
        self,
        task_id: str,
        from_states: Sequence[str],
        target_state: str,
        kind: str,
        payload_json: str = "",
        lease_owner: str = "",
    ) -> bool:
        """Move the task from one of ``from_states`` to ``target_state`` and append ``kind``.

        No transition graph: the caller names the allowed sources. The lease
        fences it like :meth:`renew_lease` and :meth:`finish`: with
        ``lease_owner``, that owner's lease must be live; without, a terminal
        target needs a task without a lease (leased work is settled by its
        owner's :meth:`finish` or by recovery) and any other target but
        ``canceling`` (a request the lease holder answers) needs no *live* lease.
        Moving to ``queued`` clears the lease. ``""`` payload means ``{}``.
        """
        states = require_states(from_states, "from_states")
        if not states:
            raise ValidationError("task transition requires a source state", field="from_states")
        target = require_states([target_state], "target_state")[0]
        payload = payload_json or "{}"
        require_event(kind, payload)
        require_max_length(lease_owner, 255, "lease_owner")
        event_id, now = new_id(), self.now()
        return self.write(
            lambda cursor: self.transition_row(
                cursor,
                task_id,
                states,
                target,
                kind,
                payload,
                event_id,
                now,
                lease_owner=lease_owner,
            )
        )

    def finish(self, finish: TaskFinish | None) -> bool:
        """Settle the task in a terminal state, fenced on its lease; ``False`` if unchanged."""
        clean = self.validated_finish(finish)
        event_id, now = new_id(), self.now()
        # "Now" adapted outside the writer queue: finish_row's own adaptation
        # of the same "now" is then a cache hit.
        self._db_time(now)
        return self.write(lambda cursor: self.finish_row(cursor, clean, event_id, now))

    def finish_many(self, finishes: Sequence[TaskFinish]) -> list[bool]:
        """:meth:`finish` for several tasks in one write transaction; one flag per finish.

        Each is fenced on its own lease exactly as :meth:`finish`; a worker
        settling a batch of short tasks pays one commit instead of one each.
        """
        clean = [self.validated_finish(finish) for finish in finishes]
        if not clean:
            return []
        event_ids, now = [new_id() for _ in clean], self.now()

        def finish_them(cursor: SqlCursor) -> list[bool]:
            return [
                self.finish_row(cursor, finish, event_id, now)
                for finish, event_id in zip(clean, event_ids, strict=True)
            ]

        return self.write(finish_them)

    def recover_expired(self, recovery: TaskRecovery | None) -> list[str]:
        """Settle running/canceling tasks of one kind whose lease is absent or expired.

        ``expires_before`` is inclusive. Runs in batches of 100, each one short
        write transaction; returns the recovered ids in ``created_at, id``
        order. ``result`` is left as the worker last wrote it.
        """
        if recovery is None:
            raise coded(
                ValidationError("task recovery is required", field="recovery"), "nil_task_recovery"
            )
        if str(recovery.target_state) not in TERMINAL:
            raise ValidationError(
                "task recovery requires a terminal target", field="recovery.target_state"
            )
        require_text(recovery.kind, "recovery.kind")
        if recovery.expires_before is None:
            raise ValidationError(
                "recovery.expires_before is required", field="recovery.expires_before"
            )
        expires_before = require_aware(recovery.expires_before, "recovery.expires_before")
        require_event(recovery.event_kind, recovery.payload_json)
        template = TaskFinish(
            event_kind=recovery.event_kind,
            error_code=recovery.error_code,
            error_message=recovery.error_message,
            payload_json=recovery.payload_json,
            target_state=str(recovery.target_state),
        )
        return self.recover_kind(
            kind=recovery.kind, expires_before=expires_before, finish_template=template
        )

    # -- events ------------------------------------------------------------------

    def append_event(self, task_id: str, kind: str, payload_json: str) -> TaskEventEntity:
        """Append an event at the task's next sequence, whatever its state."""
        require_event(kind, payload_json)
        event_id, now = new_id(), self.now()

        def append(cursor: SqlCursor) -> int:
            if self.lock_task(cursor, task_id) is None:
                raise ValidationError(f"task {task_id} does not exist", field="task_id")
            cursor.execute(task_sql.NEXT_SEQUENCE, [task_id])
            sequence = int(cursor.fetchone()[0])
            cursor.execute(
                task_sql.INSERT_EVENT,
                [task_id, sequence, event_id, kind, payload_json, self._db_time(now)],
            )
            return sequence

        sequence = self.write(append)
        return TaskEventEntity(
            event=EventEntity(id=event_id, kind=kind, payload_json=payload_json, created_at=now),
            task_id=task_id,
            sequence=sequence,
        )

    def append_running_events(
        self, task_id: str, lease_owner: str, drafts: Sequence[TaskEventDraft]
    ) -> tuple[list[TaskEventEntity], bool]:
        """Append ``drafts`` while ``lease_owner``'s lease is live: contiguous, one timestamp.

        Every draft is checked before anything is written. An empty list
        returns ``([], True)`` without touching the database; a lost lease
        returns ``([], False)``.
        """
        for n, draft in enumerate(drafts):
            require_event(draft.kind, draft.payload_json, f"drafts[{n}]")
        if not drafts:
            return [], True
        event_ids = [new_id() for _ in drafts]
        now = self.now()
        # The fence and the next sequence in one statement; on PostgreSQL the
        # row lock serialises us against finish/recovery/other appenders.
        fence = task_sql.running_fence(self.vendor)
        at = self._db_time(now)  # outside the queue

        def append(cursor: SqlCursor) -> int | None:
            cursor.execute(fence, [task_id, task_id, lease_owner, at])
            row = cursor.fetchone()
            if row is None:
                return None
            base = int(row[0])
            cursor.executemany(
                task_sql.INSERT_EVENT,
                [
                    (task_id, base + n, event_id, draft.kind, draft.payload_json, at)
                    for n, (event_id, draft) in enumerate(zip(event_ids, drafts, strict=True), 1)
                ],
            )
            return base

        base = self.write(append)
        if base is None:
            return [], False
        return [
            TaskEventEntity(
                event=EventEntity(
                    id=event_id, kind=draft.kind, payload_json=draft.payload_json, created_at=now
                ),
                task_id=task_id,
                sequence=base + n,
            )
            for n, (event_id, draft) in enumerate(zip(event_ids, drafts, strict=True), 1)
        ], True

    def append_running_event(
        self, task_id: str, lease_owner: str, kind: str, payload_json: str
    ) -> TaskEventEntity | None:
        """Append one event while ``lease_owner``'s lease is live; ``None`` when fenced out."""
        events, appended = self.append_running_events(
            task_id, lease_owner, [TaskEventDraft(kind=kind, payload_json=payload_json)]
        )
        return events[0] if appended else None

    def latest_event(self, task_id: str) -> TaskEventEntity | None:
        """Return the task's highest-sequence event, or ``None``."""
        row = (
            TaskEvent.objects.using(self.using)
            .filter(task_id=task_id)
            .order_by("-sequence")
            .values(*EVENT_FIELDS)
            .first()
        )
        return None if row is None else event_from_values(row)

    def list_events(self, task_id: str, after: int = 0, limit: int = 0) -> list[TaskEventEntity]:
        """Return events with ``sequence > after`` in replay order; ``limit`` ≤ 0 gives 100."""
        rows = (
            TaskEvent.objects.using(self.using)
            .filter(task_id=task_id, sequence__gt=after)
            .order_by("sequence")
            .values(*EVENT_FIELDS)[: clamp_limit(limit, cap=None)]
        )
        return [event_from_values(row) for row in rows]

    # -- worker support (agentstore.tasks.worker; docs/tasks.md "Running tasks") ----
    #
    # Not in librecode: what a worker loop needs beyond claim_next_queued —
    # queues, priorities, run_after, retries and lease-expiry requeueing. Each
    # method is still one short write transaction fenced by a guarded UPDATE.

    def enqueue(
        self,
        task: TaskEntity,
        detail: DetailInsert | None = None,
    ) -> TaskEntity:
        """Insert a queued task and its ``task_queued`` event; ``detail`` adds a detail row.

        Unlike :meth:`create` the owner session is optional (a ``django.tasks``
        function has none) and the scheduling fields are taken from ``task``:
        ``queue_name`` (``""`` is ``default``), ``priority`` (-100..100),
        ``run_after`` (aware or ``None``) and ``max_attempts`` (0 is 1).
        ``detail`` (an INSERT and its parameters given the new task's id) runs
        in the same write transaction, so the task and its details appear
        together or not at all. On PostgreSQL a task without owner or parent
        is one statement in autocommit (decision 288).
        """
        kind = require_text(task.kind, "task.kind").strip()
        require_max_length(kind, 64, "task.kind")
        owner = task.owner_session_id.strip()
        if owner:
            require_uuid7(owner, "task.owner_session_id")
        parent = task.parent_task_id.strip()
        if parent:
            require_uuid7(parent, "task.parent_task_id")
        require_max_length(task.concurrency_key, 255, "task.concurrency_key")
        queue = task.queue_name or "default"
        # The one rule for names (no NUL, control characters, lone surrogates or
        # "/"; PostgreSQL refuses NUL outright), as AgentStoreBackend applies it.
        require_name(queue, "task.queue_name", 64)
        for field, value, low, high in (
            ("task.priority", task.priority, -100, 100),
            ("task.max_attempts", task.max_attempts, 0, 2**31 - 1),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ValidationError(
                    f"{field} must be an integer from {low} to {high}", field=field
                )
        max_attempts = task.max_attempts or 1
        run_after = None
        if task.run_after is not None:
            run_after = require_aware(task.run_after, "task.run_after")
        task_id, event_id, now = new_id(), new_id(), self.now()

        def insert_it(cursor: SqlCursor) -> None:
            if owner:
                cursor.execute(task_sql.SESSION_EXISTS, [owner])
                if cursor.fetchone() is None:
                    raise NoSession(f"enqueue task: owner session {owner} does not exist")
            if parent:
                cursor.execute(task_sql.TASK_EXISTS, [parent])
                if cursor.fetchone() is None:
                    raise ValidationError(
                        f"enqueue task: task.parent_task_id {parent} names no task",
                        field="task.parent_task_id",
                    )
            cursor.execute(task_sql.INSERT_TASK, task_row)
            cursor.execute(task_sql.INSERT_EVENT, event_row)
            if detail is not None:
                cursor.execute(detail.statement, detail_row)
            notify.notify(self.using, notify.queue_key(queue))  # idle workers look

        at = self._db_time(now)
        task_row = sql.row(
            Task,
            id=task_id,
            kind=kind,
            state=QUEUED,
            parent_task_id=parent or None,
            owner_session_id=owner or None,
            concurrency_key=task.concurrency_key,
            result="",
            error_code="",
            error_message="",
            created_at=at,
            updated_at=at,
            queue_name=queue,
            priority=task.priority,
            run_after=self._db_time(run_after),
            attempts=0,
            max_attempts=max_attempts,
        )
        event_row = [task_id, 1, event_id, "task_queued", "{}", at]
        detail_row = list(detail.params(task_id)) if detail is not None else []
        if self.vendor == "postgresql" and not owner and not parent:
            # Nothing to look up first: one statement, one round trip (decision 288).
            payload = notify.payload_of(self.using, notify.queue_key(queue))
            statement = task_sql.enqueue_pg(
                detail.statement if detail is not None else "", payload is not None
            )
            params = [*task_row, *event_row, *detail_row]
            if payload is not None:
                params += [notify.CHANNEL, payload]

            self.write(lambda cursor: cursor.execute(statement, params), single=True)
        else:
            self.write(insert_it)
        return TaskEntity(
            id=task_id,
            kind=kind,
            state=QUEUED,
            parent_task_id=parent,
            owner_session_id=owner,
            concurrency_key=task.concurrency_key,
            created_at=now,
            updated_at=now,
            queue_name=queue,
            priority=task.priority,
            run_after=run_after,
            max_attempts=max_attempts,
        )

    def claim_ready(
        self,
        queues: Sequence[str],
        kinds: Sequence[str],
        lease_owner: str,
        lease_expires_at: datetime,
        limit: int = 1,
        event_kind: str = "task_started",
    ) -> list[TaskEntity]:
        """Claim up to ``limit`` ready tasks for ``lease_owner``; return them as claimed.

        Ready: queued, in one of ``queues``, of one of ``kinds`` (empty: any
        kind), and ``run_after`` absent or past. Highest priority first, then
        oldest. Each claim counts an attempt and appends ``event_kind`` with
        ``{"worker_id": …, "attempt": n}``. On PostgreSQL the pick skips rows
        other claimers hold, so workers do not queue behind one another.
        """
        return self.finish_and_claim(
            (), queues, kinds, lease_owner, lease_expires_at, limit, event_kind
        )[1]

    def finish_and_claim(
        self,
        finishes: Sequence[TaskFinish],
        queues: Sequence[str],
        kinds: Sequence[str],
        lease_owner: str,
        lease_expires_at: datetime,
        limit: int = 1,
        event_kind: str = "task_started",
        look_first: bool = True,
        calls: dict[str, tuple[str, str, str]] | None = None,
        workers: int = 0,
    ) -> tuple[list[bool], list[TaskEntity]]:
        """:meth:`finish_many` then :meth:`claim_ready`, in one write transaction.

        A worker settles the task it just ran and claims its next one for the
        price of one commit (the busiest path of a queue of short tasks). One
        flag per finish, each fenced on its own lease, and the claimed tasks.
        ``look_first`` checks for a ready task without the write lock first (an
        idle poll then costs one read); a busy worker passes ``False``.
        ``calls``, when given, receives the function call (``function``,
        ``backend``, ``arguments_json``) of each claimed ``function`` task by
        id, read with the claim: the worker then needs no read of its own
        before it runs the task (decision 286). ``workers`` > 0 claims a fair
        share: at most ceil(ready / ``workers``) of ``limit`` (decision 331).
        """
        if not queues:
            raise ValidationError("claim requires at least one queue", field="queues")
        clean = [self.validated_finish(finish) for finish in finishes]
        finish_ids = [new_id() for _ in clean]
        if not lease_owner.strip() or lease_expires_at is None:
            raise ValidationError("task claim requires an owner and expiry", field="lease_owner")
        require_max_length(lease_owner, 255, "lease_owner")
        require_text(event_kind, "event.kind")
        expires = self._db_time(require_aware(lease_expires_at, "lease_expires_at"))
        limit = max(1, min(limit, RECOVERY_BATCH))
        now = self.now()
        at = self._db_time(now)
        event_ids = [new_id() for _ in range(limit)]
        fair = workers > 0 and limit > 1
        claim = task_sql.claim_ready(len(queues), len(kinds), limit, self.vendor, fair)
        claim_params = [at, lease_owner, expires, at, *queues, *kinds, at]
        if fair:
            claim_params += [workers, workers, *queues, *kinds, at, limit * workers]
        owner_json = json.dumps(lease_owner)

        def claim_them(cursor: SqlCursor) -> tuple[list[bool], list[TaskEntity]]:
            flags = [
                self.finish_row(cursor, finish, finish_id, now)
                for finish, finish_id in zip(clean, finish_ids, strict=True)
            ]
            # Pick and claim in one statement (docs/tasks.md, "Performance").
            cursor.execute(claim, claim_params)
            rows = [self._row_values(row) for row in cursor.fetchall()]
            if not rows:
                return flags, []
            if len(rows) > limit:  # never: the pick runs once (sql.tasks.picked)
                raise AssertionError(f"claimed {len(rows)} tasks, asked for {limit}")
            # RETURNING keeps no order: put the batch back in claim order.
            rows.sort(key=lambda row: (-row["priority"], row["created_at"], row["id"]))
            cursor.executemany(
                task_sql.INSERT_NEXT_EVENT,
                [
                    (
                        row["id"],
                        event_id,
                        event_kind,
                        f'{{"worker_id": {owner_json}, "attempt": {row["attempts"]}}}',
                        at,
                        row["id"],
                    )
                    for row, event_id in zip(rows, event_ids, strict=False)
                ],
            )
            if calls is not None:
                cursor.execute(task_sql.functions_of(len(rows)), [row["id"] for row in rows])
                calls.update(
                    (str(r[0]), (str(r[1]), str(r[2]), str(r[3]))) for r in cursor.fetchall()
                )
            return flags, [task_from_values(row) for row in rows]

        if self.vendor == "postgresql":
            done = self._finish_and_claim_pg(
                clean,
                finish_ids,
                queues,
                kinds,
                limit,
                claim_params,
                event_ids,
                event_kind,
                owner_json,
                now,
                calls,
                fair,
            )
            if done is not None:
                return done
            # A concurrent event append raced the one statement: step by step.
        # An idle worker polls often: look without the write lock first (hand-written,
        # like the claim: the ORM would cost more than the query). On PostgreSQL
        # the one-statement claim above is already that cheap when nothing is ready.
        if look_first and self.vendor != "postgresql":
            with db.cursor(self.using) as cursor:
                cursor.execute(task_sql.ready(len(queues), len(kinds)), [*queues, *kinds, at])
                ready = cursor.fetchone() is not None
            if not ready:
                return (self.finish_many(clean) if clean else []), []
        return self.write(claim_them)

    def _finish_and_claim_pg(
        self,
        finishes: Sequence[TaskFinish],
        finish_ids: Sequence[str],
        queues: Sequence[str],
        kinds: Sequence[str],
        limit: int,
        claim_params: list[Any],
        event_ids: list[str],
        event_kind: str,
        owner_json: str,
        now: datetime,
        calls: dict[str, tuple[str, str, str]] | None,
        fair: bool = False,
    ) -> tuple[list[bool], list[TaskEntity]] | None:
        """:meth:`finish_and_claim` as one statement; ``None`` when it must be re-run in steps.

        Outside a transaction the statement is its own (autocommit): one round
        trip, one commit. Inside one (a test case) it runs in a savepoint (``write``
        refuses a caller's transaction outside tests, as everywhere). The
        one refusal is the event-sequence collision :data:`agentstore.sql.tasks.NEXT_EVENT_OF`
        describes; every fence is the same guarded UPDATE as the stepwise path.
        """
        at = self._db_time(now)
        statement = task_sql.finish_and_claim_pg(
            tuple((len(f.from_states), bool(f.lease_owner)) for f in finishes),
            len(queues),
            len(kinds),
            limit,
            calls is not None,
            fair,
        )
        params: list[Any] = []
        for finish, finish_id in zip(finishes, finish_ids, strict=True):
            params += _finish_params(finish, at)
            params += [finish_id, finish.event_kind, finish.payload_json, at]
        params += claim_params
        params += [event_ids, event_kind, owner_json, at]

        def run(cursor: SqlCursor) -> list[Any]:
            cursor.execute(statement, params)
            return list(cursor.fetchall())

        try:
            # Planned once per connection. In a caller's transaction, write()
            # nests a savepoint: a refused statement rolls back to it and the
            # fallback can still run.
            rows = self.write(run, single=True, prepare=True)
        except IntegrityError:
            return None
        flags = [bool(n) for n in rows[0][0]]
        width = 1 + len(TASK_FIELDS)
        claimed = [self._row_values(row[1:width]) for row in rows if row[1] is not None]
        if calls is not None:
            calls.update(
                (str(row[1]), (str(row[width]), str(row[width + 1]), str(row[width + 2])))
                for row in rows
                if row[1] is not None and row[width] is not None
            )
        if len(claimed) > limit:  # never: the pick runs once (agentstore.sql.tasks.picked)
            raise AssertionError(f"claimed {len(claimed)} tasks, asked for {limit}")
        claimed.sort(key=lambda row: (-row["priority"], row["created_at"], row["id"]))
        return flags, [task_from_values(row) for row in claimed]

    def _row_values(self, row: Sequence[Any]) -> dict[str, Any]:
        """A raw ``SELECT`` of :data:`TASK_FIELDS` as ``values()`` would return it."""
        values = dict(zip(TASK_FIELDS, row, strict=True))
        for name in task_sql.DATETIME_FIELDS:
            # SQLite's own cursor may hand back the stored text, Django's a naive
            # UTC datetime: the one timestamp path (agentstore/sql) reads both.
            value = values[name]
            values[name] = None if value is None else sql.utc(value)
        return values

    def renew_leases(
        self, task_ids: Sequence[str], lease_owner: str, lease_expires_at: datetime | None
    ) -> list[str]:
        """:meth:`renew_lease` for several tasks in one write; return the ids still held."""
        if not task_ids:
            return []
        if not (lease_owner or "").strip() or lease_expires_at is None:
            raise ValidationError("lease renewal requires an owner and expiry", field="lease_owner")
        expires = self._db_time(require_aware(lease_expires_at, "lease_expires_at"))
        at = self._db_time(self.now())

        ids = list(dict.fromkeys(task_ids))
        # One statement for every held lease (a worker holds at most a batch).
        statement = task_sql.renew_many(len(ids))

        def renew(cursor: SqlCursor) -> list[str]:
            cursor.execute(statement, [expires, at, *ids, lease_owner, at])
            kept = {str(row[0]) for row in cursor.fetchall()}
            return [task_id for task_id in ids if task_id in kept]

        return self.write(renew)

    def retry(
        self,
        task_id: str,
        lease_owner: str,
        run_after: datetime,
        *,
        error_code: str = "",
        error_message: str = "",
        event_kind: str = "task_retry_scheduled",
        payload_json: str = "{}",
    ) -> bool:
        """Put a running task back in its queue until ``run_after``; fenced on the live lease.

        The lease is released and the error kept on the task (a later claim
        clears it); ``False`` when ``lease_owner`` no longer holds the task.
        """
        require_event(event_kind, payload_json)
        when = self._db_time(require_aware(run_after, "run_after"))
        event_id, at = new_id(), self._db_time(self.now())

        def retry_it(cursor: SqlCursor) -> bool:
            cursor.execute(
                task_sql.RETRY, [when, error_code, error_message, at, task_id, lease_owner, at]
            )
            if cursor.rowcount != 1:
                return False
            self._append_next_event(cursor, task_id, event_id, event_kind, payload_json, at)
            return True

        return self.write(retry_it)

    def requeue_expired(
        self,
        expires_before: datetime,
        kinds: Sequence[str] = (),
        *,
        max_crashes: int | None = None,
    ) -> list[str]:
        """Queue again running tasks whose lease expired and that have crash budget left.

        At-least-once delivery for work whose worker died: each such task goes
        back to ``queued`` with its crash counted (``crashes`` + 1; its retry
        attempts are not spent: a crash is not the task's failure), event
        ``task_lease_expired`` naming the lost worker, and the dead worker's
        late writes stay fenced out because it no longer holds the lease. A
        task is requeued while its crashes so far are fewer than
        ``max_crashes`` (default: ``AGENTSTORE["TASK_MAX_CRASHES"]``); the rest
        are left for :meth:`recover_expired`. ``kinds`` empty means every kind
        (``agentstore.tasks.recovery`` names the kinds that are rerun).
        Returns the requeued ids.
        """
        before = self._db_time(require_aware(expires_before, "expires_before"))
        budget = crash_budget() if max_crashes is None else max_crashes
        select = task_sql.expired_requeueable(len(kinds), self.vendor)
        requeued: list[str] = []
        while True:
            event_ids = [new_id() for _ in range(RECOVERY_BATCH)]
            at = self._db_time(self.now())
            selected, changed = self.write(
                partial(
                    self._requeue_batch,
                    select,
                    [before, budget, *kinds],
                    before,
                    budget,
                    event_ids,
                    at,
                ),
            )
            requeued += changed
            if selected < RECOVERY_BATCH or not changed:
                return requeued

    def _requeue_batch(
        self,
        select: str,
        params: list[Any],
        before: Any,
        budget: int,
        event_ids: list[str],
        at: Any,
        cursor: SqlCursor,
    ) -> tuple[int, list[str]]:
        """One batch of :meth:`requeue_expired` (one write transaction): selected count, ids."""
        cursor.execute(select, params)
        candidates = cursor.fetchall()
        return len(candidates), [
            str(task_id)
            for (task_id, owner, crashes), event_id in zip(candidates, event_ids, strict=False)
            if self._requeue_row(cursor, task_id, owner, crashes, budget, before, event_id, at)
        ]

    def _requeue_row(
        self,
        cursor: SqlCursor,
        task_id: str,
        owner: str,
        crashes: int,
        budget: int,
        before: Any,
        event_id: str,
        at: Any,
    ) -> bool:
        """Queue one crashed task again, its crash counted; event ``task_lease_expired``."""
        count = int(crashes) + 1
        message = (
            f"the worker running the task went away (lease expired): crash {count} "
            f"of {budget} allowed, queued to run again"
        )
        cursor.execute(task_sql.REQUEUE_EXPIRED, [message, at, task_id, owner, before, budget])
        if cursor.rowcount != 1:
            return False
        payload = {
            "worker_id": owner,
            "error_code": "lease_expired",
            "crashes": count,
            "max_crashes": budget,
            **crash_error(message),
        }
        self._append_next_event(
            cursor, task_id, event_id, "task_lease_expired", json.dumps(payload), at
        )
        return True

    def release(self, task_id: str, lease_owner: str) -> bool:
        """Give a claimed task back to its queue unrun (a stopping worker); fenced on the lease.

        The claim's attempt is not counted; event ``task_released``.
        """
        event_id, at = new_id(), self._db_time(self.now())
        payload = json.dumps({"worker_id": lease_owner})

        def release_it(cursor: SqlCursor) -> bool:
            cursor.execute(task_sql.RELEASE, [at, task_id, lease_owner, at])
            if cursor.rowcount != 1:
                return False
            self._append_next_event(cursor, task_id, event_id, "task_released", payload, at)
            return True

        return self.write(release_it)
