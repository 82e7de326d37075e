"""AgentStoreSession against the OpenAI Agents SDK's SQLiteSession and raw sqlite3.

    .venv/bin/python bench/openai_session.py                      # 100k items, SQLite files
    .venv/bin/python bench/openai_session.py --items 20000 --ops 500

One conversation of ``--items`` Responses items (user messages, function calls,
their outputs, assistant messages: ~250 bytes each), then, on that conversation:

* ``add_items`` of **one** item, ``--ops`` times (the agent appending a turn's
  items one call at a time), and
* ``get_items(limit=50)``, ``--ops`` times (the Runner loading recent history),

through three writers, each on its own SQLite file in WAL mode with
``synchronous=NORMAL``:

* ``raw``      — the stdlib ``sqlite3`` module: INSERT the item's JSON text
  into SQLiteSession's own schema in one transaction; SELECT the newest 50;
* ``sqlite``   — the SDK's ``SQLiteSession`` (its async API, as the Runner calls
  it), on the same settings (the bench subclass adds ``synchronous=NORMAL``;
  the SDK only sets WAL);
* ``agentstore`` — ``AgentStoreSession`` (async API, on ``db_thread``'s thread): the
  item validated, hashed (RFC 8785, SHA-256) and appended to the log tree, the
  hold checked, one transaction; ``get_items`` walks the branch from the leaf;
* ``floor``    — the stdlib ``sqlite3`` module replaying, on a copy of
  agentstore's own database taken just before its timed appends, the very rows
  those appends wrote: per add, ``BEGIN IMMEDIATE``, the log store's fenced
  session update (its own statement, ``agentstore.sql.sessions.update_held``),
  the ``INSERT`` of the entry row (every column, as read back), ``COMMIT`` —
  no Python of ours, no hashing, no hop. It is what SQLite alone spends on
  agentstore's schema for an append: the least any code on that schema can
  cost (decision record 0077). SQLite only.

Targets (issue 18): ``add_items`` throughput ≥ SQLiteSession's; ``get_items(50)``
latency ≤ 1.5× SQLiteSession's. Also printed: the *cold* cost — the first
``get_items`` and the first ``add_items`` of a fresh session object (a new
process, in effect): the read walks from the session's head row, the write
opens it from that row (O(1) in the conversation's length, issue 15).

Printed, never asserted: the machine is shared, so run it when it is quiet.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import common  # noqa: E402

INSERT = "INSERT INTO agent_messages (session_id, message_data) VALUES ('s', ?)"


def make_item(n: int) -> dict[str, Any]:
    """The n-th item of a conversation: user, call, output, answer, repeating."""
    turn, kind = divmod(n, 4)
    if kind == 0:
        return {"role": "user", "content": f"Turn {turn}: what is the weather in city {turn}?"}
    if kind == 1:
        return {
            "type": "function_call",
            "id": f"fc_{turn}",
            "call_id": f"call_{turn}",
            "name": "get_weather",
            "arguments": json.dumps({"city": f"city {turn}"}),
            "status": "completed",
        }
    if kind == 2:
        return {"type": "function_call_output", "call_id": f"call_{turn}", "output": "sunny, 21°C"}
    return {
        "type": "message",
        "id": f"msg_{turn}",
        "role": "assistant",
        "status": "completed",
        "content": [
            {"type": "output_text", "text": f"In city {turn} it is sunny, 21°C.", "annotations": []}
        ],
    }


def timed(samples: list[float]) -> tuple[float, float, float]:
    """(ops/s, p50 ms, p99 ms) of per-operation durations."""
    ordered = sorted(samples)
    p99 = ordered[max(int(len(ordered) * 0.99) - 1, 0)]
    return len(samples) / sum(samples), statistics.median(samples) * 1000, p99 * 1000


# -- raw sqlite3 -----------------------------------------------------------------


def bench_raw(path: Path, items: int, ops: int) -> dict[str, Any]:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(
        "CREATE TABLE agent_messages (id INTEGER PRIMARY KEY AUTOINCREMENT, "
        "session_id TEXT NOT NULL, message_data TEXT NOT NULL, "
        "created_at TIMESTAMP DEFAULT CURRENT_TIMESTAMP)"
    )
    conn.execute("CREATE INDEX idx_msg ON agent_messages (session_id, id)")
    conn.execute("BEGIN")
    conn.executemany(INSERT, ((json.dumps(make_item(n)),) for n in range(items)))
    conn.execute("COMMIT")
    adds: list[float] = []
    cpu = time.process_time()
    for n in range(items, items + ops):
        data = json.dumps(make_item(n))
        start = time.perf_counter()
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "INSERT INTO agent_messages (session_id, message_data) VALUES ('s', ?)", (data,)
        )
        conn.execute("COMMIT")
        adds.append(time.perf_counter() - start)
    cpu_add = (time.process_time() - cpu) / ops
    gets: list[float] = []
    cpu = time.process_time()
    for _ in range(ops):
        start = time.perf_counter()
        rows = conn.execute(
            "SELECT message_data FROM agent_messages WHERE session_id = 's' "
            "ORDER BY id DESC LIMIT 50"
        ).fetchall()
        got = [json.loads(r[0]) for r in reversed(rows)]
        gets.append(time.perf_counter() - start)
    assert len(got) == 50
    conn.close()
    cpu_get = (time.process_time() - cpu) / ops
    return {"add": timed(adds), "get": timed(gets), "cpu": (cpu_add, cpu_get)}


# -- the SDK's SQLiteSession -------------------------------------------------------


async def bench_sqlite_session(path: Path, items: int, ops: int) -> dict[str, Any]:
    from agents.memory.sqlite_session import SQLiteSession

    class NormalSQLiteSession(SQLiteSession):
        # The SDK sets WAL only; the comparison wants agentstore's settings.
        @staticmethod
        def _configure_connection(conn: sqlite3.Connection) -> None:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")

    session = NormalSQLiteSession("s", db_path=path)
    for start in range(0, items, 10_000):
        await session.add_items([make_item(n) for n in range(start, min(items, start + 10_000))])
    adds: list[float] = []
    cpu = time.process_time()
    for n in range(items, items + ops):
        item = make_item(n)
        begin = time.perf_counter()
        await session.add_items([item])
        adds.append(time.perf_counter() - begin)
    cpu_add = (time.process_time() - cpu) / ops
    gets: list[float] = []
    cpu = time.process_time()
    for _ in range(ops):
        begin = time.perf_counter()
        got = await session.get_items(limit=50)
        gets.append(time.perf_counter() - begin)
    assert len(got) == 50
    session.close()
    cpu_get = (time.process_time() - cpu) / ops
    return {"add": timed(adds), "get": timed(gets), "cpu": (cpu_add, cpu_get)}


# -- AgentStoreSession ---------------------------------------------------------------


def seed_agentstore(items: int) -> None:
    """The conversation as an agentsession file imported in one go (set-based)."""
    from agentstore.formats.agentsession import Session, dumps
    from agentstore.integrations.openai_agents import item_entry
    from agentstore.stores import LogStore

    session = Session.new({"id": "s", "harness": {"name": "openai-agents"}})
    for n in range(items):
        session.append(item_entry(make_item(n)))
    LogStore().import_jsonl(dumps(session))


def bench_floor(path: Path, ops: int) -> dict[str, Any]:
    """agentstore's last ``ops`` appends replayed bare on the copy at ``path`` (``bench.floor``)."""
    from bench import floor

    seconds, cpu_add = floor.log_replay(path, "s", ops)
    return {"add": timed(seconds), "cpu": (cpu_add, 0.0)}


async def bench_agentstore(items: int, ops: int, floor_copy: Path | None) -> dict[str, Any]:
    from asgiref.sync import sync_to_async

    from agentstore.integrations.openai_agents import AgentStoreSession
    from bench import floor

    await sync_to_async(seed_agentstore)(items)
    cold = AgentStoreSession("s")
    begin = time.perf_counter()
    await cold.get_items(limit=50)
    cold_get = time.perf_counter() - begin
    begin = time.perf_counter()
    await cold.add_items([make_item(items)])
    cold_add = time.perf_counter() - begin
    await cold.aclose()

    session = AgentStoreSession("s")
    await session.get_items(limit=1)
    await session.add_items([make_item(items + 1)])
    if floor_copy is not None:  # the database as the timed appends find it (held, warm)
        await sync_to_async(floor.snapshot)(floor_copy)
    adds: list[float] = []
    cpu = time.process_time()
    for n in range(items + 2, items + 2 + ops):
        item = make_item(n)
        begin = time.perf_counter()
        await session.add_items([item])
        adds.append(time.perf_counter() - begin)
    cpu_add = (time.process_time() - cpu) / ops
    gets: list[float] = []
    cpu = time.process_time()
    for _ in range(ops):
        begin = time.perf_counter()
        got = await session.get_items(limit=50)
        gets.append(time.perf_counter() - begin)
    assert len(got) == 50 and got[-1] == make_item(items + 1 + ops)
    await session.aclose()
    cpu_get = (time.process_time() - cpu) / ops
    return {
        "add": timed(adds),
        "get": timed(gets),
        "cpu": (cpu_add, cpu_get),
        "cold_get": cold_get,
        "cold_add": cold_add,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--ops", type=int, default=10_000)
    common.add_json_flag(parser)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        # $DATABASE_URL (PostgreSQL): AgentStoreSession there, the SQLite contenders as ever.
        common.setup_django(common.database_url(tmp, "agentstore.sqlite3"))
        print(
            f"{args.items} items in the conversation, {args.ops} operations each, "
            f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}"
        )
        raw = bench_raw(Path(tmp) / "raw.sqlite3", args.items, args.ops)
        sdk = asyncio.run(bench_sqlite_session(Path(tmp) / "sdk.sqlite3", args.items, args.ops))
        from django.db import connection

        copy = Path(tmp) / "floor.sqlite3"
        sqlite = connection.vendor == "sqlite"
        ours = asyncio.run(bench_agentstore(args.items, args.ops, copy if sqlite else None))
        floor = bench_floor(copy, args.ops) if sqlite else None
    print("\nadd_items of one item (one transaction each)")
    adders = [("raw", raw), ("sqlite", sdk), ("agentstore", ours)]
    for name, result in adders + ([("floor", floor)] if floor else []):
        rate, p50, p99 = result["add"]
        print(
            f"  {name:<11} {rate:>8.0f} adds/s   p50 {p50:7.3f} ms   p99 {p99:7.3f} ms   "
            f"{rate / raw['add'][0]:.2f}x raw   {rate / sdk['add'][0]:.2f}x SQLiteSession"
        )
    print("\nget_items(limit=50)")
    for name, result in (("raw", raw), ("sqlite", sdk), ("agentstore", ours)):
        rate, p50, p99 = result["get"]
        print(
            f"  {name:<11} p50 {p50:7.3f} ms   p99 {p99:7.3f} ms   "
            f"{p50 / raw['get'][1]:.2f}x raw latency   {p50 / sdk['get'][1]:.2f}x SQLiteSession"
        )
    print("\nCPU per operation (this process, all threads: less sensitive to a busy machine)")
    for name, result in (("raw", raw), ("sqlite", sdk), ("agentstore", ours)):
        add_cpu, get_cpu = result["cpu"]
        print(
            f"  {name:<11} add {add_cpu * 1e6:6.0f} µs ({add_cpu / sdk['cpu'][0]:.2f}x "
            f"SQLiteSession)   get(50) {get_cpu * 1e6:6.0f} µs "
            f"({get_cpu / sdk['cpu'][1]:.2f}x SQLiteSession)"
        )
    if floor:
        add_cpu = floor["cpu"][0]
        print(
            f"  {'floor':<11} add {add_cpu * 1e6:6.0f} µs ({add_cpu / sdk['cpu'][0]:.2f}x "
            f"SQLiteSession): SQLite alone on agentstore's schema; "
            f"{(ours['cpu'][0] - add_cpu) * 1e6:.0f} µs of agentstore's add is above it"
        )
    print(
        f"\ncold (a fresh AgentStoreSession, as in a new process): "
        f"first get_items {ours['cold_get'] * 1000:.0f} ms, "
        f"first add_items {ours['cold_add'] * 1000:.0f} ms"
    )
    add, get = "openai: add_items of 1 item", f"openai: get_items(limit=50) of {args.items:,}"
    for who, role, result in (
        ("raw sqlite3", "raw", raw),
        ("OpenAI SQLiteSession", "peer", sdk),
        ("AgentStoreSession", "agentstore", ours),
    ):
        common.record(add, who, result["add"][0], role=role)
        common.record(get, who, result["get"][1], role=role, unit="ms")
    if floor:
        common.record(add, "raw sqlite3 on agentstore's schema", floor["add"][0], role="other")
    cold = f"openai: first get_items of a fresh session, {args.items:,} items"
    common.record(cold, "AgentStoreSession", ours["cold_get"] * 1000, unit="ms")
    common.emit("openai_session", args)


if __name__ == "__main__":
    main()
