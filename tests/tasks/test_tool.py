"""ToolTaskRepository (librecode tool_task_repository_test.go and the tool branches)."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from agentstore.exceptions import NoSession, ValidationError
from agentstore.ids import new_id
from agentstore.models import Task, ToolTask
from agentstore.tasks import TaskRepository, ToolTaskRepository
from agentstore.tasks.tool import CANCELED_OUTCOME, LEASE_EXPIRED_OUTCOME
from agentstore.types import TaskFinish
from tests.tasks.conftest import Graph, claim_for, make_session, run_together, tool_entity

pytestmark = pytest.mark.django_db


def settle(task_id: str, owner: str, target: str = "succeeded", states=("running",)) -> TaskFinish:  # type: ignore[no-untyped-def]
    return TaskFinish(
        task_id=task_id,
        lease_owner=owner,
        from_states=list(states),
        target_state=target,
        event_kind=f"task_{target}",
        payload_json="{}",
    )


def test_create_idempotent_finish_and_owner_scope(
    graph: Graph, owner: str, other_owner: str
) -> None:
    tools = graph.tools
    first = tools.create(tool_entity(owner))
    again = tools.create(tool_entity(owner, arguments_json='{"path":"other"}'))
    assert again == first and again.arguments_json == '{"path":"go.mod"}'
    assert (first.task.kind, first.task.state, first.outcome_version) == ("tool", "queued", None)
    assert tools.get_owned(other_owner, first.task.id) is None
    foreign = tools.create(tool_entity(other_owner))
    assert foreign.task.id != first.task.id
    expiry = graph.clock.peek() + timedelta(minutes=5)
    assert graph.tasks.claim_queued(claim_for(first.task.id, "worker", expiry))
    outcome = '{"result":{"content":[],"details":{}},"is_error":false}'
    assert tools.finish(settle(first.task.id, "worker"), outcome)
    got = tools.get(first.task.id)
    assert got is not None and got.task.state == "succeeded"
    assert json.loads(got.outcome_json or "") == json.loads(outcome)
    assert got.outcome_version == 1


def test_create_defaults_policy_without_mutating_candidate(graph: Graph, owner: str) -> None:
    candidate = tool_entity(owner, policy_json="")
    created = graph.tools.create(candidate)
    assert candidate.policy_json == "" and created.policy_json == "{}"


def test_finish_honors_queued_source_state(graph: Graph, owner: str) -> None:
    task = graph.tools.create(tool_entity(owner))
    finish = TaskFinish(
        task_id=task.task.id,
        from_states=["queued"],
        target_state="failed",
        event_kind="task_failed",
        error_message="rejected",
        payload_json="{}",
    )
    assert graph.tools.finish(finish, '{"is_error":true}')
    assert graph.tools.get(task.task.id).task.state == "failed"  # type: ignore[union-attr]


def test_canceling_wins_terminal_settlement(graph: Graph, owner: str) -> None:
    task = graph.tools.create(tool_entity(owner))
    expiry = graph.clock.peek() + timedelta(minutes=5)
    assert graph.tasks.claim_queued(claim_for(task.task.id, "worker", expiry))
    canceling = graph.tools.cancel(owner, task.task.id)
    assert canceling is not None and canceling.task.state == "canceling"
    assert canceling.task.lease_owner == "worker"
    assert graph.tools.cancel(owner, task.task.id).task.state == "canceling"  # type: ignore[union-attr]
    assert not graph.tools.finish(
        settle(task.task.id, "intruder", states=("running", "canceling")), "{}"
    )
    assert graph.tools.finish(
        settle(task.task.id, "worker", states=("running", "canceling")), '{"is_error":false}'
    )
    got = graph.tools.get(task.task.id)
    assert got is not None
    assert (got.task.state, got.task.error_code, got.outcome_json) == (
        "canceled",
        "canceled",
        CANCELED_OUTCOME,
    )
    kinds = [e.event.kind for e in graph.tasks.list_events(task.task.id)]
    assert kinds == ["task_queued", "task_started", "task_canceling", "task_canceled"]
    assert graph.tasks.latest_event(task.task.id).event.payload_json == '{"error_code":"canceled"}'  # type: ignore[union-attr]


def test_settlement_requires_live_lease(graph: Graph, owner: str) -> None:
    task = graph.tools.create(tool_entity(owner))
    dead = graph.clock.peek() - timedelta(seconds=1)
    assert graph.tasks.claim_queued(claim_for(task.task.id, "worker", dead))
    assert not graph.tools.finish(settle(task.task.id, "worker"), "{}")
    got = graph.tools.get(task.task.id)
    assert got is not None and got.task.state == "running" and got.outcome_json is None


def test_recover_expired_stores_canonical_outcome_and_skips_live_leases(
    graph: Graph, owner: str
) -> None:
    tools, tasks, now = graph.tools, graph.tasks, graph.clock.peek()
    expired = tools.create(tool_entity(owner, "a"))
    canceling = tools.create(tool_entity(owner, "b"))
    live = tools.create(tool_entity(owner, "c"))
    assert tasks.claim_queued(claim_for(expired.task.id, "w1", now - timedelta(minutes=1)))
    assert tasks.claim_queued(claim_for(canceling.task.id, "w2", now - timedelta(minutes=1)))
    assert tasks.transition(canceling.task.id, ["running"], "canceling", "task_canceling")
    assert tasks.claim_queued(claim_for(live.task.id, "w3", now + timedelta(hours=1)))
    assert tools.recover_expired(graph.clock.peek()) == [expired.task.id, canceling.task.id]
    for task_id in (expired.task.id, canceling.task.id):
        got = tools.get(task_id)
        assert got is not None
        assert (got.task.state, got.task.error_code, got.outcome_version) == (
            "interrupted",
            "lease_expired",
            1,
        )
        assert got.outcome_json == LEASE_EXPIRED_OUTCOME and "lease expired" in got.outcome_json
    still = tools.get(live.task.id)
    assert still is not None and still.task.state == "running" and still.outcome_json is None


def test_cancel_queued_stores_canonical_outcome_and_is_then_a_noop(
    graph: Graph, owner: str
) -> None:
    task = graph.tools.create(tool_entity(owner))
    canceled = graph.tools.cancel(owner, task.task.id)
    assert canceled is not None
    assert (canceled.task.state, canceled.outcome_json) == ("canceled", CANCELED_OUTCOME)
    again = graph.tools.cancel(owner, task.task.id)
    assert again == canceled
    assert len(graph.tasks.list_events(task.task.id)) == 2


def test_cancel_is_owner_scoped(graph: Graph, owner: str, other_owner: str) -> None:
    task = graph.tools.create(tool_entity(owner))
    assert graph.tools.cancel(other_owner, task.task.id) is None
    assert graph.tools.cancel(owner, new_id()) is None
    assert graph.tools.get(task.task.id).task.state == "queued"  # type: ignore[union-attr]


def test_create_rolls_back_when_owner_is_missing(graph: Graph) -> None:
    ghost = new_id()
    with pytest.raises(NoSession, match="create tool task"):
        graph.tools.create(tool_entity(ghost))
    assert Task.objects.count() == 0
    assert graph.tools.get_by_invocation(ghost, "call-1") is None


def test_lookup_validation_and_missing_finish(graph: Graph) -> None:
    with pytest.raises(ValidationError, match="tool_task.task_id must be a UUIDv7"):
        graph.tools.get("bad")
    with pytest.raises(ValidationError, match="tool_task.owner_session_id must be a UUIDv7"):
        graph.tools.get_by_invocation("bad", "call-1")
    with pytest.raises(ValidationError, match="tool_task.task_id must be a UUIDv7"):
        graph.tools.get_owned(new_id(), "bad")
    with pytest.raises(ValidationError, match="tool_task.owner_session_id must be a UUIDv7"):
        graph.tools.get_owned("bad", new_id())
    assert not graph.tools.finish(settle(new_id(), "w"), "{}")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"target_name": " "}, "target, cwd, owner, invocation, and wrapper call are required"),
        ({"cwd": ""}, "target, cwd, owner, invocation, and wrapper call are required"),
        ({"timeout_seconds": 0}, "timeout must be positive"),
        ({"arguments_json": "[]"}, "arguments must be a bounded JSON object"),
        (
            {"arguments_json": json.dumps({"x": "a" * (256 * 1024)})},
            "arguments must be a bounded JSON object",
        ),
        ({"policy_json": "[]"}, "policy must be a JSON object"),
        ({"definition_json": "null"}, "definition must be a JSON object"),
        ({"owner_session_id": "bad"}, "owner_session_id must be a UUIDv7"),
    ],
)
def test_validation_branches(
    graph: Graph, owner: str, change: dict[str, object], message: str
) -> None:
    with pytest.raises(ValidationError, match=message):
        graph.tools.create(tool_entity(owner, **change))
    assert Task.objects.count() == 0


def test_list_cancel_and_finish_validation(graph: Graph, owner: str) -> None:
    tools = graph.tools
    with pytest.raises(ValidationError, match="tool task is required"):
        tools.create(None)
    first = tools.create(tool_entity(owner, "first"))
    second = tools.create(tool_entity(owner, "second"))
    expiry = graph.clock.peek() + timedelta(minutes=5)
    assert graph.tasks.claim_queued(claim_for(second.task.id, "w", expiry))
    assert [t.task.id for t in tools.list_by_owner(owner, ["queued"], 101)] == [first.task.id]
    assert len(tools.list_by_owner(owner, [], 0)) == 2
    with pytest.raises(ValidationError, match="must be a UUIDv7"):
        tools.list_by_owner("bad")
    with pytest.raises(ValidationError, match="outcome_json must be valid JSON"):
        tools.finish(settle(second.task.id, "w"), "{")
    with pytest.raises(ValidationError, match="task finish is required"):
        tools.finish(None, "{}")
    with pytest.raises(ValidationError, match="terminal target"):
        tools.finish(settle(second.task.id, "w", target="running"), "{}")
    assert tools.get(second.task.id).outcome_json is None  # type: ignore[union-attr]


@pytest.mark.django_db(transaction=True)
def test_concurrent_duplicate_creates_return_one_task() -> None:
    owner = make_session()
    tools = ToolTaskRepository()
    results, errors = run_together(*[lambda: tools.create_created(tool_entity(owner, "race"))] * 6)
    assert errors == []
    assert len({r.task.id for r, _ in results}) == 1 and len(results) == 6  # type: ignore[misc]
    # Exactly one caller admitted it (the API's one 201); a later replay did not.
    assert sorted(created for _, created in results) == [False] * 5 + [True]  # type: ignore[misc]
    assert tools.create_created(tool_entity(owner, "race"))[1] is False
    assert ToolTask.objects.filter(invocation_id="race").count() == 1


@pytest.mark.django_db(transaction=True)
def test_cancel_races_claim_without_losing_cancellation() -> None:
    owner = make_session()
    tools, tasks = ToolTaskRepository(), TaskRepository()
    for round_ in range(25):
        task_id = tools.create(tool_entity(owner, f"round-{round_}")).task.id
        expiry = tasks.now() + timedelta(minutes=5)
        _, errors = run_together(
            lambda: tasks.claim_queued(claim_for(task_id, "worker", expiry)),  # noqa: B023
            lambda: tools.cancel(owner, task_id),  # noqa: B023
        )
        assert errors == []
        got = tools.get(task_id)
        assert got is not None and got.task.state in {"canceled", "canceling"}
