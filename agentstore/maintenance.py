"""Housekeeping: counts for operators, pruning old data, reclaiming space.

    stats()                                    # {"sessions": {"tree": 3, …}, "tasks": {…}, …}
    prune_sessions(before, dry_run=True)       # ids that would go
    prune_tasks(older_than=timedelta(days=30))
    vacuum()

Pruning deletes through the stores, one short transaction per session or per
chunk of tasks, so it never holds the write lock for long and cascades exactly
as a normal delete does. Held sessions are skipped (someone has them open).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Count, Q, QuerySet
from django.utils import timezone

from agentstore import db
from agentstore.exceptions import NoSession
from agentstore.models import (
    Checkpoint,
    Document,
    Entry,
    Grant,
    Holder,
    MessagePart,
    Ref,
    Session,
    Step,
    Task,
    TaskEvent,
)
from agentstore.models.tasks import ACTIVE_STATES, LEASED_STATES, TERMINAL_STATES

__all__ = ["prune_sessions", "prune_tasks", "stats", "vacuum"]

Progress = Callable[[int, int], None]


def stats(*, using: str = DEFAULT_DB_ALIAS) -> dict[str, Any]:
    """Row counts by kind and state, holds, and expired leases."""
    now = timezone.now()
    by_kind = dict(
        Session.objects.using(using).values_list("kind").annotate(n=Count("id")).order_by()
    )
    by_state = dict(
        Task.objects.using(using).values_list("state").annotate(n=Count("id")).order_by()
    )
    expired = (
        Task.objects.using(using)
        .filter(state__in=LEASED_STATES)
        .filter(Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lte=now))
        .count()
    )
    return {
        "sessions": {kind: by_kind.get(kind, 0) for kind in ("tree", "loop", "log", "graph")},
        "entries": Entry.objects.using(using).count(),
        "message_parts": MessagePart.objects.using(using).count(),
        "steps": Step.objects.using(using).count(),
        "grants": Grant.objects.using(using).count(),
        "holds": Holder.objects.using(using).count(),
        "refs": Ref.objects.using(using).count(),
        "documents": Document.objects.using(using).count(),
        "checkpoints": Checkpoint.objects.using(using).count(),
        "tasks": {state: by_state.get(state, 0) for state in sorted(by_state)},
        "task_events": TaskEvent.objects.using(using).count(),
        "expired_leases": expired,
    }


def prune_sessions(
    before: datetime,
    *,
    dry_run: bool = False,
    kinds: tuple[str, ...] = ("tree", "loop", "log", "graph"),
    using: str = DEFAULT_DB_ALIAS,
    progress: Progress | None = None,
) -> list[str]:
    """Delete sessions not updated since ``before``; return their ids.

    Held sessions and sessions that still own active tasks are kept.
    """
    candidates = list(
        Session.objects.using(using)
        .filter(updated_at__lt=before, kind__in=kinds, holder__isnull=True)
        .exclude(owned_tasks__state__in=ACTIVE_STATES)
        .order_by("updated_at", "id")
        .values_list("id", "kind")
        .distinct()
    )
    if dry_run:
        return [session_id for session_id, _ in candidates]
    from agentstore.stores import SessionStore

    sessions = SessionStore(using=using)
    deleted = []
    for number, (session_id, kind) in enumerate(candidates, start=1):
        try:
            sessions.delete(session_id, kind)
        except NoSession:
            pass  # deleted meanwhile (by another prune, the admin, the API)
        else:
            deleted.append(session_id)
        if progress is not None:
            progress(number, len(candidates))
    return deleted


def prune_tasks(
    older_than: timedelta,
    *,
    dry_run: bool = False,
    chunk: int = 500,
    using: str = DEFAULT_DB_ALIAS,
    progress: Progress | None = None,
) -> int:
    """Delete finished tasks (and their events) that finished more than ``older_than`` ago.

    Tasks with an unfinished child task, and agent tasks linked to a workflow
    that is still going (a resumed workflow looks them up), are kept.
    """
    cutoff = timezone.now() - older_than
    doomed = (
        Task.objects.using(using)
        .filter(state__in=TERMINAL_STATES, finished_at__lt=cutoff)
        .exclude(child_tasks__state__in=ACTIVE_STATES)
        .exclude(agent__workflow_link__workflow__task__state__in=ACTIVE_STATES)
        .order_by("finished_at", "id")
    )
    ids = list(doomed.values_list("id", flat=True).distinct())
    if dry_run:
        return len(ids)
    for start in range(0, len(ids), chunk):
        batch = ids[start : start + chunk]

        rows = Task.objects.using(using).filter(pk__in=batch)
        # One short transaction per chunk keeps the write lock brief.
        db.write(partial(_delete_rows, rows), using=using, orm=True)
        if progress is not None:
            progress(min(start + chunk, len(ids)), len(ids))
    return len(ids)


def _delete_rows(rows: QuerySet[Any], cursor: db.SqlCursor) -> None:
    rows.delete()


def vacuum(*, using: str = DEFAULT_DB_ALIAS) -> None:
    """Give freed space back to the file system (SQLite ``VACUUM``; PostgreSQL ``VACUUM``)."""
    connection = connections[using]
    connection.ensure_connection()
    if connection.in_atomic_block:
        raise RuntimeError("VACUUM cannot run inside a transaction")
    with db.cursor_on(connection) as cursor:
        cursor.execute("VACUUM")
