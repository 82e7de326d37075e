"""Creating tasks: ``create`` for an owner's task, ``enqueue`` for a worker's queue.

Both insert a ``queued`` task and its ``task_queued`` event (sequence 1) in one
write transaction, and wake idle workers (``agentstore.notify``)::

    task = tasks.create(TaskEntity(kind="agent", owner_session_id=sid))
    job = tasks.enqueue(
        TaskEntity(kind="function", queue_name="emails", priority=10, run_after=later),
        detail=DetailInsert(task_sql.INSERT_FUNCTION, lambda task_id: [task_id, ...]),
    )

``create`` takes only kind, owner, parent and concurrency key (librecode's
contract; the owner session must exist) and reads the task back. ``enqueue``
also takes the scheduling fields a worker loop needs — queue, priority,
``run_after``, ``max_attempts`` — allows a task without owner (a
``django.tasks`` function has none), and inserts the kind's detail row
(:class:`DetailInsert`) in the same transaction, so a task and its details
appear together or not at all. Ids and "now" are made before the transaction
because a busy SQLite write may be re-run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from agentstore import notify, sql
from agentstore.db import SqlCursor
from agentstore.exceptions import NoSession, ValidationError
from agentstore.ids import new_id
from agentstore.models import Task
from agentstore.sql import tasks as task_sql
from agentstore.tasks.lifecycle.reads import TaskReads
from agentstore.tasks.lifecycle.vocabulary import QUEUED
from agentstore.types.tasks import TaskEntity
from agentstore.validation import (
    require_aware,
    require_max_length,
    require_name,
    require_text,
    require_uuid7,
)

__all__ = ["DetailInsert", "TaskCreation"]


class DetailInsert(NamedTuple):
    """One detail row inserted with a task (:meth:`TaskRepository.enqueue`).

    ``statement`` is a single-row ``INSERT … VALUES`` (``%s`` placeholders);
    ``params(task_id)`` its parameters once the task's id is known.
    """

    statement: str
    params: Callable[[str], Sequence[Any]]


class TaskCreation(TaskReads):
    """Queued tasks and their first event, inserted in one write transaction."""

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
        is one statement in autocommit (decision record 0047).
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
            # Nothing to look up first: one statement, one round trip (decision record 0047).
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
