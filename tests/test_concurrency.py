"""Many OS processes writing through ``agentstore.db.write`` at once: no error reaches a caller.

This is the load the issue measured: a naive Django writer (IMMEDIATE and a
busy timeout alone) let "database is locked" escape 1–4 times a run at 4–8
processes. Through the helper, 8 processes × 500 read-then-write transactions
on one SQLite file must see 0 errors, and every write must be there — the
``counter`` mode also proves the transactions were serialised (each one reads
the row count and inserts count + 1 under a unique key).
"""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from django.db import connection

from agentstore import db
from agentstore.models import Document
from tests.processes import run_together

PROCESSES = 8
WRITES = 500


def run_writers(
    database_url: str, *, processes: int, writes: int, mode: str, strategy: str = "helper"
) -> list[dict[str, Any]]:
    return run_together(
        database_url,
        [
            [
                "-m",
                "tests.workers.writer",
                "--worker",
                str(n),
                "--writes",
                str(writes),
                "--mode",
                mode,
                "--strategy",
                strategy,
            ]
            for n in range(processes)
        ],
    )


@pytest.mark.slow
@pytest.mark.sqlite_only
def test_eight_processes_serialised_writes_on_one_sqlite_file(test_database_url: str) -> None:
    results = run_writers(test_database_url, processes=PROCESSES, writes=WRITES, mode="counter")

    assert [r["errors"] for r in results] == [0] * PROCESSES, results
    assert sum(int(r["written"]) for r in results) == PROCESSES * WRITES
    keys = list(
        Document.objects.filter(namespace="counter").order_by("key").values_list("key", flat=True)
    )
    # Contiguous 1..4000: no two transactions ever read the same count.
    assert keys == [f"{n:07d}" for n in range(1, PROCESSES * WRITES + 1)]
    per_worker = dict.fromkeys(range(PROCESSES), 0)
    for value in Document.objects.filter(namespace="counter").values_list("value_json", flat=True):
        per_worker[json.loads(value)["worker"]] += 1
    assert per_worker == dict.fromkeys(range(PROCESSES), WRITES)


@pytest.mark.slow
@pytest.mark.postgres_only
def test_eight_processes_write_on_postgresql(test_database_url: str) -> None:
    results = run_writers(test_database_url, processes=PROCESSES, writes=WRITES, mode="independent")

    assert [r["errors"] for r in results] == [0] * PROCESSES, results
    assert Document.objects.filter(namespace="independent").count() == PROCESSES * WRITES


@pytest.mark.sqlite_only
@pytest.mark.django_db(transaction=True)
def test_threads_in_one_process_are_serialised() -> None:
    """Threads queue on the writer lock too (each thread has its own lock description)."""
    threads, writes = 6, 40
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(writes):
                db.write(lambda cursor: _insert_next_counter(), orm=True)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connection.close()

    workers = [threading.Thread(target=work) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()

    assert errors == []
    keys = list(Document.objects.filter(namespace="threads").values_list("key", flat=True))
    assert sorted(keys) == [f"{n:07d}" for n in range(1, threads * writes + 1)]


def _insert_next_counter() -> None:
    from django.utils import timezone

    n = Document.objects.filter(namespace="threads").count()
    Document.objects.create(namespace="threads", key=f"{n + 1:07d}", updated_at=timezone.now())
