"""Which tasks a user may see: those whose owner session the user may see.

from agentstore.selectors.tasks import tasks_visible_to

running = tasks_visible_to(request.user).filter(state="running")
"""

from __future__ import annotations

from typing import Any

from agentstore.models import Task
from agentstore.models.tasks import TaskQuerySet
from agentstore.selectors.sessions import is_staff, sessions_visible_to

__all__ = ["tasks_visible_to", "visible_task"]


def tasks_visible_to(user: Any, *, using: str = "default") -> TaskQuerySet:
    """Return the tasks ``user`` may see: staff all, others those of their own sessions."""
    tasks: TaskQuerySet = Task.objects.using(using).all()
    if is_staff(user):
        return tasks
    return tasks.filter(owner_session__in=sessions_visible_to(user, using=using).values("pk"))


def visible_task(user: Any, task_id: str, *, using: str = "default") -> Task | None:
    """Return the task if ``user`` may see it, else ``None`` (missing or someone else's)."""
    return tasks_visible_to(user, using=using).filter(pk=task_id).first()
