"""Task claim throughput: agentstore vs raw sqlite3 (or psycopg) vs django-tasks-db.

    .venv/bin/python bench/tasks_claim.py                       # 10,000 tasks, W = 1, 2, 4
    .venv/bin/python bench/tasks_claim.py --tasks 2000 --workers 1 4 --skip-dtdb
    .venv/bin/python bench/tasks_claim.py --tasks 2000 \
        --postgres-url postgres://postgres@127.0.0.1:5432/agentstore_bench_claims

Flags (stable; ``bench/run_all`` calls them): ``--tasks N`` queued tasks per round;
``--workers W …`` worker process counts; ``--timeout S`` SQLite busy timeout;
``--skip-dtdb``; ``--dtdb-python PATH`` (default: this interpreter when
django-tasks-db is importable, from ``pip install --group bench``);
``--postgres-url URL`` also run every round on that PostgreSQL database (its
``public`` schema is dropped and re-created each round: give it a scratch database)
and print a second table; ``--raw-cursor`` / ``--no-writer-queue`` diagnostics.

Each round creates a fresh migrated database holding ``--tasks`` queued tasks,
then starts W worker processes at the same moment. Every worker loops

    claim the oldest queued task (lease)  →  append 2 running events  →  finish

until nothing is queued — three short write transactions per task — with one
of these strategies:

* ``agentstore`` — ``TaskRepository.claim_next_queued`` / ``append_running_events``
  / ``finish`` (the lean SQL path through Django's connection, writer queue);
* ``raw`` — the stdlib ``sqlite3`` module (PostgreSQL: ``psycopg``) running the
  *same statements* in ``BEGIN IMMEDIATE`` (plain) transactions, no Django;
* ``dtdb`` — django-tasks-db's ``DatabaseBackend`` (its own worker code, one
  task at a time), on the same database settings.

Columns: tasks/s of each, agentstore's ratio to raw and its multiple of dtdb;
``worst`` is the longest single claim cycle any agentstore worker saw (raw's in
brackets), ``fair`` the fewest tasks any worker did over the most (1.00: even).
After each round the database is checked: every task succeeded exactly once
(one ``task_started``, one ``task_succeeded``), every event log is 1..5 and
contiguous, and no worker saw an error ("database is locked" included). The
figures are for reading; nothing asserts timings.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import common  # noqa: E402
from tests.processes import release  # noqa: E402
from tests.workers.start import ready_then_wait  # noqa: E402

KIND = "bench"


def django_setup() -> None:
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    os.environ["DJANGO_DEBUG"] = "0"
    import django

    django.setup()


def db_time(value: datetime) -> str:
    # Django's SQLite text form of an aware UTC datetime.
    return value.astimezone(UTC).replace(tzinfo=None).isoformat(sep=" ", timespec="microseconds")


# -- roles run in subprocesses ---------------------------------------------------


def seed(count: int) -> None:
    django_setup()
    from agentstore.demo import seeding

    owner = seeding.session(cwd="/bench")
    seeding.queued_tasks(owner, count, kind=KIND)


def worker_agentstore(worker: int, start_file: str) -> dict[str, Any]:
    django_setup()
    from django.db import connection

    from agentstore.tasks import TaskRepository
    from agentstore.types import TaskEventDraft, TaskFinish

    if os.environ.get("BENCH_NO_WRITER_QUEUE"):
        # Diagnostics only: SQLite's busy handler alone, without agentstore's queue.
        from django.conf import settings

        settings.AGENTSTORE = {**settings.AGENTSTORE, "SQLITE_WRITE_LOCK": False}
    if os.environ.get("BENCH_EXECUTE_WRAPPER"):
        # What a tracer costs: an execute_wrapper (OpenTelemetry's and Sentry's
        # Django instrumentations install one) sees every statement.
        def passthrough(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
            return execute(sql, params, many, context)

        connection.execute_wrappers.append(passthrough)
    tasks = TaskRepository()
    owner = f"worker-{worker}"
    drafts = [
        TaskEventDraft(kind="progress", payload_json='{"n":1}'),
        TaskEventDraft(kind="progress", payload_json='{"n":2}'),
    ]
    connection.ensure_connection()
    ready_then_wait(start_file)
    done, errors, fenced, worst = 0, [], 0, 0.0
    t0 = time.monotonic()
    while True:
        try:
            began = time.monotonic()
            expiry = datetime.now(UTC) + timedelta(seconds=30)
            task_id = tasks.claim_next_queued(KIND, owner, expiry)
            if task_id is None:
                break
            _, appended = tasks.append_running_events(task_id, owner, drafts)
            finished = tasks.finish(
                TaskFinish(
                    task_id=task_id,
                    lease_owner=owner,
                    from_states=("running", "canceling"),
                    target_state="succeeded",
                    event_kind="task_succeeded",
                    payload_json="{}",
                )
            )
            fenced += (not appended) + (not finished)
            done += 1
            worst = max(worst, time.monotonic() - began)
        except Exception as exc:  # counted and reported, never hidden
            errors.append(f"{type(exc).__name__}: {exc}")
    seconds = time.monotonic() - t0
    return {"done": done, "errors": errors, "fenced": fenced, "seconds": seconds, "worst": worst}


def worker_raw(worker: int, start_file: str, path: str, timeout: float) -> dict[str, Any]:
    django_setup()
    from django.db import connection

    from agentstore.ids import new_id
    from agentstore.sql import tasks as task_sql

    postgres = connection.vendor == "postgresql"
    # The statements agentstore sends (agentstore/sql/tasks.py), with the driver's placeholders.
    q = (lambda sql: sql) if postgres else (lambda sql: sql.replace("%s", "?"))
    claim = q(task_sql.claim_next(connection.vendor))
    next_event, insert_event = q(task_sql.INSERT_NEXT_EVENT), q(task_sql.INSERT_EVENT)
    fence = q(task_sql.running_fence(connection.vendor))
    finish = q(task_sql.finish(2, True))
    owner = f"worker-{worker}"
    stamp: Any
    if postgres:
        import psycopg

        settings = connection.settings_dict
        # A cursor: it has execute (returning itself), fetchone, rowcount and executemany.
        conn: Any = psycopg.connect(
            dbname=settings["NAME"],
            user=settings["USER"] or None,
            password=settings["PASSWORD"] or None,
            host=settings["HOST"] or None,
            port=settings["PORT"] or None,
            autocommit=True,
        ).cursor()
        begin = "BEGIN"

        def stamp(value: datetime) -> Any:
            return value

    else:
        conn = sqlite3.connect(path, timeout=timeout, isolation_level=None)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        begin = "BEGIN IMMEDIATE"
        stamp = db_time
    connection.close()

    def txn(fn: Any) -> Any:
        conn.execute(begin)
        try:
            value = fn()
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        return value

    ready_then_wait(start_file)
    done, errors, fenced, worst = 0, [], 0, 0.0
    t0 = time.monotonic()
    while True:
        try:
            began = time.monotonic()
            now = stamp(datetime.now(UTC))
            expiry = stamp(datetime.now(UTC) + timedelta(seconds=30))
            event_id = new_id()

            def claim_one(now: Any = now, expiry: Any = expiry, event_id: str = event_id) -> Any:
                row = conn.execute(claim, (now, owner, expiry, now, KIND)).fetchone()
                if row is None:
                    return None
                conn.execute(next_event, (row[0], event_id, "task_started", "{}", now, row[0]))
                return row[0]

            task_id = txn(claim_one)
            if task_id is None:
                break
            now = stamp(datetime.now(UTC))
            ids = [new_id(), new_id()]

            def append(now: Any = now, ids: list[str] = ids, task_id: str = task_id) -> bool:
                row = conn.execute(fence, (task_id, task_id, owner, now)).fetchone()
                if row is None:
                    return False
                conn.executemany(
                    insert_event,
                    [
                        (task_id, row[0] + n + 1, ids[n], "progress", f'{{"n":{n + 1}}}', now)
                        for n in range(2)
                    ],
                )
                return True

            appended = txn(append)
            now, event_id = stamp(datetime.now(UTC)), new_id()

            def settle(now: Any = now, event_id: str = event_id, task_id: str = task_id) -> bool:
                params = ("succeeded", "", "", "", now, now, task_id, "running", "canceling")
                if conn.execute(finish, (*params, owner, now)).rowcount != 1:
                    return False
                conn.execute(next_event, (task_id, event_id, "task_succeeded", "{}", now, task_id))
                return True

            finished = txn(settle)
            fenced += (not appended) + (not finished)
            done += 1
            worst = max(worst, time.monotonic() - began)
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
            if len(errors) > 50:
                break
    seconds = time.monotonic() - t0
    return {"done": done, "errors": errors, "fenced": fenced, "seconds": seconds, "worst": worst}


# -- django-tasks-db (runs under --dtdb-python) ----------------------------------

DTDB_SCRIPT = r"""
import importlib.util, json, os, sys, time
import django
from django.conf import settings

path, role, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
APPS = ["django_tasks_db"]
if importlib.util.find_spec("django_tasks"):
    APPS.insert(0, "django_tasks")  # the backport, on Django < 6
WAL = "PRAGMA journal_mode=WAL;PRAGMA synchronous=NORMAL"
if path.startswith("postgres"):
    from urllib.parse import urlsplit
    url = urlsplit(path)
    DATABASE = {"ENGINE": "django.db.backends.postgresql", "NAME": url.path.lstrip("/"),
                "USER": url.username or "", "PASSWORD": url.password or "",
                "HOST": url.hostname or "", "PORT": str(url.port or ""), "CONN_MAX_AGE": None}
else:
    DATABASE = {"ENGINE": "django.db.backends.sqlite3", "NAME": path,
                "OPTIONS": {"timeout": 20, "init_command": WAL}}
settings.configure(
    INSTALLED_APPS=APPS,
    DATABASES={"default": DATABASE},
    TASKS={"default": {"BACKEND": "django_tasks_db.DatabaseBackend"}},
    USE_TZ=True,
)
django.setup()
if role == "migrate":
    from django.core.management import call_command
    from django.db import connection
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("DROP SCHEMA public CASCADE; CREATE SCHEMA public;")
    call_command("migrate", verbosity=0)
    sys.exit(0)
if role == "states":
    from django_tasks_db.models import DBTaskResult
    from django.db.models import Count
    rows = DBTaskResult.objects.values_list("status").annotate(n=Count("id"))
    print(json.dumps(dict(rows)))
    sys.exit(0)
sys.path.insert(0, os.environ["BENCH_NOOP_DIR"])
import bench_noop
if role == "enqueue":
    t0 = time.monotonic()
    for _ in range(count):
        bench_noop.noop.enqueue()
    print(json.dumps({"seconds": time.monotonic() - t0}))
    sys.exit(0)
# role == "work": the db_worker's own Worker, one task at a time, until the queue is empty.
start_file = sys.argv[4]
from django_tasks_db.management.commands.db_worker import Worker
import inspect
params = inspect.signature(Worker).parameters
kwargs = dict(queue_names=["default"], interval=0, batch=True, backend_name="default",
              startup_delay=False, max_tasks=None, worker_id=f"w{os.getpid()}",
              excluded_queue_names=[])
worker = Worker(**{k: v for k, v in kwargs.items() if k in params})
# The worker half of tests/processes.py's handshake (tests.workers.start's
# ready file; this script runs under another Python, without the repository).
open(f"{start_file}.ready-{os.getpid()}", "w").close()
while not os.path.exists(start_file):
    time.sleep(0.002)
t0 = time.monotonic()
errors = []
try:
    worker.run()
except Exception as exc:
    errors.append(f"{type(exc).__name__}: {exc}")
print(json.dumps({"seconds": time.monotonic() - t0, "errors": errors}))
"""


def dtdb_round(python: str, count: int, workers: int, url: str = "") -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        path = url or str(Path(tmp) / "dtdb.sqlite3")
        script = Path(tmp) / "dtdb_bench.py"
        script.write_text(DTDB_SCRIPT)
        (Path(tmp) / "bench_noop.py").write_text(
            "try:\n    from django.tasks import task\nexcept ImportError:\n"
            "    from django_tasks import task\n\n@task()\ndef noop():\n    return None\n"
        )
        env = {**os.environ, "PYTHONPATH": tmp, "BENCH_NOOP_DIR": tmp}
        env.pop("DJANGO_SETTINGS_MODULE", None)
        run = [python, str(script), path]
        subprocess.run([*run, "migrate", "0"], env=env, check=True)
        enqueue = subprocess.run(
            [*run, "enqueue", str(count)], env=env, check=True, capture_output=True, text=True
        )
        enqueue_seconds = json.loads(enqueue.stdout.strip().splitlines()[-1])["seconds"]
        start = Path(tmp) / "go"
        procs = [
            subprocess.Popen(
                [*run, "work", "0", str(start)],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(workers)
        ]
        release(start, procs)
        t0 = time.monotonic()
        errors: list[str] = []
        for proc in procs:
            out, err = proc.communicate(timeout=3600)
            if proc.returncode:
                errors.append(err.strip().splitlines()[-1] if err.strip() else "failed")
                continue
            errors += json.loads(out.strip().splitlines()[-1])["errors"]
        elapsed = time.monotonic() - t0
        states = json.loads(
            subprocess.run(
                [*run, "states", "0"], env=env, check=True, capture_output=True, text=True
            ).stdout.strip()
        )
    per_task = enqueue_seconds / count + elapsed / count
    return {
        "tasks_per_s": count / elapsed,
        "end_to_end_per_s": 1 / per_task,
        "states": states,
        "errors": errors,
    }


# -- orchestration ---------------------------------------------------------------


def verify(path: str, count: int) -> dict[str, Any]:
    """Exactly once? Read by a driver connection (``path``: a SQLite file or a postgres URL)."""
    if path.startswith("postgres"):
        import psycopg

        conn: Any = psycopg.connect(path, autocommit=True)
        mark = "%s"
    else:
        conn = sqlite3.connect(path)
        mark = "?"
    states = dict(
        conn.execute(
            f"SELECT state, COUNT(*) FROM agentstore_task WHERE kind = {mark} GROUP BY state",
            (KIND,),
        ).fetchall()
    )
    bad_logs = conn.execute(
        "SELECT COUNT(*) FROM (SELECT task_id, COUNT(*) AS n, MIN(sequence) AS lo, "
        "MAX(sequence) AS hi, SUM(CASE WHEN kind = 'task_started' THEN 1 ELSE 0 END) AS s, "
        "SUM(CASE WHEN kind = 'task_succeeded' THEN 1 ELSE 0 END) AS f "
        "FROM agentstore_taskevent GROUP BY task_id) AS logs "
        "WHERE n != 5 OR lo != 1 OR hi != 5 OR s != 1 OR f != 1"
    ).fetchone()[0]
    conn.close()
    return {
        "exactly_once": states == {"succeeded": count} and bad_logs == 0,
        "states": states,
        "bad_logs": bad_logs,
    }


def fresh_postgres(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP SCHEMA public CASCADE")
        conn.execute("CREATE SCHEMA public")


def run_round(
    strategy: str, count: int, workers: int, timeout: float, url: str = ""
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        path = url or str(Path(tmp).resolve() / "bench.sqlite3")
        env = {
            **os.environ,
            "DATABASE_URL": url or f"sqlite:///{path}",
            "DJANGO_SETTINGS_MODULE": "project.settings",
            "DJANGO_DEBUG": "0",
        }
        if url:
            fresh_postgres(url)
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=env, check=True
        )
        subprocess.run(
            [sys.executable, __file__, "--role", "seed", "--tasks", str(count)],
            cwd=ROOT,
            env=env,
            check=True,
        )
        start = Path(tmp) / "go"
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--role",
                    strategy,
                    "--worker",
                    str(n),
                    "--start-file",
                    str(start),
                    "--path",
                    path,
                    "--timeout",
                    str(timeout),
                ],
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for n in range(workers)
        ]
        release(start, procs)  # once every worker is set up (tests/processes.py)
        t0 = time.monotonic()
        results = []
        for proc in procs:
            out, err = proc.communicate(timeout=3600)
            if proc.returncode:
                raise SystemExit(f"worker failed: {err}")
            results.append(json.loads(out.strip().splitlines()[-1]))
        elapsed = time.monotonic() - t0
        checked = verify(path, count)
    errors = [e for r in results for e in r["errors"]]
    dones = [r["done"] for r in results]
    return {
        "tasks_per_s": sum(r["done"] for r in results) / elapsed,
        "worst_ms": max(r["worst"] for r in results) * 1000,
        "fair": min(dones) / max(max(dones), 1),
        "done": sum(r["done"] for r in results),
        "errors": errors,
        "locked": sum("locked" in e for e in errors),
        "fenced": sum(r["fenced"] for r in results),
        **checked,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--timeout", type=float, default=20.0, help="busy timeout (s)")
    parser.add_argument("--skip-dtdb", action="store_true")
    parser.add_argument(
        "--dtdb-python",
        default=sys.executable
        if importlib.util.find_spec("django_tasks_db")
        else "/tmp/dtdb/bin/python",
        help="an interpreter with django-tasks-db (default: this one, when it has it)",
    )
    parser.add_argument(
        "--postgres-url",
        default="",
        help="also run on this PostgreSQL database (its public schema is dropped each round)",
    )
    parser.add_argument(
        "--no-writer-queue",
        action="store_true",
        help="diagnostics: run agentstore without its SQLite writer queue",
    )
    parser.add_argument(
        "--watched",
        action="store_true",
        help="also run agentstore with an execute_wrapper installed "
        "(column 'watched/s'; ratio: unwatched over it)",
    )
    parser.add_argument("--role", default="", help=argparse.SUPPRESS)
    parser.add_argument("--worker", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--start-file", default="", help=argparse.SUPPRESS)
    parser.add_argument("--path", default="", help=argparse.SUPPRESS)
    common.add_json_flag(parser)
    args = parser.parse_args()

    if args.role == "seed":
        seed(args.tasks)
        return 0
    if args.role == "agentstore":
        print(json.dumps(worker_agentstore(args.worker, args.start_file)))
        return 0
    if args.role == "raw":
        print(json.dumps(worker_raw(args.worker, args.start_file, args.path, args.timeout)))
        return 0

    if args.no_writer_queue:
        os.environ["BENCH_NO_WRITER_QUEUE"] = "1"
    dtdb = not args.skip_dtdb and os.path.exists(args.dtdb_python)
    print(f"{args.tasks} queued tasks; each: claim -> 2 running events -> finish")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    if args.no_writer_queue:
        print("(agentstore runs WITHOUT its SQLite writer queue: diagnostics)")
    databases = [("SQLite (WAL)", "")]
    if args.postgres_url:
        databases.append(("PostgreSQL", args.postgres_url))
    for label, url in databases:
        print(f"\n{label}")
        table(args, url, dtdb)
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    common.emit("tasks_claim", args, engine_name="sqlite")
    return 0


def table(args: argparse.Namespace, url: str, dtdb: bool) -> None:
    """One table: a row per worker count, every system on the same database."""
    header = (
        f"{'W':>2}  {'agentstore/s':>12}  "
        + (f"{'watched/s':>9}  {'ratio':>6}  " if args.watched else "")
        + f"{'raw/s':>8}  {'ratio':>6}  "
        f"{'dtdb/s':>8}  {'x dtdb':>7}  {'worst ms (raw)':>15}  {'fair':>4}  "
        "exactly-once  errors(locked)"
    )
    print(header)
    for workers in args.workers:
        ours = run_round("agentstore", args.tasks, workers, args.timeout, url)
        bypass = ""
        if args.watched:
            os.environ["BENCH_EXECUTE_WRAPPER"] = "1"
            wrapped = run_round("agentstore", args.tasks, workers, args.timeout, url)
            del os.environ["BENCH_EXECUTE_WRAPPER"]
            rate = wrapped["tasks_per_s"]
            bypass = f"{rate:9.0f}  {ours['tasks_per_s'] / rate:6.2f}  "
        raw = run_round("raw", args.tasks, workers, args.timeout, url)
        theirs = dtdb_round(args.dtdb_python, args.tasks, workers, url) if dtdb else None
        their_rate = f"{theirs['tasks_per_s']:8.0f}" if theirs else f"{'-':>8}"
        times = f"{ours['tasks_per_s'] / theirs['tasks_per_s']:7.1f}" if theirs else f"{'-':>7}"
        worst = f"{ours['worst_ms']:.0f} ({raw['worst_ms']:.0f})"
        print(
            f"{workers:>2}  {ours['tasks_per_s']:12.0f}  {bypass}{raw['tasks_per_s']:8.0f}  "
            f"{ours['tasks_per_s'] / raw['tasks_per_s']:6.2f}  {their_rate}  {times}  "
            f"{worst:>15}  {ours['fair']:4.2f}  "
            f"{str(ours['exactly_once']):>5}/{str(raw['exactly_once']):<6}  "
            f"{len(ours['errors'])}({ours['locked']}) / raw {len(raw['errors'])}({raw['locked']})"
            + (f" / dtdb {len(theirs['errors'])}" if theirs else ""),
            flush=True,
        )
        for label, result in (("agentstore", ours), ("raw", raw)):
            if not result["exactly_once"] or result["errors"]:
                print(f"    {label}: {result['states']} bad logs {result['bad_logs']}")
                print(f"    {label} errors: {sorted(set(result['errors']))[:3]}")
        if theirs and (theirs["errors"] or set(theirs["states"]) != {"SUCCESSFUL"}):
            print(f"    dtdb: {theirs['states']} errors {sorted(set(theirs['errors']))[:3]}")
        cycle = f"tasks: claim -> 2 events -> finish, {workers} worker" + "s" * (workers > 1)
        if url:
            cycle += " (PostgreSQL)"
        common.record(
            cycle, "raw sqlite3" if not url else "raw psycopg", raw["tasks_per_s"], role="raw"
        )
        common.record(cycle, "TaskRepository", ours["tasks_per_s"])
        if theirs:
            common.record(cycle, "django-tasks-db", theirs["tasks_per_s"], role="peer")


if __name__ == "__main__":
    raise SystemExit(main())
