"""Reading tasks back: one by id, an owner's, a kind's in some states, the unhandled queue.

Plain ORM reads (no write transaction, no lease): what the API, the admin and
the composite repositories show::

    task = tasks.get(task_id)                                  # any kind, or None
    mine = tasks.list_owned(session_id, kinds=["tool"])        # newest first, ≤ 100
    stuck = tasks.list_by_states("agent", ["interrupted"])     # oldest first
    orphans = tasks.list_queued_excluding(["function"])        # kinds nobody runs

Every read returns :class:`agentstore.types.tasks.TaskEntity` values, never
ORM rows. A listing's ``limit`` ≤ 0 (or above 100) gives a page of 100, except
``list_by_states``, where it means "all".
"""

from __future__ import annotations

from collections.abc import Sequence

from agentstore.models import Task
from agentstore.stores.base import lookup, none, nothing
from agentstore.tasks.lifecycle.rows import TaskRows
from agentstore.tasks.lifecycle.vocabulary import (
    QUEUED,
    TASK_FIELDS,
    clamp_limit,
    require_states,
    task_from_values,
)
from agentstore.types.tasks import TaskEntity

__all__ = ["TaskReads"]


class TaskReads(TaskRows):
    """Tasks read back as entities (the ORM; no transaction of their own)."""

    @lookup("task_id", missing=none)
    def get(self, task_id: str) -> TaskEntity | None:
        """Return the task (any kind), or ``None``."""
        row = Task.objects.using(self.using).filter(pk=task_id).values(*TASK_FIELDS).first()
        return None if row is None else task_from_values(row)

    @lookup("owner_session_id", "kinds", missing=nothing)
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

    @lookup("kind", "owner_session_id", missing=nothing)
    def list_by_owner(self, kind: str, owner_session_id: str, limit: int = 0) -> list[TaskEntity]:
        """Return the owner's tasks of one kind, newest first."""
        return self.list_owned(owner_session_id, [kind], (), limit)

    @lookup("kind", missing=nothing)
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

    @lookup(excluded=("kinds",))
    def list_queued_excluding(self, kinds: Sequence[str] = (), limit: int = 0) -> list[TaskEntity]:
        """Return queued tasks whose kind is not in ``kinds``, oldest first, across owners.

        For a runtime to fail work nobody handles. ``limit`` ≤ 0 or above 100 gives 100.
        """
        qs = Task.objects.using(self.using).filter(state=QUEUED)
        if kinds:
            qs = qs.exclude(kind__in=list(kinds))
        rows = qs.order_by("created_at", "id").values(*TASK_FIELDS)[: clamp_limit(limit)]
        return [task_from_values(row) for row in rows]
