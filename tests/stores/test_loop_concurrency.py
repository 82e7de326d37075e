"""LoopStore under real concurrency: OS processes appending to one database at once.

The port of agentloop's ``TestConcurrentStoresOverOneFile``: 6 processes, each
with its own store (its own connection), append 12 steps to their own session
on one SQLite file at the same moment. No "database is locked" may reach a
caller, and every session must hold its 12 steps in order. The same load runs
against PostgreSQL when the suite does.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentstore.models import Session
from agentstore.stores import LoopStore
from tests.processes import run_together

PROCESSES = 6
STEPS = 12


def run_appenders(database_url: str, *, processes: int, steps: int) -> list[dict[str, Any]]:
    return run_together(
        database_url,
        [
            ["-m", "tests.workers.loop_append", "--worker", str(n), "--steps", str(steps)]
            for n in range(processes)
        ],
        timeout=120,
    )


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
