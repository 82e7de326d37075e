"""Workflows: tasks of kind ``workflow`` and the agent tasks they launch, by node and invocation.

A workflow run is a generic task plus its source (hash, version), arguments and
name. Each agent task a workflow launches is linked by the workflow node that
launched it and that node's invocation index, and gets the next workflow-local
``sequence`` (its launch order, 1..n)::

    workflows = WorkflowRepository(tasks=tasks, agents=agents)
    run = workflows.create(WorkflowRunEntity(task=TaskEntity(owner_session_id=sid),
                                             source="...", source_hash="sha256:..."))
    agent = workflows.create_agent_task(run.task.id, AgentTaskEntity(...), "inspect", 0)
    workflows.find_agent_task(run.task.id, "inspect", 0)     # a resumed run finds it

``link_agent_task`` is idempotent: it *inserts first* and treats only the
unique violation of (workflow, node key, invocation index) as "already linked"
— the same agent returns the existing link, another agent is a
``WorkflowInvocationConflict``; every other failure propagates.
``create_agent_task`` is not idempotent: a repeated (node, index) is a conflict
and nothing of the new agent task is kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, Q, QuerySet

from agentstore.db import SqlCursor
from agentstore.exceptions import (
    AgentStoreError,
    AgentTaskAlreadyLinked,
    RepositoryGraphMismatch,
    ValidationError,
    WorkflowInvocationConflict,
)
from agentstore.ids import new_id
from agentstore.models import WorkflowAgentTask, WorkflowRun
from agentstore.models.tasks import ACTIVE_STATES
from agentstore.sql import tasks as task_sql
from agentstore.stores.base import Clock, lookup, none, nothing
from agentstore.tasks._graph import SharesTasks
from agentstore.tasks.agent import AgentTaskRepository
from agentstore.tasks.lifecycle.vocabulary import clamp_limit, coded, task_from_model
from agentstore.tasks.repository import TaskRepository
from agentstore.types.tasks import (
    AgentTaskEntity,
    ChildSessionRequest,
    TaskEntity,
    WorkflowAgentTaskDetail,
    WorkflowAgentTaskEntity,
    WorkflowRunEntity,
)
from agentstore.validation import (
    require_json_object,
    require_max_length,
    require_text,
    require_uuid7,
)

__all__ = ["WorkflowRepository"]

WORKFLOW_KIND = "workflow"
#: The unique constraint whose violation means "this invocation is already linked".
INVOCATION_CONSTRAINT = "agentstore_wflink_invocation"
#: Django's name for the one-to-one key "an agent task belongs to at most one link".
AGENT_LINK_CONSTRAINT = "agentstore_workflowagenttask_agent_task_id_key"


def workflow_from_model(row: WorkflowRun) -> WorkflowRunEntity:
    return WorkflowRunEntity(
        task=task_from_model(row.task),
        name=row.name,
        source=row.source,
        source_hash=row.source_hash,
        source_version=row.source_version,
        arguments_json=row.arguments_json,
    )


def link_from_model(row: WorkflowAgentTask) -> WorkflowAgentTaskEntity:
    return WorkflowAgentTaskEntity(
        created_at=row.created_at,
        workflow_task_id=row.workflow_id,
        agent_task_id=row.agent_task_id,
        node_key=row.node_key,
        invocation_index=row.invocation_index,
        sequence=row.sequence,
    )


def _is_link_uniqueness(exc: IntegrityError) -> bool:
    """Tell whether ``exc`` is a unique violation an identical link can cause.

    An identical repeat violates both (workflow, node key, invocation index)
    and the one-link-per-agent-task key; which one the database reports first
    differs (SQLite names the invocation, PostgreSQL the agent task), so both
    lead to the look-up. PostgreSQL names the constraint (``diag``); SQLite's
    message names the columns ("UNIQUE constraint failed: t.a, t.b").
    """
    diag = getattr(exc.__cause__, "diag", None)
    name = getattr(diag, "constraint_name", None)
    if name:
        return name in (INVOCATION_CONSTRAINT, AGENT_LINK_CONSTRAINT)
    message = str(exc)
    if not message.startswith("UNIQUE constraint failed"):
        return False
    columns = message.split(":", 1)[1].replace(" ", "").split(",")
    columns = [column.rsplit(".", 1)[-1] for column in columns]
    return columns in (["workflow_id", "node_key", "invocation_index"], ["agent_task_id"])


class WorkflowRepository(SharesTasks):
    """Persist workflow runs and their agent-task links on a shared task repository."""

    agents: AgentTaskRepository

    def __init__(
        self,
        *,
        tasks: TaskRepository | None = None,
        agents: AgentTaskRepository | None = None,
        using: str | None = None,
        clock: Clock | None = None,
    ) -> None:
        if agents is not None:
            if not isinstance(agents, AgentTaskRepository):
                raise RepositoryGraphMismatch(
                    f"WorkflowRepository needs an AgentTaskRepository, not {type(agents).__name__}"
                )
            if tasks is None:
                tasks = agents.tasks
            elif tasks is not agents.tasks:
                raise RepositoryGraphMismatch(
                    "WorkflowRepository: the agent task repository must share the task repository"
                )
        super().__init__(tasks=tasks, using=using, clock=clock)
        self.agents = agents if agents is not None else AgentTaskRepository(tasks=self.tasks)

    # -- runs --------------------------------------------------------------------

    def create(self, run: WorkflowRunEntity | None) -> WorkflowRunEntity:
        """Persist a queued workflow (task row, run row, ``task_queued``) atomically."""
        if run is None:
            raise coded(
                ValidationError("workflow run is required", field="workflow_run"),
                "nil_workflow_run",
            )
        task = self.tasks.validated_task(
            TaskEntity(
                kind=WORKFLOW_KIND,
                owner_session_id=run.task.owner_session_id,
                parent_task_id=run.task.parent_task_id,
                concurrency_key=run.task.concurrency_key,
            )
        )
        require_text(run.source, "workflow_run.source")
        require_text(run.source_hash, "workflow_run.source_hash")
        require_max_length(run.source_hash, 255, "workflow_run.source_hash")
        require_max_length(run.source_version, 255, "workflow_run.source_version")
        require_max_length(run.name, 255, "workflow_run.name")
        arguments = run.arguments_json or "{}"
        require_json_object(arguments, "workflow_run.arguments_json")
        task_id, event_id, now = new_id(), new_id(), self.now()

        def insert(cursor: SqlCursor) -> None:
            self.tasks.insert_task(cursor, task, task_id, event_id, now)
            WorkflowRun.objects.using(self.using).create(
                task_id=task_id,
                name=run.name,
                source=run.source,
                source_hash=run.source_hash,
                source_version=run.source_version,
                arguments_json=arguments,
            )

        self.write(insert, orm=True)
        created = self.get(task_id)
        assert created is not None
        return created

    def _runs(self) -> QuerySet[WorkflowRun]:
        return (
            WorkflowRun.objects.using(self.using)
            .select_related("task")
            .filter(task__kind=WORKFLOW_KIND)
        )

    @lookup("task_id", missing=none)
    def get(self, task_id: str) -> WorkflowRunEntity | None:
        """Return the workflow run with its lifecycle, or ``None``."""
        row = self._runs().filter(task_id=task_id).first()
        return None if row is None else workflow_from_model(row)

    @lookup("task_ids", missing=nothing)
    def list_by_ids(self, task_ids: Sequence[str]) -> list[WorkflowRunEntity]:
        """Return the workflow runs among ``task_ids`` (no ordering guarantee)."""
        if not task_ids:
            return []
        return [workflow_from_model(row) for row in self._runs().filter(task_id__in=list(task_ids))]

    @lookup("owner_session_id", missing=nothing)
    def list_by_owner(self, owner_session_id: str, limit: int = 0) -> list[WorkflowRunEntity]:
        """Return the owner's workflow runs, newest first; ``limit`` ≤ 0 gives 100."""
        rows = (
            self._runs()
            .filter(task__owner_session_id=owner_session_id)
            .order_by("-task__updated_at", "-task__id")[: clamp_limit(limit, cap=None)]
        )
        return [workflow_from_model(row) for row in rows]

    @lookup("owner_session_id", missing=nothing)
    def list_active_by_owner(
        self, owner_session_id: str, limit: int = 0
    ) -> list[WorkflowRunEntity]:
        """Return the owner's runs that are active or have an active directly linked agent task.

        A run that already settled while one of its agents still works is active.
        """
        active_child = WorkflowAgentTask.objects.filter(
            workflow_id=OuterRef("task_id"), agent_task__task__state__in=ACTIVE_STATES
        )
        rows = (
            self._runs()
            .filter(task__owner_session_id=owner_session_id)
            .filter(Q(task__state__in=ACTIVE_STATES) | Exists(active_child))
            .order_by("-task__updated_at", "-task__id")[: clamp_limit(limit, cap=None)]
        )
        return [workflow_from_model(row) for row in rows]

    # -- agent tasks of a workflow -------------------------------------------------

    def create_agent_task(
        self,
        workflow_task_id: str,
        agent_task: AgentTaskEntity | None,
        node_key: str,
        invocation_index: int,
    ) -> AgentTaskEntity:
        """Persist a queued agent task and its link to the workflow atomically (not idempotent).

        The agent's parent task must be the workflow and its owner the
        workflow's owner.
        """
        return self._create_agent_task(
            workflow_task_id, agent_task, None, node_key, invocation_index
        )

    def create_agent_task_with_child_session(
        self,
        workflow_task_id: str,
        agent_task: AgentTaskEntity | None,
        child_request: ChildSessionRequest | None,
        node_key: str,
        invocation_index: int,
    ) -> AgentTaskEntity:
        """As :meth:`create_agent_task`, also creating the child session in the transaction."""
        return self._create_agent_task(
            workflow_task_id, agent_task, child_request, node_key, invocation_index, child=True
        )

    def _create_agent_task(
        self,
        workflow_task_id: str,
        agent_task: AgentTaskEntity | None,
        child_request: ChildSessionRequest | None,
        node_key: str,
        invocation_index: int,
        *,
        child: bool = False,
    ) -> AgentTaskEntity:
        request: ChildSessionRequest | None = None
        if child:
            agent, request = self.agents.prepare_child(agent_task, child_request)
        workflow_id = require_uuid7(workflow_task_id, "workflow_agent_task.workflow_task_id")
        if not child:
            agent = self.agents.prepare(agent_task)
        if agent.task.parent_task_id != workflow_id:
            raise coded(
                ValidationError(
                    f"agent task parent must be workflow {workflow_id}",
                    field="agent_task.task.parent_task_id",
                ),
                "workflow_agent_parent_mismatch",
            )
        node = self._node_key(node_key)
        index = self._index(invocation_index)
        task_id, event_id, now = new_id(), new_id(), self.now()

        def insert(cursor: SqlCursor) -> None:
            owner = self._lock_workflow(cursor, workflow_id)
            if owner != agent.task.owner_session_id:
                raise coded(
                    ValidationError(
                        "agent task owner differs from workflow owner",
                        field="agent_task.task.owner_session_id",
                    ),
                    "workflow_agent_owner_mismatch",
                )
            existing = (
                WorkflowAgentTask.objects.using(self.using)
                .filter(workflow_id=workflow_id, node_key=node, invocation_index=index)
                .values_list("agent_task_id", flat=True)
                .first()
            )
            if existing is not None:
                raise WorkflowInvocationConflict(
                    f"workflow invocation {node!r}[{index}] is already linked to agent task "
                    f"{existing}"
                )
            self.agents.insert_rows(cursor, agent, task_id, event_id, now, request)
            self._insert_link(workflow_id, task_id, node, index, now)

        self.write(insert, orm=True)
        return self.agents.must_get(task_id)

    def link_agent_task(
        self, workflow_task_id: str, agent_task_id: str, node_key: str, invocation_index: int
    ) -> WorkflowAgentTaskEntity:
        """Link an existing agent task to the workflow; repeating the exact link returns it.

        Inserts first; only the unique violation of (workflow, node key,
        invocation index) is resolved by looking the link up: the same agent
        returns the existing link, another agent raises
        ``WorkflowInvocationConflict``, and an agent task linked elsewhere
        already (another node key or invocation, another workflow) raises
        ``AgentTaskAlreadyLinked``. No owner or parent checks.
        """
        return self.link_agent_task_created(
            workflow_task_id, agent_task_id, node_key, invocation_index
        )[0]

    def link_agent_task_created(
        self, workflow_task_id: str, agent_task_id: str, node_key: str, invocation_index: int
    ) -> tuple[WorkflowAgentTaskEntity, bool]:
        """:meth:`link_agent_task`, and whether this call wrote the link (``False``: a replay).

        Decided inside the write (the insert succeeded, or met the identical
        link), so of two racing identical calls exactly one is told "created"
        (the API's 201 vs 200, docs/api.md "Replays").
        """
        workflow_id = require_uuid7(workflow_task_id, "workflow_agent_task.workflow_task_id")
        agent_id = require_uuid7(agent_task_id, "workflow_agent_task.agent_task_id")
        node = self._node_key(node_key)
        index = self._index(invocation_index)
        now = self.now()
        links = WorkflowAgentTask.objects.using(self.using)

        def link(cursor: SqlCursor) -> tuple[WorkflowAgentTaskEntity, bool]:
            self._lock_workflow(cursor, workflow_id)
            # Django's foreign keys are checked at COMMIT; check here for a clear error.
            if not self.agents.exists(agent_id):
                raise ValidationError(
                    f"workflow_agent_task.agent_task_id {agent_id} names no agent task",
                    field="workflow_agent_task.agent_task_id",
                )
            try:
                # A savepoint, so a unique violation leaves the transaction usable.
                with transaction.atomic(using=self.using):
                    row = self._insert_link(workflow_id, agent_id, node, index, now)
                return link_from_model(row), True
            except IntegrityError as exc:
                if not _is_link_uniqueness(exc):
                    raise
                existing = links.filter(
                    workflow_id=workflow_id, node_key=node, invocation_index=index
                ).first()
                if existing is None:
                    raise self._already_linked(agent_id, workflow_id) from None
                if existing.agent_task_id != agent_id:
                    raise WorkflowInvocationConflict(
                        f"workflow invocation is already linked to agent task "
                        f"{existing.agent_task_id}"
                    ) from None
                return link_from_model(existing), False

        return self.write(link, orm=True)

    def _already_linked(self, agent_id: str, workflow_id: str) -> AgentStoreError:
        """The error for an agent task that has its one link elsewhere already.

        Where it is linked is said only within this workflow: another
        workflow's id is not the caller's to learn from a refusal.
        """
        other = WorkflowAgentTask.objects.using(self.using).filter(agent_task_id=agent_id).first()
        if other is not None and other.workflow_id == workflow_id:
            return AgentTaskAlreadyLinked(
                f"agent task {agent_id} is already linked to this workflow as "
                f"{other.node_key!r}[{other.invocation_index}]"
            )
        return AgentTaskAlreadyLinked(
            f"agent task {agent_id} is already linked to another workflow"
        )

    def _lock_workflow(self, cursor: SqlCursor, workflow_id: str) -> str:
        """Return the workflow's owner; lock its task row on PostgreSQL (serialises sequences)."""
        cursor.execute(task_sql.lock_workflow_owner(self.tasks.vendor), [workflow_id])
        row = cursor.fetchone()
        if row is None:
            raise ValidationError(
                f"workflow_agent_task.workflow_task_id {workflow_id} names no workflow run",
                field="workflow_agent_task.workflow_task_id",
            )
        return str(row[0])

    def _insert_link(
        self, workflow_id: str, agent_id: str, node: str, index: int, now: datetime
    ) -> WorkflowAgentTask:
        links = WorkflowAgentTask.objects.using(self.using)
        last = (
            links.filter(workflow_id=workflow_id)
            .order_by("-sequence")
            .values_list("sequence", flat=True)
            .first()
        )
        return links.create(
            workflow_id=workflow_id,
            agent_task_id=agent_id,
            sequence=(last or 0) + 1,
            node_key=node,
            invocation_index=index,
            created_at=now,
        )

    @staticmethod
    def _node_key(node_key: str) -> str:
        node = (node_key or "").strip()
        require_max_length(node, 255, "workflow_agent_task.node_key")
        return node

    @staticmethod
    def _index(invocation_index: int) -> int:
        if invocation_index < 0:
            raise ValidationError(
                "workflow_agent_task.invocation_index must not be negative",
                field="workflow_agent_task.invocation_index",
            )
        return invocation_index

    @lookup("workflow_task_id", "node_key", missing=none)
    def find_agent_task(
        self, workflow_task_id: str, node_key: str, invocation_index: int
    ) -> WorkflowAgentTaskEntity | None:
        """Return the link of (workflow, trimmed node key, invocation index), or ``None``."""
        row = (
            WorkflowAgentTask.objects.using(self.using)
            .filter(
                workflow_id=workflow_task_id,
                node_key=(node_key or "").strip(),
                invocation_index=invocation_index,
            )
            .first()
        )
        return None if row is None else link_from_model(row)

    @lookup("workflow_task_id", missing=nothing)
    def list_agent_tasks(self, workflow_task_id: str) -> list[WorkflowAgentTaskEntity]:
        """Return the workflow's links in launch order."""
        rows = (
            WorkflowAgentTask.objects.using(self.using)
            .filter(workflow_id=workflow_task_id)
            .order_by("sequence")
        )
        return [link_from_model(row) for row in rows]

    @lookup("workflow_task_ids", missing=nothing)
    def list_agent_task_details(
        self, workflow_task_ids: Sequence[str]
    ) -> list[WorkflowAgentTaskDetail]:
        """Return the links of several workflows (by workflow id, then sequence) with their agents.

        Two queries; a link whose agent task is gone is skipped.
        """
        if not workflow_task_ids:
            return []
        links = list(
            WorkflowAgentTask.objects.using(self.using)
            .filter(workflow_id__in=list(workflow_task_ids))
            .order_by("workflow_id", "sequence")
        )
        agents = {a.task.id: a for a in self.agents.list_by_ids([x.agent_task_id for x in links])}
        return [
            WorkflowAgentTaskDetail(agent_task=agents[x.agent_task_id], link=link_from_model(x))
            for x in links
            if x.agent_task_id in agents
        ]
