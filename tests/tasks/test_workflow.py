"""WorkflowRepository (librecode workflow_repository_test.go, workflow compatibility fixture)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from django.db import IntegrityError

from agentstore.exceptions import (
    AgentTaskAlreadyLinked,
    NoSession,
    ValidationError,
    WorkflowInvocationConflict,
)
from agentstore.ids import new_id
from agentstore.models import AgentTask, Session, Task, TaskEvent, WorkflowAgentTask, WorkflowRun
from agentstore.tasks import AgentTaskRepository, TaskRepository, WorkflowRepository
from agentstore.types import (
    AgentTaskEntity,
    ChildSessionRequest,
    TaskEntity,
    TaskFinish,
    WorkflowRunEntity,
)
from tests.tasks.conftest import Graph, agent_entity, make_session, reject_inserts, run_together

pytestmark = pytest.mark.django_db


def run_entity(owner: str, **extra: object) -> WorkflowRunEntity:
    fields: dict[str, object] = {
        "name": "review",
        "source": "steps: [inspect, review]",
        "source_hash": "sha256:abc",
        "source_version": "v1",
        "arguments_json": '{"scope":"all"}',
    }
    fields.update(extra)
    return WorkflowRunEntity(task=TaskEntity(owner_session_id=owner), **fields)  # type: ignore[arg-type]


def child_agent(graph: Graph, owner: str, parent: str = "", **extra: object) -> AgentTaskEntity:
    child = make_session(parent=owner)
    return graph.agents.create(agent_entity(owner, child, parent=parent, **extra))


def test_lifecycle_and_agent_links(graph: Graph, owner: str) -> None:
    workflows = graph.workflows
    run = workflows.create(run_entity(owner))
    assert (run.task.kind, run.task.state) == ("workflow", "queued")
    got = workflows.get(run.task.id)
    assert got == run
    assert (got.name, got.source, got.arguments_json) == (
        "review",
        "steps: [inspect, review]",
        '{"scope":"all"}',
    )
    first = child_agent(graph, owner)
    second = child_agent(graph, owner)
    one = workflows.link_agent_task(run.task.id, first.task.id, "inspect", 0)
    two = workflows.link_agent_task(run.task.id, second.task.id, "review", 0)
    assert (one.sequence, two.sequence) == (1, 2)
    assert workflows.find_agent_task(run.task.id, " inspect ", 0) == one
    assert workflows.find_agent_task(run.task.id, "inspect", 1) is None
    assert workflows.list_agent_tasks(run.task.id) == [one, two]
    assert graph.tasks.transition(run.task.id, ["queued"], "running", "task_started")
    assert graph.tasks.finish(
        TaskFinish(
            task_id=run.task.id,
            from_states=["running"],
            target_state="succeeded",
            event_kind="task_succeeded",
            result="complete",
            payload_json="{}",
        )
    )
    [listed] = workflows.list_by_owner(owner, 0)
    assert (listed.task.state, listed.task.result) == ("succeeded", "complete")
    assert len(graph.tasks.list_events(run.task.id)) == 3


def test_list_active_by_owner_includes_terminal_run_with_active_child(
    graph: Graph, owner: str
) -> None:
    workflows = graph.workflows
    run = workflows.create(run_entity(owner))
    agent = workflows.create_agent_task(
        run.task.id, agent_entity(owner, make_session(parent=owner), parent=run.task.id), "a", 0
    )
    assert [r.task.id for r in workflows.list_active_by_owner(owner)] == [run.task.id]
    assert graph.tasks.finish(
        TaskFinish(
            task_id=run.task.id,
            from_states=["queued"],
            target_state="succeeded",
            event_kind="task_succeeded",
            payload_json="{}",
        )
    )
    assert [r.task.id for r in workflows.list_active_by_owner(owner)] == [run.task.id]
    assert graph.tasks.transition(agent.task.id, ["queued"], "canceled", "task_canceled")
    assert workflows.list_active_by_owner(owner) == []


def test_list_agent_task_details(graph: Graph, owner: str) -> None:
    workflows = graph.workflows
    runs = [workflows.create(run_entity(owner)) for _ in range(2)]
    created = [
        workflows.create_agent_task(
            run.task.id, agent_entity(owner, make_session(parent=owner), parent=run.task.id), n, i
        )
        for run, n, i in zip(runs, ["inspect", "review"], [0, 1], strict=True)
    ]
    details = workflows.list_agent_task_details([r.task.id for r in runs])
    expected = sorted(
        zip(
            [r.task.id for r in runs],
            ["inspect", "review"],
            [c.task.id for c in created],
            strict=True,
        )
    )
    assert [
        (d.link.workflow_task_id, d.link.node_key, d.agent_task.task.id) for d in details
    ] == expected
    assert details[0].agent_task.task.parent_task_id == details[0].link.workflow_task_id
    assert workflows.list_agent_task_details([]) == []


def test_create_agent_task_atomically_links(graph: Graph, owner: str) -> None:
    workflows = graph.workflows
    run = workflows.create(run_entity(owner))
    child = make_session(parent=owner)
    agent = workflows.create_agent_task(
        run.task.id, agent_entity(owner, child, parent=run.task.id), "inspect", 0
    )
    link = workflows.find_agent_task(run.task.id, "inspect", 0)
    assert link is not None and link.agent_task_id == agent.task.id
    assert link.created_at == agent.task.created_at
    with pytest.raises(WorkflowInvocationConflict):
        workflows.create_agent_task(
            run.task.id, agent_entity(owner, child, parent=run.task.id), "inspect", 0
        )
    assert len(graph.agents.list_by_owner(owner)) == 1


def test_create_agent_task_with_child_session_atomically(graph: Graph, owner: str) -> None:
    workflows = graph.workflows
    run = workflows.create(run_entity(owner))
    request = ChildSessionRequest(cwd="/repo", name="inspect", parent_session_id=owner)
    agent = workflows.create_agent_task_with_child_session(
        run.task.id, agent_entity(owner, parent=run.task.id), request, "inspect", 0
    )
    assert Session.objects.get(pk=agent.child_session_id).parent_session == owner
    with pytest.raises(WorkflowInvocationConflict):
        workflows.create_agent_task_with_child_session(
            run.task.id, agent_entity(owner, parent=run.task.id), request, "inspect", 0
        )
    assert Session.objects.filter(parent_session=owner).count() == 1
    assert AgentTask.objects.count() == WorkflowAgentTask.objects.count() == 1
    wrong = ChildSessionRequest(cwd="/repo", parent_session_id=new_id())
    with pytest.raises(ValidationError, match="parent differs from agent task owner"):
        workflows.create_agent_task_with_child_session(
            run.task.id, agent_entity(owner, parent=run.task.id), wrong, "inspect", 1
        )
    with pytest.raises(ValidationError, match="child session request is required"):
        workflows.create_agent_task_with_child_session("", agent_entity(owner), None, "x", 0)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"source": ""}, "workflow_run.source is required"),
        ({"source_hash": ""}, "workflow_run.source_hash is required"),
        ({"arguments_json": "{"}, "arguments_json must be a JSON object"),
        ({"arguments_json": "[]"}, "arguments_json must be a JSON object"),
        ({"arguments_json": "null"}, "arguments_json must be a JSON object"),
    ],
)
def test_validation(graph: Graph, owner: str, change: dict[str, object], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        graph.workflows.create(run_entity(owner, **change))
    assert Task.objects.count() == 0


def test_validation_of_links_and_nil(graph: Graph, owner: str) -> None:
    with pytest.raises(ValidationError, match="workflow run is required"):
        graph.workflows.create(None)
    with pytest.raises(ValidationError, match="workflow_task_id must be a UUIDv7"):
        graph.workflows.link_agent_task("bad", "bad", "node", 0)
    with pytest.raises(ValidationError, match="agent task is required"):
        graph.workflows.create_agent_task(new_id(), None, "node", 0)
    run = graph.workflows.create(run_entity(owner))
    with pytest.raises(ValidationError, match="invocation_index must not be negative"):
        graph.workflows.link_agent_task(run.task.id, new_id(), "node", -1)
    with pytest.raises(ValidationError, match="names no agent task"):
        graph.workflows.link_agent_task(run.task.id, new_id(), "node", 0)
    with pytest.raises(ValidationError, match="names no workflow run"):
        graph.workflows.link_agent_task(new_id(), child_agent(graph, owner).task.id, "node", 0)


def test_boundaries_and_idempotent_links(graph: Graph, owner: str) -> None:
    workflows = graph.workflows
    run = workflows.create(run_entity(owner, arguments_json=""))
    assert run.arguments_json == "{}"
    agent = child_agent(graph, owner)
    first = workflows.link_agent_task(run.task.id, agent.task.id, " node ", 0)
    again = workflows.link_agent_task(run.task.id, agent.task.id, "node", 0)
    assert first == again and first.node_key == "node"
    other = child_agent(graph, owner)
    with pytest.raises(WorkflowInvocationConflict, match="already linked"):
        workflows.link_agent_task(run.task.id, other.task.id, "node", 0)
    with pytest.raises(ValidationError, match="agent_task_id must be a UUIDv7"):
        workflows.link_agent_task(run.task.id, "bad", "node", 0)
    assert WorkflowAgentTask.objects.count() == 1


def test_link_agent_task_only_recovers_invocation_uniqueness(graph: Graph, owner: str) -> None:
    workflows = graph.workflows
    run = workflows.create(run_entity(owner))
    agent = child_agent(graph, owner)
    workflows.link_agent_task(run.task.id, agent.task.id, "node", 0)
    reject_inserts(WorkflowAgentTask._meta.db_table, "reject workflow link")
    # A look-up-first implementation would return the existing link here.
    with pytest.raises(IntegrityError, match="reject workflow link"):
        workflows.link_agent_task(run.task.id, agent.task.id, "node", 0)


def test_link_rejects_an_agent_already_linked_elsewhere(graph: Graph, owner: str) -> None:
    workflows = graph.workflows
    run = workflows.create(run_entity(owner))
    agent = child_agent(graph, owner)
    workflows.link_agent_task(run.task.id, agent.task.id, "a", 0)
    # A domain error (the API's 409), not the database's IntegrityError (a 500).
    with pytest.raises(AgentTaskAlreadyLinked, match="already linked to this workflow as 'a'"):
        workflows.link_agent_task(run.task.id, agent.task.id, "b", 0)
    with pytest.raises(AgentTaskAlreadyLinked, match="already linked to this workflow"):
        workflows.link_agent_task(run.task.id, agent.task.id, "a", 1)
    other = workflows.create(run_entity(owner))
    with pytest.raises(AgentTaskAlreadyLinked, match="another workflow") as caught:
        workflows.link_agent_task(other.task.id, agent.task.id, "a", 0)
    assert run.task.id not in caught.value.message
    assert WorkflowAgentTask.objects.count() == 1


def test_create_rolls_back_every_write_on_failure(graph: Graph, owner: str) -> None:
    with pytest.raises(NoSession, match="insert task"):
        graph.workflows.create(run_entity(new_id()))
    assert Task.objects.count() == WorkflowRun.objects.count() == TaskEvent.objects.count() == 0
    # The run row is written last: its failure must take the task and event with it.
    reject_inserts(WorkflowRun._meta.db_table, "reject workflow run")
    with pytest.raises(IntegrityError, match="reject workflow run"):
        graph.workflows.create(run_entity(owner))
    assert Task.objects.count() == WorkflowRun.objects.count() == TaskEvent.objects.count() == 0


def test_rejects_agent_parent_and_owner_mismatch(
    graph: Graph, owner: str, other_owner: str
) -> None:
    workflows = graph.workflows
    run = workflows.create(run_entity(owner))
    with pytest.raises(ValidationError, match="agent task parent") as parent:
        workflows.create_agent_task(
            run.task.id, agent_entity(owner, make_session(), parent=new_id()), "n", 0
        )
    assert parent.value.code == "workflow_agent_parent_mismatch"
    with pytest.raises(ValidationError, match="owner differs") as owner_error:
        workflows.create_agent_task(
            run.task.id, agent_entity(other_owner, make_session(), parent=run.task.id), "n", 0
        )
    assert owner_error.value.code == "workflow_agent_owner_mismatch"
    assert AgentTask.objects.count() == 0


def test_persisted_workflow_compatibility_fixture(graph: Graph, owner: str) -> None:
    """Rows as an import of librecode v10 data would write them read back through the repository."""
    at = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    run_id, agent_ids = new_id(), [new_id(), new_id()]
    Task.objects.create(
        id=run_id,
        kind="workflow",
        state="succeeded",
        owner_session_id=owner,
        created_at=at,
        updated_at=at,
        started_at=at,
        finished_at=at,
    )
    WorkflowRun.objects.create(
        task_id=run_id,
        name="compatibility fixture",
        source="s",
        source_hash="h",
        source_version="v1",
        arguments_json='{"scope":"terminal states"}',
    )
    for n, (kind, seq) in enumerate(
        [("task_queued", 1), ("task_started", 2), ("task_succeeded", 3)]
    ):
        TaskEvent.objects.create(
            task_id=run_id, sequence=seq, event_id=new_id(), kind=kind, created_at=at
        )
        assert n + 1 == seq
    for index, agent_id in enumerate(agent_ids):
        Task.objects.create(
            id=agent_id,
            kind="agent",
            state="succeeded",
            owner_session_id=owner,
            parent_task_id=run_id,
            created_at=at,
            updated_at=at,
        )
        AgentTask.objects.create(
            task_id=agent_id,
            child_session_id=make_session(parent=owner),
            agent_name="general",
            prompt="p",
            depth=1,
        )
        WorkflowAgentTask.objects.create(
            workflow_id=run_id,
            agent_task_id=agent_id,
            sequence=index + 1,
            node_key="inspect",
            invocation_index=index,
            created_at=at,
        )
    run = graph.workflows.get(run_id)
    assert run is not None and run.name == "compatibility fixture"
    assert (run.source_version, run.arguments_json) == ("v1", '{"scope":"terminal states"}')
    details = graph.workflows.list_agent_task_details([run_id])
    assert [(d.link.node_key, d.link.invocation_index, d.link.sequence) for d in details] == [
        ("inspect", 0, 1),
        ("inspect", 1, 2),
    ]
    assert all(d.agent_task.task.owner_session_id == owner for d in details)
    assert all(d.agent_task.task.parent_task_id == run_id for d in details)
    found = graph.workflows.find_agent_task(run_id, "inspect", 1)
    assert found is not None and found.agent_task_id == agent_ids[1]
    events = graph.tasks.list_events(run_id)
    assert [(e.event.kind, e.sequence) for e in events] == [
        ("task_queued", 1),
        ("task_started", 2),
        ("task_succeeded", 3),
    ]


@pytest.mark.django_db(transaction=True)
def test_concurrent_links_get_unique_contiguous_sequences() -> None:
    owner = make_session()
    tasks = TaskRepository()
    workflows = WorkflowRepository(tasks=tasks)
    run = workflows.create(run_entity(owner))
    agents = [
        workflows.agents.create(agent_entity(owner, make_session(parent=owner))) for _ in range(8)
    ]

    def linker(n: int) -> Callable[[], object]:
        return lambda: workflows.link_agent_task(run.task.id, agents[n].task.id, "node", n)

    results, errors = run_together(*[linker(n) for n in range(8)])
    assert errors == []
    links = workflows.list_agent_tasks(run.task.id)
    assert [x.sequence for x in links] == list(range(1, 9))
    assert sorted(x.invocation_index for x in links) == list(range(8))


@pytest.mark.django_db(transaction=True)
def test_concurrent_identical_link_is_idempotent() -> None:
    owner = make_session()
    workflows = WorkflowRepository(agents=AgentTaskRepository())
    run = workflows.create(run_entity(owner))
    agent = workflows.agents.create(agent_entity(owner, make_session(parent=owner)))
    results, errors = run_together(
        *[lambda: workflows.link_agent_task_created(run.task.id, agent.task.id, " same ", 3)] * 8
    )
    assert errors == []
    assert len(results) == 8 and len({link for link, _ in results}) == 1  # type: ignore[misc]
    # Exactly one caller wrote it (the API's one 201).
    assert sorted(created for _, created in results) == [False] * 7 + [True]  # type: ignore[misc]
    [link] = workflows.list_agent_tasks(run.task.id)
    assert (link.sequence, link.node_key, link.invocation_index) == (1, "same", 3)
