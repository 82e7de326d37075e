"""Lease fencing: who may renew, append and finish (librecode's task_lease_test.go).

See docs/tasks.md, "Leases and fencing".
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from agentstore.exceptions import ValidationError
from agentstore.types import TaskClaim, TaskEntity, TaskFinish, TaskRecovery
from tests.tasks.conftest import Graph, claim_for

pytestmark = pytest.mark.django_db


def succeed(task_id: str, owner: str) -> TaskFinish:
    return TaskFinish(
        task_id=task_id,
        lease_owner=owner,
        from_states=["running", "canceling"],
        target_state="succeeded",
        event_kind="task_succeeded",
        payload_json="{}",
    )


def test_does_not_renew_expired_lease(graph: Graph, owner: str) -> None:
    tasks, now = graph.tasks, graph.clock.peek()
    task = tasks.create(TaskEntity(kind="agent", owner_session_id=owner))
    assert tasks.claim_queued(claim_for(task.id, "worker", now - timedelta(minutes=1)))
    assert not tasks.renew_lease(task.id, "worker", now + timedelta(minutes=1))
    assert tasks.get(task.id).lease_expires_at == now - timedelta(minutes=1)


def test_leases_fence_workers_and_recovery(graph: Graph, owner: str) -> None:
    tasks, now = graph.tasks, graph.clock.peek()
    task = tasks.create(TaskEntity(kind="agent", owner_session_id=owner))
    expiry = now + timedelta(minutes=1)
    assert tasks.claim_queued(claim_for(task.id, "worker-one", expiry))
    assert not tasks.claim_queued(claim_for(task.id, "worker-two", expiry))
    assert not tasks.renew_lease(task.id, "worker-two", expiry + timedelta(minutes=1))
    before = tasks.get(task.id).updated_at
    assert tasks.renew_lease(task.id, "worker-one", expiry + timedelta(minutes=1))
    renewed = tasks.get(task.id)
    assert renewed.lease_expires_at == expiry + timedelta(minutes=1)
    assert renewed.updated_at > before  # heartbeats reorder owner lists
    recovery = TaskRecovery(
        kind="agent",
        expires_before=expiry,
        target_state="interrupted",
        event_kind="task_interrupted",
        payload_json="{}",
    )
    assert tasks.recover_expired(recovery) == []
    assert not tasks.transition(task.id, ["running"], "failed", "task_failed")  # leased
    assert not tasks.finish(succeed(task.id, ""))
    assert not tasks.finish(succeed(task.id, "worker-two"))
    assert tasks.finish(succeed(task.id, "worker-one"))
    got = tasks.get(task.id)
    assert (got.state, got.lease_owner, got.lease_expires_at) == ("succeeded", "", None)
    kinds = [e.event.kind for e in tasks.list_events(task.id)]
    assert kinds == ["task_queued", "task_started", "task_succeeded"]  # renewals add none


def test_recovery_boundary_is_inclusive(graph: Graph, owner: str) -> None:
    tasks, now = graph.tasks, graph.clock.peek()
    task = tasks.create(TaskEntity(kind="agent", owner_session_id=owner))
    expiry = now + timedelta(minutes=1)
    assert tasks.claim_queued(claim_for(task.id, "w", expiry))
    recovery = TaskRecovery(
        kind="agent",
        expires_before=expiry - timedelta(microseconds=1),
        target_state="interrupted",
        event_kind="task_interrupted",
        payload_json="{}",
    )
    assert tasks.recover_expired(recovery) == []
    exact = TaskRecovery(
        kind="agent",
        expires_before=expiry,
        target_state="interrupted",
        event_kind="task_interrupted",
        payload_json="{}",
    )
    assert tasks.recover_expired(exact) == [task.id]


def test_recovers_expired_lease(graph: Graph, owner: str) -> None:
    tasks, now = graph.tasks, graph.clock.peek()
    task = tasks.create(TaskEntity(kind="agent", owner_session_id=owner))
    assert tasks.claim_queued(claim_for(task.id, "dead-worker", now - timedelta(minutes=1)))
    tasks.append_event(task.id, "note", "{}")
    recovery = TaskRecovery(
        kind="agent",
        expires_before=now,
        target_state="interrupted",
        event_kind="task_interrupted",
        payload_json="{}",
    )
    assert tasks.recover_expired(recovery) == [task.id]
    got = tasks.get(task.id)
    assert (got.state, got.lease_owner, got.lease_expires_at) == ("interrupted", "", None)
    # The dead worker wakes up: it can write nothing.
    assert not tasks.finish(succeed(task.id, "dead-worker"))
    assert tasks.append_running_event(task.id, "dead-worker", "progress", "{}") is None
    assert not tasks.renew_lease(task.id, "dead-worker", now + timedelta(hours=1))
    assert [e.sequence for e in tasks.list_events(task.id)] == [1, 2, 3, 4]


def test_expired_owner_cannot_settle_before_recovery(graph: Graph, owner: str) -> None:
    tasks, now = graph.tasks, graph.clock.peek()
    task = tasks.create(TaskEntity(kind="agent", owner_session_id=owner))
    assert tasks.claim_queued(claim_for(task.id, "slow", now + timedelta(milliseconds=50)))
    graph.clock.advance(timedelta(seconds=1))
    assert not tasks.finish(succeed(task.id, "slow"))
    assert tasks.get(task.id).state == "running"


def test_canceling_keeps_the_lease(graph: Graph, owner: str) -> None:
    tasks, now = graph.tasks, graph.clock.peek()
    task = tasks.create(TaskEntity(kind="agent", owner_session_id=owner))
    assert tasks.claim_queued(claim_for(task.id, "w", now + timedelta(minutes=1)))
    assert tasks.transition(task.id, ["running"], "canceling", "task_canceling")
    assert tasks.get(task.id).lease_owner == "w"
    assert tasks.renew_lease(task.id, "w", now + timedelta(minutes=2))
    assert tasks.finish(succeed(task.id, "w"))


def test_lease_validation(graph: Graph, owner: str) -> None:
    tasks, now = graph.tasks, graph.clock.peek()
    task = tasks.create(TaskEntity(kind="agent", owner_session_id=owner))
    with pytest.raises(ValidationError, match="task claim is required"):
        tasks.claim_queued(None)
    with pytest.raises(ValidationError, match="requires an owner and expiry"):
        tasks.claim_queued(TaskClaim(task_id=task.id, lease_expires_at=now, event_kind="s"))
    with pytest.raises(ValidationError, match="requires an owner and expiry"):
        tasks.claim_queued(TaskClaim(task_id=task.id, lease_owner="w", event_kind="s"))
    with pytest.raises(ValidationError, match="event.kind is required"):
        tasks.claim_queued(TaskClaim(task_id=task.id, lease_owner="w", lease_expires_at=now))
    with pytest.raises(ValidationError, match="requires an owner and expiry"):
        tasks.renew_lease(task.id, "", now)
    with pytest.raises(ValidationError, match="requires an owner and expiry"):
        tasks.renew_lease(task.id, "w", None)
    with pytest.raises(ValidationError, match="task recovery is required"):
        tasks.recover_expired(None)
    with pytest.raises(ValidationError, match="requires a terminal target"):
        tasks.recover_expired(
            TaskRecovery(
                kind="agent",
                expires_before=now,
                target_state="running",
                event_kind="x",
                payload_json="{}",
            )
        )
    with pytest.raises(ValidationError, match="event.kind is required"):
        tasks.recover_expired(
            TaskRecovery(
                kind="agent",
                expires_before=now,
                target_state="failed",
                event_kind=" ",
                payload_json="{}",
            )
        )
    assert tasks.get(task.id).state == "queued"
    assert len(tasks.list_events(task.id)) == 1
