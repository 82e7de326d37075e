"""Which tasks a user may see, and the details of a task the pages show beside its row.

    from agentstore.selectors.tasks import tasks_visible_to, function_call, workflow_link

    running = tasks_visible_to(request.user).filter(state="running")
    call = function_call(task_id)      # a django.tasks call: function path, backend, arguments
    link = workflow_link(task_id)      # the workflow (and node) that launched an agent task

Reads only; the admin's task page and ``manage.py agentstore task`` use them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import DEFAULT_DB_ALIAS

from agentstore.models import FunctionTask, Task, WorkflowAgentTask
from agentstore.models.tasks import TaskQuerySet
from agentstore.selectors.sessions import is_staff, sessions_visible_to
from agentstore.validation import could_be_stored

__all__ = [
    "FunctionCall",
    "WorkflowLink",
    "function_call",
    "tasks_visible_to",
    "visible_task",
    "workflow_link",
]


@dataclass(frozen=True, slots=True)
class FunctionCall:
    """The call a ``function`` task (a ``django.tasks`` ``@task``) stands for."""

    function: str
    backend: str
    arguments_json: str


@dataclass(frozen=True, slots=True)
class WorkflowLink:
    """Where a workflow launched an agent task: the run, its node key and invocation."""

    workflow_id: str
    workflow_name: str
    node_key: str
    invocation_index: int
    sequence: int


def function_call(task_id: str, *, using: str = DEFAULT_DB_ALIAS) -> FunctionCall | None:
    """The call of a function task, or ``None`` (another kind, or no such task)."""
    row = (
        FunctionTask.objects.using(using)
        .filter(pk=task_id)
        .values_list("function", "backend", "arguments_json")
        .first()
    )
    return None if row is None else FunctionCall(*row)


def workflow_link(agent_task_id: str, *, using: str = DEFAULT_DB_ALIAS) -> WorkflowLink | None:
    """The workflow link of an agent task, or ``None`` when no workflow launched it."""
    row = (
        WorkflowAgentTask.objects.using(using)
        .filter(agent_task_id=agent_task_id)
        .values_list("workflow_id", "workflow__name", "node_key", "invocation_index", "sequence")
        .first()
    )
    return None if row is None else WorkflowLink(*row)


def tasks_visible_to(user: Any, *, using: str = "default") -> TaskQuerySet:
    """Return the tasks ``user`` may see: staff all, others those of their own sessions."""
    tasks: TaskQuerySet = Task.objects.using(using).all()
    if is_staff(user):
        return tasks
    return tasks.filter(owner_session__in=sessions_visible_to(user, using=using).values("pk"))


def visible_task(user: Any, task_id: str, *, using: str = "default") -> Task | None:
    """Return the task if ``user`` may see it, else ``None`` (missing or someone else's)."""
    if not could_be_stored(task_id):
        return None
    return tasks_visible_to(user, using=using).filter(pk=task_id).first()
