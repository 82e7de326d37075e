"""The words every task module shares: states, page sizes, rows as entities, input checks.

The lifecycle modules beside this one, and the agent, tool and workflow
repositories built on them, speak of tasks in the same terms::

    from agentstore.tasks.lifecycle.vocabulary import TERMINAL, clamp_limit, task_from_values

    if task.state in TERMINAL: ...          # settled for good: no lease, finished_at set
    entity = task_from_values(row)          # a ``values(*TASK_FIELDS)`` row as a TaskEntity
    limit = clamp_limit(limit)              # ≤ 0 or above 100: a page of 100

Nothing here touches the database. The checks raise ``ValidationError`` (with
the field it names) before any transaction opens, so bad input writes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agentstore.exceptions import ValidationError
from agentstore.models import Task
from agentstore.models.tasks import TaskState
from agentstore.sql import tasks as task_sql
from agentstore.types.tasks import EventEntity, TaskEntity, TaskEventEntity
from agentstore.validation import require_json, require_max_length, require_text

__all__ = [
    "ALL_STATES",
    "CANCELING",
    "EVENT_FIELDS",
    "LEASED",
    "LIST_LIMIT",
    "QUEUED",
    "RECOVERY_BATCH",
    "RUNNING",
    "TASK_FIELDS",
    "TERMINAL",
    "clamp_limit",
    "coded",
    "event_from_values",
    "require_event",
    "require_states",
    "task_from_model",
    "task_from_values",
]

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
