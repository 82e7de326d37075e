"""What the queue looks like: running workers and the depth of each queue.

    from agentstore.selectors.workers import queue_depths, worker_rows

Read-only (the admin and ``manage.py agentstore workers`` show these).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.db.models import Count, Q

from agentstore.models import Task, Worker
from agentstore.models.tasks import LEASED_STATES

__all__ = ["QueueDepth", "WorkerRow", "current_tasks", "queue_depths", "worker_rows"]


@dataclass(frozen=True, slots=True)
class WorkerRow:
    id: str
    host: str
    pid: int
    queues: str
    started_at: datetime
    heartbeat_at: datetime
    tasks_done: int
    #: Ids of the tasks this worker holds a lease on now (usually one).
    current_tasks: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class QueueDepth:
    queue_name: str
    #: Queued (ready now or deferred) and leased (running/canceling) tasks.
    queued: int
    running: int


def current_tasks(worker_ids: list[str], *, using: str = "default") -> dict[str, list[str]]:
    """The leased task ids of each worker (a worker's id is its tasks' lease owner)."""
    held: dict[str, list[str]] = {}
    rows = (
        Task.objects.using(using)
        .filter(state__in=LEASED_STATES, lease_owner__in=worker_ids)
        .order_by("started_at", "id")
        .values_list("lease_owner", "id")
    )
    for owner, task_id in rows[: 10 * max(len(worker_ids), 1)]:
        held.setdefault(str(owner), []).append(task_id)
    return held


def worker_rows(*, using: str = "default", limit: int = 500) -> list[WorkerRow]:
    """Registered workers (host, pid, id order) with the tasks they hold."""
    workers = list(Worker.objects.using(using).all()[:limit])
    held = current_tasks([w.id for w in workers], using=using)
    return [
        WorkerRow(
            id=w.id,
            host=w.host,
            pid=w.pid,
            queues=w.queues,
            started_at=w.started_at,
            heartbeat_at=w.heartbeat_at,
            tasks_done=w.tasks_done,
            current_tasks=tuple(held.get(w.id, ())),
        )
        for w in workers
    ]


def queue_depths(*, using: str = "default") -> list[QueueDepth]:
    """Per queue: how many tasks wait and how many run, for queues with either."""
    rows = (
        Task.objects.using(using)
        .filter(state__in=["queued", *LEASED_STATES])
        .values("queue_name")
        .annotate(
            queued=Count("id", filter=Q(state="queued")),
            running=Count("id", filter=Q(state__in=LEASED_STATES)),
        )
        .order_by("queue_name")
    )
    return [QueueDepth(r["queue_name"], r["queued"], r["running"]) for r in rows]
