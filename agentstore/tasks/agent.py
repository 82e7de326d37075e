"""Agent tasks: subagents, each a task of kind ``agent`` running in its own child session.

An agent task is a generic task (lifecycle, lease, events — see
``TaskRepository``) plus the agent's details: its child session, agent name,
prompt, model/provider, policy, usage and depth::

    agents = AgentTaskRepository(tasks=tasks)
    agent = agents.create_with_child_session(
        AgentTaskEntity(task=TaskEntity(owner_session_id=sid), agent_name="general",
                        prompt="inspect the repository", depth=1),
        ChildSessionRequest(cwd="/repo", name="inspect", parent_session_id=sid),
    )
    agents.finish(TaskFinish(task_id=agent.task.id, ...), usage_json='{"input_tokens": 12}')

Creation writes the child session (when asked), the task row, the agent row
and the ``task_queued`` event in one transaction: a failure anywhere leaves
none of them behind.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.db.models import QuerySet

from agentstore.db import SqlCursor
from agentstore.exceptions import NoSession, ValidationError
from agentstore.ids import new_id
from agentstore.models import AgentTask, Session
from agentstore.models.sessions import SessionKind
from agentstore.stores.base import false, lookup, none, nothing
from agentstore.stores.sessions import SessionStore
from agentstore.tasks._graph import SharesTasks
from agentstore.tasks.lifecycle.vocabulary import clamp_limit, coded, task_from_model
from agentstore.types.tasks import AgentTaskEntity, ChildSessionRequest, TaskEntity, TaskFinish
from agentstore.validation import require_json, require_max_length, require_text, require_uuid7

__all__ = ["AgentTaskRepository"]

AGENT_KIND = "agent"


def agent_from_model(row: AgentTask) -> AgentTaskEntity:
    """Build an :class:`AgentTaskEntity` from an ``AgentTask`` with its task loaded."""
    return AgentTaskEntity(
        task=task_from_model(row.task),
        child_session_id=row.child_session_id,
        agent_name=row.agent_name,
        prompt=row.prompt,
        model=row.model,
        provider=row.provider,
        policy_json=row.policy_json,
        usage_json=row.usage_json,
        depth=row.depth,
    )


class AgentTaskRepository(SharesTasks):
    """Persist agent tasks alongside their generic task rows."""

    # -- validation (shared with the workflow repository) -------------------------

    def prepare(self, agent: AgentTaskEntity | None) -> AgentTaskEntity:
        """Validate ``agent`` for creation and return it normalised (``""`` JSON → ``{}``)."""
        if agent is None:
            raise coded(
                ValidationError("agent task is required", field="agent_task"), "nil_agent_task"
            )
        task = self.tasks.validated_task(
            TaskEntity(
                kind=AGENT_KIND,
                owner_session_id=agent.task.owner_session_id,
                parent_task_id=agent.task.parent_task_id,
                concurrency_key=agent.task.concurrency_key,
            )
        )
        child = require_uuid7(agent.child_session_id, "agent_task.child_session_id")
        name = require_text(agent.agent_name, "agent_task.agent_name")
        require_max_length(name, 255, "agent_task.agent_name")
        prompt = require_text(agent.prompt, "agent_task.prompt")
        require_max_length(agent.model, 255, "agent_task.model")
        require_max_length(agent.provider, 255, "agent_task.provider")
        if agent.depth < 1:
            raise ValidationError("agent_task.depth must be positive", field="agent_task.depth")
        policy = agent.policy_json or "{}"
        usage = agent.usage_json or "{}"
        require_json(policy, "agent_task.policy_json")
        require_json(usage, "agent_task.usage_json")
        return AgentTaskEntity(
            task=task,
            child_session_id=child,
            agent_name=name,
            prompt=prompt,
            model=agent.model,
            provider=agent.provider,
            policy_json=policy,
            usage_json=usage,
            depth=agent.depth,
        )

    def prepare_child(
        self, agent: AgentTaskEntity | None, request: ChildSessionRequest | None
    ) -> tuple[AgentTaskEntity, ChildSessionRequest]:
        """Validate a child-session creation; return the agent (new child id) and the request."""
        if agent is None:
            raise coded(
                ValidationError("agent task is required", field="agent_task"), "nil_agent_task"
            )
        if request is None:
            raise coded(
                ValidationError("child session request is required", field="child_session_request"),
                "nil_child_session_request",
            )
        owner = agent.task.owner_session_id.strip()
        parent = request.parent_session_id.strip()
        if parent.lower() != owner.lower():
            raise ValidationError(
                "child session parent differs from agent task owner",
                field="child_session_request.parent_session_id",
            )
        cwd = require_text(request.cwd, "session.cwd")
        require_max_length(request.name, 500, "session.name")
        prepared = self.prepare(
            AgentTaskEntity(
                task=agent.task,
                child_session_id=new_id(),
                agent_name=agent.agent_name,
                prompt=agent.prompt,
                model=agent.model,
                provider=agent.provider,
                policy_json=agent.policy_json,
                usage_json=agent.usage_json,
                depth=agent.depth,
            )
        )
        clean = ChildSessionRequest(
            cwd=cwd, name=request.name, parent_session_id=prepared.task.owner_session_id
        )
        return prepared, clean

    # -- the internal API WorkflowRepository composes (inside its write) --------

    def insert_rows(
        self,
        cursor: SqlCursor,
        agent: AgentTaskEntity,
        task_id: str,
        event_id: str,
        now: datetime,
        child: ChildSessionRequest | None,
    ) -> None:
        """Insert (child session,) task, agent row and event; inside a write.

        Part of the internal API (docs/tasks.md, "Composite repositories"):
        ``WorkflowRepository`` inserts an agent task and its link in one
        transaction through it.
        """
        if child is not None:
            sessions = SessionStore(using=self.using, clock=self.clock)
            # The subagent's session belongs to whoever owns the parent
            # session, so the API and admin show it to the same user.
            parent = sessions.get(child.parent_session_id)
            sessions.insert(
                cursor,
                SessionKind.TREE,
                agent.child_session_id,
                created_at=now,
                updated_at=now,
                cwd=child.cwd,
                name=child.name,
                parent_session=child.parent_session_id,
                owner_id=parent.owner_id if parent is not None else None,
            )
        elif not Session.objects.using(self.using).filter(pk=agent.child_session_id).exists():
            raise NoSession(
                f"insert agent task: child session {agent.child_session_id} does not exist"
            )
        self.tasks.insert_task(cursor, agent.task, task_id, event_id, now)
        AgentTask.objects.using(self.using).create(
            task_id=task_id,
            child_session_id=agent.child_session_id,
            agent_name=agent.agent_name,
            prompt=agent.prompt,
            model=agent.model,
            provider=agent.provider,
            policy_json=agent.policy_json,
            usage_json=agent.usage_json,
            depth=agent.depth,
        )

    # -- operations --------------------------------------------------------------

    def create(self, agent_task: AgentTaskEntity | None) -> AgentTaskEntity:
        """Persist a queued agent task (task row, agent row, ``task_queued``) atomically.

        The child session must exist; its parent is not checked.
        """
        agent = self.prepare(agent_task)
        task_id, event_id, now = new_id(), new_id(), self.now()
        self.write(
            lambda cursor: self.insert_rows(cursor, agent, task_id, event_id, now, None), orm=True
        )
        return self.must_get(task_id)

    def create_with_child_session(
        self, agent_task: AgentTaskEntity | None, child_request: ChildSessionRequest | None
    ) -> AgentTaskEntity:
        """Create a child session (kind ``tree``, parent = the owner) and its queued agent task.

        The request's parent must be the task's owner. Session, task, agent row
        and event are one transaction.
        """
        agent, child = self.prepare_child(agent_task, child_request)
        task_id, event_id, now = new_id(), new_id(), self.now()
        self.write(
            lambda cursor: self.insert_rows(cursor, agent, task_id, event_id, now, child), orm=True
        )
        return self.must_get(task_id)

    def finish(self, finish: TaskFinish | None, usage_json: str) -> bool:
        """Settle the task (as ``TaskRepository.finish``) and record usage in the same transaction.

        A finish that changes nothing leaves the usage untouched.
        """
        clean = self.tasks.validated_finish(finish)
        require_json(usage_json, "agent_task.usage_json")
        event_id, now = new_id(), self.now()

        def settle(cursor: SqlCursor) -> bool:
            if not self.tasks.finish_row(cursor, clean, event_id, now):
                return False
            AgentTask.objects.using(self.using).filter(pk=clean.task_id).update(
                usage_json=usage_json
            )
            return True

        return self.write(settle, orm=True)

    def _rows(self) -> QuerySet[AgentTask]:
        return (
            AgentTask.objects.using(self.using).select_related("task").filter(task__kind=AGENT_KIND)
        )

    @lookup("task_id", missing=false)
    def exists(self, task_id: str) -> bool:
        """Tell whether ``task_id`` is an agent task."""
        return bool(self._rows().filter(task_id=task_id).exists())

    def must_get(self, task_id: str) -> AgentTaskEntity:
        """The agent task just written (it must exist)."""
        created = self.get(task_id)
        assert created is not None
        return created

    @lookup("task_id", missing=none)
    def get(self, task_id: str) -> AgentTaskEntity | None:
        """Return the agent task with its lifecycle, or ``None``."""
        row = self._rows().filter(task_id=task_id).first()
        return None if row is None else agent_from_model(row)

    @lookup("owner_session_id", missing=nothing)
    def list_by_owner(self, owner_session_id: str, limit: int = 0) -> list[AgentTaskEntity]:
        """Return the owner's agent tasks, newest first; ``limit`` ≤ 0 gives 100."""
        rows = (
            self._rows()
            .filter(task__owner_session_id=owner_session_id)
            .order_by("-task__updated_at", "-task__id")[: clamp_limit(limit, cap=None)]
        )
        return [agent_from_model(row) for row in rows]

    @lookup("task_ids", missing=nothing)
    def list_by_ids(self, task_ids: Sequence[str]) -> list[AgentTaskEntity]:
        """Return the agent tasks among ``task_ids`` (no ordering guarantee)."""
        if not task_ids:
            return []
        return [agent_from_model(row) for row in self._rows().filter(task_id__in=list(task_ids))]
