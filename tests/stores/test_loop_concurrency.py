"""LoopStore under real concurrency: OS processes appending to one database at once.

The port of agentloop's ``TestConcurrentStoresOverOneFile``: 6 processes, each
with its own store (its own connection), append 12 steps to their own session
on one SQLite file at the same moment. No "database is locked" may reach a
caller, and every session must hold its 12 steps in order. The same load runs
against PostgreSQL when the suite does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from agentstore.models import Session
from agentstore.stores import LoopStore
from tests.conftest import REPO_ROOT

PROCESSES = 6
STEPS = 12


def run_appenders(database_url: str, *, processes: int, steps: int) -> list[dict[str, object]]:
    env = {**os.environ, "DATABASE_URL": database_url, "DJANGO_SETTINGS_MODULE": "project.settings"}
    with tempfile.TemporaryDirectory() as tmp:
        start_file = Path(tmp) / "go"
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.workers.loop_append",
                    "--worker",
                    str(n),
                    "--steps",
                    str(steps),
                    "--start-file",
                    str(start_file),
                ],
                cwd=REPO_ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for n in range(processes)
        ]
        # Let every worker finish django.setup() and connect, then start them together.
        threading.Event().wait(1.5)
        start_file.touch()
        results = []
        for proc in procs:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
            results.append(json.loads(out.strip().splitlines()[-1]))
    return results


def assert_every_session_complete(results: list[dict[str, object]]) -> None:
    assert [r["errors"] for r in results] == [0] * PROCESSES, results
    assert [r["written"] for r in results] == [STEPS] * PROCESSES
    store = LoopStore()
    for worker in range(PROCESSES):
        got = store.steps(f"session-{worker}")
        assert [s.step_index for s in got] == list(range(STEPS))
        assert [s.content for s in got] == [f"worker {worker} step {i}" for i in range(STEPS)]
        assert [json.loads(s.tool_args or b"") for s in got] == [
            {"worker": worker, "i": i} for i in range(STEPS)
        ]
    assert Session.objects.filter(kind="loop").count() == PROCESSES


@pytest.mark.slow
class TestConcurrentStoresOverOneFile:
    @pytest.mark.sqlite_only
    def test_six_processes_on_one_sqlite_file(self, test_database_url: str) -> None:
        results = run_appenders(test_database_url, processes=PROCESSES, steps=STEPS)

        assert_every_session_complete(results)

    @pytest.mark.postgres_only
    def test_six_processes_on_one_postgresql_database(self, test_database_url: str) -> None:
        results = run_appenders(test_database_url, processes=PROCESSES, steps=STEPS)

        assert_every_session_complete(results)
