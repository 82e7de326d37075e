"""Demo data of the task repositories: tasks in every state, an agent, a tool task, a workflow.

    from agentstore.demo import tasks
    for line in tasks.seed(owner):
        print(line)

Everything is written through :mod:`agentstore.tasks` (the owner session row is
created directly, so this does not depend on the tree store). Safe to run
again: the data is created only when the demo owner session does not exist yet;
otherwise the existing tasks are summarised.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

# The concrete modules rather than the lazy ``agentstore.tasks`` (typed for mypy).
from agentstore.demo import seeding
from agentstore.models import Session, Task
from agentstore.tasks.agent import AgentTaskRepository
from agentstore.tasks.repository import TaskRepository
from agentstore.tasks.tool import ToolTaskRepository
from agentstore.tasks.workflow import WorkflowRepository
from agentstore.types import (
    AgentTaskEntity,
    ChildSessionRequest,
    TaskClaim,
    TaskEntity,
    TaskEventDraft,
    TaskFinish,
    TaskRecovery,
    ToolTaskEntity,
    WorkflowRunEntity,
)

#: The demo owner session (a fixed UUIDv7, so a second run finds it).
OWNER_SESSION_ID = "0197a000-0000-7000-8000-00000000da5c"
WORKER = "demo-worker"
#: How long the demo worker's leases last; every seed run renews them, so a
#: fresh demo's dashboard shows no expired lease (only the recovered example).
LEASE = timedelta(days=7)


def _finish(task_id: str, target: str, owner: str = WORKER, **extra: Any) -> TaskFinish:
    return TaskFinish(
        task_id=task_id,
        lease_owner=owner,
        from_states=("queued", "running", "canceling"),
        target_state=target,
        event_kind=f"task_{target}",
        payload_json=extra.pop("payload_json", "{}"),
        **extra,
    )


def seed(owner: Any) -> list[str]:
    """Create the demo tasks once; return lines describing them."""
    if not Session.objects.filter(pk=OWNER_SESSION_ID).exists():
        _create(owner)
    renewed = _renew_leases()
    states = Counter(
        Task.objects.filter(owner_session_id=OWNER_SESSION_ID).values_list("state", flat=True)
    )
    kinds = Counter(
        Task.objects.filter(owner_session_id=OWNER_SESSION_ID).values_list("kind", flat=True)
    )
    return [
        f"Tasks: owner session {OWNER_SESSION_ID}",
        "  by state: " + ", ".join(f"{s} {n}" for s, n in sorted(states.items())),
        "  by kind:  " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())),
        f"  renewed {renewed} live lease(s) of {WORKER} for {LEASE.days} days",
    ]


def _renew_leases() -> int:
    """Renew the demo worker's live leases (``TaskRepository.renew_lease``), like a worker would.

    An already expired lease cannot be revived (that is recovery's job), so a
    demo left alone for longer than :data:`LEASE` shows expired leases again.
    """
    tasks = TaskRepository()
    expires = tasks.now() + LEASE
    running = Task.objects.filter(
        owner_session_id=OWNER_SESSION_ID, lease_owner=WORKER, state__in=("running", "canceling")
    ).values_list("id", flat=True)
    return sum(tasks.renew_lease(task_id, WORKER, expires) for task_id in running)


def _create(user: Any) -> None:
    tasks = TaskRepository()
    agents = AgentTaskRepository(tasks=tasks)
    tools = ToolTaskRepository(tasks=tasks)
    workflows = WorkflowRepository(tasks=tasks, agents=agents)
    now = tasks.now()
    seeding.session(
        session_id=OWNER_SESSION_ID,
        owner=user,
        cwd="/srv/demo-repo",
        name="demo: durable tasks",
    )
    live = now + LEASE

    def job(label: str) -> str:
        return tasks.create(
            TaskEntity(kind="demo-job", owner_session_id=OWNER_SESSION_ID, concurrency_key=label)
        ).id

    def claim(task_id: str, expires: datetime = live) -> None:
        tasks.claim_queued(
            TaskClaim(
                task_id=task_id,
                lease_owner=WORKER,
                lease_expires_at=expires,
                event_kind="task_started",
            )
        )

    # One generic task per state.
    job("queued")
    running = job("running")
    claim(running)
    tasks.append_running_events(
        running,
        WORKER,
        [
            TaskEventDraft(kind="progress", payload_json='{"percent":25}'),
            TaskEventDraft(kind="progress", payload_json='{"percent":60}'),
        ],
    )
    canceling = job("canceling")
    claim(canceling)
    tasks.transition(
        canceling, ["running"], "canceling", "task_canceling", '{"canceled_by":"parent"}'
    )
    succeeded = job("succeeded")
    claim(succeeded)
    tasks.finish(_finish(succeeded, "succeeded", result="42 files indexed"))
    failed = job("failed")
    claim(failed)
    tasks.finish(
        _finish(
            failed,
            "failed",
            error_code="model",
            error_message="provider returned 529",
            payload_json='{"error_code":"model"}',
        )
    )
    tasks.transition(job("canceled"), ["queued"], "canceled", "task_canceled")
    interrupted = job("interrupted")
    claim(interrupted, now - timedelta(minutes=1))  # its worker went away
    tasks.recover_expired(_recovery("demo-job", now))

    # A subagent in its own child session, working.
    agent = agents.create_with_child_session(
        AgentTaskEntity(
            task=TaskEntity(owner_session_id=OWNER_SESSION_ID),
            agent_name="general",
            prompt="Inspect the repository and list the failing tests.",
            model="gpt-demo",
            provider="demo",
            depth=1,
        ),
        ChildSessionRequest(
            cwd="/srv/demo-repo", name="subagent: inspect", parent_session_id=OWNER_SESSION_ID
        ),
    )
    claim(agent.task.id)
    tasks.append_running_event(agent.task.id, WORKER, "tool_started", '{"tool":"bash"}')

    # A background tool invocation, settled with its outcome.
    tool = tools.create(
        ToolTaskEntity(
            owner_session_id=OWNER_SESSION_ID,
            invocation_id="demo-call-1",
            wrapper_call_id="demo-wrapper-1",
            target_name="read",
            cwd="/srv/demo-repo",
            arguments_json='{"path":"README.md"}',
            timeout_seconds=30,
            definition_json='{"name":"read","description":"Read a file"}',
        )
    )
    claim(tool.task.id)
    tools.finish(
        _finish(tool.task.id, "succeeded"),
        '{"is_error":false,"result":{"content":[{"type":"text","text":"# demo"}],"details":{}}}',
    )

    # A workflow that launched two agent tasks.
    run = workflows.create(
        WorkflowRunEntity(
            task=TaskEntity(owner_session_id=OWNER_SESSION_ID),
            name="review a change",
            source="nodes: [inspect, review]",
            source_hash="sha256:demo",
            source_version="v1",
            arguments_json='{"change":"demo-123"}',
        )
    )
    claim(run.task.id)  # its runner holds a lease like any worker
    for node in ("inspect", "review"):
        workflows.create_agent_task_with_child_session(
            run.task.id,
            AgentTaskEntity(
                task=TaskEntity(owner_session_id=OWNER_SESSION_ID, parent_task_id=run.task.id),
                agent_name=node,
                prompt=f"{node.capitalize()} change demo-123.",
                depth=1,
            ),
            ChildSessionRequest(
                cwd="/srv/demo-repo", name=f"workflow: {node}", parent_session_id=OWNER_SESSION_ID
            ),
            node,
            0,
        )


def _recovery(kind: str, before: datetime) -> TaskRecovery:
    return TaskRecovery(
        kind=kind,
        expires_before=before.astimezone(UTC),
        target_state="interrupted",
        event_kind="task_interrupted",
        error_code="lease_expired",
        error_message="worker lease expired",
        payload_json='{"error_code":"lease_expired"}',
    )
