"""SIGKILL in the middle of a run: the run is rerun on another worker, under the same hold.

A worker process (``manage.py agentstore worker``) runs a run whose runner
writes to the session, then waits; the test SIGKILLs the worker there. The
session's hold stays behind (a dead process cannot release it) — and it is the
*run's* hold: a second worker finds the lease expired, queues the run again
(the crash counted, no attempt spent), and its rerun takes the hold over by
its token and finishes. At least once: both attempts' writes are in the
session, in order; the hold is gone at the end.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from agentstore import runs
from agentstore.models import Holder
from agentstore.runs.execution import hold_token
from agentstore.stores.log import LogStore
from agentstore.tasks import TaskRepository
from tests.tasks.test_worker_chaos import _wait_for_other_sessions_to_close
from tests.tasks.test_worker_crash import DEADLINE, WorkerProcess, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

SETTINGS = "tests.workers.runs_settings"


def kill_in_the_run_then_rerun(test_database_url: str, run_id: str, marker: Path) -> None:
    """Worker 1 runs the run until its runner writes its pid to ``marker``; it is SIGKILLed
    there, the session held under the run's token; worker 2 reruns the run to success."""
    first = WorkerProcess(test_database_url, "--batch", "1", settings=SETTINGS)
    second: WorkerProcess | None = None
    try:
        assert first.ready.wait(DEADLINE), first.log()
        wait_for(lambda: marker.exists() and marker.read_text() != "", "never started", first)
        assert int(marker.read_text()) == first.proc.pid  # the runner runs in the worker
        held = Holder.objects.get(session_id=runs.get_run(run_id).session_id)  # type: ignore[union-attr]
        assert held.token == hold_token(run_id) and held.pid == first.proc.pid
        os.kill(first.proc.pid, signal.SIGKILL)  # mid-run, the session held
        assert first.proc.wait(timeout=60) == -signal.SIGKILL
        second = WorkerProcess(test_database_url, "--batch", "1", settings=SETTINGS)
        assert second.ready.wait(DEADLINE), second.log()
        wait_for(
            lambda: runs.get_run(run_id).state == "succeeded",  # type: ignore[union-attr]
            "the run was not rerun",
            second,
        )
    finally:
        first.stop()
        code = second.stop() if second is not None else 0
    assert code == 0
    _wait_for_other_sessions_to_close()


def test_a_run_killed_with_its_worker_is_rerun_under_its_own_hold(
    test_database_url: str, tmp_path: Path
) -> None:
    marker = tmp_path / "pid"
    run = runs.start("killable", str(marker))
    kill_in_the_run_then_rerun(test_database_url, run.id, marker)
    done = runs.get_run(run.id)
    assert done is not None and done.output == "done on attempt 2"
    task = TaskRepository().get(run.id)
    assert task is not None and (task.attempts, task.crashes) == (2, 1)
    tail = LogStore(holds=False).tail(run.session_id, None, types={"item"})
    assert [e.data["item"]["content"] for e in tail.entries] == ["attempt 1", "attempt 2"]
    assert not Holder.objects.filter(session_id=run.session_id).exists()


def test_an_sdk_turn_killed_in_its_tool_is_rerun_without_repeating_its_input(
    test_database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentstore.integrations.openai_agents import AgentStoreSession
    from tests.runs.runners import KILL_MARKER

    marker = tmp_path / "pid"
    monkeypatch.setenv(KILL_MARKER, str(marker))
    run = runs.start("sdk_weather", "What about Paris")
    kill_in_the_run_then_rerun(test_database_url, run.id, marker)
    done = runs.get_run(run.id)
    assert done is not None and done.output == {
        "output": "The weather: sunny, 21°C.",
        "agent": "weather",
    }
    items = AgentStoreSession(run.session_id).get_items_sync()
    # The input once, then the turn: one call, its one output, the answer.
    assert [(i.get("type", "message"), i.get("role")) for i in items] == [
        ("message", "user"),
        ("function_call", None),
        ("function_call_output", None),
        ("message", "assistant"),
    ]
    assert items[1]["call_id"] == items[2]["call_id"]
