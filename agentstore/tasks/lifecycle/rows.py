"""The base of TaskRepository: the pieces of a task write that run inside a transaction.

Every lifecycle module (claims, settling, events, expired leases …) writes
through these, and so do the composite repositories. ``AgentTaskRepository``,
``ToolTaskRepository`` and ``WorkflowRepository`` compose their writes from
them inside one write transaction they open with ``write()``: a tool task's
finish is ``finish_row`` plus its outcome row, an agent task's insert is
``insert_task`` plus its agent row::

    clean = tasks.validated_finish(finish)             # check first: nothing written yet
    event_id, now = new_id(), tasks.now()              # outside: a busy write may re-run

    def settle(cursor):
        if not tasks.finish_row(cursor, clean, event_id, now):
            return False                               # lost the race or the lease
        ...                                            # the composite's own row
        return True

    tasks.write(settle, orm=True)

They are public so no class reaches into another's privates, but they are not
for application code: nothing here opens a transaction or validates input
(``validated_task``/``validated_finish`` do that first). docs/tasks.md,
"Composite repositories", lists them.

The class also holds what every hand-written task statement needs: the
backend's ``vendor`` (cached per alias: the hot paths ask on every call),
datetimes adapted the way the ORM would (``_db_time``, so rows written here read
back through the ORM unchanged) and the append of a task's next event.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

from django.db import DEFAULT_DB_ALIAS, connections

from agentstore import notify, sql
from agentstore.db import SqlCursor
from agentstore.exceptions import NoSession, ValidationError
from agentstore.models import Task
from agentstore.sql import tasks as task_sql
from agentstore.stores.base import Clock, StoreBase
from agentstore.tasks.lifecycle.vocabulary import (
    CANCELING,
    QUEUED,
    RUNNING,
    TERMINAL,
    coded,
    require_event,
    require_states,
)
from agentstore.types.tasks import TaskEntity, TaskFinish
from agentstore.validation import require_max_length, require_text, require_uuid7

__all__ = ["QueuedRows", "TaskRows"]


class QueuedRows(NamedTuple):
    """A queued task's rows (``sql.row(Task, …)`` and its first event's parameters), and
    what is checked before they are inserted: the owner session and parent task (``""``:
    none) and the queue whose workers are woken."""

    owner: str
    parent: str
    queue: str
    task: list[Any]
    event: list[Any]
    #: The task as a read of these rows gives it (nothing is read back).
    entity: TaskEntity


class TaskRows(StoreBase):
    """Connection plumbing, input validation and the in-transaction pieces of a task write."""

    def __init__(self, *, using: str = DEFAULT_DB_ALIAS, clock: Clock | None = None) -> None:
        super().__init__(using=using, clock=clock)
        self._vendors: dict[str, str] = {}
        # The last datetime _db_time adapted and its database value: a
        # settle-and-claim adapts the same "now" for every statement it sends.
        self._last_time: tuple[datetime | None, Any] = (None, None)

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

    @staticmethod
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

    def insert_task(
        self, cursor: SqlCursor, task: TaskEntity, task_id: str, event_id: str, now: datetime
    ) -> None:
        """Insert a queued task and its ``task_queued`` event (inside a write)."""
        self.insert_queued(cursor, self.queued_rows(task, task_id, event_id, now))

    def queued_rows(
        self,
        task: TaskEntity,
        task_id: str,
        event_id: str,
        now: datetime,
        *,
        queue: str = "default",
        run_after: datetime | None = None,
        max_attempts: int = 1,
        priority: int = 0,
    ) -> QueuedRows:
        """The rows a queued task starts as (its id, owner and parent already validated)."""
        at = self._db_time(now)
        return QueuedRows(
            owner=task.owner_session_id or "",
            parent=task.parent_task_id or "",
            queue=queue,
            task=sql.row(
                Task,
                id=task_id,
                kind=task.kind,
                state=QUEUED,
                parent_task_id=task.parent_task_id or None,
                owner_session_id=task.owner_session_id or None,
                concurrency_key=task.concurrency_key,
                result="",
                error_code="",
                error_message="",
                created_at=at,
                updated_at=at,
                queue_name=queue,
                priority=priority,
                run_after=self._db_time(run_after),
                attempts=0,
                max_attempts=max_attempts,
            ),
            event=[task_id, 1, event_id, "task_queued", "{}", at],
            entity=TaskEntity(
                id=task_id,
                kind=task.kind,
                state=QUEUED,
                parent_task_id=task.parent_task_id,
                owner_session_id=task.owner_session_id,
                concurrency_key=task.concurrency_key,
                created_at=now,
                updated_at=now,
                queue_name=queue,
                priority=priority,
                run_after=run_after,
                max_attempts=max_attempts,
            ),
        )

    def insert_queued(
        self, cursor: SqlCursor, rows: QueuedRows, detail: tuple[str, Sequence[Any]] | None = None
    ) -> None:
        """The one body that inserts a queued task: its owner and parent checked, the task,
        its first event and ``detail`` (a statement and its parameters) inserted, idle
        workers woken at commit. Runs inside the caller's write transaction."""
        if rows.owner:
            cursor.execute(task_sql.SESSION_EXISTS, [rows.owner])
            if cursor.fetchone() is None:
                raise NoSession(f"insert task: owner session {rows.owner} does not exist")
        if rows.parent:
            cursor.execute(task_sql.TASK_EXISTS, [rows.parent])
            if cursor.fetchone() is None:
                raise ValidationError(
                    f"insert task: task.parent_task_id {rows.parent} names no task",
                    field="task.parent_task_id",
                )
        cursor.execute(task_sql.INSERT_TASK, rows.task)
        cursor.execute(task_sql.INSERT_EVENT, rows.event)
        if detail is not None:
            cursor.execute(*detail)
        notify.notify(self.using, notify.queue_key(rows.queue))  # idle workers look

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
        cursor.execute(statement, self._finish_params(finish, at))
        if cursor.rowcount != 1:
            return False
        self._append_next_event(
            cursor, finish.task_id, event_id, finish.event_kind, finish.payload_json, at
        )
        return True

    def cancel_row(
        self, cursor: SqlCursor, task_id: str, payload_json: str, event_id: str, now: datetime
    ) -> str:
        """Ask for the task's cancel inside the caller's transaction; the state it is in now.

        The one cancel policy: a queued task is canceled at once (``task_canceled``);
        a running one is asked to stop (``canceling``, ``task_canceling``): its
        worker answers the request — settles it canceled, or finishes it
        anyway. ``""`` when the task is in neither state (it can no longer be
        canceled, or there is none).
        """
        if self.transition_row(
            cursor, task_id, [QUEUED], "canceled", "task_canceled", payload_json, event_id, now
        ):
            return "canceled"
        if self.transition_row(
            cursor, task_id, [RUNNING], CANCELING, "task_canceling", payload_json, event_id, now
        ):
            return CANCELING
        return ""

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
