"""Runs from Python: start, execute on the worker, read back — and the session's hold.

The worker here is ``TaskWorker(once=True)`` in this process: it claims what is
ready, runs it, and stops when nothing is. Runs are tasks, so their queue,
lease and retries are the tasks' (tested there); these tests hold what is
particular to a run: its session, its runner, its output, and that the session
is held for the run — by the run's code only.
"""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model

from agentstore import exceptions, runs
from agentstore.integrations.conversation import ConversationLog
from agentstore.models import Holder, Session, Task
from agentstore.runs.execution import hold_token
from agentstore.stores.log import LogStore
from agentstore.stores.sessions import SessionStore
from agentstore.tasks import TaskRepository
from agentstore.tasks.worker import TaskWorker

pytestmark = pytest.mark.django_db(transaction=True)


def work() -> None:
    TaskWorker(once=True).run()


def texts(session_id: str) -> list[str]:
    tail = LogStore(holds=False).tail(session_id, None, types={"item"})
    return [entry.data["item"]["content"] for entry in tail.entries]


def test_a_run_creates_its_session_and_stores_the_runners_output() -> None:
    run = runs.start("echo", "hello", overrides={"model": "m-1"})
    assert run.state == "queued" and run.output is None and run.attempts == 0
    session = Session.objects.get(pk=run.session_id)
    assert session.kind == "log"  # the runner's default kind, there before the run
    work()
    done = runs.get_run(run.id)
    assert done is not None
    assert done.state == "succeeded" and done.finished
    assert done.output == {"text": "echo hello", "attempt": 1, "overrides": {"model": "m-1"}}
    assert done.input == "hello" and done.started_at and done.finished_at
    assert not Holder.objects.filter(session_id=run.session_id).exists()  # released


def test_runs_continue_one_session_in_the_order_they_were_started() -> None:
    first = runs.start("say", "one")
    work()
    second = runs.start("say", "two", session_id=first.session_id)
    third = runs.start("say", "three", session_id=first.session_id)
    work()
    assert texts(first.session_id) == ["one", "two", "three"]
    assert [r.id for r in runs.list_runs(first.session_id)] == [third.id, second.id, first.id]
    events = [e.event.kind for e in TaskRepository().list_events(second.id)]
    assert events == ["task_queued", "task_started", "said", "task_succeeded"]


def test_a_session_id_the_caller_chose_becomes_a_session_of_that_id() -> None:
    run = runs.start("say", "hi", session_id="conv-42")
    work()
    assert runs.get_run(run.id).state == "succeeded"  # type: ignore[union-attr]
    assert texts("conv-42") == ["hi"]


def test_an_async_runner_is_run_to_its_end() -> None:
    run = asyncio.run(runs.astart("aecho", "hi"))
    work()
    done = asyncio.run(runs.aget_run(run.id))
    assert done is not None and done.output == {"text": "async echo hi"}
    assert [r.id for r in asyncio.run(runs.alist_runs(run.session_id))] == [run.id]


def test_a_runner_that_raises_fails_the_run_and_is_retried_while_attempts_last() -> None:
    run = runs.start("fails", max_attempts=2)
    work()  # attempt 1 fails; the retry waits its backoff
    retrying = runs.get_run(run.id)
    assert retrying is not None and retrying.state == "queued" and retrying.attempts == 1
    Task.objects.filter(pk=run.id).update(run_after=None)  # the backoff, skipped
    work()
    failed = runs.get_run(run.id)
    assert failed is not None and failed.state == "failed" and failed.output is None
    assert failed.error_code == "builtins.RuntimeError"
    assert failed.error_message == "runner failed on attempt 2"


@pytest.mark.parametrize("runner", ["not_json"])
def test_an_output_that_is_not_json_fails_the_run_without_a_retry(runner: str) -> None:
    run = runs.start(runner, max_attempts=3)
    work()
    failed = runs.get_run(run.id)
    assert failed is not None and failed.state == "failed" and failed.attempts == 1
    assert "not JSON" in failed.error_message


def test_text_no_database_could_hold_comes_back_as_it_was_returned() -> None:
    run = runs.start("nul")
    work()
    done = runs.get_run(run.id)
    assert done is not None and done.output == "a\x00b\udc80"
    assert "\x00" not in Task.objects.get(pk=run.id).result  # stored as escapes


def test_the_session_is_held_by_the_run_and_only_its_code_writes_under_the_hold() -> None:
    run = runs.start("outsider")
    work()
    done = runs.get_run(run.id)
    assert done is not None and done.state == "succeeded", done.error_message
    assert done.output == {"outside": "SessionLocked"}
    assert texts(run.session_id) == ["from the run", "from the run again"]
    # Released with the run: anyone may write again.
    log = ConversationLog(run.session_id, harness="tests")
    log.read(None, types={"item"})
    log.write([{"type": "item", "item": {"type": "message", "role": "user", "content": "after"}}])
    assert texts(run.session_id)[-1] == "after"


def test_a_second_run_waits_while_another_run_holds_the_session() -> None:
    first = runs.start("say", "first", run_after=_later())  # queued, not ready
    SessionStore().claim_hold(first.session_id, hold_token(first.id))  # "running elsewhere"
    second = runs.start("say", "second", session_id=first.session_id)
    work()
    waiting = runs.get_run(second.id)
    assert waiting is not None and waiting.state == "queued"
    assert waiting.attempts == 0  # postponed: no attempt spent, no error recorded
    assert waiting.error_code == "" and waiting.run_after is not None
    events = TaskRepository().list_events(second.id)
    assert [e.event.kind for e in events] == ["task_queued", "task_started", "task_released"]
    assert "is busy" in json.loads(events[-1].event.payload_json)["reason"]
    # The first run ends (here: canceled) and leaves its hold behind, as a dead
    # worker would: the second run clears it and runs.
    TaskRepository().transition(first.id, ["queued"], "canceled", "task_canceled", "{}")
    Task.objects.filter(pk=second.id).update(run_after=None)
    work()
    assert runs.get_run(second.id).state == "succeeded"  # type: ignore[union-attr]
    assert texts(first.session_id) == ["second"]
    assert not Holder.objects.filter(session_id=first.session_id).exists()


def test_starting_checks_everything_before_writing_anything() -> None:
    before = (Session.objects.count(), Task.objects.count())
    bad = [
        ({"runner": "nope"}, "runner"),
        ({"runner": "echo", "input": float("nan")}, "input"),
        ({"runner": "echo", "input": "a\x00"}, "input"),
        ({"runner": "echo", "input": "x" * 1_000_001}, "input"),
        ({"runner": "echo", "overrides": ["model"]}, "overrides"),
        ({"runner": "echo", "queue": "a/b"}, "task.queue_name"),
        ({"runner": "echo", "priority": 101}, "task.priority"),
        ({"runner": "echo", "session_id": "   "}, "session_id"),
        ({"runner": "echo", "session_id": "x" * 256}, "session_id"),
        ({"runner": "a\x00"}, "runner"),
    ]
    for arguments, field in bad:
        name = arguments.pop("runner")
        with pytest.raises(exceptions.ValidationError) as raised:
            runs.start(name, **arguments)  # type: ignore[arg-type]
        assert raised.value.field == field, arguments
    assert (Session.objects.count(), Task.objects.count()) == before


def test_an_owner_starts_runs_only_on_sessions_they_may_see() -> None:
    users = get_user_model().objects
    alice, bob = users.create_user("alice"), users.create_user("bob")
    mine = runs.start("echo", "hi", owner=alice)
    assert Session.objects.get(pk=mine.session_id).owner_id == alice.pk
    with pytest.raises(exceptions.NoSession):
        runs.start("echo", "hi", owner=bob, session_id=mine.session_id)
    runs.start("echo", "again", owner=alice, session_id=mine.session_id)
    assert Task.objects.filter(owner_session_id=mine.session_id).count() == 2


def test_unknown_and_unstorable_run_ids_read_as_missing() -> None:
    for run_id in ["nope", "a\x00b", "\udc80", "../x"]:
        assert runs.get_run(run_id) is None
    task = TaskRepository().enqueue(runs_task())
    assert runs.get_run(task.id) is None  # a task, but not a run


def test_a_run_goes_with_its_session() -> None:
    run = runs.start("echo", "hi")
    SessionStore().delete(run.session_id)
    assert runs.get_run(run.id) is None
    assert not Task.objects.filter(pk=run.id).exists()


def _later() -> object:
    from django.utils import timezone

    return timezone.now() + timedelta(hours=1)


def runs_task() -> object:
    from agentstore.types.tasks import TaskEntity

    return TaskEntity(kind="function")


def test_a_start_that_fails_leaves_no_session_behind(monkeypatch: pytest.MonkeyPatch) -> None:
    def fail(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the disk is full")

    monkeypatch.setattr(TaskRepository, "insert_queued", fail)
    with pytest.raises(RuntimeError):
        runs.start("echo", "x", session_id="conv-atomic")
    assert not Session.objects.filter(pk="conv-atomic").exists()


def test_starts_racing_on_one_new_session_id_both_queue_a_run() -> None:
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connections

    def start(n: int) -> str:
        try:
            return runs.start("say", f"racer {n}", session_id="conv-race").id
        finally:
            connections.close_all()

    with ThreadPoolExecutor(4) as pool:
        ids = list(pool.map(start, range(8)))
    assert len(set(ids)) == 8
    assert Session.objects.filter(pk="conv-race").count() == 1
    work()
    assert sorted(texts("conv-race")) == sorted(f"racer {n}" for n in range(8))
