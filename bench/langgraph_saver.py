"""AgentStoreSaver against LangGraph's own SqliteSaver and PostgresSaver, in one run.

    .venv/bin/python bench/langgraph_saver.py                       # SQLite half only
    .venv/bin/python bench/langgraph_saver.py \\
        --postgres postgres://postgres@127.0.0.1:5432/agentstore_bench_langgraph

Workload, the same for every saver on the same database engine:

* a ``StateGraph`` of ``--nodes`` nodes in a chain (``{"n": int}``, each node
  adds one; 1 by default, 6 for the user's-path table of docs/performance.md) invoked
  ``--invocations`` times (2,000) on one thread with ``durability="sync"`` —
  every checkpoint and write is committed before ``invoke`` returns;
* ``get_tuple`` of the latest checkpoint, ``--reads`` times, on a 10-checkpoint
  thread and on that long thread (two checkpoints an invocation).

Besides invoke/s (wall clock, which swings with a shared machine's load) it
prints the process CPU an invoke and its split: CPU inside the saver's methods
(thread CPU on whichever thread LangGraph ran them) and the rest — steadier
than throughput for comparing the savers (bench/results/2026-12-01-langgraph-saver-gap.md).

SQLite: both savers get their own file database in WAL mode (agentstore through
Django with the project's settings; SqliteSaver on a plain ``sqlite3``
connection — raw sqlite3, the baseline the other benches use). PostgreSQL: the
database named by ``--postgres`` (created if missing), PostgresSaver on its own
psycopg connection. Figures are printed with ratios, never asserted.
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
import threading
import time
from pathlib import Path
from typing import Any, TypedDict

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import common  # noqa: E402


class Count(TypedDict):
    n: int


def graph_with(saver: Any, nodes: int = 1) -> Any:
    """A chain of ``nodes`` nodes, each adding one to ``n`` (a checkpoint and a write each)."""
    from langgraph.graph import END, START, StateGraph

    def add(state: Count) -> Count:
        return {"n": state["n"] + 1}

    builder = StateGraph(Count)
    names = [f"add{i}" for i in range(nodes)]
    for name in names:
        builder.add_node(name, add)
    for before, after in zip([START, *names], [*names, END], strict=True):
        builder.add_edge(before, after)
    return builder.compile(checkpointer=saver)


#: The saver methods LangGraph calls during ``invoke`` (and ``list`` for completeness).
SAVER_METHODS = ("put", "put_writes", "get_tuple", "list", "get_next_version")


def time_saver_methods(saver: Any) -> list[float]:
    """Wrap ``saver``'s methods on the instance; the returned cell sums their thread CPU.

    LangGraph calls the saver from its executor threads, new at every ``invoke``:
    ``time.thread_time`` around each outermost call (a method calling another
    counts once) gives the CPU spent inside the saver, whatever thread ran it;
    the process's CPU minus that is LangGraph's own (and the threads') —
    the split measured in bench/results/2026-12-01-langgraph-saver-gap.md. ~0.5 µs a
    call of overhead, both savers alike.
    """
    spent = [0.0]
    depth = threading.local()

    def timed(method: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            if getattr(depth, "n", 0):
                return method(*args, **kwargs)
            depth.n = 1
            started = time.thread_time()
            try:
                return method(*args, **kwargs)
            finally:
                spent[0] += time.thread_time() - started
                depth.n = 0

        return call

    for name in SAVER_METHODS:
        setattr(saver, name, timed(getattr(saver, name)))
    return spent


def measure(saver: Any, invocations: int, reads: int, tag: str, nodes: int = 1) -> dict[str, float]:
    spent = time_saver_methods(saver)
    graph = graph_with(saver, nodes)
    long_config = {"configurable": {"thread_id": f"long-{tag}"}}
    cpu_started, inside_started = time.process_time(), spent[0]
    started = time.perf_counter()
    for _ in range(invocations):
        graph.invoke({"n": 0}, long_config, durability="sync")
    elapsed = time.perf_counter() - started
    cpu = (time.process_time() - cpu_started) / invocations * 1e6
    inside = (spent[0] - inside_started) / invocations * 1e6
    short_config = {"configurable": {"thread_id": f"short-{tag}"}}
    for _ in range(5):
        graph.invoke({"n": 0}, short_config, durability="sync")

    def latency(config: dict[str, Any]) -> float:
        samples = []
        for _ in range(reads):
            t = time.perf_counter()
            saver.get_tuple(config)
            samples.append(time.perf_counter() - t)
        return statistics.median(samples) * 1e6

    latency(long_config)  # warm-up
    checkpoints = sum(1 for _ in saver.list(long_config))
    return {
        "invokes_per_s": invocations / elapsed,
        "cpu_us": cpu,
        "saver_cpu_us": inside,
        "rest_cpu_us": cpu - inside,
        "get_short_us": latency(short_config),
        "get_long_us": latency(long_config),
        "long_checkpoints": checkpoints,
    }


def sqlite_half(args: argparse.Namespace) -> dict[str, Any]:
    from langgraph.checkpoint.sqlite import SqliteSaver

    with tempfile.TemporaryDirectory() as tmp:
        os.environ["DATABASE_URL"] = f"sqlite:///{tmp}/agentstore.sqlite3"
        agentstore = _agentstore(args)
        conn = sqlite3.connect(f"{tmp}/langgraph.sqlite3", check_same_thread=False)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=NORMAL")
        theirs = measure(SqliteSaver(conn), args.invocations, args.reads, "theirs", args.nodes)
        conn.close()
    return {"backend": "sqlite", "agentstore": agentstore, "langgraph": theirs}


def postgres_half(args: argparse.Namespace) -> dict[str, Any]:
    from langgraph.checkpoint.postgres import PostgresSaver

    common.ensure_postgres_database(args.postgres)  # created if missing, kept if there
    os.environ["DATABASE_URL"] = args.postgres
    agentstore = _agentstore(args)
    tag = f"theirs-{time.time_ns()}"
    if args.peer_pool:
        # Pooled, as LangGraph's docs set up a server: the connection options of
        # from_conn_string, on a psycopg_pool.ConnectionPool.
        from psycopg.rows import dict_row
        from psycopg_pool import ConnectionPool

        options = {"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row}
        with ConnectionPool(args.postgres, max_size=4, kwargs=options) as pool:
            saver = PostgresSaver(pool)
            saver.setup()
            theirs = measure(saver, args.invocations, args.reads, tag, args.nodes)
    else:
        with PostgresSaver.from_conn_string(args.postgres) as saver:
            saver.setup()
            theirs = measure(saver, args.invocations, args.reads, tag, args.nodes)
    return {"backend": "postgresql", "agentstore": agentstore, "langgraph": theirs}


def _agentstore(args: argparse.Namespace) -> dict[str, float]:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    os.environ["DJANGO_DEBUG"] = "0"  # production-like: no query recording
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from agentstore.integrations.langgraph import AgentStoreSaver

    return measure(
        AgentStoreSaver(), args.invocations, args.reads, f"ours-{time.time_ns()}", args.nodes
    )


def report(result: dict[str, Any]) -> None:
    ours, theirs = result["agentstore"], result["langgraph"]
    name = "SqliteSaver" if result["backend"] == "sqlite" else "PostgresSaver"
    print(f"\n{result['backend']}: {ours['long_checkpoints']} checkpoints on the long thread")
    print(f"{'':28} {'agentstore':>12} {name:>14} {'ratio':>7}")
    rows = [
        ("invoke/s (durability=sync)", "invokes_per_s", True),
        ("CPU µs an invoke", "cpu_us", False),
        ("  inside the saver", "saver_cpu_us", False),
        ("  the rest (LangGraph)", "rest_cpu_us", False),
        ("get_tuple latest, short µs", "get_short_us", False),
        ("get_tuple latest, long µs", "get_long_us", False),
    ]
    for label, key, higher_better in rows:
        ratio = ours[key] / theirs[key] if higher_better else theirs[key] / ours[key]
        print(f"{label:28} {ours[key]:12.1f} {theirs[key]:14.1f} {ratio:6.2f}x")
    print("(ratio > 1: agentstore is faster)")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--invocations", type=int, default=2000)
    parser.add_argument("--reads", type=int, default=500)
    parser.add_argument("--nodes", type=int, default=1, help="nodes in the graph's chain")
    parser.add_argument(
        "--peer-pool",
        action="store_true",
        help="PostgresSaver on a psycopg_pool.ConnectionPool (as its docs set up a server)",
    )
    parser.add_argument("--postgres", default="", help="a PostgreSQL URL to also measure")
    parser.add_argument("--skip-sqlite", action="store_true", help="measure PostgreSQL only")
    common.add_json_flag(parser)
    parser.add_argument(
        "--half", choices=["sqlite", "postgres"], default="", help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.half == "postgres":
        print(json.dumps(postgres_half(args)))
        return 0
    if args.half == "sqlite":
        print(json.dumps(sqlite_half(args)))
        return 0
    # Each half in its own process: Django reads DATABASE_URL once, at setup.
    halves = ([] if args.skip_sqlite else ["sqlite"]) + (["postgres"] if args.postgres else [])
    for half in halves:
        done = subprocess.run(
            [sys.executable, __file__, "--half", half, *sys.argv[1:]],
            capture_output=True,
            text=True,
            check=True,
        )
        result = json.loads(done.stdout.strip().splitlines()[-1])
        report(result)
        peer = "SqliteSaver" if result["backend"] == "sqlite" else "PostgresSaver"
        if peer == "PostgresSaver" and args.peer_pool:
            peer = "PostgresSaver (pooled)"
        prefix = "langgraph" if args.nodes == 1 else f"langgraph, {args.nodes} nodes"
        for label, key, unit, scale in (
            (f"{prefix}: invoke, durability=sync", "invokes_per_s", "ops/s", 1.0),
            (f"{prefix}: CPU an invoke", "cpu_us", "ms", 1e-3),
            (f"{prefix}: CPU an invoke inside the saver", "saver_cpu_us", "ms", 1e-3),
            (f"{prefix}: get_tuple latest, short thread", "get_short_us", "ms", 1e-3),
            (f"{prefix}: get_tuple latest, long thread", "get_long_us", "ms", 1e-3),
        ):
            common.record(label, "AgentStoreSaver", result["agentstore"][key] * scale, unit=unit)
            common.record(label, peer, result["langgraph"][key] * scale, role="peer", unit=unit)
    common.emit("langgraph_saver", args, engine_name="postgresql" if args.skip_sqlite else "")
    return 0


if __name__ == "__main__":
    sys.exit(main())
