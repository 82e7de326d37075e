"""Runs start to finish: 10,000 no-op runs through the worker, beside no-op ``django.tasks``.

    .venv/bin/pip install --group bench          # django-tasks-db, which the settings load
    .venv/bin/python bench/run_throughput.py                     # SQLite, 10,000 runs, 1 and 4
    .venv/bin/python bench/run_throughput.py --runs 2000 --workers 1 \\
        --database-url postgres://postgres@127.0.0.1:5432/agentstore_bench_runs

What a durable run costs on top of a durable task, measured the same way as
``bench/worker_throughput.py`` measures the worker: ``--runs`` no-op runs are
started (``agentstore.runs.start``, each on a new session — a new conversation's
first turn) into a parked queue, in one process, timed: **starts/s**. Then
``manage.py agentstore worker --processes N`` starts on the live queue, says it is
ready, one UPDATE moves every run to the live queue, and the clock runs until the
last run is settled: **runs/s**. The same count of no-op ``@task`` functions
(``AgentStoreBackend``) goes through the same steps beside it, on the same
database: a run's extra work is its session (created at start), its detail row,
and the hold taken and released around the runner.

``--database-url`` runs on that database instead of a fresh SQLite file (a
PostgreSQL database's ``public`` schema is dropped and re-created: give it a
scratch database).
Printed, never asserted; ``--json`` for ``bench/run_all.py``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import common  # noqa: E402
from bench.worker_throughput import Workers, migrate_fresh, setup_django  # noqa: E402


def start_parked(kind: str, count: int) -> float:
    """Start ``count`` no-op runs (or enqueue no-op functions) in the parked queue; seconds."""
    from agentstore import runs
    from bench.worker_bench import jobs

    parked = jobs.noop.using(queue_name="parked")
    started = time.perf_counter()
    for _ in range(count):
        if kind == "run":
            runs.start("noop", queue="parked")
        else:
            parked.enqueue()
    return time.perf_counter() - started


def unsettled() -> int:
    from agentstore.models import Task

    return Task.objects.exclude(state__in=["succeeded", "failed"]).count()


def release() -> None:
    from django.db import connection

    from agentstore.models import Task

    Task.objects.update(queue_name="live")
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:  # a table filled at once: give it statistics
            cursor.execute(f"ANALYZE {Task._meta.db_table}")


def through(kind: str, url: str, count: int, processes: int) -> dict[str, float]:
    from django.db import connection

    migrate_fresh(url)
    start_seconds = start_parked(kind, count)
    connection.close()
    command = ["manage.py", "agentstore", "worker", "--queue", "live"]
    workers = Workers([[*command, "--processes", str(processes)]], url, "ready ")
    try:
        workers.wait_ready(processes)
        started = time.perf_counter()
        release()
        while unsettled():
            time.sleep(0.01)
        elapsed = time.perf_counter() - started
    finally:
        connection.close()
        workers.stop()
    return {"starts_per_s": count / start_seconds, "per_s": count / elapsed}


def measure(url: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    from django.db import connection

    rows = []
    for processes in args.workers:
        # Alternating, so a change in the shared machine's load lands on both.
        for kind in ("run", "function"):
            figures = through(kind, url, args.runs, processes)
            rows.append({"kind": kind, "processes": processes, **figures})
            who = "runs" if kind == "run" else "django.tasks functions"
            workload = f"{args.runs:,} no-op, {processes} worker process(es), {connection.vendor}"
            common.record(
                f"start: {workload}", who, figures["starts_per_s"],
                role="agentstore" if kind == "run" else "other", unit="ops/s",
            )  # fmt: skip
            common.record(
                f"start to finish: {workload}", who, figures["per_s"],
                role="agentstore" if kind == "run" else "other", unit="ops/s",
            )  # fmt: skip
    return rows


def show(vendor: str, rows: list[dict[str, Any]]) -> None:
    load = common.machine()["load_average"]
    print(f"\n{vendor}: load {load}")
    print(f"{'':28} {'starts/s':>10} {'settled/s':>10}")
    for row in rows:
        label = f"{row['kind']:<8} {row['processes']} process(es)"
        print(f"{label:28} {row['starts_per_s']:>10,.0f} {row['per_s']:>10,.0f}")
    by = {(r["kind"], r["processes"]): r for r in rows}
    for processes in sorted({r["processes"] for r in rows}):
        run, function = by[("run", processes)], by[("function", processes)]
        print(
            f"runs ÷ functions, {processes} process(es): start "
            f"{run['starts_per_s'] / function['starts_per_s']:.2f}x, "
            f"start to finish {run['per_s'] / function['per_s']:.2f}x"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--database-url", default="", help="default: a fresh SQLite file")
    common.add_json_flag(parser)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = args.database_url or f"sqlite:///{Path(tmp) / 'runs.sqlite3'}"
        if common.engine(url) == "postgresql":
            common.ensure_postgres_database(url)
        setup_django(url)
        from django.db import connection

        show(connection.vendor, measure(url, args))
    common.emit("run_throughput", args, engine_name=common.engine(url))


if __name__ == "__main__":
    main()
