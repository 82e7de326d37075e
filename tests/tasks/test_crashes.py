"""A crash is not the task's failure: the crash budget, apart from the retry budget.

A task whose worker went away (its lease expired) is queued again by recovery —
the worker's sweep, the admin, the command and the API share one policy,
``agentstore/tasks/recovery.py`` — with the crash counted and its retry attempts
untouched, until ``TASK_MAX_CRASHES`` crashes; the crash past that fails it,
naming the count. agent, tool and workflow tasks are never rerun. A dead worker
is faked here with a claim whose lease is already over; the real thing (SIGKILL
of a worker process) is in ``test_worker_crash.py``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings
from django.utils import timezone

from agentstore.exceptions import TaskCrashed
from agentstore.models import Task
from agentstore.tasks import TaskRepository, ToolTaskRepository
from agentstore.tasks.framework import framework
from agentstore.tasks.recovery import FAILED, recover_expired_leases, rescue_expired
from agentstore.tasks.worker import TaskWorker, sweep
from agentstore.types import TaskEntity
from tests.tasks import jobs
from tests.tasks.conftest import make_session, tool_entity

pytestmark = pytest.mark.django_db(transaction=True)

assert framework is not None
Status = framework.TaskResultStatus
NO_BACKOFF = {"WORKER_RETRY_BACKOFF_BASE": 0.0}


def crash(task_id: str, worker: str = "dead") -> None:
    """Claim ``task_id`` (the oldest ready task) for a worker whose lease is already over."""
    tasks = TaskRepository()
    [claimed] = tasks.claim_ready(
        ["default", "reports"], [], worker, timezone.now() - timedelta(seconds=1)
    )
    assert claimed.id == task_id


def run_ready(**options: Any) -> TaskWorker:
    worker = TaskWorker(once=True, **options)
    worker.run()
    return worker


def events(task_id: str) -> list[tuple[str, dict[str, Any]]]:
    return [
        (e.event.kind, json.loads(e.event.payload_json))
        for e in TaskRepository().list_events(task_id)
    ]


@pytest.fixture
def finished() -> Iterator[list[Any]]:
    """The ``task_finished`` results sent."""
    seen: list[Any] = []

    def receive(sender: Any, task_result: Any, **kwargs: Any) -> None:
        seen.append(task_result)

    framework.task_finished.connect(receive, weak=False)
    yield seen
    framework.task_finished.disconnect(receive)


def test_a_crashed_function_task_runs_again_without_spending_its_attempt() -> None:
    result = jobs.add.enqueue(2, 3)  # the backend's MAX_ATTEMPTS is 1: no retries
    crash(result.id)
    outcome = sweep(TaskRepository(), ["function"], timezone.now())
    assert outcome == {"requeued": [result.id], "settled": []}
    task = TaskRepository().get(result.id)
    assert task is not None
    assert (task.state, task.attempts, task.crashes, task.max_attempts) == ("queued", 1, 1, 1)
    kind, payload = events(result.id)[-1]
    assert kind == "task_lease_expired"
    assert payload["worker_id"] == "dead"
    assert (payload["crashes"], payload["max_crashes"]) == (1, 3)
    worker = run_ready()
    result.refresh()
    assert (result.status, result.return_value) == (Status.SUCCESSFUL, 5)
    assert result.attempts == 2
    assert result.worker_ids == ["dead", worker.worker_id]
    # The crash is listed among the result's errors, as a failed attempt would be.
    assert [e.exception_class for e in result.errors] == [TaskCrashed]
    assert "crash 1 of 3 allowed" in result.errors[0].traceback


@override_settings(AGENTSTORE=NO_BACKOFF)
def test_the_retry_budget_is_apart_from_the_crash_budget(tmp_path: Path) -> None:
    """Two crashes and two failures: the task still gets all three of its attempts."""
    marker = tmp_path / "flaky"
    result = jobs.flaky.enqueue(str(marker), 2)  # max_attempts=3: fails twice, then "ok"
    tasks = TaskRepository()
    for _ in range(2):
        crash(result.id)
        assert sweep(tasks, ["function"], timezone.now())["requeued"] == [result.id]
    for _ in range(3):
        run_ready()
    result.refresh()
    assert (result.status, result.return_value) == (Status.SUCCESSFUL, "ok")
    task = tasks.get(result.id)
    assert task is not None and (task.attempts, task.crashes) == (5, 2)
    assert marker.read_text() == "3"  # three runs of the function itself


@override_settings(AGENTSTORE={"TASK_MAX_CRASHES": 2})
def test_the_crash_past_the_budget_fails_the_task_naming_the_count(finished: list[Any]) -> None:
    result = jobs.add.enqueue(1, 1)
    tasks = TaskRepository()
    for expected in ({"requeued": [result.id], "settled": []},) * 2 + (
        {"requeued": [], "settled": [result.id]},
    ):
        crash(result.id)
        assert sweep(tasks, ["function"], timezone.now()) == expected
    task = tasks.get(result.id)
    assert task is not None
    assert (task.state, task.error_code, task.crashes, task.attempts) == ("failed", "crashed", 3, 3)
    assert "went away 3 times" in task.error_message
    assert "TASK_MAX_CRASHES is 2" in task.error_message
    log = events(result.id)
    assert [kind for kind, _ in log] == [
        "task_queued",
        "task_started",
        "task_lease_expired",
        "task_started",
        "task_lease_expired",
        "task_started",
        "task_failed",
    ]
    assert log[-1][1]["crashes"] == 3 and log[-1][1]["error_code"] == "crashed"
    result.refresh()
    assert result.status == Status.FAILED
    assert [e.exception_class for e in result.errors] == [TaskCrashed] * 3
    # The stored failure is announced like any other (receivers see FAILED).
    assert [(r.id, r.status) for r in finished] == [(result.id, Status.FAILED)]
    assert sweep(tasks, ["function"], timezone.now()) == {}  # settled once


@override_settings(AGENTSTORE={"TASK_MAX_CRASHES": 0})
def test_a_budget_of_zero_never_reruns_a_crashed_task() -> None:
    result = jobs.add.enqueue(1, 1)
    crash(result.id)
    assert sweep(TaskRepository(), ["function"], timezone.now()) == {
        "requeued": [],
        "settled": [result.id],
    }
    task = TaskRepository().get(result.id)
    assert task is not None and (task.state, task.crashes) == ("failed", 1)
    assert "went away once" in task.error_message


@pytest.mark.parametrize("budget", [-1, "3", 2.5, True, None])
def test_a_bad_budget_is_refused(budget: Any) -> None:
    with (
        override_settings(AGENTSTORE={"TASK_MAX_CRASHES": budget}),
        pytest.raises(ImproperlyConfigured, match="TASK_MAX_CRASHES"),
    ):
        rescue_expired(["function"])


def test_every_door_applies_the_same_policy() -> None:
    """The admin's action and the command call recover_expired_leases: a rerun there too."""
    result = jobs.add.enqueue(1, 1)
    crash(result.id)
    assert recover_expired_leases() == {"function": [result.id]}
    task = TaskRepository().get(result.id)
    assert task is not None and (task.state, task.crashes) == ("queued", 1)


def test_a_named_policy_settles_instead_of_rerunning() -> None:
    """The API's recover-expired names its target (librecode's RecoverExpired): no rerun."""
    result = jobs.add.enqueue(1, 1)
    crash(result.id)
    done = rescue_expired(["function"], policy=FAILED)
    assert (done.requeued, done.settled) == ({}, {"function": [result.id]})
    task = TaskRepository().get(result.id)
    assert task is not None
    assert (task.state, task.error_code, task.crashes) == ("failed", "lease_expired", 1)


def test_each_kind_has_its_rule() -> None:
    """Custom kinds rerun like functions; agent, tool and workflow tasks are interrupted."""
    tasks = TaskRepository()
    owner = make_session()
    report = tasks.enqueue(TaskEntity(kind="report", queue_name="reports"))
    crash(report.id)
    tool = ToolTaskRepository(tasks=tasks).create(tool_entity(owner))
    tasks.claim_next_queued("tool", "dead", timezone.now() - timedelta(seconds=1))
    done = rescue_expired(now=timezone.now())
    assert done.requeued == {"report": [report.id]}
    assert done.settled == {"report": [], "tool": [tool.task.id]}
    settled = ToolTaskRepository(tasks=tasks).get(tool.task.id)
    assert settled is not None and settled.task.state == "interrupted"
    assert settled.task.crashes == 1  # counted, though not rerun
    assert "lease expired" in (settled.outcome_json or "")


def test_a_canceling_task_whose_worker_went_away_ends_canceled() -> None:
    result = jobs.add.enqueue(1, 1)
    crash(result.id)
    tasks = TaskRepository()
    assert tasks.transition(result.id, ["running"], "canceling", "task_canceling")
    assert sweep(tasks, ["function"], timezone.now()) == {"requeued": [], "settled": [result.id]}
    task = tasks.get(result.id)
    assert task is not None and (task.state, task.error_code) == ("canceled", "canceled")


def test_a_task_that_crashed_before_runs_alone(tmp_path: Path) -> None:
    """Before running it the worker stores its finished work and gives back the rest."""
    tasks = TaskRepository()
    first = tasks.enqueue(TaskEntity(kind="probe"))
    crashed = tasks.enqueue(TaskEntity(kind="probe"))
    last = tasks.enqueue(TaskEntity(kind="probe"))
    [claimed, _, _] = tasks.claim_ready(
        ["default"], ["probe"], "dead", timezone.now() - timedelta(seconds=1), limit=3
    )
    rescue_expired(["probe"])  # all three crashed once; make two of them fresh again
    Task.objects.filter(pk__in=[first.id, last.id]).update(crashes=0)
    seen: dict[str, Any] = {}

    def probe(job: Any) -> str:
        if job.task.id == crashed.id:
            seen["states"] = dict(Task.objects.values_list("id", "state"))
        return "done"

    worker = TaskWorker(once=True, batch=3, registry={"probe": probe})
    worker.run()
    # While the crashed task ran, the task before it was settled and the one after
    # it was back in the queue: if it had killed the worker, only it would pay.
    assert seen["states"] == {first.id: "succeeded", crashed.id: "running", last.id: "queued"}
    assert {t.state for t in map(tasks.get, [first.id, crashed.id, last.id]) if t} == {"succeeded"}
    kinds = [kind for kind, _ in events(last.id)]
    assert "task_released" in kinds
    final = tasks.get(last.id)
    assert final is not None and final.crashes == 0
    assert claimed.id == first.id
