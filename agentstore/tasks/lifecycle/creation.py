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

from agentstore import notify
from agentstore.exceptions import ValidationError
from agentstore.ids import new_id
from agentstore.sql import tasks as task_sql
from agentstore.tasks.lifecycle.reads import TaskReads
from agentstore.types.tasks import TaskEntity
from agentstore.validation import (
    require_aware,
    require_max_length,
    require_name,
    require_storable_text,
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
        rows = self.queued_rows(clean, task_id, event_id, now)
        self.write(lambda cursor: self.insert_queued(cursor, rows))
        return rows.entity  # what was inserted, as a read gives it (no read back)

    def check_enqueue(self, task: TaskEntity) -> TaskEntity:
        """The task :meth:`enqueue` would insert, its fields checked and normalised.

        ``ValidationError`` for what :meth:`enqueue` refuses, before anything is
        written: a caller with writes of its own to make first checks here.
        """
        kind = require_text(task.kind, "task.kind").strip()
        require_max_length(kind, 64, "task.kind")
        owner = task.owner_session_id.strip()
        if owner:
            # Any session's id (a run's session may be an SDK conversation's own
            # id); it must name a session, which insert_queued checks.
            require_storable_text(owner, "task.owner_session_id", 255)
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
        run_after = None
        if task.run_after is not None:
            run_after = require_aware(task.run_after, "task.run_after")
        return TaskEntity(
            kind=kind,
            owner_session_id=owner,
            parent_task_id=parent,
            concurrency_key=task.concurrency_key,
            queue_name=queue,
            priority=task.priority,
            run_after=run_after,
            max_attempts=task.max_attempts or 1,
        )

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
        clean = self.check_enqueue(task)
        owner, parent, queue = clean.owner_session_id, clean.parent_task_id, clean.queue_name
        kind, max_attempts, run_after = clean.kind, clean.max_attempts, clean.run_after
        task_id, event_id, now = new_id(), new_id(), self.now()
        rows = self.queued_rows(
            TaskEntity(
                kind=kind,
                owner_session_id=owner,
                parent_task_id=parent,
                concurrency_key=task.concurrency_key,
            ),
            task_id,
            event_id,
            now,
            queue=queue,
            run_after=run_after,
            max_attempts=max_attempts,
            priority=task.priority,
        )
        detail_row = list(detail.params(task_id)) if detail is not None else []
        detail_statement = None if detail is None else (detail.statement, detail_row)
        if self.vendor == "postgresql" and not owner and not parent:
            # Nothing to look up first: one statement, one round trip (decision record 0047).
            payload = notify.payload_of(self.using, notify.queue_key(queue))
            statement = task_sql.enqueue_pg(
                detail.statement if detail is not None else "", payload is not None
            )
            params = [*rows.task, *rows.event, *detail_row]
            if payload is not None:
                params += [notify.CHANNEL, payload]

            self.write(lambda cursor: cursor.execute(statement, params), single=True)
        else:
            self.write(lambda cursor: self.insert_queued(cursor, rows, detail_statement))
        return rows.entity
