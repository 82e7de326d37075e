"""AgentTaskRepository (librecode agent_task_repository_test.go, session_task_behavior_test.go)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from agentstore.exceptions import NoSession, ValidationError
from agentstore.ids import new_id
from agentstore.models import AgentTask, Session, Task, TaskEvent
from agentstore.types import AgentTaskEntity, ChildSessionRequest, TaskFinish
from tests.tasks.conftest import Graph, agent_entity

pytestmark = pytest.mark.django_db


def test_agent_task_lifecycle(
    graph: Graph, owner: str, session_factory: Callable[..., str]
) -> None:
    child = session_factory(parent=owner)
    created = graph.agents.create(agent_entity(owner, child, policy_json='{"tools":["read"]}'))
    assert (created.task.state, created.task.kind) == ("queued", "agent") and created.task.id
    tasks = graph.tasks
    assert not tasks.transition(created.task.id, ["succeeded"], "running", "task_started")
    assert tasks.transition(created.task.id, ["queued"], "running", "task_started")
    assert tasks.transition(created.task.id, ["running"], "succeeded", "task_succeeded")
    assert not tasks.transition(created.task.id, ["running"], "failed", "task_failed")
    got = graph.agents.get(created.task.id)
    assert got is not None and got.task.state == "succeeded"
    assert (got.child_session_id, got.agent_name, got.prompt, got.policy_json, got.depth) == (
        child,
        "general",
        "inspect the repository",
        '{"tools":["read"]}',
        1,
    )
    assert graph.agents.list_by_owner(owner, 10) == [got]
    assert got.task.started_at is not None and got.task.finished_at is not None
    events = tasks.list_events(created.task.id)
    assert [e.event.kind for e in events] == ["task_queued", "task_started", "task_succeeded"]
    assert [e.sequence for e in events] == [1, 2, 3]
    assert all(e.event.id for e in events)


def test_creates_child_session_atomically(graph: Graph, owner: str) -> None:
    request = ChildSessionRequest(cwd="/repo/sub", name="inspect", parent_session_id=owner)
    created = graph.agents.create_with_child_session(agent_entity(owner), request)
    child = Session.objects.get(pk=created.child_session_id)
    assert (child.parent_session, child.kind, child.cwd, child.name) == (
        owner,
        "tree",
        "/repo/sub",
        "inspect",
    )
    assert child.created_at == created.task.created_at  # the task clock
    wrong = ChildSessionRequest(cwd="/repo", parent_session_id=new_id())
    with pytest.raises(ValidationError, match="parent differs from agent task owner"):
        graph.agents.create_with_child_session(agent_entity(owner), wrong)
    assert Session.objects.filter(parent_session=owner).count() == 1


def test_rolls_back_child_session_when_task_insert_fails(graph: Graph, owner: str) -> None:
    request = ChildSessionRequest(cwd="/repo", parent_session_id=owner)
    with pytest.raises(ValidationError, match="insert task"):
        graph.agents.create_with_child_session(agent_entity(owner, parent=new_id()), request)
    assert Session.objects.filter(parent_session=owner).count() == 0
    assert Task.objects.count() == AgentTask.objects.count() == 0


def test_create_requires_an_existing_child_session(graph: Graph, owner: str) -> None:
    with pytest.raises(NoSession, match="child session"):
        graph.agents.create(agent_entity(owner, new_id()))
    assert Task.objects.count() == 0


def test_finish_behavior(graph: Graph, owner: str, session_factory: Callable[..., str]) -> None:
    def finish(task_id: str, states: list[str] | None) -> TaskFinish:
        return TaskFinish(
            task_id=task_id,
            from_states=states or [],
            target_state="succeeded",
            event_kind="task_succeeded",
            payload_json="{}",
        )

    agents = graph.agents
    done = agents.create(agent_entity(owner, session_factory(parent=owner)))
    assert agents.finish(finish(done.task.id, ["queued"]), '{"input_tokens":12}')
    got = agents.get(done.task.id)
    assert got is not None and (got.task.state, got.usage_json) == (
        "succeeded",
        '{"input_tokens":12}',
    )

    stale = agents.create(agent_entity(owner, session_factory(parent=owner)))
    assert not agents.finish(finish(stale.task.id, ["running"]), '{"input_tokens":12}')
    got = agents.get(stale.task.id)
    assert got is not None and (got.task.state, got.usage_json) == ("queued", "{}")
    with pytest.raises(ValidationError, match="usage_json must be valid JSON"):
        agents.finish(finish(stale.task.id, ["queued"]), "{")
    assert agents.get(stale.task.id).task.state == "queued"  # type: ignore[union-attr]
    with pytest.raises(ValidationError, match="source states and a terminal target"):
        agents.finish(finish(stale.task.id, None), "{}")
    with pytest.raises(ValidationError, match="task finish is required"):
        agents.finish(None, "{}")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"task_owner": "bad"}, "task.owner_session_id must be a UUIDv7"),
        ({"parent": "bad"}, "task.parent_task_id must be a UUIDv7"),
        ({"child": "bad"}, "child_session_id must be a UUIDv7"),
        ({"agent_name": " "}, "agent_name is required"),
        ({"prompt": " "}, "prompt is required"),
        ({"depth": 0}, "depth must be positive"),
        ({"policy_json": "{"}, "policy_json must be valid JSON"),
        ({"usage_json": "{"}, "usage_json must be valid JSON"),
    ],
)
def test_create_validation(
    graph: Graph,
    owner: str,
    session_factory: Callable[..., str],
    change: dict[str, object],
    message: str,
) -> None:
    child = str(change.pop("child", session_factory(parent=owner)))
    task_owner = str(change.pop("task_owner", owner))
    parent = str(change.pop("parent", ""))
    with pytest.raises(ValidationError, match=message) as info:
        graph.agents.create(agent_entity(task_owner, child, parent=parent, **change))
    assert info.value.field
    assert Task.objects.count() == 0


def test_create_defaults_and_nil(
    graph: Graph, owner: str, session_factory: Callable[..., str]
) -> None:
    with pytest.raises(ValidationError, match="agent task is required"):
        graph.agents.create(None)
    with pytest.raises(ValidationError, match="child session request is required"):
        graph.agents.create_with_child_session(agent_entity(owner), None)
    created = graph.agents.create(
        agent_entity(owner, session_factory(parent=owner), policy_json="", usage_json="")
    )
    assert (created.policy_json, created.usage_json) == ("{}", "{}")


def test_get_missing_and_list_by_ids(
    graph: Graph, owner: str, session_factory: Callable[..., str]
) -> None:
    assert graph.agents.get(new_id()) is None
    assert graph.agents.list_by_ids([]) == []
    one = graph.agents.create(agent_entity(owner, session_factory(parent=owner)))
    two = graph.agents.create(agent_entity(owner, session_factory(parent=owner)))
    found = graph.agents.list_by_ids([one.task.id, two.task.id, new_id()])
    assert sorted(a.task.id for a in found) == sorted([one.task.id, two.task.id])


def test_task_repository_appends_polymorphic_events(
    graph: Graph, owner: str, session_factory: Callable[..., str]
) -> None:
    agent = graph.agents.create(agent_entity(owner, session_factory(parent=owner)))
    event = graph.tasks.append_event(agent.task.id, "tool_started", '{"tool":"bash"}')
    assert event.sequence == 2
    assert graph.tasks.list_events(agent.task.id, 1) == [event]


def test_deleting_the_owner_removes_tasks_but_keeps_the_child_session(graph: Graph) -> None:
    owner = Session.objects.create(
        id=new_id(), kind="tree", cwd="/r", created_at=graph.clock(), updated_at=graph.clock()
    ).id
    request = ChildSessionRequest(cwd="/repo", parent_session_id=owner)
    agent: AgentTaskEntity = graph.agents.create_with_child_session(agent_entity(owner), request)
    graph.tasks.append_event(agent.task.id, "extra", "{}")
    Session.objects.filter(pk=owner).delete()
    assert not Task.objects.filter(pk=agent.task.id).exists()
    assert not AgentTask.objects.exists() and not TaskEvent.objects.exists()
    assert Session.objects.filter(pk=agent.child_session_id).exists()


def test_deleting_the_child_session_removes_the_agent_row_and_keeps_the_owner(
    graph: Graph, owner: str
) -> None:
    request = ChildSessionRequest(cwd="/repo", parent_session_id=owner)
    agent = graph.agents.create_with_child_session(agent_entity(owner), request)
    Session.objects.filter(pk=agent.child_session_id).delete()
    # The ORM cascades the agent row; TreeStore.delete_session also removes the
    # owner's generic task row (decision record 0018), which a bare ORM delete does not.
    assert graph.agents.get(agent.task.id) is None
    assert Session.objects.filter(pk=owner).exists()


def test_child_session_belongs_to_the_owner_sessions_user(graph: Graph, owner: str) -> None:
    from django.contrib.auth import get_user_model

    alice = get_user_model().objects.create_user("alice")
    Session.objects.filter(pk=owner).update(owner=alice)
    request = ChildSessionRequest(cwd="/repo/sub", parent_session_id=owner)

    created = graph.agents.create_with_child_session(agent_entity(owner), request)

    assert Session.objects.get(pk=created.child_session_id).owner == alice
