"""The task demo data: every state, an agent with a child session, a tool task, a workflow."""

from __future__ import annotations

import pytest

from agentstore.demo import tasks as demo
from agentstore.models import AgentTask, Session, Task, ToolTask, WorkflowAgentTask
from agentstore.tasks import TaskRepository

pytestmark = pytest.mark.django_db


def test_seed_is_idempotent_and_covers_every_state() -> None:
    first = demo.seed(None)
    counts = Task.objects.count()
    assert demo.seed(None) == first
    assert Task.objects.count() == counts
    states = set(Task.objects.filter(kind="demo-job").values_list("state", flat=True))
    assert states == {
        "queued",
        "running",
        "canceling",
        "succeeded",
        "failed",
        "canceled",
        "interrupted",
    }
    assert ToolTask.objects.filter(outcome_version=1).count() == 1
    assert WorkflowAgentTask.objects.count() == 2
    assert AgentTask.objects.count() == 3
    children = Session.objects.filter(parent_session=demo.OWNER_SESSION_ID)
    assert children.count() == 3
    # Every event log the demo wrote is contiguous.
    repo = TaskRepository()
    for task_id in Task.objects.values_list("id", flat=True):
        sequences = [e.sequence for e in repo.list_events(task_id)]
        assert sequences == list(range(1, len(sequences) + 1))
    assert any("demo-job" in line for line in first)
