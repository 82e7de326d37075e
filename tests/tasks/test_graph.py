"""Repository graph and construction (librecode repository_construction_internal_test.go)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from agentstore.exceptions import RepositoryGraphMismatch, ValidationError
from agentstore.ids import new_id
from agentstore.tasks import (
    AgentTaskRepository,
    TaskRepository,
    ToolTaskRepository,
    WorkflowRepository,
)
from agentstore.types import TaskEntity
from tests.tasks.conftest import Graph, agent_entity, make_session, tool_entity
from tests.tasks.test_workflow import run_entity

FIXED = datetime(2026, 8, 6, 12, 0, 0, tzinfo=UTC)


def test_composite_constructors_share_dependencies() -> None:
    tasks = TaskRepository()
    agents = AgentTaskRepository(tasks=tasks)
    workflows = WorkflowRepository(tasks=tasks, agents=agents)
    tools = ToolTaskRepository(tasks=tasks)
    assert agents.tasks is tasks and workflows.tasks is tasks and tools.tasks is tasks
    assert workflows.agents is agents
    assert WorkflowRepository(agents=agents).tasks is tasks
    assert WorkflowRepository(tasks=tasks).agents.tasks is tasks
    tasks.clock = lambda: FIXED
    assert agents.now() == workflows.now() == tools.now() == FIXED
    assert agents.using == tasks.using == "default"


def test_standalone_constructors_build_their_own_task_repository() -> None:
    agents = AgentTaskRepository(clock=lambda: FIXED)
    assert isinstance(agents.tasks, TaskRepository) and agents.tasks.now() == FIXED
    workflows = WorkflowRepository()
    assert workflows.agents.tasks is workflows.tasks


def test_composite_constructors_reject_invalid_graph() -> None:
    tasks = TaskRepository()
    with pytest.raises(RepositoryGraphMismatch) as info:
        AgentTaskRepository(tasks=tasks, using="other")
    assert info.value.code == "repository_graph_mismatch"
    with pytest.raises(RepositoryGraphMismatch):
        AgentTaskRepository(tasks=tasks, clock=lambda: FIXED)
    with pytest.raises(RepositoryGraphMismatch):
        ToolTaskRepository(tasks=tasks, using="other")
    with pytest.raises(RepositoryGraphMismatch):
        ToolTaskRepository(tasks=object())  # type: ignore[arg-type]
    with pytest.raises(RepositoryGraphMismatch):
        WorkflowRepository(tasks=TaskRepository(), agents=AgentTaskRepository(tasks=tasks))
    with pytest.raises(RepositoryGraphMismatch):
        WorkflowRepository(agents=AgentTaskRepository(tasks=tasks), using="other")
    with pytest.raises(RepositoryGraphMismatch):
        WorkflowRepository(agents=object())  # type: ignore[arg-type]
    # A matching explicit alias or the same clock is fine.
    assert AgentTaskRepository(tasks=tasks, using="default", clock=tasks.clock).tasks is tasks


@pytest.mark.django_db
def test_composite_repositories_use_shared_clock() -> None:
    owner = make_session()
    tasks = TaskRepository(clock=lambda: FIXED)
    agents = AgentTaskRepository(tasks=tasks)
    workflows = WorkflowRepository(tasks=tasks, agents=agents)
    tools = ToolTaskRepository(tasks=tasks)
    generic = tasks.create(TaskEntity(kind="test", owner_session_id=owner))
    agent = agents.create(agent_entity(owner, make_session(parent=owner)))
    run = workflows.create(run_entity(owner))
    tool = tools.create(tool_entity(owner))
    for task in (generic, agent.task, run.task, tool.task):
        assert task.created_at == task.updated_at == FIXED


@pytest.mark.parametrize(
    ("call", "code"),
    [
        (lambda g: g.tasks.create(None), "nil_task"),
        (lambda g: g.tasks.claim_queued(None), "nil_task_claim"),
        (lambda g: g.tasks.finish(None), "nil_task_finish"),
        (lambda g: g.tasks.recover_expired(None), "nil_task_recovery"),
        (lambda g: g.agents.create(None), "nil_agent_task"),
        (lambda g: g.agents.finish(None, "{}"), "nil_task_finish"),
        (
            lambda g: g.agents.create_with_child_session(agent_entity(new_id()), None),
            "nil_child_session_request",
        ),
        (lambda g: g.workflows.create(None), "nil_workflow_run"),
        (
            lambda g: g.workflows.create_agent_task_with_child_session(
                "", agent_entity(new_id()), None, "n", 0
            ),
            "nil_child_session_request",
        ),
        (lambda g: g.tools.create(None), "nil_tool_task"),
    ],
)
def test_repository_methods_reject_nil_entities(graph: Graph, call: Any, code: str) -> None:
    with pytest.raises(ValidationError) as info:
        call(graph)
    assert info.value.code == code
