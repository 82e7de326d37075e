"""LoopStore hot paths against raw sqlite3: appending 1 KB steps and reading the last 50.

    .venv/bin/python bench/loop_steps.py
    .venv/bin/python bench/loop_steps.py --appends 3000 --history 100000 --reads 500
    .venv/bin/python bench/loop_steps.py --oai-python /tmp/oai/bin/python

One fresh migrated SQLite file (WAL, synchronous=NORMAL, the project's settings)
per run, in one process, one connection per strategy:

* appends — each append is one write transaction that upserts the session row
  and inserts a step with 1 KB of content and a small JSON ``tool_args``:
  ``raw`` (stdlib ``sqlite3``: ``BEGIN IMMEDIATE``, the same two statements,
  ``COMMIT``), ``store`` (``LoopStore.append``) and ``orm`` (the naive ORM path:
  ``get_or_create`` + ``update`` + ``Step.objects.create`` in ``atomic()``). The
  strategies take turns in rounds so machine noise hits them alike.
* last 50 — a 100,000-step session, then the median latency of ``raw`` (the
  same SELECT … ORDER BY id DESC LIMIT 50, reversed) and ``LoopStore.last_n(50)``
  (which also builds ``RunStep`` values and parses timestamps).

With ``--oai-python`` (an interpreter that has ``openai-agents`` installed, never
a project dependency) the same workload runs through the OpenAI Agents SDK's
``SQLiteSession`` (``add_items`` one item a call, ``get_items(limit=50)``) in a
child process on its own file. Ratios are against raw sqlite3 in the same run;
timings are for reading, never for asserting.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import common  # noqa: E402

CONTENT = "x" * 1024
TOOL_ARGS = b'{"code":"console.log(1)","retain_from_step":3}'


def _stamp() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


def open_raw(path: str) -> sqlite3.Connection:
    raw = sqlite3.connect(path, timeout=20, isolation_level=None)
    # The pragmas Django's connection runs (foreign_keys is Django's own).
    raw.execute("PRAGMA journal_mode=WAL")
    raw.execute("PRAGMA synchronous=NORMAL")
    raw.execute("PRAGMA foreign_keys=ON")
    return raw


def raw_session_upsert(raw: sqlite3.Connection) -> str:
    """The session upsert with every NOT NULL column, as LoopStore writes it."""
    columns = [row[1] for row in raw.execute("PRAGMA table_info(agentstore_session)")]
    placeholders = ", ".join("?" for _ in columns)
    return (
        f"INSERT INTO agentstore_session ({', '.join(columns)}) VALUES ({placeholders}) "
        "ON CONFLICT (id) DO UPDATE SET updated_at = excluded.updated_at "
        "WHERE agentstore_session.kind = 'loop'"
    )


INSERT_STEP = (
    "INSERT INTO agentstore_step (session_id, step_index, step_type, content, tool_args,"
    " duration_ms, prompt_tokens, completion_tokens, created_at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
LAST_50 = (
    "SELECT step_index, step_type, content, tool_args, duration_ms, prompt_tokens,"
    " completion_tokens, created_at FROM agentstore_step WHERE session_id = ?"
    " ORDER BY id DESC LIMIT ?"
)


def bench(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp).resolve() / "bench.sqlite3")
        # $DATABASE_URL (PostgreSQL): the stores only, against the SQLite raw
        # figures of the same bench/run_all.py run.
        postgres = common.engine(os.environ.get("DATABASE_URL", "")) == "postgresql"
        os.environ.update(
            DATABASE_URL=os.environ["DATABASE_URL"] if postgres else f"sqlite:///{path}",
            DJANGO_SETTINGS_MODULE="project.settings",
            DJANGO_DEBUG="0",  # no query log
        )
        subprocess.run(
            [sys.executable, "manage.py", "migrate", "-v0"], cwd=ROOT, env=os.environ, check=True
        )
        sys.path.insert(0, str(ROOT))
        import django

        django.setup()
        from django.db import transaction

        from agentstore.models import Session, Step
        from agentstore.stores import LoopStore
        from agentstore.types import RunStep

        raw = open_raw(path)
        if postgres:  # an empty SQLite file: raw_params below reads no columns
            raw.execute("CREATE TABLE agentstore_session (id TEXT PRIMARY KEY, kind TEXT)")
        upsert_sql = raw_session_upsert(raw)
        store = LoopStore()

        def store_append(i: int) -> None:
            store.append(
                RunStep(
                    session_id="store-append",
                    step_index=i,
                    step_type="response",
                    content=CONTENT,
                    tool_args=TOOL_ARGS,
                    duration_ms=5,
                    prompt_tokens=10,
                    completion_tokens=2,
                )
            )

        def orm_append(i: int) -> None:
            now = datetime.now(UTC)
            with transaction.atomic():
                _, created = Session.objects.get_or_create(
                    id="orm-append", defaults={"kind": "loop", "created_at": now, "updated_at": now}
                )
                if not created:
                    Session.objects.filter(pk="orm-append").update(updated_at=now)
                Step.objects.create(
                    session_id="orm-append",
                    step_index=i,
                    step_type="response",
                    content=CONTENT,
                    tool_args=TOOL_ARGS,
                    duration_ms=5,
                    prompt_tokens=10,
                    completion_tokens=2,
                    created_at=now,
                )

        # Column list and zero values read once: raw does no more work than it must.
        session_columns = raw.execute("PRAGMA table_info(agentstore_session)").fetchall()

        def raw_params(sid: str, stamp: str) -> list[Any]:
            values = {
                "id": sid,
                "kind": "loop",
                "owner_id": None,
                "created_at": stamp,
                "updated_at": stamp,
                "incarnation": os.urandom(16).hex(),
                "data": None,
            }
            return [
                values.get(name, 0 if decl.startswith(("integer", "bigint")) else "")
                for _, name, decl, *_ in session_columns
            ]

        def raw_append_fast(i: int) -> None:
            stamp = _stamp()
            params = raw_params("raw-append", stamp)
            raw.execute("BEGIN IMMEDIATE")
            raw.execute(upsert_sql, params)
            raw.execute(
                INSERT_STEP, ("raw-append", i, "response", CONTENT, TOOL_ARGS, 5, 10, 2, stamp)
            )
            raw.execute("COMMIT")

        strategies: dict[str, Callable[[int], None]] = {
            "raw": raw_append_fast,
            "store": store_append,
            "orm": orm_append,
        }
        if postgres:
            del strategies["raw"]
        elapsed = dict.fromkeys(strategies, 0.0)
        rounds = max(1, args.rounds)
        per_round = max(1, args.appends // rounds)
        for r in range(rounds):
            for name, fn in strategies.items():
                t0 = time.perf_counter()
                for i in range(r * per_round, (r + 1) * per_round):
                    fn(i)
                elapsed[name] += time.perf_counter() - t0
        total = per_round * rounds
        rates = {name: total / seconds for name, seconds in elapsed.items()}

        # The long session: written in one raw transaction (setup, not measured).
        stamp = _stamp()
        if postgres:
            from agentstore.demo import seeding
            from agentstore.stores import SessionStore

            SessionStore().create("loop", session_id="history")
            seeding.steps(
                "history", args.history, content=CONTENT, step_type="response",
                tool_args=TOOL_ARGS, duration_ms=5, prompt_tokens=10, completion_tokens=2,
            )  # fmt: skip
        else:
            raw.execute("BEGIN IMMEDIATE")
            raw.execute(upsert_sql, raw_params("history", stamp))
            raw.executemany(
                INSERT_STEP,
                (
                    ("history", i % 50, "response", CONTENT, TOOL_ARGS, 5, 10, 2, stamp)
                    for i in range(args.history)
                ),
            )
            raw.execute("COMMIT")
            assert [s.step_index for s in store.last_n("history", 50)][-1] == (
                args.history - 1
            ) % 50

        def raw_last_50() -> None:
            rows = raw.execute(LAST_50, ("history", 50)).fetchall()
            rows.reverse()

        def store_last_50() -> None:
            store.last_n("history", 50)

        samples: dict[str, list[float]] = {"raw": [], "store": []}
        if postgres:
            del samples["raw"]
        for _ in range(args.reads):
            for name, fn in (("raw", raw_last_50), ("store", store_last_50)):
                if name not in samples:
                    continue
                t0 = time.perf_counter()
                fn()
                samples[name].append(time.perf_counter() - t0)
        medians = {name: statistics.median(values) * 1e6 for name, values in samples.items()}
        raw.close()

    raw_rate, raw_median = rates.get("raw", float("nan")), medians.get("raw", float("nan"))
    print(f"appends of 1 KB steps ({total} per strategy, {rounds} interleaved rounds)")
    for name, rate in rates.items():
        print(f"  {name:>6} {rate:>9.0f} appends/s   {rate / raw_rate:.2f}x raw")
        common.record(APPEND, WHO[name], rate, role=ROLE[name])
    print(f"last_n(50) on a {args.history}-step session (median of {args.reads})")
    for name, median in medians.items():
        print(f"  {name:>6} {median:>9.1f} us         {median / raw_median:.2f}x raw latency")
        common.record(last_50(args), WHO[name], median / 1000, role=ROLE[name], unit="ms")

    if args.oai_python:
        oai = run_oai(args)
        if oai is None:
            common.emit("loop_steps", args)
            return
        print("OpenAI Agents SDK SQLiteSession (separate file, same machine, same run)")
        print(
            f"  {'oai':>6} {oai['appends_per_s']:>9.0f} appends/s   "
            f"{oai['appends_per_s'] / raw_rate:.2f}x raw"
        )
        print(
            f"  {'oai':>6} {oai['last50_median_us']:>9.1f} us         "
            f"{oai['last50_median_us'] / raw_median:.2f}x raw latency"
        )
        common.record(APPEND, "OpenAI SQLiteSession", oai["appends_per_s"], role="peer")
        common.record(
            last_50(args), "OpenAI SQLiteSession", oai["last50_median_us"] / 1000,
            role="peer", unit="ms",
        )  # fmt: skip
    common.emit("loop_steps", args)


APPEND = "loop: append 1 KB step, 1 process"
WHO = {"raw": "raw sqlite3", "store": "LoopStore", "orm": "naive ORM"}
ROLE = {"raw": "raw", "orm": "other", "store": "agentstore"}


def last_50(args: argparse.Namespace) -> str:
    return f"loop: last 50 of {args.history:,} steps"


def run_oai(args: argparse.Namespace) -> dict[str, float] | None:
    proc = subprocess.run(
        [
            args.oai_python,
            __file__,
            "--oai-worker",
            "--appends",
            str(args.appends),
            "--history",
            str(args.history),
            "--reads",
            str(args.reads),
        ],
        capture_output=True,
        text=True,
    )
    if proc.returncode:
        print(f"OpenAI Agents SDK run failed:\n{proc.stderr[-2000:]}")
        return None
    result: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def oai_worker(args: argparse.Namespace) -> None:
    """Run the workload through agents.SQLiteSession (in the throwaway venv)."""
    import asyncio

    from agents import SQLiteSession

    async def run(path: str) -> dict[str, float]:
        appender = SQLiteSession("oai-append", path)
        item = {"role": "user", "content": CONTENT}
        t0 = time.perf_counter()
        for _ in range(args.appends):
            await appender.add_items([item])  # type: ignore[list-item]
        appends_per_s = args.appends / (time.perf_counter() - t0)

        history = SQLiteSession("oai-history", path)
        await history.add_items([item] * args.history)  # type: ignore[list-item]
        samples = []
        for _ in range(args.reads):
            t0 = time.perf_counter()
            await history.get_items(limit=50)
            samples.append(time.perf_counter() - t0)
        appender.close()
        history.close()
        return {
            "appends_per_s": appends_per_s,
            "last50_median_us": statistics.median(samples) * 1e6,
        }

    with tempfile.TemporaryDirectory() as tmp:
        print(json.dumps(asyncio.run(run(str(Path(tmp) / "oai.sqlite3")))))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--appends", type=int, default=3000, help="(default: %(default)r)")
    parser.add_argument("--rounds", type=int, default=5, help="(default: %(default)r)")
    parser.add_argument("--history", type=int, default=100_000, help="(default: %(default)r)")
    parser.add_argument("--reads", type=int, default=500, help="(default: %(default)r)")
    parser.add_argument("--oai-python", default="", help="python with openai-agents installed")
    parser.add_argument("--oai-worker", action="store_true", help=argparse.SUPPRESS)
    common.add_json_flag(parser)
    args = parser.parse_args()
    if args.oai_worker:
        oai_worker(args)
    else:
        bench(args)


if __name__ == "__main__":
    main()
