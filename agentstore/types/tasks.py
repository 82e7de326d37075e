"""Value objects of the tasks area: what the task repositories take and return.

Frozen dataclasses with librecode's Go fields in snake_case; every field
defaults to the Go zero value, so only what matters needs spelling out::

    from agentstore.types import TaskClaim, TaskEntity, TaskFinish

    task = tasks.create(TaskEntity(kind="tool", owner_session_id=sid))
    tasks.claim_queued(TaskClaim(task_id=task.id, lease_owner="worker-1",
                                 lease_expires_at=now + timedelta(seconds=30),
                                 event_kind="task_started"))

Embedded Go structs stay nested: ``AgentTaskEntity(task=TaskEntity(...))``,
``TaskEventEntity(event=EventEntity(...), task_id=..., sequence=...)``. Go's
``From`` is ``from_states``. States are plain strings (``"queued"`` …);
``agentstore.models.TaskState`` names them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

__all__ = [
    "AgentTaskEntity",
    "ChildSessionRequest",
    "EventEntity",
    "TaskClaim",
    "TaskEntity",
    "TaskEventDraft",
    "TaskEventEntity",
    "TaskFinish",
    "TaskRecovery",
    "ToolTaskEntity",
    "WorkflowAgentTaskDetail",
    "WorkflowAgentTaskEntity",
    "WorkflowRunEntity",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskEntity:
    """The generic durable lifecycle of one piece of asynchronous work."""

    id: str = ""
    kind: str = ""
    parent_task_id: str = ""
    owner_session_id: str = ""
    concurrency_key: str = ""
    state: str = ""
    result: str = ""
    error_code: str = ""
    error_message: str = ""
    created_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    updated_at: datetime | None = None
    #: ``""`` when the task holds no lease.
    lease_owner: str = ""
    lease_expires_at: datetime | None = None
    #: Worker scheduling (not in librecode; docs/tasks.md "Running tasks"):
    #: ``""`` is the ``default`` queue, ``max_attempts`` 0 is 1.
    queue_name: str = ""
    priority: int = 0
    run_after: datetime | None = None
    attempts: int = 0
    max_attempts: int = 0
    #: Runs lost because their worker went away (docs/tasks.md "Retries and recovery").
    crashes: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class EventEntity:
    """A durable event envelope."""

    id: str = ""
    kind: str = ""
    payload_json: str = ""
    created_at: datetime | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskEventEntity:
    """An event at its task-local replay position (``sequence`` 1..n)."""

    event: EventEntity = field(default_factory=EventEntity)
    task_id: str = ""
    sequence: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskEventDraft:
    """One event to append (``append_running_events``)."""

    kind: str = ""
    payload_json: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskClaim:
    """A lease one worker asks for on one task (``claim_queued``/``claim_interrupted``)."""

    task_id: str = ""
    lease_owner: str = ""
    lease_expires_at: datetime | None = None
    event_kind: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskFinish:
    """A conditional terminal transition.

    ``lease_owner=""`` finishes only a task that holds no lease; a non-empty
    owner finishes only while that owner's lease is live.
    """

    task_id: str = ""
    event_kind: str = ""
    result: str = ""
    error_code: str = ""
    error_message: str = ""
    payload_json: str = ""
    lease_owner: str = ""
    target_state: str = ""
    from_states: Sequence[str] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskRecovery:
    """The terminal outcome for abandoned leased work of one kind (``recover_expired``)."""

    expires_before: datetime | None = None
    kind: str = ""
    event_kind: str = ""
    error_code: str = ""
    error_message: str = ""
    payload_json: str = ""
    target_state: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentTaskEntity:
    """A subagent: a task of kind ``agent`` running in its own child session."""

    task: TaskEntity = field(default_factory=TaskEntity)
    child_session_id: str = ""
    agent_name: str = ""
    prompt: str = ""
    model: str = ""
    provider: str = ""
    policy_json: str = ""
    usage_json: str = ""
    depth: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class ChildSessionRequest:
    """The child session to create together with an agent task."""

    cwd: str = ""
    name: str = ""
    parent_session_id: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolTaskEntity:
    """An admitted tool invocation and, once settled, its canonical outcome."""

    task: TaskEntity = field(default_factory=TaskEntity)
    wrapper_call_id: str = ""
    owner_session_id: str = ""
    invocation_id: str = ""
    cwd: str = ""
    parent_call_id: str = ""
    initiating_entry_id: str = ""
    policy_json: str = ""
    definition_json: str = ""
    arguments_json: str = ""
    target_name: str = ""
    source_sequence: int = 0
    timeout_seconds: int = 0
    #: ``None`` until the task settles through the repository (then 1).
    outcome_version: int | None = None
    outcome_json: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkflowRunEntity:
    """A workflow run: a task of kind ``workflow`` plus its source and arguments."""

    task: TaskEntity = field(default_factory=TaskEntity)
    name: str = ""
    source: str = ""
    source_hash: str = ""
    source_version: str = ""
    arguments_json: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkflowAgentTaskEntity:
    """An agent task's place in a workflow's launch order."""

    created_at: datetime | None = None
    workflow_task_id: str = ""
    agent_task_id: str = ""
    node_key: str = ""
    invocation_index: int = 0
    sequence: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkflowAgentTaskDetail:
    """A workflow link together with its complete agent task."""

    agent_task: AgentTaskEntity = field(default_factory=AgentTaskEntity)
    link: WorkflowAgentTaskEntity = field(default_factory=WorkflowAgentTaskEntity)
