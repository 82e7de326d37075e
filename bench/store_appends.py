"""Tree and loop appends at 1 and N processes against raw sqlite3 and the OpenAI Agents SDK.

    .venv/bin/python bench/store_appends.py                        # 1 and 8 processes
    .venv/bin/python bench/store_appends.py --processes 1 8 --ops 10000 --rounds 2
    .venv/bin/python bench/store_appends.py --code ../main        # another checkout ("before")

Every strategy appends ``--ops`` records of a 1 KB JSON payload in total, split
over N OS processes writing to one SQLite file (WAL, synchronous=NORMAL — the
project's settings), one session per process, one write transaction per append:

* ``raw-tree`` — stdlib ``sqlite3`` on the narrowest sensible schema for a tree
  session: ``session(id, updated_at)`` indexed by ``updated_at`` (lists by recent
  activity) and ``entry(id, session_id, seq, entry_id, parent_id, created_at,
  data)`` unique on ``(session_id, seq)`` and ``(session_id, entry_id)``. An
  append is BEGIN IMMEDIATE, the session's ``updated_at`` moved forward, the entry
  inserted at the next seq only if its parent exists, COMMIT.
* ``tree`` — ``TreeStore.append_message`` (validation, metadata, the text-search
  index, writer queue; entries chained to the previous one).
* ``floor-tree`` — stdlib ``sqlite3`` on agentstore's own migrated schema, sending
  the tree store's own statements (``agentstore.sql``: the session touch, the
  entry ``INSERT`` with its parent check) with parameters from ``sql.row``: what
  SQLite alone spends on that schema per append, the least any code on it can
  cost. Its ratio to ``raw-tree`` bounds ``tree``'s (decision record 0077).
* ``floor-loop`` — the same for the loop store's statements (the session's
  ``updated_at``, the step ``INSERT``), against ``raw-loop``.
* ``raw-loop`` — the same for a step trace: ``step(id, session_id, step_index,
  data, created_at)`` indexed by ``(session_id, id)`` for last-N, and the session
  upserted (created on the first step, ``updated_at`` moved after).
* ``loop`` — ``LoopStore.append``.
* ``oai`` — the OpenAI Agents SDK's ``SQLiteSession.add_items`` with one item
  (skipped when ``agents`` is not importable).

Workers start together (each announces it is ready, then waits for a start file;
``tests/workers/start.py``); the strategies take turns each round so machine
noise hits them alike. Printed: appends/s over the wall time from the start to
the last worker's end, errors that escaped, and the ratio to the raw baseline
of the same kind in the same round (oai against raw-tree). Timings are for
reading, never for asserting (docs/operations.md, "Performance").
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import common  # noqa: E402

TEXT = ("The quick brown fox jumps over the lazy dog. " * 24)[:1000]
PAYLOAD = json.dumps({"role": "user", "content": TEXT})  # ~1 KB of JSON
STRATEGIES = ("raw-tree", "tree", "floor-tree", "raw-loop", "loop", "floor-loop", "oai")

NARROW_SCHEMA = """
CREATE TABLE session (id TEXT PRIMARY KEY, updated_at TEXT NOT NULL);
CREATE INDEX session_updated ON session (updated_at);
CREATE TABLE entry (
    id INTEGER PRIMARY KEY, session_id TEXT NOT NULL REFERENCES session (id),
    seq INTEGER NOT NULL, entry_id TEXT NOT NULL, parent_id TEXT,
    created_at TEXT NOT NULL, data TEXT NOT NULL,
    UNIQUE (session_id, seq), UNIQUE (session_id, entry_id));
CREATE TABLE step (
    id INTEGER PRIMARY KEY, session_id TEXT NOT NULL REFERENCES session (id),
    step_index INTEGER NOT NULL, data TEXT NOT NULL, created_at TEXT NOT NULL);
CREATE INDEX step_session ON step (session_id, id);
"""
RAW_TOUCH = "UPDATE session SET updated_at = max(updated_at, ?) WHERE id = ?"
RAW_ENTRY = (
    "INSERT INTO entry (session_id, seq, entry_id, parent_id, created_at, data)"
    " SELECT ?, n.seq, ?, ?, ?, ? FROM (SELECT COALESCE(MAX(seq), 0) + 1 AS seq FROM entry"
    " WHERE session_id = ?) n WHERE ? IS NULL OR EXISTS"
    " (SELECT 1 FROM entry WHERE session_id = ? AND entry_id = ?)"
)
RAW_UPSERT = (
    "INSERT INTO session (id, updated_at) VALUES (?, ?)"
    " ON CONFLICT (id) DO UPDATE SET updated_at = excluded.updated_at"
)
RAW_STEP = "INSERT INTO step (session_id, step_index, data, created_at) VALUES (?, ?, ?, ?)"


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


def _raw(path: str) -> sqlite3.Connection:
    con = sqlite3.connect(path, isolation_level=None, timeout=30)
    # The pragmas of the project's SQLite settings (project/database_url.py).
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=NORMAL")
    con.execute("PRAGMA foreign_keys=ON")
    con.execute("PRAGMA cache_size=-16000")
    return con


def _django(db: str) -> None:
    """Set Django up on ``db`` (the project's settings, DEBUG off)."""
    os.environ.update(
        DATABASE_URL=f"sqlite:///{db}",
        DJANGO_SETTINGS_MODULE="project.settings",
        DJANGO_DEBUG="0",
    )
    import django

    django.setup()


def _floor(args: argparse.Namespace) -> Any:
    """The ``floor-*`` append: the store's own statements, bare, on agentstore's schema.

    Django is set up only for the models' ``_meta`` (``bench.floor`` builds
    every statement and row from it); the writes go through ``sqlite3``.
    """
    _django(args.db)
    from bench import floor

    con = floor.connect(args.db)
    if args.strategy == "floor-tree":
        return floor.tree_appender(con, args.session, text=TEXT)
    return floor.loop_appender(con, args.session, text=TEXT)


def worker(args: argparse.Namespace) -> None:
    """One process: ``--ops`` appends of ``--strategy`` in session ``--session``."""
    from tests.workers.start import ready_then_wait

    strategy, sid, ops = args.strategy, args.session, args.ops
    errors = 0
    if strategy.startswith("raw"):
        con = _raw(args.db)
        if strategy == "raw-tree":
            con.execute("INSERT INTO session VALUES (?, ?)", (sid, _stamp()))
        from agentstore.ids import new_id

        def append(n: int, parent: str | None) -> str | None:
            stamp = _stamp()
            con.execute("BEGIN IMMEDIATE")
            if strategy == "raw-tree":
                entry_id = new_id()
                con.execute(RAW_TOUCH, (stamp, sid))
                cursor = con.execute(
                    RAW_ENTRY, (sid, entry_id, parent, stamp, PAYLOAD, sid, parent, sid, parent)
                )
                if cursor.rowcount != 1:
                    raise RuntimeError("parent missing")
                con.execute("COMMIT")
                return entry_id
            con.execute(RAW_UPSERT, (sid, stamp))
            con.execute(RAW_STEP, (sid, n, PAYLOAD, stamp))
            con.execute("COMMIT")
            return None

    elif strategy.startswith("floor"):
        append = _floor(args)

    elif strategy == "oai":
        import asyncio

        from agents import SQLiteSession

        session = SQLiteSession(sid, args.db)
        item = json.loads(PAYLOAD)
        loop = asyncio.new_event_loop()

        def append(n: int, parent: str | None) -> str | None:
            loop.run_until_complete(session.add_items([item]))
            return None

    else:
        _django(args.db)
        from agentstore.stores import LoopStore, TreeStore
        from agentstore.types import MessageEntity, RunStep

        if strategy == "tree":
            tree = TreeStore()
            tree_sid = tree.create_session("/bench").id

            def append(n: int, parent: str | None) -> str | None:
                role = "user" if n % 2 == 0 else "assistant"
                return tree.append_message(
                    tree_sid, parent, MessageEntity(role=role, content=TEXT)
                ).id

        else:
            loop_store = LoopStore()

            def append(n: int, parent: str | None) -> str | None:
                loop_store.append(
                    RunStep(session_id=sid, step_index=n, step_type="response", content=TEXT)
                )
                return None

    ready_then_wait(args.start_file)
    started = time.perf_counter()
    parent: str | None = None
    for n in range(ops):
        try:
            parent = append(n, parent)
        except Exception as exc:  # counted: an escaped error is a result here
            errors += 1
            print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
    print(
        json.dumps(
            {"ops": ops - errors, "errors": errors, "seconds": time.perf_counter() - started}
        )
    )


def run(
    strategy: str, processes: int, ops: int, template: str, tmp: Path, code: str
) -> dict[str, float]:
    """Start ``processes`` workers of ``strategy`` on a fresh copy of the database."""
    work = tmp / f"{strategy}-{processes}"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir()
    db = work / "bench.sqlite3"
    if strategy in ("tree", "floor-tree", "loop", "floor-loop"):
        shutil.copy(template, db)
    elif strategy.startswith("raw"):
        con = sqlite3.connect(db)
        con.execute("PRAGMA journal_mode=WAL")
        con.executescript(NARROW_SCHEMA)
        con.close()
    start = work / "go"
    per = ops // processes
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                __file__,
                "--worker",
                "--strategy",
                strategy,
                "--db",
                str(db),
                "--session",
                f"s{n}",
                "--ops",
                str(per),
                "--start-file",
                str(start),
                "--code",
                code,
            ],
            cwd=code,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(processes)
    ]
    # Release them together once every one is set up (no sleep as a barrier).
    from tests.processes import release

    release(start, procs)
    t0 = time.perf_counter()
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=3600)
        if proc.returncode:
            raise SystemExit(f"{strategy} worker failed: {err[-2000:]}")
        results.append(json.loads(out.strip().splitlines()[-1]))
    wall = time.perf_counter() - t0
    done = sum(r["ops"] for r in results)
    return {"rate": done / wall, "errors": sum(r["errors"] for r in results)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 8])
    parser.add_argument(
        "--ops", type=int, default=10_000, help="per strategy (default: %(default)r)"
    )
    parser.add_argument("--rounds", type=int, default=2, help="(default: %(default)r)")
    parser.add_argument("--strategies", nargs="+", default=list(STRATEGIES), choices=STRATEGIES)
    parser.add_argument("--code", default=str(ROOT), help="the checkout whose agentstore runs")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--strategy", default="", help=argparse.SUPPRESS)
    parser.add_argument("--db", default="", help=argparse.SUPPRESS)
    parser.add_argument("--session", default="", help=argparse.SUPPRESS)
    parser.add_argument("--start-file", default="", help=argparse.SUPPRESS)
    common.add_json_flag(parser)
    args = parser.parse_args()
    code = str(Path(args.code).resolve())
    sys.path.insert(0, code)
    if args.worker:
        worker(args)
        return
    strategies = list(args.strategies)
    try:
        import agents  # noqa: F401
    except ImportError:
        strategies = [s for s in strategies if s != "oai"]
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name).resolve()
        template = tmp / "template.sqlite3"
        env = {
            **os.environ,
            "DATABASE_URL": f"sqlite:///{template}",
            "DJANGO_DEBUG": "0",
            "DJANGO_SETTINGS_MODULE": "project.settings",
        }
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "-v0"], cwd=code, env=env, check=True
        )
        con = sqlite3.connect(template)
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        con.close()
        print(f"agentstore from {code}")
        print(f"appends of a 1 KB JSON payload, {args.ops} per strategy, {args.rounds} rounds")
        print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        for processes in args.processes:
            rates: dict[str, list[float]] = {s: [] for s in strategies}
            errors = dict.fromkeys(strategies, 0.0)
            for _ in range(args.rounds):
                for strategy in strategies:
                    result = run(strategy, processes, args.ops, str(template), tmp, code)
                    rates[strategy].append(result["rate"])
                    errors[strategy] += result["errors"]
            median = {s: statistics.median(r) for s, r in rates.items()}
            print(f"{processes} process(es):")
            for strategy in strategies:
                base = "raw-loop" if "loop" in strategy else "raw-tree"
                ratio = median[strategy] / median[base] if base in median else float("nan")
                extra = ""
                if strategy in ("tree", "loop") and "oai" in median:
                    extra = f"   {median[strategy] / median['oai']:.2f}x oai"
                print(
                    f"  {strategy:>8} {median[strategy]:>8.0f} appends/s  "
                    f"errors {int(errors[strategy])}   {ratio:.2f}x {base}{extra}"
                )
            for store in ("tree", "loop"):
                workload = f"{store} appends (narrow raw schema), {processes} process(es)"
                if f"raw-{store}" in median:
                    common.record(workload, "raw sqlite3", median[f"raw-{store}"], role="raw")
                if store in median:
                    common.record(workload, f"{store.capitalize()}Store", median[store])
                if f"floor-{store}" in median:
                    who = "raw sqlite3 on agentstore's schema"
                    common.record(workload, who, median[f"floor-{store}"], role="other")
                if "oai" in median:
                    common.record(workload, "OpenAI SQLiteSession", median["oai"], role="peer")
        print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    common.emit("store_appends", args, engine_name="sqlite")


if __name__ == "__main__":
    main()
