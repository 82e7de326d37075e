"""TaskRepository: create, lists, transitions, finish, events (librecode task_repository*)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from agentstore import db
from agentstore.exceptions import NoSession, ValidationError
from agentstore.ids import new_id
from agentstore.models import Task, TaskEvent
from agentstore.tasks import TaskRepository
from agentstore.types import TaskEntity, TaskEventDraft, TaskFinish, TaskRecovery
from tests.tasks.conftest import Graph, claim_for

pytestmark = pytest.mark.django_db


def test_create_get_and_list(graph: Graph, owner: str) -> None:
    tasks = graph.tasks
    first = tasks.create(TaskEntity(kind="agent", owner_session_id=owner, concurrency_key="one"))
    second = tasks.create(
        TaskEntity(
            kind="agent", owner_session_id=owner, parent_task_id=first.id, concurrency_key="two"
        )
    )
    assert first.state == second.state == "queued"
    assert first.created_at is not None and first.created_at == first.updated_at
    got = tasks.get(second.id)
    assert got == second
    assert got.parent_task_id == first.id and got.concurrency_key == "two"
    assert tasks.get(new_id()) is None

    assert [t.id for t in tasks.list_by_owner("agent", owner, 0)] == [second.id, first.id]
    third = tasks.create(TaskEntity(kind="tool", owner_session_id=owner))
    assert [t.id for t in tasks.list_owned(owner, [], ["queued"], 0)] == [
        third.id,
        second.id,
        first.id,
    ]
    assert [t.id for t in tasks.list_owned(owner, ["agent"], [], 1)] == [second.id]
    assert [t.id for t in tasks.list_by_states("agent", ["queued"], 1)] == [first.id]
    assert [t.id for t in tasks.list_by_states("agent", ["queued"], 0)] == [first.id, second.id]
    assert tasks.list_by_states("agent", [], 10) == []


def test_create_forces_a_clean_queued_task(graph: Graph, owner: str, clock: object) -> None:
    task = graph.tasks.create(
        TaskEntity(
            kind="job",
            owner_session_id=owner,
            state="succeeded",
            result="stale",
            lease_owner="someone",
            lease_expires_at=graph.clock.peek() + timedelta(hours=1),
            started_at=graph.clock.peek(),
        )
    )
    assert task.state == "queued"
    assert (task.result, task.lease_owner, task.lease_expires_at, task.started_at) == (
        "",
        "",
        None,
        None,
    )
    [event] = graph.tasks.list_events(task.id)
    assert (event.sequence, event.event.kind, event.event.payload_json) == (1, "task_queued", "{}")
    assert event.event.created_at == task.created_at


@pytest.mark.parametrize(
    ("entity", "message"),
    [
        (TaskEntity(kind=" ", owner_session_id=new_id()), "task.kind is required"),
        (
            TaskEntity(kind="agent", owner_session_id="bad"),
            "task.owner_session_id must be a UUIDv7",
        ),
        (
            TaskEntity(kind="agent", owner_session_id=new_id(), parent_task_id="bad"),
            "task.parent_task_id must be a UUIDv7",
        ),
        (None, "task is required"),
    ],
)
def test_create_validation(graph: Graph, entity: TaskEntity | None, message: str) -> None:
    with pytest.raises(ValidationError, match=message) as info:
        graph.tasks.create(entity)
    assert info.value.field
    assert Task.objects.count() == 0


def test_create_refuses_missing_owner_and_parent(graph: Graph, owner: str) -> None:
    with pytest.raises(NoSession, match="insert task"):
        graph.tasks.create(TaskEntity(kind="agent", owner_session_id=new_id()))
    with pytest.raises(ValidationError, match="insert task"):
        graph.tasks.create(
            TaskEntity(kind="agent", owner_session_id=owner, parent_task_id=new_id())
        )
    assert Task.objects.count() == 0 and TaskEvent.objects.count() == 0


def test_transition_behavior(graph: Graph, owner: str) -> None:
    tasks = graph.tasks
    task = tasks.create(TaskEntity(kind="agent", owner_session_id=owner))
    assert tasks.transition(task.id, ["queued"], "running", "task_started")
    running = tasks.get(task.id)
    assert running.state == "running" and running.started_at is not None
    assert not tasks.transition(task.id, ["queued"], "running", "task_started")
    assert tasks.get(task.id).state == "running"

    other = tasks.create(TaskEntity(kind="agent", owner_session_id=owner))
    assert not tasks.transition(other.id, ["running"], "succeeded", "task_succeeded")
    assert tasks.get(other.id).state == "queued"
    assert tasks.transition(other.id, ["queued"], "interrupted", "task_interrupted")
    interrupted = tasks.get(other.id)
    assert interrupted.finished_at is not None and interrupted.started_at is None
    assert tasks.latest_event(other.id).event.payload_json == "{}"  # "" becomes {}

    with pytest.raises(ValidationError, match="requires a source state"):
        tasks.transition(task.id, [], "running", "task_started")
    with pytest.raises(ValidationError, match="event.kind is required"):
        tasks.transition(task.id, ["running"], "canceling", " ")
    with pytest.raises(ValidationError, match="event.payload_json must be valid JSON"):
        tasks.transition(task.id, ["running"], "canceling", "x", "{")
    with pytest.raises(ValidationError, match="unknown task state"):
        tasks.transition(task.id, ["running"], "paused", "x")
    assert not tasks.transition(new_id(), ["queued"], "running", "task_started")


def test_transition_from_terminal_keeps_finished_at(graph: Graph, owner: str) -> None:
    tasks = graph.tasks
    task = tasks.create(TaskEntity(kind="agent", owner_session_id=owner))
    assert tasks.transition(task.id, ["queued"], "failed", "task_failed")
    finished = tasks.get(task.id).finished_at
    assert tasks.transition(task.id, ["failed"], "queued", "task_requeued")
    assert tasks.get(task.id).finished_at == finished


def test_finish_behavior(graph: Graph, owner: str) -> None:
    tasks = graph.tasks
    with pytest.raises(ValidationError, match="task finish is required"):
        tasks.finish(None)
    task = tasks.create(TaskEntity(kind="agent", owner_session_id=owner))
    done = TaskFinish(
        task_id=task.id,
        from_states=["queued"],
        target_state="succeeded",
        event_kind="task_succeeded",
        result="done",
        payload_json='{"result":"done"}',
    )
    assert tasks.finish(done)
    got = tasks.get(task.id)
    assert (got.state, got.result) == ("succeeded", "done")
    assert got.finished_at is not None and got.started_at is None
    assert tasks.latest_event(task.id).event.payload_json == '{"result":"done"}'

    second = tasks.create(TaskEntity(kind="agent", owner_session_id=owner))
    failed = TaskFinish(
        task_id=second.id,
        from_states=["queued"],
        target_state="failed",
        event_kind="task_failed",
        error_code="model",
        error_message="failed",
        payload_json="{}",
    )
    assert tasks.finish(failed)
    got = tasks.get(second.id)
    assert (got.state, got.error_code, got.error_message) == ("failed", "model", "failed")

    stale = TaskFinish(
        task_id=second.id,
        from_states=["running"],
        target_state="succeeded",
        event_kind="task_succeeded",
        payload_json="{}",
    )
    assert not tasks.finish(stale)
    with pytest.raises(ValidationError, match="terminal target"):
        tasks.finish(
            TaskFinish(
                task_id=second.id,
                from_states=["queued"],
                target_state="running",
                event_kind="x",
                payload_json="{}",
            )
        )
    with pytest.raises(ValidationError, match="source states"):
        tasks.finish(
            TaskFinish(task_id=second.id, target_state="failed", event_kind="x", payload_json="{}")
        )
    with pytest.raises(ValidationError, match="valid JSON"):
        tasks.finish(
            TaskFinish(
                task_id=second.id,
                from_states=["queued"],
                target_state="failed",
                event_kind="x",
                payload_json="",  # an empty payload is invalid here
            )
        )
    assert [e.sequence for e in tasks.list_events(second.id)] == [1, 2]


def test_event_behavior(graph: Graph, owner: str) -> None:
    tasks = graph.tasks
    task = tasks.create(TaskEntity(kind="agent", owner_session_id=owner))
    latest = tasks.latest_event(task.id)
    assert (latest.event.kind, latest.sequence, latest.task_id) == ("task_queued", 1, task.id)
    progress = tasks.append_event(task.id, "progress", '{"percent":50}')
    assert progress.sequence == 2 and progress.event.id
    with pytest.raises(ValidationError, match="event.kind is required"):
        tasks.append_event(task.id, " ", "{}")
    with pytest.raises(ValidationError, match="valid JSON"):
        tasks.append_event(task.id, "progress", "{")
    assert tasks.list_events(task.id, 1, 0) == [progress]
    assert tasks.latest_event(new_id()) is None
    with pytest.raises(ValidationError, match="does not exist"):
        tasks.append_event(new_id(), "progress", "{}")


def test_list_events_pages(graph: Graph, owner: str) -> None:
    tasks = graph.tasks
    task = tasks.create(TaskEntity(kind="agent", owner_session_id=owner))
    for n in range(120):
        tasks.append_event(task.id, "tick", f'{{"n":{n}}}')
    assert len(tasks.list_events(task.id, 0, 0)) == 100
    assert len(tasks.list_events(task.id, 0, 500)) == 121  # no upper cap
    assert [e.sequence for e in tasks.list_events(task.id, 119, 10)] == [120, 121]


def test_list_filters_and_limits(graph: Graph, owner: str, other_owner: str) -> None:
    tasks = graph.tasks
    agent_queued = tasks.create(TaskEntity(kind="agent", owner_session_id=owner))
    agent_running = tasks.create(TaskEntity(kind="agent", owner_session_id=owner))
    assert tasks.transition(agent_running.id, ["queued"], "running", "task_started")
    extension = tasks.create(TaskEntity(kind="extension-job", owner_session_id=owner))
    tasks.create(TaskEntity(kind="tool", owner_session_id=owner))
    foreign = tasks.create(TaskEntity(kind="extension-job", owner_session_id=other_owner))

    assert [t.id for t in tasks.list_owned(owner, ["agent"], ["queued"], 101)] == [agent_queued.id]
    assert len(tasks.list_owned(owner, [], [], 1)) == 1
    assert len(tasks.list_owned(owner, [], [], -1)) == 4
    excluded = tasks.list_queued_excluding(["agent", "tool"], 101)
    assert [t.id for t in excluded] == [extension.id, foreign.id]
    assert len(tasks.list_queued_excluding([], 0)) == 4


def test_list_limits_cap_at_one_hundred(graph: Graph, owner: str) -> None:
    for _ in range(105):
        graph.tasks.create(TaskEntity(kind="job", owner_session_id=owner))
    assert len(graph.tasks.list_owned(owner, [], [], 500)) == 100
    assert len(graph.tasks.list_queued_excluding([], 500)) == 100
    assert len(graph.tasks.list_by_states("job", ["queued"], 0)) == 105


def test_claim_interrupted_and_running_events(graph: Graph, owner: str) -> None:
    tasks, now = graph.tasks, graph.clock.peek()
    task = tasks.create(TaskEntity(kind="workflow", owner_session_id=owner))
    assert tasks.transition(task.id, ["queued"], "interrupted", "task_interrupted")
    claim = claim_for(task.id, "worker", now + timedelta(minutes=5), "task_resumed")
    assert tasks.claim_interrupted(claim)
    resumed = tasks.get(task.id)
    assert resumed.state == "running" and resumed.finished_at is None
    assert tasks.append_running_event(task.id, "other-worker", "progress", "{}") is None
    event = tasks.append_running_event(task.id, "worker", "progress", '{"step":1}')
    assert event is not None and event.event.kind == "progress" and event.sequence == 4
    assert tasks.transition(task.id, ["running"], "canceling", "task_canceling")
    canceling = tasks.append_running_event(task.id, "worker", "progress", "{}")
    assert canceling is not None and (canceling.sequence, canceling.event.payload_json) == (6, "{}")
    with pytest.raises(ValidationError, match="valid JSON"):
        tasks.append_running_event(task.id, "worker", "progress", "{")
    assert [e.sequence for e in tasks.list_events(task.id)] == [1, 2, 3, 4, 5, 6]


def test_claims_reset_outcome_but_keep_started_at(graph: Graph, owner: str) -> None:
    tasks, now = graph.tasks, graph.clock.peek()
    task = tasks.create(TaskEntity(kind="workflow", owner_session_id=owner))
    assert tasks.claim_queued(claim_for(task.id, "w1", now + timedelta(minutes=1)))
    started = tasks.get(task.id).started_at
    assert tasks.finish(
        TaskFinish(
            task_id=task.id,
            lease_owner="w1",
            from_states=["running"],
            target_state="interrupted",
            event_kind="task_interrupted",
            result="partial",
            error_code="x",
            payload_json="{}",
        )
    )
    assert tasks.claim_interrupted(claim_for(task.id, "w2", now + timedelta(minutes=2), "resume"))
    got = tasks.get(task.id)
    assert (got.state, got.result, got.error_code, got.finished_at) == ("running", "", "", None)
    assert got.started_at == started and got.lease_owner == "w2"


def test_recovery_handles_canceling_and_unleased_tasks(graph: Graph, owner: str) -> None:
    tasks = graph.tasks
    running = tasks.create(TaskEntity(kind="agent", owner_session_id=owner))
    canceling = tasks.create(TaskEntity(kind="agent", owner_session_id=owner))
    queued = tasks.create(TaskEntity(kind="agent", owner_session_id=owner))
    other_kind = tasks.create(TaskEntity(kind="tool", owner_session_id=owner))
    for task in (running, canceling, other_kind):
        assert tasks.transition(task.id, ["queued"], "running", "task_started")
    assert tasks.transition(canceling.id, ["running"], "canceling", "task_canceling")
    recovery = TaskRecovery(
        kind="agent",
        expires_before=graph.clock.peek(),
        target_state="failed",
        event_kind="task_failed",
        error_code="worker_lost",
        error_message="worker disappeared",
        payload_json='{"recovered":true}',
    )
    assert tasks.recover_expired(recovery) == [running.id, canceling.id]
    for task_id in (running.id, canceling.id):
        got = tasks.get(task_id)
        assert (got.state, got.error_code, got.error_message) == (
            "failed",
            "worker_lost",
            "worker disappeared",
        )
        assert got.finished_at is not None
        assert tasks.latest_event(task_id).event.payload_json == '{"recovered":true}'
    assert tasks.get(queued.id).state == "queued"
    assert tasks.get(other_kind.id).state == "running"  # recovery is kind-scoped
    assert tasks.recover_expired(recovery) == []


def test_recovery_runs_in_batches(graph: Graph, owner: str) -> None:
    tasks = graph.tasks
    expired = graph.clock.peek() - timedelta(minutes=1)
    ids = []
    for n in range(230):
        task = tasks.create(TaskEntity(kind="batch", owner_session_id=owner))
        assert tasks.claim_queued(claim_for(task.id, f"w{n}", expired))
        ids.append(task.id)
    recovery = TaskRecovery(
        kind="batch",
        expires_before=graph.clock.peek(),
        target_state="interrupted",
        event_kind="task_interrupted",
        payload_json="{}",
    )
    assert tasks.recover_expired(recovery) == ids
    assert Task.objects.filter(kind="batch", state="interrupted").count() == 230


def test_append_running_events_batch(graph: Graph, owner: str) -> None:
    tasks = graph.tasks
    task = tasks.create(TaskEntity(kind="agent", owner_session_id=owner))
    assert tasks.claim_queued(claim_for(task.id, "worker", graph.clock.peek() + timedelta(hours=1)))
    assert tasks.append_running_events(task.id, "worker", []) == ([], True)
    drafts = [TaskEventDraft(kind=f"k{n}", payload_json=f'{{"n":{n}}}') for n in range(3)]
    assert tasks.append_running_events(task.id, "intruder", drafts) == ([], False)
    events, appended = tasks.append_running_events(task.id, "worker", drafts)
    assert appended
    assert [e.sequence for e in events] == [3, 4, 5]
    assert [(e.event.kind, e.event.payload_json, e.task_id) for e in events] == [
        (d.kind, d.payload_json, task.id) for d in drafts
    ]
    assert len({e.event.created_at for e in events}) == 1
    assert tasks.list_events(task.id, 2) == events  # what was written reads back equal
    bad = [
        TaskEventDraft(kind="ok", payload_json="{}"),
        TaskEventDraft(kind="bad", payload_json="{"),
    ]
    with pytest.raises(ValidationError, match="valid JSON"):
        tasks.append_running_events(task.id, "worker", bad)
    assert len(tasks.list_events(task.id)) == 5


def test_append_running_events_after_lease_loss(graph: Graph, owner: str) -> None:
    tasks = graph.tasks
    task = tasks.create(TaskEntity(kind="agent", owner_session_id=owner))
    dead = graph.clock.peek() - timedelta(minutes=1)
    assert tasks.claim_queued(claim_for(task.id, "old-owner", dead))
    assert tasks.append_running_event(task.id, "old-owner", "progress", "{}") is None
    recovery = TaskRecovery(
        kind="agent",
        expires_before=graph.clock.peek(),
        target_state="interrupted",
        event_kind="task_interrupted",
        payload_json="{}",
    )
    assert task.id in tasks.recover_expired(recovery)
    live = graph.clock.peek() + timedelta(minutes=5)
    assert tasks.claim_interrupted(claim_for(task.id, "new-owner", live, "task_resumed"))
    assert tasks.append_running_events(
        task.id, "old-owner", [TaskEventDraft(kind="p", payload_json="{}")]
    ) == ([], False)
    events, appended = tasks.append_running_events(
        task.id, "new-owner", [TaskEventDraft(kind="p", payload_json="{}")]
    )
    assert appended and len(events) == 1


def test_claim_next_queued_takes_the_oldest_of_its_kind(graph: Graph, owner: str) -> None:
    tasks = graph.tasks
    later = graph.clock.peek() + timedelta(minutes=1)
    first = tasks.create(TaskEntity(kind="job", owner_session_id=owner))
    tasks.create(TaskEntity(kind="other", owner_session_id=owner))
    second = tasks.create(TaskEntity(kind="job", owner_session_id=owner))
    assert tasks.claim_next_queued("job", "w", later) == first.id
    assert tasks.claim_next_queued("job", "w", later) == second.id
    assert tasks.claim_next_queued("job", "w", later) is None
    got = tasks.get(first.id)
    assert (got.state, got.lease_owner, got.lease_expires_at) == ("running", "w", later)
    assert tasks.latest_event(first.id).event.kind == "task_started"


def test_nil_entities_are_refused(graph: Graph) -> None:
    tasks = graph.tasks
    with pytest.raises(ValidationError, match="task claim is required"):
        tasks.claim_queued(None)
    with pytest.raises(ValidationError, match="task claim is required"):
        tasks.claim_interrupted(None)
    with pytest.raises(ValidationError, match="task recovery is required"):
        tasks.recover_expired(None)


@pytest.mark.django_db(transaction=True)
def test_concurrent_appends_keep_sequences_contiguous() -> None:
    from tests.tasks.conftest import make_session, run_together

    tasks = TaskRepository()
    task = tasks.create(TaskEntity(kind="job", owner_session_id=make_session()))

    def append_many() -> None:
        for n in range(25):
            tasks.append_event(task.id, "tick", f'{{"n":{n}}}')

    _, errors = run_together(*[append_many] * 4)
    assert errors == []
    assert [e.sequence for e in tasks.list_events(task.id, 0, 1000)] == list(range(1, 102))


def test_a_failing_event_insert_rolls_the_claim_back(graph: Graph, owner: str) -> None:
    from django.db import IntegrityError

    from tests.tasks.conftest import reject_inserts

    task = graph.tasks.create(TaskEntity(kind="agent", owner_session_id=owner))
    reject_inserts(TaskEvent._meta.db_table, "reject task event")
    expiry = graph.clock.peek() + timedelta(minutes=1)
    # The hand-written SQL path still raises Django's exceptions.
    with pytest.raises(IntegrityError, match="reject task event"):
        graph.tasks.claim_queued(claim_for(task.id, "w", expiry))
    got = graph.tasks.get(task.id)
    assert got is not None and (got.state, got.lease_owner) == ("queued", "")


@pytest.mark.django_db(transaction=True)
def test_an_event_racing_the_one_statement_finish_is_kept() -> None:
    """PostgreSQL's one-statement ``finish_and_claim`` reads one snapshot: an event
    committed while it waited for the task's row lock makes its MAX(sequence) + 1
    collide. It must fall back to step-by-step and keep both events, in order.
    """
    import threading
    import time

    from django.db import connection, transaction

    if connection.vendor != "postgresql":
        pytest.skip("the one-statement finish and claim is PostgreSQL's")
    tasks = TaskRepository()
    queued = tasks.enqueue(TaskEntity(kind="job", queue_name="race"))
    expiry = tasks.now() + timedelta(minutes=5)
    [task] = tasks.claim_ready(["race"], ["job"], "w", expiry)
    locked, commit = threading.Event(), threading.Event()
    outcome: list[object] = []

    def request_cancel() -> None:  # holds the row lock until told to commit
        try:
            with transaction.atomic(), db.cursor(tasks.using) as cursor:
                moved = tasks.transition_row(
                    cursor, task.id, ["running"], "canceling",
                    "task_cancel_requested", "{}", new_id(), tasks.now(),
                )  # fmt: skip
                outcome.append(moved)
                locked.set()
                commit.wait(30)
        except BaseException as error:  # reported to the test
            outcome.append(error)
            locked.set()
        finally:
            connection.close()

    def finish() -> None:
        try:
            done = TaskFinish(
                task_id=task.id,
                lease_owner="w",
                from_states=["running", "canceling"],
                target_state="succeeded",
                event_kind="task_succeeded",
                payload_json="{}",
            )
            outcome.append(tasks.finish_and_claim([done], ["race"], ["job"], "w", expiry))
        except BaseException as error:  # reported to the test
            outcome.append(error)
        finally:
            connection.close()

    canceller = threading.Thread(target=request_cancel)
    canceller.start()
    assert locked.wait(30)
    assert outcome == [True], outcome
    finisher = threading.Thread(target=finish)
    finisher.start()
    # Commit the cancel only once the finish statement waits for the row lock.
    deadline = time.monotonic() + 30
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute(
                "SELECT COUNT(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND wait_event_type = 'Lock' AND query LIKE 'WITH f0 AS%%'"
            )
            if cursor.fetchone()[0]:
                break
            time.sleep(0.01)
        else:
            pytest.fail("the finish never waited for the row lock")
    commit.set()
    canceller.join()
    finisher.join()
    assert outcome == [True, ([True], [])]
    got = tasks.get(queued.id)
    assert got is not None and got.state == "succeeded"
    events = tasks.list_events(task.id)
    assert [(e.sequence, e.event.kind) for e in events] == [
        (1, "task_queued"),
        (2, "task_started"),
        (3, "task_cancel_requested"),
        (4, "task_succeeded"),
    ]
