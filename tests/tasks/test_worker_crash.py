"""SIGKILL, for real: worker processes (``manage.py agentstore worker``) die under a task.

* A worker is SIGKILLed in the middle of a ``django.tasks`` task; another worker
  process finds the expired lease, queues the task again (the crash counted, the
  task's one attempt not spent) and runs it to success.
* A poison task SIGKILLs every worker that runs it: it is run again until the
  crash budget (``TASK_MAX_CRASHES``, 3) is spent, then fails with error
  ``crashed`` — it does not loop forever — and a task queued beside it is not
  charged for its crashes.

Each worker says ``ready <id>`` on stderr once registered: that is the start
barrier. Waits poll the database (or a marker file the task writes) for a
condition under a deadline, a bound against hangs — never a timing assertion.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from agentstore.exceptions import TaskCrashed
from agentstore.tasks import TaskRepository
from agentstore.tasks.framework import framework
from tests.conftest import REPO_ROOT
from tests.tasks import jobs
from tests.tasks.test_worker_chaos import _wait_for_other_sessions_to_close, worker_database_url

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

assert framework is not None
Status = framework.TaskResultStatus
LEASE = "1"
DEADLINE = 120.0  # seconds; a bound against hangs, never a timing assertion


class WorkerProcess:
    """``manage.py agentstore worker`` with its stderr drained; ``ready`` once it said so."""

    def __init__(self, database_url: str, *args: str, settings: str = "project.settings") -> None:
        self.ready = threading.Event()
        self.tail: collections.deque[str] = collections.deque(maxlen=60)
        self.proc = subprocess.Popen(
            [sys.executable, "manage.py", "agentstore", "worker", "--lease", LEASE, *args],
            cwd=REPO_ROOT,
            env={
                **os.environ,
                "DATABASE_URL": worker_database_url(database_url),
                "DJANGO_SETTINGS_MODULE": settings,
            },
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.tail.append(line)
            if line.startswith("ready "):
                self.ready.set()

    def log(self) -> str:
        return "".join(self.tail)

    def stop(self) -> int:
        """SIGTERM (a clean stop) and the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=90)


def wait_for(condition: Callable[[], bool], what: str, worker: WorkerProcess) -> None:
    deadline = time.monotonic() + DEADLINE
    while not condition():
        assert time.monotonic() < deadline, f"{what}; worker stderr:\n{worker.log()}"
        time.sleep(0.05)  # polling a condition, not a barrier


def test_a_task_killed_with_its_worker_runs_on_another_worker(
    test_database_url: str, tmp_path: Path
) -> None:
    marker = tmp_path / "first-run"
    result = jobs.wait_to_be_killed.enqueue(str(marker))  # MAX_ATTEMPTS 1: no retries
    first = WorkerProcess(test_database_url, "--batch", "1")
    second: WorkerProcess | None = None
    try:
        assert first.ready.wait(DEADLINE), first.log()
        wait_for(marker.exists, "the task never started", first)
        wait_for(lambda: marker.read_text().strip() != "", "no pid in the marker", first)
        pid = int(marker.read_text())
        assert pid == first.proc.pid  # the task runs in the worker process itself
        os.kill(pid, signal.SIGKILL)  # mid-task
        assert first.proc.wait(timeout=60) == -signal.SIGKILL
        second = WorkerProcess(test_database_url, "--batch", "1")
        assert second.ready.wait(DEADLINE), second.log()
        wait_for(
            lambda: TaskRepository().get(result.id).state == "succeeded",  # type: ignore[union-attr]
            "the task was not run again",
            second,
        )
    finally:
        first.stop()
        code = second.stop() if second is not None else 0
    assert code == 0
    _wait_for_other_sessions_to_close()
    result.refresh()
    assert (result.status, result.return_value) == (Status.SUCCESSFUL, "ran again")
    assert result.attempts == 2 and len(set(result.worker_ids)) == 2
    assert [e.exception_class for e in result.errors] == [TaskCrashed]
    task = TaskRepository().get(result.id)
    assert task is not None
    assert (task.attempts, task.crashes, task.max_attempts) == (2, 1, 1)
    kinds = [e.event.kind for e in TaskRepository().list_events(result.id)]
    assert kinds == [
        "task_queued",
        "task_started",
        "task_lease_expired",
        "task_started",
        "task_succeeded",
    ]


def test_a_task_that_kills_every_worker_fails_after_the_crash_budget(
    test_database_url: str, tmp_path: Path
) -> None:
    runs = tmp_path / "runs"
    poison = jobs.kill_my_worker.enqueue(str(runs))
    bystander = jobs.add.enqueue(20, 22)
    # Two children, each restarted by the supervisor when the poison kills it.
    workers = WorkerProcess(test_database_url, "--processes", "2")
    try:
        assert workers.ready.wait(DEADLINE), workers.log()
        wait_for(
            lambda: TaskRepository().get(poison.id).state == "failed",  # type: ignore[union-attr]
            "the poison task was never failed",
            workers,
        )
        wait_for(
            lambda: TaskRepository().get(bystander.id).state == "succeeded",  # type: ignore[union-attr]
            "the task beside it never ran",
            workers,
        )
    finally:
        code = workers.stop()
    assert code == 0
    _wait_for_other_sessions_to_close()
    task = TaskRepository().get(poison.id)
    assert task is not None
    assert (task.state, task.error_code, task.crashes) == ("failed", "crashed", 4)
    assert "went away 4 times" in task.error_message
    assert "TASK_MAX_CRASHES is 3" in task.error_message
    assert len(runs.read_text().split()) == 4  # run 1 + 3 reruns, each killed its worker
    assert workers.log().count("exited (-9); restarting") >= 4
    kinds = [e.event.kind for e in TaskRepository().list_events(poison.id)]
    assert kinds == [
        "task_queued",
        *["task_started", "task_lease_expired"] * 3,
        "task_started",
        "task_failed",
    ]
    poison.refresh()
    assert poison.status == Status.FAILED
    assert [e.exception_class for e in poison.errors] == [TaskCrashed] * 4
    beside = TaskRepository().get(bystander.id)
    assert beside is not None and beside.crashes <= 1  # never charged again after a shared crash
    assert jobs.add.get_result(bystander.id).return_value == 42
