"""LogStore appends against raw sqlite3 writing the same lines; follow latency across processes.

    .venv/bin/python bench/log_append.py                    # SQLite file in a temp dir
    .venv/bin/python bench/log_append.py --appends 5000 --follow 40

Appends: 1 KB ``item`` entries (a user message) chained into one session, one
transaction each, through

* ``raw``   — the stdlib ``sqlite3`` module inserting the *same lines* the store
  wrote (already hashed): BEGIN IMMEDIATE, INSERT the entry row, UPDATE the
  session's ``updated_at``, COMMIT;
* ``narrow`` — the same, into the narrowest sensible log schema (a table of
  ``(session, seq)`` primary key, entry id (unique per session), parent, line;
  a session table with ``updated_at``): the baseline issue 15 asks for;
* ``store`` — ``LogStore.append``: validation, RFC 8785 hashing of the content and
  the envelope, the heartbeat (hold check), the insert, the session update with
  the head the next open trusts, the writer queue. Target: at least 0.35x raw.

Then ``--processes`` OS processes at once (default 1 and 8), each appending
``--appends / N`` entries to its own session — LogStore (``tests/workers/
log_worker.py --mode append``) against raw sqlite3 processes doing the narrow
schema's insert + update (this script with ``--raw-worker``), both released
together by the ready/start handshake (``tests/processes.py``).

Follow latency: a worker *process* (``tests/workers/log_worker.py --mode append``)
appends entries at a steady pace and prints the wall-clock time just after each
commit; this process follows the session with ``LogStore.follow`` at the
default interval (100 ms) and records when each ``appended`` change arrives.
Target: median under 150 ms.

Printed, never asserted: the machine is shared, so run it when it is quiet.
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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import common  # noqa: E402
from tests.processes import release  # noqa: E402

APPEND = "log: append 1 KB item, 1 process"
TEXT = ("The quick brown fox jumps over the lazy dog. " * 24)[:1024]


def item(n: int) -> dict[str, Any]:
    return {
        "type": "item",
        "item": {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": f"{n:06d} {TEXT}"[:1024]}],
        },
    }


def bench_store(count: int) -> tuple[list[float], float, list[tuple[str, str | None, str]]]:
    from agentstore.stores import LogStore

    store = LogStore()
    session = store.create({"cwd": "/bench/store"})
    latencies = []
    started = time.perf_counter()
    for n in range(count):
        t0 = time.perf_counter()
        store.append(session.id, item(n))
        latencies.append(time.perf_counter() - t0)
    total = time.perf_counter() - started
    rows = [(e.id, e.parent, e.line) for e in session.entries]
    store.close()
    return latencies, total, rows


def bench_raw(path: str, rows: list[tuple[str, str | None, str]]) -> tuple[list[float], float]:
    from agentstore.stores import LogStore

    store = LogStore()
    session_id = store.create({"cwd": "/bench/raw"}).id
    store.close()
    con = sqlite3.connect(path, isolation_level=None, timeout=20)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=NORMAL")
    latencies = []
    started = time.perf_counter()
    for seq, (entry_id, parent, line) in enumerate(rows, start=1):
        t0 = time.perf_counter()
        stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
        con.execute("BEGIN IMMEDIATE")
        con.execute(
            "INSERT INTO agentstore_entry (session_id, seq, entry_id, parent_id, type, line, "
            "created_at, role, content, provider, model, custom_type, summary, tool_name, "
            "tool_status, tool_args_json, token_estimate, model_facing, display, "
            "compaction_first_kept_entry_id, compaction_tokens_before, branch_from_entry_id, "
            "operation_id, part_count) VALUES (?, ?, ?, ?, 'item', ?, ?, '', '', '', '', '', "
            "'', '', '', '', 0, 0, 1, '', 0, '', '', 0)",
            (session_id, seq, entry_id, parent, line, stamp),
        )
        con.execute(
            "UPDATE agentstore_session SET updated_at = ? WHERE id = ?", (stamp, session_id)
        )
        con.execute("COMMIT")
        latencies.append(time.perf_counter() - t0)
    total = time.perf_counter() - started
    con.close()
    return latencies, total


NARROW = (
    "CREATE TABLE IF NOT EXISTS narrow_session (id TEXT PRIMARY KEY, updated_at TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS narrow_line (session_id TEXT NOT NULL, seq INTEGER NOT NULL, "
    "entry_id TEXT NOT NULL, parent_id TEXT, line TEXT NOT NULL, "
    "PRIMARY KEY (session_id, seq), UNIQUE (session_id, entry_id))",
)


def narrow_append(
    con: sqlite3.Connection, session_id: str, seq: int, row: tuple[str, str | None, str]
) -> None:
    """One append on the narrow schema: BEGIN IMMEDIATE, INSERT, UPDATE, COMMIT."""
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    con.execute("BEGIN IMMEDIATE")
    con.execute(
        "INSERT INTO narrow_line (session_id, seq, entry_id, parent_id, line) "
        "VALUES (?, ?, ?, ?, ?)",
        (session_id, seq, *row),
    )
    con.execute("UPDATE narrow_session SET updated_at = ? WHERE id = ?", (stamp, session_id))
    con.execute("COMMIT")


def narrow_connection(path: str, session_id: str) -> sqlite3.Connection:
    con = sqlite3.connect(path, isolation_level=None, timeout=20)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=NORMAL")
    for statement in NARROW:
        con.execute(statement)
    con.execute("INSERT OR IGNORE INTO narrow_session VALUES (?, '')", (session_id,))
    return con


def bench_narrow(path: str, rows: list[tuple[str, str | None, str]]) -> tuple[list[float], float]:
    con = narrow_connection(path, "narrow")
    latencies = []
    started = time.perf_counter()
    for seq, row in enumerate(rows, start=1):
        t0 = time.perf_counter()
        narrow_append(con, "narrow", seq, row)
        latencies.append(time.perf_counter() - t0)
    total = time.perf_counter() - started
    con.close()
    return latencies, total


def raw_worker(path: str, session_id: str, count: int, start_file: str) -> None:
    """A raw sqlite3 writer process: ``count`` 1 KB appends on the narrow schema."""
    from tests.workers.start import ready_then_wait

    con = narrow_connection(path, session_id)
    lines = [(f"sha256:{session_id}-{n}", None, json.dumps(item(n))) for n in range(count)]
    ready_then_wait(start_file)
    for seq, row in enumerate(lines, start=1):
        narrow_append(con, session_id, seq, row)
    con.close()
    print(json.dumps({"committed": time.time()}), flush=True)


def bench_processes(url: str, path: str, processes: int, appends: int) -> tuple[float, float]:
    """(LogStore appends/s, raw appends/s) with ``processes`` writers, one session each."""
    from agentstore.stores import LogStore
    from tests.processes import Launcher

    per = max(1, appends // processes)
    store = LogStore()
    sessions = [store.create({"cwd": f"/bench/p{n}"}).id for n in range(processes)]
    store.close()
    here = str(Path(__file__).resolve())
    rates = []
    for commands in (
        [
            [
                "-m",
                "tests.workers.log_worker",
                "--mode",
                "append",
                "--session",
                sid,
                "--count",
                str(per),
                "--gap",
                "0",
                "--size",
                "1024",
            ]
            for sid in sessions
        ],
        [
            [here, "--raw-worker", path, "--session", f"raw-{processes}-{n}", "--appends", str(per)]
            for n in range(processes)
        ],
    ):
        with Launcher(url) as launcher:
            procs = [launcher.spawn(*command) for command in commands]
            launcher.wait_ready()
            started = time.time()
            launcher.release()
            ended = max(launcher.result(proc)["committed"] for proc in procs)
        rates.append(per * processes / (ended - started))
    return rates[0], rates[1]


def bench_follow(url: str, count: int, gap: float) -> list[float]:
    from agentstore.stores import LogStore

    writer = LogStore()
    session_id = writer.create({"cwd": "/bench/follow"}).id
    writer.close()
    follower = LogStore(read_only=True)  # the default follow_interval (100 ms)
    with tempfile.TemporaryDirectory() as tmp:
        start = Path(tmp) / "go"
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.workers.log_worker",
                "--mode",
                "append",
                "--session",
                session_id,
                "--count",
                str(count),
                "--gap",
                str(gap),
                "--size",
                "1024",
                "--start-file",
                str(start),
            ],
            cwd=ROOT,
            env={**os.environ, "DATABASE_URL": url},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        changes = follower.follow(session_id)
        next(changes)
        release(start, [proc])  # once the writer has opened the session
        arrived: dict[str, float] = {}
        for change in changes:
            if change.kind == "appended":
                arrived[change.entry_id] = time.time()
                if len(arrived) == count:
                    break
        out, err = proc.communicate(timeout=120)
        if proc.returncode:
            raise SystemExit(err)
    committed = [json.loads(line) for line in out.splitlines() if line.strip()]
    return [arrived[r["id"]] - r["committed"] for r in committed]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--appends", type=int, default=2000)
    parser.add_argument("--follow", type=int, default=30, help="appends followed across processes")
    parser.add_argument("--gap", type=float, default=0.27, help="seconds between followed appends")
    common.add_json_flag(parser)
    parser.add_argument("--processes", type=int, nargs="*", default=[1, 8])
    parser.add_argument("--raw-worker", default="", help=argparse.SUPPRESS)
    parser.add_argument("--session", default="", help=argparse.SUPPRESS)
    parser.add_argument("--start-file", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.raw_worker:
        raw_worker(args.raw_worker, args.session, args.appends, args.start_file)
        return

    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "bench.sqlite3")
        url = common.database_url(tmp)  # $DATABASE_URL (PostgreSQL): no raw sqlite3 run
        common.setup_django(url)
        print(f"LogStore appends: {args.appends} × 1 KB item entries, one transaction each")
        latencies, total, rows = bench_store(args.appends)
        raw_lat, raw_total = bench_raw(path, rows)
        raw_rate = common.summarise("raw", raw_lat, raw_total, None, width=6)
        narrow_lat, narrow_total = bench_narrow(path, rows)
        narrow_rate = common.summarise("narrow", narrow_lat, narrow_total, raw_rate, width=6)
        rate = common.summarise("store", latencies, total, raw_rate, width=6)
        common.record(APPEND, "raw sqlite3", raw_rate, role="raw")
        common.record(APPEND, "LogStore", rate)
        print(f"  store against the narrow schema: {rate / narrow_rate:.2f}x")

        for processes in args.processes if common.engine(url) == "sqlite" else []:
            ours, raw = bench_processes(url, path, processes, args.appends)
            print(
                f"{processes} process(es), one session each: store {ours:.0f} appends/s, "
                f"raw sqlite3 (narrow) {raw:.0f} appends/s, {ours / raw:.2f}x"
            )

        print(f"Follow latency: {args.follow} appends by another process, {args.gap}s apart")
        delays = bench_follow(url, args.follow, args.gap)
        ms = sorted(d * 1000 for d in delays)
        print(
            f"  median {statistics.median(ms):6.1f} ms   p90 {ms[int(len(ms) * 0.9) - 1]:6.1f} ms"
            f"   max {ms[-1]:6.1f} ms"
        )
        common.record(
            "log: follow latency, another process", "LogStore", statistics.median(ms), unit="ms"
        )
    common.emit("log_append", args)


if __name__ == "__main__":
    main()
