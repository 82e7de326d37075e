"""django.tasks' signals: ``task_enqueued``, ``task_started`` and ``task_finished``.

Sent as the framework's own backends send them (sender: the backend class;
``task_result``: a ``TaskResult``): enqueued when the task is stored, started
before the function runs (status RUNNING), finished once the outcome is stored
(SUCCESSFUL with the return value, or FAILED with the errors). An attempt that
fails and will be retried is not finished: the task is READY again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings

from agentstore.tasks.backends import AgentStoreBackend
from agentstore.tasks.framework import framework
from agentstore.tasks.handlers import NotRetryable
from agentstore.tasks.worker import TaskWorker
from tests.tasks import jobs

pytestmark = pytest.mark.django_db(transaction=True)

assert framework is not None
F = framework
Status = F.TaskResultStatus


@pytest.fixture
def sent() -> Iterator[list[tuple[str, Any, Any]]]:
    """Every signal sent, as (signal name, sender, task_result)."""
    seen: list[tuple[str, Any, Any]] = []
    receivers = {}
    for name in ("task_enqueued", "task_started", "task_finished"):

        def receive(sender: Any, task_result: Any, _name: str = name, **kwargs: Any) -> None:
            seen.append((_name, sender, task_result))

        receivers[name] = receive
        getattr(F, name).connect(receive, weak=False)
    yield seen
    for name, receive in receivers.items():
        getattr(F, name).disconnect(receive)


def run_ready() -> TaskWorker:
    worker = TaskWorker(once=True)
    worker.run()
    return worker


def test_success_sends_enqueued_started_finished(sent: list[tuple[str, Any, Any]]) -> None:
    result = jobs.add.enqueue(2, 3)
    assert [(n, s, r.id, r.status) for n, s, r in sent] == [
        ("task_enqueued", AgentStoreBackend, result.id, Status.READY)
    ]
    worker = run_ready()
    names = [name for name, _, _ in sent]
    assert names == ["task_enqueued", "task_started", "task_finished"]
    _, sender, started = sent[1]
    assert sender is AgentStoreBackend
    assert (started.id, started.status, started.args) == (result.id, Status.RUNNING, [2, 3])
    assert started.worker_ids == [worker.worker_id]
    assert started.started_at is not None and started.finished_at is None
    _, sender, finished = sent[2]
    assert sender is AgentStoreBackend
    assert (finished.status, finished.return_value, finished.errors) == (
        Status.SUCCESSFUL,
        5,
        [],
    )
    assert finished.finished_at is not None
    # What the receivers saw is what get_result reads back.
    assert jobs.add.get_result(result.id).return_value == finished.return_value


def test_aenqueue_sends_enqueued(sent: list[tuple[str, Any, Any]]) -> None:
    result = asyncio.run(jobs.add.aenqueue(1, 1))
    assert [(n, r.id, r.status) for n, _, r in sent] == [("task_enqueued", result.id, Status.READY)]


@override_settings(AGENTSTORE={"WORKER_RETRY_BACKOFF_BASE": 0.0})
def test_a_retried_attempt_is_not_finished(
    sent: list[tuple[str, Any, Any]], tmp_path: Path
) -> None:
    result = jobs.flaky.enqueue(str(tmp_path / "flaky"), 1)  # fails once, then succeeds
    run_ready()  # no backoff: the same run claims the retry
    assert [name for name, _, _ in sent] == [
        "task_enqueued",
        "task_started",
        "task_started",
        "task_finished",
    ]
    second = sent[2][2]
    assert (second.status, second.attempts, len(second.errors)) == (Status.RUNNING, 2, 1)
    finished = sent[3][2]
    assert (finished.id, finished.status, finished.return_value) == (
        result.id,
        Status.SUCCESSFUL,
        "ok",
    )
    assert len(finished.errors) == 1  # the first attempt's error is kept


def test_a_final_failure_is_finished_with_its_error(sent: list[tuple[str, Any, Any]]) -> None:
    result = jobs.permanent.enqueue()
    run_ready()
    assert [name for name, _, _ in sent] == ["task_enqueued", "task_started", "task_finished"]
    finished = sent[2][2]
    assert (finished.id, finished.status) == (result.id, Status.FAILED)
    assert [error.exception_class for error in finished.errors] == [NotRetryable]
    assert "bad input" in finished.errors[0].traceback


def test_a_failing_receiver_does_not_stop_the_worker() -> None:
    def broken(sender: Any, task_result: Any, **kwargs: Any) -> None:
        raise RuntimeError("receiver bug")

    F.task_finished.connect(broken, weak=False)
    try:
        first, second = jobs.add.enqueue(1, 2), jobs.add.enqueue(3, 4)
        assert run_ready().done == 2
    finally:
        F.task_finished.disconnect(broken)
    assert jobs.add.get_result(first.id).return_value == 3
    assert jobs.add.get_result(second.id).return_value == 7


def test_a_final_failure_logs_the_real_exception(caplog: pytest.LogCaptureFixture) -> None:
    """The framework's own receiver logs a FAILED result with ``logger.exception``.

    Its backends send ``task_finished`` from the ``except`` block; the worker
    sends it once the failure is stored, later — and the log said
    ``NoneType: None``. It must show the task's exception and traceback.
    """
    result = jobs.permanent.enqueue()
    with caplog.at_level(logging.INFO):
        run_ready()
    [record] = [r for r in caplog.records if r.exc_info and r.name.startswith(F.module)]
    assert record.exc_info is not None and record.exc_info[0] is NotRetryable
    assert result.id in record.getMessage()
    text = caplog.text
    assert "NoneType: None" not in text
    assert "bad input" in text and "tests/tasks/jobs.py" in text  # the task's own frame
    assert 'raise NotRetryable("bad input")' in text
    assert "_send_finished" not in text  # the traceback is the task's, not the re-raise's


def test_a_task_failed_for_crashing_logs_the_crash(caplog: pytest.LogCaptureFixture) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from agentstore.exceptions import TaskCrashed
    from agentstore.tasks import TaskRepository
    from agentstore.tasks.worker import sweep

    result = jobs.add.enqueue(1, 1)
    tasks = TaskRepository()
    with override_settings(AGENTSTORE={"TASK_MAX_CRASHES": 0}), caplog.at_level(logging.INFO):
        tasks.claim_ready(["default"], [], "dead", timezone.now() - timedelta(seconds=1))
        assert sweep(tasks, ["function"], timezone.now())["settled"] == [result.id]
    [record] = [r for r in caplog.records if r.exc_info]
    assert record.exc_info is not None and record.exc_info[0] is TaskCrashed
    assert "NoneType: None" not in caplog.text
    assert "went away once" in caplog.text
