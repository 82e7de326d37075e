"""Every kind of task, with and without an owner session, in every state: its admin pages render.

The task page is the first page someone opens to debug a failed job, so it must
render for ``django.tasks`` functions (no owner session), custom kinds with or
without an owner, agent tasks (plain and launched by a workflow), tool tasks and
workflow runs — queued, running (live or expired lease), canceling, succeeded,
failed with an error, canceled and interrupted — and the changelist must list
them all, filtered by any kind.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from agentstore.demo import seeding
from agentstore.tasks import (
    AgentTaskRepository,
    TaskRepository,
    ToolTaskRepository,
    WorkflowRepository,
)
from agentstore.types import (
    AgentTaskEntity,
    ChildSessionRequest,
    TaskClaim,
    TaskEntity,
    TaskFinish,
    WorkflowRunEntity,
)
from tests.tasks import jobs
from tests.tasks.conftest import tool_entity

pytestmark = pytest.mark.django_db

STATES = (
    "queued",
    "running",
    "expired",  # running, its worker's lease over
    "canceling",
    "succeeded",
    "failed",
    "canceled",
    "interrupted",
)


@pytest.fixture
def admin_client(db: None) -> Client:
    """A logged-in superuser without a password (no hashing: 65 pages render here)."""
    from django.contrib.auth import get_user_model

    admin = get_user_model().objects.create(username="admin", is_staff=True, is_superuser=True)
    client = Client()
    client.force_login(admin)
    return client


@dataclass(frozen=True)
class World:
    """One owner session with an agent, a tool task and a workflow that launched an agent."""

    tree_id: str
    agent_task_id: str
    tool_task_id: str
    workflow_id: str
    workflow_agent_id: str


@pytest.fixture
def world(db: None) -> World:
    sid = seeding.session(cwd="/repo", name="admin tour")
    tasks = TaskRepository()
    agents = AgentTaskRepository(tasks=tasks)
    workflows = WorkflowRepository(tasks=tasks, agents=agents)

    def agent(name: str, parent: str = "") -> AgentTaskEntity:
        return AgentTaskEntity(
            task=TaskEntity(owner_session_id=sid, parent_task_id=parent),
            agent_name=name,
            prompt="map the modules",
            depth=1,
        )

    explorer = agents.create_with_child_session(
        agent("explorer"), ChildSessionRequest(cwd="/repo", parent_session_id=sid)
    )
    tool = ToolTaskRepository(tasks=tasks).create(tool_entity(sid, "call-2"))
    run = workflows.create(
        WorkflowRunEntity(
            task=TaskEntity(owner_session_id=sid),
            name="review",
            source="steps: [review]",
            source_hash="sha256:abc",
        )
    )
    linked = workflows.create_agent_task_with_child_session(
        run.task.id,
        agent("reviewer", run.task.id),
        ChildSessionRequest(cwd="/repo", parent_session_id=sid),
        "review",
        0,
    )
    return World(sid, explorer.task.id, tool.task.id, run.task.id, linked.task.id)


@dataclass(frozen=True)
class Made:
    task_id: str
    owner: bool
    #: Text the task page must show for this kind.
    shows: tuple[str, ...] = ()


def _function(world: World) -> Made:
    result = jobs.add.using(queue_name="default", priority=7).enqueue(2, 40)
    return Made(result.id, False, ("tests.tasks.jobs.add", "40", 'id="function-details"'))


def _custom_ownerless(world: World) -> Made:
    task = TaskRepository().enqueue(TaskEntity(kind="report", queue_name="reports"))
    return Made(task.id, False, ("report", "reports"))


def _custom_owned(world: World) -> Made:
    task = TaskRepository().enqueue(TaskEntity(kind="report", owner_session_id=world.tree_id))
    return Made(task.id, True, ("admin tour",))


def _child_of_ownerless(world: World) -> Made:
    tasks = TaskRepository()
    parent = tasks.enqueue(TaskEntity(kind="report"))
    child = tasks.enqueue(TaskEntity(kind="report-part", parent_task_id=parent.id))
    return Made(child.id, False, (reverse("admin:agentstore_task_change", args=[parent.id]),))


def _agent(world: World) -> Made:
    return Made(world.agent_task_id, True, ("explorer", "map the modules"))


def _workflow_agent(world: World) -> Made:
    return Made(
        world.workflow_agent_id,
        True,
        (
            'id="workflow-link"',
            reverse("admin:agentstore_workflowrun_change", args=[world.workflow_id]),
        ),
    )


def _tool(world: World) -> Made:
    return Made(world.tool_task_id, True, ('id="tool-details"', "call-2"))


def _workflow(world: World) -> Made:
    return Made(
        world.workflow_id,
        True,
        (reverse("admin:agentstore_workflowrun_change", args=[world.workflow_id]),),
    )


KINDS: dict[str, Callable[[World], Made]] = {
    "function": _function,
    "custom-ownerless": _custom_ownerless,
    "custom-owned": _custom_owned,
    "child-of-ownerless": _child_of_ownerless,
    "agent": _agent,
    "workflow-agent": _workflow_agent,
    "tool": _tool,
    "workflow": _workflow,
}

TRACEBACK = 'Traceback (most recent call last):\n  File "jobs.py", line 9\nBoom: disk full\n'


def drive(task_id: str, state: str) -> None:
    """Move a queued task to ``state`` through the repository, as workers and recovery do."""
    tasks = TaskRepository()
    now = tasks.now()

    def claim(expires: timedelta = timedelta(hours=1)) -> None:
        assert tasks.claim_queued(
            TaskClaim(
                task_id=task_id,
                lease_owner="worker-1",
                lease_expires_at=now + expires,
                event_kind="task_started",
            )
        )

    def finish(target: str, **fields: str) -> None:
        assert tasks.finish(
            TaskFinish(
                task_id=task_id,
                lease_owner=fields.pop("lease_owner", "worker-1"),
                from_states=fields.pop("from_states", "running").split(","),
                target_state=target,
                event_kind=f"task_{target}",
                payload_json=fields.pop("payload_json", "{}"),
                **fields,
            )
        )

    if state == "queued":
        return
    if state == "canceled":
        finish("canceled", lease_owner="", from_states="queued", error_code="canceled")
        return
    if state == "expired":
        claim(-timedelta(minutes=5))
        return
    claim()
    if state == "canceling":
        assert tasks.transition(task_id, ["running"], "canceling", "task_canceling")
    elif state == "succeeded":
        finish("succeeded", result='{"answer": 42}')
    elif state == "failed":
        finish(
            "failed",
            error_code="tests.tasks.jobs.Boom",
            error_message="disk full",
            payload_json=json.dumps({"traceback": TRACEBACK, "worker_id": "worker-1"}),
        )
    elif state == "interrupted":
        finish("interrupted", error_code="lease_expired", error_message="worker went away")


def page_text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub("<[^>]+>", " ", html))


@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("kind", list(KINDS))
def test_the_task_page_renders_for_every_kind_and_state(
    admin_client: Client, world: World, kind: str, state: str
) -> None:
    made = KINDS[kind](world)
    drive(made.task_id, state)
    response = admin_client.get(reverse("admin:agentstore_task_change", args=[made.task_id]))
    assert response.status_code == 200
    html = response.content.decode()
    for shown in made.shows:
        assert shown in html, (kind, state, shown)
    owner = page_text(html.split('id="task-owner"')[1].split("</td>")[0])
    if made.owner:
        assert reverse("admin:agentstore_session_change", args=[world.tree_id]) in html
    else:
        assert "no agent session owns this task" in owner
    shown_state = {"expired": "running"}.get(state, state)
    assert f"state-{shown_state}" in html
    if state == "expired":
        assert 'id="lease-expired"' in html
    if state == "failed":
        error = page_text(html.split('id="task-error"')[1].split("</td>")[0])
        assert "tests.tasks.jobs.Boom" in error and "disk full" in error
        assert "Boom: disk full" in html.split('id="task-traceback"')[1]  # the traceback
    if state == "succeeded":
        assert "answer" in html


def test_the_changelist_lists_every_kind_and_filters_by_each(
    admin_client: Client, world: World
) -> None:
    made = {kind: make(world) for kind, make in KINDS.items()}
    for state, (kind, task) in zip(STATES, made.items(), strict=False):
        if kind not in ("workflow-agent", "agent"):  # the agents stay queued for the filter
            drive(task.task_id, state)
    changelist = reverse("admin:agentstore_task_changelist")
    response = admin_client.get(changelist)
    assert response.status_code == 200
    html = response.content.decode()
    for task in made.values():
        assert task.task_id in html
    for kind in ("function", "report", "agent", "tool", "workflow", "report-part"):
        filtered = admin_client.get(changelist, {"kind__exact": kind})
        assert filtered.status_code == 200
        listed = set(re.findall(r'<code title="([0-9a-f-]{36})">', filtered.content.decode()))
        expected = {t.task_id for k, t in made.items() if _kind_of(k) == kind}
        if kind == "report":
            expected.add(_parent_of(made["child-of-ownerless"].task_id))
        assert expected <= listed, kind
        assert all(_stored_kind(task_id) == kind for task_id in listed), kind


def _kind_of(made_kind: str) -> str:
    return {
        "custom-ownerless": "report",
        "custom-owned": "report",
        "child-of-ownerless": "report-part",
        "workflow-agent": "agent",
    }.get(made_kind, made_kind)


def _parent_of(task_id: str) -> str:
    task = TaskRepository().get(task_id)
    assert task is not None
    return task.parent_task_id


def _stored_kind(task_id: str) -> str:
    task = TaskRepository().get(task_id)
    assert task is not None
    return task.kind


def test_the_changelist_says_what_each_task_runs(admin_client: Client, world: World) -> None:
    """A django.tasks job shows its function path, queue, priority and runs, not just "function"."""
    mail = jobs.add.using(queue_name="mail", priority=5).enqueue(1, 2)
    crashed = jobs.noop.enqueue()
    tasks = TaskRepository()
    now = tasks.now()
    [claimed] = tasks.claim_ready(["default"], ["function"], "dead", now - timedelta(seconds=1))
    assert claimed.id == crashed.id
    tasks.requeue_expired(now)
    html = admin_client.get(reverse("admin:agentstore_task_changelist")).content.decode()
    rows = {
        task_id: page_text(row)
        for row in html.split("<tr")[1:]
        for task_id in re.findall(r'<code title="([0-9a-f-]{36})">', row)[:1]
    }
    assert "tests.tasks.jobs.add" in rows[mail.id] and "mail" in rows[mail.id]
    assert "priority 5" in rows[mail.id] and "0/1" in rows[mail.id]
    assert "tests.tasks.jobs.noop" in rows[crashed.id] and "1 crashed" in rows[crashed.id]
    assert "explorer" in rows[world.agent_task_id]
    assert "read" in rows[world.tool_task_id]
    assert "review" in rows[world.workflow_id]


def test_the_kind_filter_offers_every_kind(admin_client: Client, world: World) -> None:
    changelist = reverse("admin:agentstore_task_changelist")
    with override_settings(AGENTSTORE={"WORKER_HANDLERS": {"report": "tests.tasks.jobs.add"}}):
        html = admin_client.get(changelist).content.decode()
    for kind in ("agent", "function", "tool", "workflow", "report"):
        assert f"?kind__exact={kind}" in html, kind
    # A kind nothing names still filters, and is then offered.
    TaskRepository().enqueue(TaskEntity(kind="nightly"))
    html = admin_client.get(changelist, {"kind__exact": "nightly"}).content.decode()
    assert "?kind__exact=nightly" in html


def test_the_changelist_reads_a_fixed_number_of_queries(admin_client: Client, world: World) -> None:
    changelist = reverse("admin:agentstore_task_changelist")
    admin_client.get(changelist)
    with CaptureQueriesContext(connection) as before:
        admin_client.get(changelist)
    for n in range(5):
        jobs.add.enqueue(n, n)
    with CaptureQueriesContext(connection) as after:
        admin_client.get(changelist)
    assert len(after) == len(before)
