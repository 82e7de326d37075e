"""Property test: any sequence of lifecycle calls keeps the task's invariants.

Hypothesis drives one task through random claims, renewals, running events,
transitions, finishes and recoveries by several workers and a moving clock.
After every call: a call reported a change exactly when it wrote its events,
the event log is contiguous from 1, terminal tasks hold no lease and have
``finished_at``, and a leased task has started.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentstore.ids import new_id
from agentstore.types import TaskClaim, TaskEntity, TaskEventDraft, TaskFinish, TaskRecovery
from tests.tasks.conftest import START, TickingClock, make_session

STATES = ["queued", "running", "canceling", "succeeded", "failed", "canceled", "interrupted"]
TERMINAL = {"succeeded", "failed", "canceled", "interrupted"}
WORKERS = ["", "w1", "w2"]

operation = st.one_of(
    st.tuples(st.just("claim"), st.sampled_from(WORKERS[1:]), st.integers(-5, 5)),
    st.tuples(st.just("resume"), st.sampled_from(WORKERS[1:]), st.integers(-5, 5)),
    st.tuples(st.just("renew"), st.sampled_from(WORKERS[1:]), st.integers(-5, 5)),
    st.tuples(st.just("append"), st.sampled_from(WORKERS[1:]), st.integers(0, 3)),
    st.tuples(st.just("event"), st.just(""), st.integers(0, 0)),
    st.tuples(
        st.just("transition"),
        st.sampled_from(STATES),
        st.lists(st.sampled_from(STATES), min_size=1, max_size=3),
    ),
    st.tuples(
        st.just("finish"),
        st.sampled_from(WORKERS),
        st.tuples(
            st.sampled_from(sorted(TERMINAL)),
            st.lists(st.sampled_from(STATES), min_size=1, max_size=3),
        ),
    ),
    st.tuples(st.just("recover"), st.just(""), st.integers(-5, 5)),
    st.tuples(st.just("tick"), st.just(""), st.integers(1, 5)),
)


@pytest.mark.django_db
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(operations=st.lists(operation, max_size=25))
def test_any_call_sequence_keeps_the_invariants(operations: list[tuple[object, ...]]) -> None:
    from agentstore.tasks.repository import TaskRepository

    clock = TickingClock(START, step=timedelta(0))
    tasks = TaskRepository(clock=clock)
    # Examples share the test's database transaction: a kind of its own per example.
    kind = f"prop-{new_id()}"
    task = tasks.create(TaskEntity(kind=kind, owner_session_id=make_session()))
    expected_events = 1
    minute = timedelta(minutes=1)

    for op in operations:
        name = op[0]
        now = clock.peek()
        written = 0
        if name in ("claim", "resume"):
            claim = TaskClaim(
                task_id=task.id,
                lease_owner=str(op[1]),
                lease_expires_at=now + int(op[2]) * minute,  # type: ignore[call-overload]
                event_kind="task_started",
            )
            call = tasks.claim_queued if name == "claim" else tasks.claim_interrupted
            written = 1 if call(claim) else 0
        elif name == "renew":
            tasks.renew_lease(task.id, str(op[1]), now + int(op[2]) * minute)  # type: ignore[call-overload]
        elif name == "append":
            drafts = [TaskEventDraft(kind="p", payload_json="{}")] * int(op[2])  # type: ignore[call-overload]
            events, appended = tasks.append_running_events(task.id, str(op[1]), drafts)
            assert len(events) == (len(drafts) if appended else 0)
            written = len(events)
        elif name == "event":
            tasks.append_event(task.id, "note", "{}")
            written = 1
        elif name == "transition":
            written = 1 if tasks.transition(task.id, op[2], str(op[1]), "moved") else 0  # type: ignore[arg-type]
        elif name == "finish":
            target, sources = op[2]  # type: ignore[misc]
            finish = TaskFinish(
                task_id=task.id,
                lease_owner=str(op[1]),
                from_states=sources,
                target_state=target,
                event_kind="settled",
                payload_json="{}",
            )
            written = 1 if tasks.finish(finish) else 0
        elif name == "recover":
            recovery = TaskRecovery(
                kind=kind,
                expires_before=now + int(op[2]) * minute,  # type: ignore[call-overload]
                target_state="interrupted",
                event_kind="recovered",
                payload_json="{}",
            )
            written = len(tasks.recover_expired(recovery))
        else:
            clock.advance(int(op[2]) * minute)  # type: ignore[call-overload]
        expected_events += written

        got = tasks.get(task.id)
        assert got is not None
        log = tasks.list_events(task.id, 0, 1000)
        assert [e.sequence for e in log] == list(range(1, expected_events + 1)), op
        if got.state in TERMINAL:
            assert got.finished_at is not None
        if got.lease_owner:
            assert got.state not in TERMINAL and got.lease_expires_at is not None
        if got.lease_owner:
            assert got.started_at is not None  # only claims set leases, and claims start
