"""TreeStore appends and context building, against raw sqlite3 doing the same work in the same run.

    .venv/bin/python bench/tree_append.py                   # SQLite file in a temp dir
    .venv/bin/python bench/tree_append.py --appends 5000
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/agentstore_bench \\
        .venv/bin/python bench/tree_append.py --skip-raw      # TreeStore on PostgreSQL

Appends: 1 KB user/assistant messages chained into one session, one transaction
each, through

* ``raw``      — the stdlib ``sqlite3`` module sending the tree store's own
  statements on agentstore's schema (``bench.floor``: BEGIN IMMEDIATE, the session
  touched, the entry INSERT that computes its seq and checks its parent, COMMIT) —
  the schema's floor, not the narrow schema of ``store_appends.py``;
* ``naive``    — the Django ORM: ``atomic()`` + ``Entry.objects.create`` + a session
  ``update``;
* ``store``    — ``TreeStore.append_message`` (validation, metadata derivation,
  parent check, writer queue, the same rows).

Then ``build_context`` at the leaf of a 10,000-entry branch with one compaction.
Printed: appends/s, p50/p99 latency, the ratio to raw; never asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import common  # noqa: E402

APPEND = "tree: append 1 KB message, 1 process"
TEXT = ("The quick brown fox jumps over the lazy dog. " * 24)[:1024]


def bench_raw(path: str, session_id: str, count: int) -> tuple[list[float], float]:
    """The tree store's own statements, bare, on agentstore's schema (``bench.floor``)."""
    from bench import floor

    con = floor.connect(path)
    append = floor.tree_appender(con, session_id, text=TEXT)
    parent = None
    latencies = []
    started = time.perf_counter()
    for n in range(count):
        t0 = time.perf_counter()
        parent = append(n, parent)
        latencies.append(time.perf_counter() - t0)
    total = time.perf_counter() - started
    con.close()
    return latencies, total


def bench_naive(session_id: str, count: int) -> tuple[list[float], float]:
    from django.db import transaction
    from django.utils import timezone

    from agentstore.ids import new_id
    from agentstore.models import Entry, Session

    parent = None
    latencies = []
    started = time.perf_counter()
    for n in range(count):
        t0 = time.perf_counter()
        now = timezone.now()
        with transaction.atomic():
            seq = Entry.objects.filter(session_id=session_id).count() + 1
            entry = Entry.objects.create(
                session_id=session_id,
                seq=seq,
                entry_id=new_id(),
                parent_id=parent,
                type="message",
                role="user" if n % 2 == 0 else "assistant",
                content=TEXT,
                created_at=now,
                token_estimate=256,
                model_facing=True,
            )
            Session.objects.filter(pk=session_id).update(updated_at=now)
        parent = entry.entry_id
        latencies.append(time.perf_counter() - t0)
    return latencies, time.perf_counter() - started


def bench_store(session_id: str, count: int) -> tuple[list[float], float]:
    from agentstore.stores import TreeStore
    from agentstore.types import MessageEntity

    store = TreeStore()
    parent = None
    latencies = []
    started = time.perf_counter()
    for n in range(count):
        t0 = time.perf_counter()
        role = "user" if n % 2 == 0 else "assistant"
        parent = store.append_message(session_id, parent, MessageEntity(role=role, content=TEXT)).id
        latencies.append(time.perf_counter() - t0)
    return latencies, time.perf_counter() - started


def bench_context(entries: int, runs: int) -> None:
    from agentstore.stores import TreeStore
    from agentstore.types import AppendCompactionInput, MessageEntity

    store = TreeStore()
    session = store.create_session("/bench/context")
    parent = None
    first_kept = None
    t0 = time.perf_counter()
    for n in range(entries - 1):
        role = "user" if n % 2 == 0 else "assistant"
        parent = store.append_message(
            session.id, parent, MessageEntity(role=role, content=f"message {n} " + TEXT[:200])
        ).id
        if n == entries // 2 - 50:
            first_kept = parent
        if n == entries // 2:
            parent = store.append_compaction(
                AppendCompactionInput(
                    session_id=session.id,
                    parent_id=parent,
                    summary="summary of the first half",
                    first_kept_entry_id=first_kept or "",
                    operation_id="bench-compaction",
                )
            ).id
    build = time.perf_counter() - t0
    assert parent is not None
    timings = []
    for _ in range(runs):
        t1 = time.perf_counter()
        context = store.build_context(session.id, parent)
        timings.append(time.perf_counter() - t1)
    branch_timings = []
    for _ in range(runs):
        t1 = time.perf_counter()
        store.branch(session.id, parent)
        branch_timings.append(time.perf_counter() - t1)
    leaf_timings = []
    for _ in range(runs):
        t1 = time.perf_counter()
        store.leaf_entry(session.id)
        leaf_timings.append(time.perf_counter() - t1)
    print(
        f"  build_context on a {entries}-entry branch with one compaction "
        f"({len(context.messages)} messages): median "
        f"{statistics.median(timings) * 1000:.1f} ms, max {max(timings) * 1000:.1f} ms "
        f"(session built in {build:.1f} s)"
    )
    branch_ms = statistics.median(branch_timings) * 1000
    print(f"  branch (hydrated, {entries} entries): median {branch_ms:.1f} ms")
    print(f"  leaf_entry: median {statistics.median(leaf_timings) * 1000:.3f} ms")
    workload = f"tree: build_context, {entries}-entry branch, 1 compaction"
    common.record(workload, "TreeStore", statistics.median(timings) * 1000, unit="ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--appends", type=int, default=3000, help="(default: %(default)r)")
    parser.add_argument(
        "--context-entries", type=int, default=10_000, help="(default: %(default)r)"
    )
    parser.add_argument(
        "--runs", type=int, default=15, help="build_context runs (default: %(default)r)"
    )
    parser.add_argument(
        "--skip-raw", action="store_true", help="no raw/naive baseline (PostgreSQL)"
    )
    common.add_json_flag(parser)
    args = parser.parse_args()

    tmp = tempfile.TemporaryDirectory()
    url = os.environ.get("DATABASE_URL") or f"sqlite:///{Path(tmp.name).resolve()}/bench.sqlite3"
    common.setup_django(url)
    from django.db import connection

    from agentstore.stores import TreeStore

    vendor = connection.vendor
    print(f"tree_append on {vendor}: {args.appends} appends of 1 KB messages, one transaction each")
    store = TreeStore()
    raw_rate = None
    if vendor == "sqlite" and not args.skip_raw:
        path = connection.settings_dict["NAME"]
        lat, total = bench_raw(str(path), "bench-raw", args.appends)
        raw_rate = common.summarise("raw", lat, total, None)
        common.record(APPEND, "raw sqlite3", raw_rate, role="raw")
        lat, total = bench_naive(store.create_session("/bench/naive").id, args.appends)
        naive = common.summarise("naive", lat, total, raw_rate)
        common.record(APPEND, "naive ORM", naive, role="other")
    lat, total = bench_store(store.create_session("/bench/store").id, args.appends)
    common.record(APPEND, "TreeStore", common.summarise("store", lat, total, raw_rate))
    bench_context(args.context_entries, args.runs)
    common.emit("tree_append", args)
    tmp.cleanup()


if __name__ == "__main__":
    main()
