"""Task pages: state, lease, timeline, kind details, outcome; the workflow page."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from agentstore.tasks import TaskRepository, ToolTaskRepository
from agentstore.types import TaskClaim, TaskFinish
from tests.admin.seed import World

pytestmark = pytest.mark.django_db


def task_page(client: Client, task_id: str, **params: str) -> str:
    response = client.get(reverse("admin:agentstore_task_change", args=[task_id]), params)
    assert response.status_code == 200
    return response.content.decode()


def text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub("<[^>]+>", " ", html))


def test_expired_lease_is_highlighted(admin_client: Client, world: World) -> None:
    page = task_page(admin_client, world.tool_task_id)
    assert 'id="lease-expired"' in page
    assert "worker-9" in page
    timeline = text(page[page.index('id="task-timeline"') :])
    assert "1 task_queued" in timeline and "2 task_started" in timeline
    assert "not settled yet" in page  # tool outcome


def test_live_lease_is_not_highlighted(admin_client: Client, world: World) -> None:
    tasks = TaskRepository()
    tasks.claim_queued(
        TaskClaim(
            task_id=world.queued_tool_task_id,
            lease_owner="w",
            lease_expires_at=tasks.now() + timedelta(hours=1),
            event_kind="task_started",
        )
    )
    assert 'id="lease-expired"' not in task_page(admin_client, world.queued_tool_task_id)


def test_settled_tool_task_shows_its_canonical_outcome(admin_client: Client, world: World) -> None:
    tasks = TaskRepository()
    tasks.claim_queued(
        TaskClaim(
            task_id=world.queued_tool_task_id,
            lease_owner="w",
            lease_expires_at=tasks.now() + timedelta(hours=1),
            event_kind="task_started",
        )
    )
    ToolTaskRepository(tasks=tasks).finish(
        TaskFinish(
            task_id=world.queued_tool_task_id,
            lease_owner="w",
            from_states=["running"],
            target_state="succeeded",
            event_kind="task_succeeded",
            payload_json="{}",
        ),
        '{"result":{"content":[]},"is_error":false}',
    )
    page = task_page(admin_client, world.queued_tool_task_id)
    assert 'id="tool-outcome"' in page and "is_error" in page
    assert "cancel-task" not in page  # settled: nothing to cancel


def test_agent_and_workflow_details(admin_client: Client, world: World) -> None:
    agent = task_page(admin_client, world.agent_task_id)
    assert "explorer" in agent and "map the modules" in agent
    assert reverse("admin:agentstore_session_change", args=[world.child_session_id]) in agent
    workflow = task_page(admin_client, world.workflow_id)
    assert reverse("admin:agentstore_workflowrun_change", args=[world.workflow_id]) in workflow


def test_workflow_page_lists_agent_tasks_by_node(admin_client: Client, world: World) -> None:
    page = admin_client.get(
        reverse("admin:agentstore_workflowrun_change", args=[world.workflow_id])
    )
    agents = text(page.content.decode().split('id="workflow-agents"')[1])
    assert "review 0 1 reviewer queued" in agents
    assert reverse("admin:agentstore_task_change", args=[world.workflow_agent_id]) in (
        page.content.decode()
    )


def test_timeline_pages_through_events(admin_client: Client, world: World) -> None:
    tasks = TaskRepository()
    for i in range(120):
        tasks.append_event(world.agent_task_id, "progress", f'{{"i": {i}}}')
    first = task_page(admin_client, world.agent_task_id)
    assert "?after=100" in first
    # Sequence 1 is task_queued, so the first page ends at i = 98 (sequence 100).
    assert "{&quot;i&quot;: 98}" in first and "{&quot;i&quot;: 99}" not in first
    second = task_page(admin_client, world.agent_task_id, after="100")
    assert "{&quot;i&quot;: 99}" in second and "{&quot;i&quot;: 119}" in second
    assert "?after=" not in second


def test_task_page_query_count_does_not_grow_with_events(
    admin_client: Client, world: World
) -> None:
    admin_client.get(reverse("admin:agentstore_task_change", args=[world.agent_task_id]))
    with CaptureQueriesContext(connection) as before:
        task_page(admin_client, world.agent_task_id)
    tasks = TaskRepository()
    for i in range(30):
        tasks.append_event(world.agent_task_id, "progress", f'{{"i": {i}}}')
    with CaptureQueriesContext(connection) as after:
        task_page(admin_client, world.agent_task_id)
    assert len(before) == len(after)


def test_unknown_task_redirects_like_the_admin(admin_client: Client, db: None) -> None:
    response = admin_client.get(reverse("admin:agentstore_task_change", args=["missing"]))
    assert response.status_code == 302
