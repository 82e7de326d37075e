"""A conversation turn of the OpenAI Agents SDK: AgentStoreSession beside the SDK's own stores.

    .venv/bin/python bench/sdk_turn.py                  # 200 × 10 turns; 1, then 8 processes
    .venv/bin/python bench/sdk_turn.py --database both  # and PostgreSQL
    .venv/bin/python bench/sdk_turn.py --processes 8 --database postgresql
    .venv/bin/python bench/sdk_turn.py --quick          # a smoke run, seconds

What an application using the SDK does per user message, measured as such: the
Runner reads the whole history (``await session.get_items()``), then stores what the
turn produced (``await session.add_items(items)``) — here 8 Responses input items: the
user's message, three ``function_call`` items with ~1 KB of JSON ``arguments`` each,
their three ``function_call_output`` items (~1 KB each) and the assistant's answer
message (call ids unique within a conversation). ``--sessions`` conversations (200)
of ``--turns`` turns each (10: 2,000 turns, 16,000 items), round-robin across the
conversations, so consecutive turns touch different conversations and the rows of
one conversation lie spread through the file, as a busy service's do.

The stores, each on a fresh database per run, with the same durability:

* SQLite (WAL, ``synchronous=NORMAL``): ``AgentStoreSession`` (agentstore's own
  Django settings: WAL, ``synchronous=NORMAL``) and the SDK's ``SQLiteSession``
  (subclassed to add ``synchronous=NORMAL``; the SDK sets only WAL);
* PostgreSQL (the local server, default ``synchronous_commit``): ``AgentStoreSession``
  on a database migrated with Django's ``migrate`` (psycopg) and the SDK's
  ``SQLAlchemySession`` on asyncpg (``sqlalchemy[asyncio]``, ``asyncpg``: the ``bench``
  dependency group), each on its own database.

``--processes N``: N spawned OS processes, each serving its share of the
conversations (conversation ``i`` goes to process ``i mod N``) one turn after another;
all start together at a barrier. One session object per conversation per process,
kept for the whole run and never closed, as the SDK documents. Figures per store:
turns/s (all turns ÷ wall time from the first start to the last end), CPU ms per turn
(``time.process_time`` of each process over its timed turns, all threads, summed —
the PostgreSQL server's own CPU is not in it), agentstore's ratio to the peer, and the
database's size after the run (SQLite: the file plus its WAL after a
``wal_checkpoint(TRUNCATE)``; PostgreSQL: ``pg_database_size``), with its growth from
the freshly prepared database. A turn that raises is counted as failed, not retried.

The stores take turns (their order alternates from mode to mode) so a change in the
shared machine's load does not land on one store only. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import sqlite3
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import common  # noqa: E402

PG_SERVER = "postgres://postgres@127.0.0.1:5432"
PG_OURS = f"{PG_SERVER}/agentstore_bench_turn"
PG_PEER = f"{PG_SERVER}/agentstore_bench_turn_sdk"
PEERS = {"sqlite": "SQLiteSession", "postgresql": "SQLAlchemySession"}
OURS = "AgentStoreSession"

# -- the work -------------------------------------------------------------------------------


def _text(tag: str, size: int) -> str:
    """``size`` characters of prose starting with ``tag`` (no two turns' bodies alike)."""
    return (f"{tag} " + common.TEXT_1K * 2)[:size]


def turn_items(conv: int, turn: int) -> list[dict[str, Any]]:
    """The 8 items turn ``turn`` of conversation ``conv`` adds, as the Runner hands them over."""
    tag = f"c{conv}t{turn}"
    items: list[dict[str, Any]] = [{"role": "user", "content": f"{tag}: {common.TEXT_1K[:200]}"}]
    calls = []
    for k in range(3):
        arguments = json.dumps({"query": tag, "k": k, "context": _text(f"{tag}a{k}", 960)})
        calls.append(
            {
                "type": "function_call",
                "id": f"fc_{turn}_{k}",
                "call_id": f"call_{turn}_{k}",  # unique within the conversation
                "name": "search_docs",
                "arguments": arguments,
                "status": "completed",
            }
        )
    outputs = [
        {"type": "function_call_output", "call_id": c["call_id"], "output": _text(f"{tag}o", 1024)}
        for c in calls
    ]
    answer = {
        "type": "message",
        "id": f"msg_{turn}",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": _text(f"{tag}r", 400), "annotations": []}],
    }
    return [*items, *calls, *outputs, answer]


# -- the stores, opened inside each worker process --------------------------------------------


def _normal_sqlite_session() -> type:
    from agents.memory import SQLiteSession

    class NormalSQLiteSession(SQLiteSession):
        # The SDK sets WAL only (with its retry); the comparison wants agentstore's settings.
        @staticmethod
        def _configure_connection(conn: sqlite3.Connection) -> None:
            SQLiteSession._configure_connection(conn)
            conn.execute("PRAGMA synchronous=NORMAL")

    return NormalSQLiteSession


def _asyncpg(url: str) -> str:
    return url.replace("postgres://", "postgresql+asyncpg://", 1)


async def open_sessions(store: str, target: str, ids: list[str]) -> tuple[list[Any], Any]:
    """One session object per conversation, and what closes them at the end."""
    if store == OURS:
        common.setup_django(target if "://" in target else f"sqlite:///{target}", migrate=False)
        from agentstore.integrations.openai_agents import AgentStoreSession

        return [AgentStoreSession(i) for i in ids], None
    if store == "SQLiteSession":
        cls = _normal_sqlite_session()
        return [cls(i, db_path=target) for i in ids], None
    from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(_asyncpg(target))
    return [SQLAlchemySession(i, engine=engine) for i in ids], engine


async def serve(store: str, target: str, convs: list[int], turns: int, barrier: Any) -> dict:
    ids = [f"conv-{c:05d}" for c in convs]
    sessions, engine = await open_sessions(store, target, ids)
    work = {c: [turn_items(c, t) for t in range(turns)] for c in convs}  # built untimed
    if sessions:
        await sessions[0].get_items()  # open the connection(s); reads nothing, writes nothing
    await asyncio.to_thread(barrier.wait)
    failed, first_error = 0, ""
    start, cpu = time.monotonic(), time.process_time()
    for t in range(turns):
        for c, session in zip(convs, sessions, strict=True):
            try:
                await session.get_items()
                await session.add_items(work[c][t])
            except Exception as exc:  # noqa: BLE001 - counted and shown, not hidden
                failed += 1
                first_error = first_error or f"{type(exc).__name__}: {exc}"[:200]
    cpu, end = time.process_time() - cpu, time.monotonic()
    # Untimed: the history a fresh reader sees is every turn's items, in order.
    wrong = 0
    for c, session in zip(convs, sessions, strict=True):
        if await session.get_items() != [i for t in work[c] for i in t]:
            wrong += 1
    if engine is not None:
        await engine.dispose()
    return {"start": start, "end": end, "cpu": cpu, "turns": len(convs) * turns,
            "failed": failed, "error": first_error, "wrong": wrong}  # fmt: skip


def worker(store: str, target: str, convs: list[int], turns: int, barrier: Any, out: Any) -> None:
    try:
        out.put(asyncio.run(serve(store, target, convs, turns, barrier)))
    except BaseException as exc:
        barrier.abort()  # never leave the parent waiting at the start line
        out.put({"crash": f"{type(exc).__name__}: {exc}"})
        raise


# -- preparing and measuring one run --------------------------------------------------------


def _migrate(url: str) -> None:
    common.setup_django(url)


def _spawn(target: Any, *args: Any) -> None:
    """Run ``target(*args)`` in a fresh interpreter (Django reads its database once)."""
    proc = multiprocessing.get_context("spawn").Process(target=target, args=args)
    proc.start()
    proc.join()
    if proc.exitcode:
        raise SystemExit(f"{target.__name__}{args}: exit {proc.exitcode}")


async def _peer_tables(url: str) -> None:
    from agents.extensions.memory.sqlalchemy_session import SQLAlchemySession
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(_asyncpg(url))
    await SQLAlchemySession("setup", engine=engine, create_tables=True).get_items()
    await engine.dispose()


def prepare(store: str, database: str, tmp: Path, label: str) -> str:
    """A fresh database for one store and run (schema created, untimed); its path or URL."""
    if database == "sqlite":
        path = tmp / f"{label}.sqlite3"
        if store == OURS:
            _spawn(_migrate, f"sqlite:///{path}")
        else:
            _normal_sqlite_session()("setup", db_path=path).close()
        return str(path)
    url = PG_OURS if store == OURS else PG_PEER
    common.ensure_postgres_database(url, fresh=True)
    if store == OURS:
        _spawn(_migrate, url)
    else:
        asyncio.run(_peer_tables(url))
    return url


def size(database: str, target: str) -> int:
    """Bytes on disk: the SQLite file + WAL after a checkpoint, or the PostgreSQL database."""
    if database == "sqlite":
        with sqlite3.connect(target) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return sum(os.path.getsize(p) for p in (target, f"{target}-wal") if os.path.exists(p))
    import psycopg

    name = target.rsplit("/", 1)[1]
    with psycopg.connect(f"{PG_SERVER}/postgres") as conn:
        row = conn.execute("SELECT pg_database_size(%s)", [name]).fetchone()
    return int(row[0]) if row else 0


def run(store: str, database: str, processes: int, args: argparse.Namespace, tmp: Path) -> dict:
    """Every turn of one store with ``processes`` workers, on a fresh database."""
    label = f"{store}-{processes}p"
    target = prepare(store, database, tmp, label)
    before = size(database, target)
    ctx = multiprocessing.get_context("spawn")
    barrier, out = ctx.Barrier(processes + 1), ctx.Queue()
    procs = [
        ctx.Process(
            target=worker,
            args=(
                store,
                target,
                list(range(k, args.sessions, processes)),
                args.turns,
                barrier,
                out,
            ),
        )
        for k in range(processes)
    ]
    for p in procs:
        p.start()
    # Every worker opened its sessions: go. (Broken: a worker crashed; its message follows.)
    with contextlib.suppress(threading.BrokenBarrierError):
        barrier.wait(timeout=600)
    parts = [out.get(timeout=3600) for _ in procs]
    for p in procs:
        p.join()
    crashed = [p["crash"] for p in parts if "crash" in p]
    if crashed:
        raise SystemExit(f"{store} on {database}, {processes} processes: {crashed[0]}")
    wall = max(p["end"] for p in parts) - min(p["start"] for p in parts)
    turns = sum(p["turns"] for p in parts)
    return {
        "store": store,
        "database": database,
        "processes": processes,
        "turns": turns,
        "failed": sum(p["failed"] for p in parts),
        "wrong": sum(p["wrong"] for p in parts),
        "error": next((p["error"] for p in parts if p["error"]), ""),
        "wall": wall,
        "rate": turns / wall,
        "cpu_ms": sum(p["cpu"] for p in parts) / turns * 1000,
        "before": before,
        "after": size(database, target),
    }


# -- the report -----------------------------------------------------------------------------


def table(results: list[dict]) -> str:
    """The Markdown table: one row per store and mode, agentstore's ratios to the peer."""
    peer = {(r["database"], r["processes"]): r for r in results if r["store"] != OURS}
    lines = [
        "| database | processes | store | turns (failed) | wall s | turns/s | CPU ms/turn "
        "| turns/s vs peer | CPU vs peer | size after MB (grown) | size vs peer |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        p = peer.get((r["database"], r["processes"])) if r["store"] == OURS else None
        grown = r["after"] - r["before"]
        rate = cpu = disk = "—"
        if p is not None:
            rate = f"{r['rate'] / p['rate']:.2f}x"
            cpu = f"{r['cpu_ms'] / p['cpu_ms']:.2f}x"
            disk = f"{grown / max(p['after'] - p['before'], 1):.2f}x grown"
        lines.append(
            f"| {r['database']} | {r['processes']} | {r['store']} "
            f"| {r['turns']:,} ({r['failed']}) | {r['wall']:.1f} | {r['rate']:,.0f} "
            f"| {r['cpu_ms']:.2f} | {rate} | {cpu} "
            f"| {r['after'] / 1e6:.1f} ({grown / 1e6:.1f}) | {disk} |"
        )
    return "\n".join(lines)


def versions(databases: list[str]) -> str:
    from importlib.metadata import version

    parts = [f"Python {sys.version.split()[0]}", f"SQLite {sqlite3.sqlite_version}"]
    parts += [f"{d} {version(d)}" for d in ("openai-agents", "Django")]
    if "postgresql" in databases:
        import psycopg

        with psycopg.connect(f"{PG_SERVER}/postgres") as conn:
            row = conn.execute("SHOW server_version").fetchone()
        parts.append(f"PostgreSQL {row[0] if row else '?'}")
        parts += [f"{d} {version(d)}" for d in ("SQLAlchemy", "asyncpg", "psycopg")]
    return ", ".join(parts)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sessions", type=int, help="conversations (default 200; quick 6)")
    parser.add_argument("--turns", type=int, help="turns per conversation (default 10; quick 2)")
    parser.add_argument(
        "--processes", type=int, nargs="+", help="worker processes, one run each (default 1 8)"
    )
    parser.add_argument("--database", choices=["sqlite", "postgresql", "both"], default="sqlite")
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")
    common.add_json_flag(parser)
    args = parser.parse_args(argv)
    args.sessions = args.sessions or (6 if args.quick else 200)
    args.turns = args.turns or (2 if args.quick else 10)
    args.processes = args.processes or ([1, 2] if args.quick else [1, 8])
    databases = ["sqlite", "postgresql"] if args.database == "both" else [args.database]
    print(
        f"{args.sessions} conversations × {args.turns} turns (get_items + add_items of 8 items), "
        f"processes {args.processes}; {os.cpu_count()} CPUs, load {os.getloadavg()} before",
        flush=True,
    )
    print(versions(databases), flush=True)
    results: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="sdk-turn-") as tmp:
        mode = 0
        for database in databases:
            for processes in args.processes:
                stores = [OURS, PEERS[database]]
                for store in stores if mode % 2 == 0 else stores[::-1]:
                    r = run(store, database, processes, args, Path(tmp))
                    print(
                        f"  {database} {processes}p {store}: {r['rate']:,.0f} turns/s, "
                        f"{r['cpu_ms']:.2f} CPU ms/turn, {r['failed']} failed, "
                        f"{r['wrong']} histories wrong {r['error']}",
                        flush=True,
                    )
                    results.append(r)
                mode += 1
    results.sort(key=lambda r: (databases.index(r["database"]), r["processes"], r["store"] != OURS))
    print(f"\nload {os.getloadavg()} after\n")
    print(table(results))
    for r in results:
        workload = f"openai: turn, {r['database']}, {r['processes']} process(es)"
        role = "agentstore" if r["store"] == OURS else "peer"
        common.record(workload, r["store"], r["rate"], role=role, unit="turns/s")
        cpu = f"openai: CPU a turn, {r['database']}, {r['processes']} process(es)"
        common.record(cpu, r["store"], r["cpu_ms"], role=role, unit="ms")
        if r["processes"] == args.processes[0]:
            grown = (r["after"] - r["before"]) / 1e6
            common.record(
                f"openai: growth on disk, {r['database']}", r["store"], grown, role=role, unit="MB"
            )
    common.emit("sdk_turn", args, engine_name="+".join(databases))


if __name__ == "__main__":
    main()
