"""Worker throughput and latency: agentstore's worker beside django-tasks-db's ``db_worker``.

    .venv/bin/pip install --group bench          # django-tasks-db (bench only)
    .venv/bin/python bench/worker_throughput.py                      # SQLite file, 10,000 tasks
    .venv/bin/python bench/worker_throughput.py --tasks 2000 --workers 1 2
    .venv/bin/python bench/worker_throughput.py \\
        --database-url postgres://postgres@127.0.0.1:5432/agentstore_bench_worker
    .venv/bin/python bench/worker_throughput.py --tasks 2000 \\
        --postgres-url postgres://postgres@127.0.0.1:5432/agentstore_bench_worker

Flags (stable; ``bench/run_all`` calls them): ``--database-url URL`` run on that
database only (default: a fresh SQLite file); ``--postgres-url URL`` run on SQLite,
then the same on PostgreSQL, one table each (the PostgreSQL database's ``public``
schema is dropped and re-created: give it a scratch database); ``--tasks N``;
``--workers W …``; ``--batch B …`` agentstore ``--batch`` values (``0``: none given,
the worker's default fair prefetch); ``--samples N``
latency samples; ``--interval S`` idle poll of both workers; ``--skip-raw``.

**Throughput**: ``--tasks`` no-op ``@task`` functions are enqueued through each
backend into a parked queue; the workers (``manage.py agentstore worker
--processes N``, or N ``manage.py db_worker`` processes) start on the live
queue and say they are ready; then one UPDATE moves every task to the live
queue and the clock runs until the last one is finished. Enqueue cost is
measured separately (one process, one ``.enqueue()`` per task). Both worker
kinds poll every ``--interval`` seconds when idle.

**Latency**: with one idle worker, ``--samples`` tasks are enqueued one at a
time; enqueue → start is the task's ``started_at`` minus its enqueue time
(both stamped by the database rows the backends write). p50 and p90.

A raw ``sqlite3`` queue (claim = one UPDATE … RETURNING in BEGIN IMMEDIATE,
finish = one UPDATE) runs the same count with the same process counts, as the
floor every Django-level queue pays on top of. Printed, never asserted.
"""

from __future__ import annotations

import argparse
import collections
import multiprocessing
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
SETTINGS = "bench.worker_bench.settings"

from bench import common  # noqa: E402


def setup_django(url: str) -> None:
    os.environ["DATABASE_URL"] = url
    os.environ["DJANGO_SETTINGS_MODULE"] = SETTINGS
    import django

    django.setup()


def migrate_fresh(url: str) -> None:
    from django.core.management import call_command
    from django.db import connection

    if connection.vendor == "sqlite":
        connection.close()
        for suffix in ("", "-wal", "-shm"):
            Path(str(connection.settings_dict["NAME"]) + suffix).unlink(missing_ok=True)
    else:
        with connection.cursor() as cursor:
            cursor.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public;")
    call_command("migrate", verbosity=0)


class Workers:
    """Worker processes whose stderr is drained; ``ready`` counts their ready lines."""

    def __init__(self, commands: list[list[str]], url: str, marker: str) -> None:
        env = {**os.environ, "DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": SETTINGS}
        self.ready = 0
        self.cond = threading.Condition()
        #: Each process's last stderr lines, printed if they never all say ready.
        self.tails: dict[int, collections.deque[str]] = {}
        self.procs = [
            subprocess.Popen(
                [sys.executable, *command],
                cwd=ROOT,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            for command in commands
        ]
        for proc in self.procs:
            threading.Thread(target=self._drain, args=(proc, marker), daemon=True).start()

    def _drain(self, proc: subprocess.Popen[str], marker: str) -> None:
        assert proc.stderr is not None
        tail = self.tails.setdefault(proc.pid, collections.deque(maxlen=20))
        for line in proc.stderr:
            tail.append(line)
            if marker in line:
                with self.cond:
                    self.ready += 1
                    self.cond.notify_all()

    def wait_ready(self, count: int) -> None:
        with self.cond:
            if not self.cond.wait_for(lambda: self.ready >= count, timeout=300):
                for proc in self.procs:
                    print(f"process {proc.pid}, exit {proc.poll()}, last stderr:", file=sys.stderr)
                    sys.stderr.writelines(self.tails.get(proc.pid, ()))
                raise SystemExit(f"workers did not start: {self.ready} of {count} said ready")

    def stop(self) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()


def enqueue_parked(system: str, count: int) -> float:
    from bench.worker_bench import jobs

    fn = jobs.noop if system == "agentstore" else jobs.noop_db
    parked = fn.using(queue_name="parked")
    start = time.perf_counter()
    for _ in range(count):
        parked.enqueue()
    return time.perf_counter() - start


def table_of(system: str) -> str:
    if system == "agentstore":
        from agentstore.models import Task

        return Task._meta.db_table
    from django_tasks_db.models import DBTaskResult

    return str(DBTaskResult._meta.db_table)


def remaining(system: str) -> int:
    from django.db import connection

    done = "('succeeded', 'failed')" if system == "agentstore" else "('SUCCESSFUL', 'FAILED')"
    state = "state" if system == "agentstore" else "status"
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*) FROM {table_of(system)} WHERE {state} NOT IN {done}")
        return int(cursor.fetchone()[0])


def release(system: str) -> None:
    from django.db import connection, transaction

    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"UPDATE {table_of(system)} SET queue_name = 'live'")
    if connection.vendor == "postgresql":
        # The table was created a moment ago and filled by one statement: its planner
        # statistics still say "empty" until autovacuum gets to it, and both systems'
        # claims then scan the table (several-fold slower at 10,000 tasks;
        # bench/results/2026-12-01-quiet-machine.md).
        # A real queue fills over time and is analysed; give both workers that table.
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {table_of(system)}")


def worker_commands(
    system: str, processes: int, interval: float, batch: int = 0
) -> list[list[str]]:
    if system == "agentstore":
        # --batch 0 here: no --batch at all, the worker's default claim size.
        size = ["--batch", str(batch)] if batch else []
        return [
            ["manage.py", "agentstore", "worker", "--queue", "live", "--processes", str(processes)]
            + size
        ]
    return [
        [
            "manage.py",
            "db_worker",
            "--backend",
            "db",
            "--queue-name",
            "live",
            "--interval",
            str(interval),
            "--no-startup-delay",
            "--no-reload",
        ]
        for _ in range(processes)
    ]


MARKERS = {"agentstore": "ready ", "db_worker": "Starting worker"}


def throughput(
    system: str, url: str, count: int, processes: int, interval: float, batch: int = 1
) -> dict[str, Any]:
    from django.db import connection

    migrate_fresh(url)
    enqueue_seconds = enqueue_parked(system, count)
    connection.close()
    workers = Workers(worker_commands(system, processes, interval, batch), url, MARKERS[system])
    try:
        workers.wait_ready(processes)
        start = time.perf_counter()
        release(system)
        while remaining(system):
            time.sleep(0.01)
        elapsed = time.perf_counter() - start
    finally:
        connection.close()
        workers.stop()
    return {"enqueue_per_s": count / enqueue_seconds, "tasks_per_s": count / elapsed}


def latency(system: str, url: str, samples: int, interval: float) -> list[float]:
    from django.db import connection

    from bench.worker_bench import jobs

    migrate_fresh(url)
    connection.close()
    workers = Workers(worker_commands(system, 1, interval), url, MARKERS[system])
    waits: list[float] = []
    try:
        workers.wait_ready(1)
        fn = jobs.noop if system == "agentstore" else jobs.noop_db
        live = fn.using(queue_name="live")
        for _ in range(samples):
            result = live.enqueue()
            while True:
                time.sleep(0.002)
                result.refresh()
                if result.started_at is not None and result.is_finished:
                    break
            waits.append((result.started_at - result.enqueued_at).total_seconds() * 1000)
            time.sleep(0.1)  # the worker is idle again before the next sample
    finally:
        connection.close()
        workers.stop()
    return waits


# -- raw sqlite3: the floor -------------------------------------------------------


def _raw_worker(path: str, out: Any) -> None:
    db = sqlite3.connect(path, isolation_level=None, timeout=30)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    done = 0
    while True:
        db.execute("BEGIN IMMEDIATE")
        row = db.execute(
            "UPDATE q SET state = 'running' WHERE id = "
            "(SELECT id FROM q WHERE state = 'ready' ORDER BY id LIMIT 1) RETURNING id"
        ).fetchone()
        db.execute("COMMIT")
        if row is None:
            break
        db.execute("BEGIN IMMEDIATE")
        db.execute("UPDATE q SET state = 'done' WHERE id = ?", row)
        db.execute("COMMIT")
        done += 1
    out.put(done)


def raw_sqlite(count: int, processes: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "raw.sqlite3")
        db = sqlite3.connect(path, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("CREATE TABLE q (id INTEGER PRIMARY KEY, state TEXT NOT NULL)")
        db.execute("CREATE INDEX q_ready ON q (state, id)")
        db.executemany("INSERT INTO q (state) VALUES ('ready')", [()] * count)
        db.close()
        ctx = multiprocessing.get_context("spawn")
        out = ctx.Queue()
        procs = [ctx.Process(target=_raw_worker, args=(path, out)) for _ in range(processes)]
        start = time.perf_counter()
        for proc in procs:
            proc.start()
        total = sum(out.get() for _ in procs)
        elapsed = time.perf_counter() - start
        for proc in procs:
            proc.join()
        assert total == count
        return count / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--database-url", default="")
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--samples", type=int, default=50)
    parser.add_argument("--interval", type=float, default=0.02, help="idle poll (both workers)")
    parser.add_argument("--skip-raw", action="store_true")
    parser.add_argument(
        "--postgres-url",
        default="",
        help="after SQLite, run the same on this PostgreSQL database (schema dropped)",
    )
    parser.add_argument(
        "--batch",
        type=int,
        nargs="+",
        default=[1, 0, 16],
        help="agentstore --batch values to run (0: no --batch, the worker's default)",
    )
    common.add_json_flag(parser)
    args = parser.parse_args()
    if args.postgres_url and not args.database_url:
        # One database per process (Django is set up once): PostgreSQL in a second run.
        forwarded = [a for a in sys.argv[1:] if not a.startswith("--postgres-url")]
        if args.postgres_url in forwarded:
            forwarded.remove(args.postgres_url)
        subprocess.run([sys.executable, __file__, *forwarded], check=True)
        print(flush=True)
        subprocess.run(
            [sys.executable, __file__, *forwarded, "--database-url", args.postgres_url],
            check=True,
        )
        return
    tmp = tempfile.mkdtemp(prefix="agentstore-bench-")
    url = args.database_url or f"sqlite:///{tmp}/bench.sqlite3"
    setup_django(url)
    from django.db import connection

    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"database: {connection.vendor}  tasks: {args.tasks}  load average: {load}")
    header = ("workers", "system", "tasks/s", "enqueue/s", "vs db_worker", "vs raw")
    print("{:>7}  {:<22} {:>9} {:>10} {:>12} {:>7}".format(*header))
    for processes in args.workers:
        sqlite = connection.vendor == "sqlite"
        raw = None if args.skip_raw or not sqlite else raw_sqlite(args.tasks, processes)
        theirs = throughput("db_worker", url, args.tasks, processes, args.interval)
        rows = [
            (
                f"agentstore --batch {batch}" if batch else "agentstore (default)",
                throughput("agentstore", url, args.tasks, processes, args.interval, batch),
            )
            for batch in args.batch
        ]
        for name, figures in [*rows, ("db_worker", theirs)]:
            ratio = figures["tasks_per_s"] / theirs["tasks_per_s"]
            vs_raw = f"{figures['tasks_per_s'] / raw:.2f}" if raw else "-"
            print(
                f"{processes:>7}  {name:<22} {figures['tasks_per_s']:>9.0f} "
                f"{figures['enqueue_per_s']:>10.0f} {ratio:>11.2f}x {vs_raw:>7}",
                flush=True,
            )
        if raw:
            print(f"{processes:>7}  {'raw sqlite3':<22} {raw:>9.0f}", flush=True)
        workload = f"worker: no-op tasks, {processes} worker process" + "es" * (processes > 1)
        if raw:
            common.record(workload, "raw sqlite3", raw, role="raw")
        for name, figures in [*rows, ("django-tasks-db db_worker", theirs)]:
            role = "peer" if name.startswith("django") else "agentstore"
            common.record(workload, name, figures["tasks_per_s"], role=role)
    for system in ("agentstore", "db_worker"):
        waits = latency(system, url, args.samples, args.interval)
        q = statistics.quantiles(waits, n=10)
        print(
            f"enqueue→start, idle worker, {system:<10}: p50 {statistics.median(waits):.1f} ms  "
            f"p90 {q[8]:.1f} ms  ({len(waits)} samples)",
            flush=True,
        )
        who, role = ("agentstore worker", "agentstore") if system == "agentstore" else (
            "django-tasks-db db_worker", "peer"
        )  # fmt: skip
        common.record(
            "worker: enqueue -> start, idle worker",
            who,
            statistics.median(waits),
            role=role,
            unit="ms",
        )
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    common.emit("worker_throughput", args, engine_name=common.engine(url))


if __name__ == "__main__":
    main()
