"""Ordered task events: appending them (fenced on the lease or not) and reading them back.

Every task has its own event sequence, 1..n with ``task_queued`` as 1; the
lifecycle's own events (``task_started``, ``task_succeeded`` …) are appended by
the write that changes the state. These are the other appends and the reads::

    tasks.append_event(task_id, "note", '{"by": "admin"}')          # any state
    events, held = tasks.append_running_events(task_id, "worker-1", drafts)
    if not held: ...                       # the lease expired or was taken: nothing written
    page = tasks.list_events(task_id, after=last_seen)              # replay order

``append_running_events`` is the worker's progress path: the lease fence and
the next sequence are one statement, and the drafts are inserted contiguously
with one timestamp, so a worker that lost its lease writes nothing. Sequences
are ``max(sequence) + 1`` inside the write transaction; the task row is locked
first (``lock_task`` or the fence), which keeps two appenders from computing the
same number (repository.py, "How exclusivity works").
"""

from __future__ import annotations

from collections.abc import Sequence

from agentstore.db import SqlCursor
from agentstore.exceptions import ValidationError
from agentstore.ids import new_id
from agentstore.models import TaskEvent
from agentstore.sql import tasks as task_sql
from agentstore.stores.base import lookup, none, nothing
from agentstore.tasks.lifecycle.rows import TaskRows
from agentstore.tasks.lifecycle.vocabulary import (
    EVENT_FIELDS,
    clamp_limit,
    event_from_values,
    require_event,
)
from agentstore.types.tasks import EventEntity, TaskEventDraft, TaskEventEntity

__all__ = ["TaskEvents"]


class TaskEvents(TaskRows):
    """Appends to a task's event sequence and reads of it."""

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

    @lookup("task_id", missing=none)
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

    @lookup("task_id", missing=nothing)
    def list_events(self, task_id: str, after: int = 0, limit: int = 0) -> list[TaskEventEntity]:
        """Return events with ``sequence > after`` in replay order; ``limit`` ≤ 0 gives 100."""
        rows = (
            TaskEvent.objects.using(self.using)
            .filter(task_id=task_id, sequence__gt=after)
            .order_by("sequence")
            .values(*EVENT_FIELDS)[: clamp_limit(limit, cap=None)]
        )
        return [event_from_values(row) for row in rows]
