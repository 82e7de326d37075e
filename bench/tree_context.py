"""TreeStore.build_context on a long compacted session, against raw sqlite3 reading the same rows.

    .venv/bin/python bench/tree_context.py                      # this checkout
    .venv/bin/python bench/tree_context.py --code ../main       # another checkout ("before")
    .venv/bin/python bench/tree_context.py --settings-at 99000  # settings near the leaf
    .venv/bin/python bench/tree_context.py --entries 1000000

One session of ``--entries`` chained 1 KB messages (inserted set-based), every 1,000th
entry (seq 500, 1500, …) a compaction keeping the 20 entries before it, and a model
change and a thinking-level change at ``--settings-at`` (settings outlive every
compaction; each compaction records those in force at its parent, as
``append_compaction`` does — ``--unrecorded`` leaves them out, as in rows written
before that, and the context must climb to find them). Timed: ``build_context`` at the
leaf — what an agent loop calls every turn — and raw ``sqlite3`` reading the same rows
(the leaf's branch up to the latest compaction's first-kept entry, plus the two
settings) in one recursive query on the same file. Printed: median and p90 over the
repeats and the ratio to raw; never asserted (decision record 0027).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

TEXT = ("The quick brown fox jumps over the lazy dog. " * 24)[:1024]
EVERY, OFFSET, KEEP = 1000, 500, 20


def timed(call, repeats: int) -> list[float]:  # type: ignore[no-untyped-def]
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return sorted(times)


def show(name: str, times: list[float], raw: float | None) -> float:
    median = statistics.median(times)
    p90 = times[int(len(times) * 0.9) - 1] if len(times) >= 10 else times[-1]
    ratio = f"{median / raw:.1f}x raw" if raw else "1.0x"
    print(f"  {name:<14} median {median * 1000:8.2f} ms   p90 {p90 * 1000:8.2f} ms   {ratio}")
    return median


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument(
        "--settings-at", type=int, default=2, help="seq of the model and thinking-level changes"
    )
    parser.add_argument("--code", default=str(Path(__file__).resolve().parent.parent))
    parser.add_argument("--json", action="store_true", help="print the results as a JSON line")
    parser.add_argument("--last", type=int, default=50, help="entries of the last-N read")
    parser.add_argument(
        "--unrecorded",
        action="store_true",
        help="compactions without recorded settings (rows written before they were)",
    )
    args = parser.parse_args()
    sys.path.insert(0, args.code)
    # This checkout's bench/common.py, whichever checkout --code names.
    spec = importlib.util.spec_from_file_location("common", Path(__file__).with_name("common.py"))
    assert spec is not None and spec.loader is not None
    common = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(common)
    path = Path(tempfile.mkdtemp()) / "bench.sqlite3"
    # $DATABASE_URL (PostgreSQL): build_context there, no raw sqlite3 run.
    os.environ["DATABASE_URL"] = common.database_url(path.parent)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    os.environ["DJANGO_DEBUG"] = "0"
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection, transaction

    import agentstore
    from agentstore.stores import TreeStore
    from tests.security.chains import insert_chain

    call_command("migrate", verbosity=0)
    print(f"agentstore from {Path(agentstore.__file__).parent}")
    store = TreeStore()
    sid = store.create_session("/bench").id
    start = time.perf_counter()
    insert_chain(sid, args.entries, content=TEXT)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "UPDATE agentstore_entry SET type = 'compaction', role = '', content = '',"
            " model_facing = FALSE, summary = 'summary ' || entry_id,"
            " compaction_first_kept_entry_id = 'e' || CAST(seq - %s AS TEXT)"
            " WHERE session_id = %s AND seq %% %s = %s",
            [KEEP, sid, EVERY, OFFSET],
        )
        cursor.execute(
            "UPDATE agentstore_entry SET type = 'model_change', role = '', content = '',"
            " provider = 'prov', model = 'mod', model_facing = FALSE"
            " WHERE session_id = %s AND seq = %s",
            [sid, args.settings_at],
        )
        cursor.execute(
            "UPDATE agentstore_entry SET type = 'thinking_level_change', role = '', content = '',"
            ' line = \'{"thinking_level": "high"}\', model_facing = FALSE'
            " WHERE session_id = %s AND seq = %s",
            [sid, args.settings_at + 1],
        )
        cursor.execute("SELECT name FROM pragma_table_info('agentstore_entry')")
        if not args.unrecorded and ("compaction_settings",) in cursor.fetchall():
            # What TreeStore.append_compaction records: the settings in force
            # at the compaction's parent (decision record 0027).
            cursor.execute(
                "UPDATE agentstore_entry SET compaction_settings = CASE WHEN seq > %s"
                ' THEN \'["prov", "mod", "high"]\' ELSE \'["", "", ""]\' END'
                " WHERE session_id = %s AND type = 'compaction'",
                [args.settings_at + 1, sid],
            )
    print(f"seeded {args.entries:,} entries in {time.perf_counter() - start:.1f} s")
    leaf = f"e{args.entries}"
    compaction = args.entries - (args.entries - OFFSET) % EVERY
    depth = args.entries - (compaction - KEEP)  # leaf up to the first-kept entry

    workload = f"tree: build_context at the leaf, {args.entries:,} entries, compactions"
    raw = sqlite3.connect(path)  # an empty file on PostgreSQL (unused)
    raw_sql = (
        "WITH RECURSIVE chain(id, parent_id, depth) AS ("
        " SELECT id, parent_id, 0 FROM agentstore_entry WHERE session_id = ? AND entry_id = ?"
        " UNION ALL SELECT e.id, e.parent_id, chain.depth + 1 FROM chain"
        " JOIN agentstore_entry e ON e.session_id = ? AND e.entry_id = chain.parent_id"
        " WHERE chain.depth < ?)"
        " SELECT e.entry_id, e.type, e.role, e.content, e.summary, e.created_at FROM chain"
        " JOIN agentstore_entry e ON e.id = chain.id"
    )

    def raw_read() -> None:
        rows = raw.execute(raw_sql, [sid, leaf, sid, depth]).fetchall()
        rows += raw.execute(
            "SELECT entry_id, type, provider, model FROM agentstore_entry"
            " WHERE session_id = ? AND seq IN (?, ?)",
            [sid, args.settings_at, args.settings_at + 1],
        ).fetchall()
        assert len(rows) == depth + 3

    context = store.build_context(sid, leaf)
    print(
        f"build_context at {leaf}: {len(context.messages)} messages"
        f" (raw reads {depth + 3} rows); settings"
        f" {context.provider}/{context.model}/{context.thinking_level}"
    )
    raw_median = None
    if connection.vendor == "sqlite":
        raw_median = show("raw sqlite3", timed(raw_read, args.repeats), None)
        common.record(workload, "raw sqlite3", raw_median * 1000, role="raw", unit="ms")
    ours = show(
        "build_context", timed(lambda: store.build_context(sid, leaf), args.repeats), raw_median
    )
    common.record(workload, "TreeStore", ours * 1000, unit="ms")
    if connection.vendor == "sqlite":
        last_n(store, raw, sid, leaf, args)
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    common.emit("tree_context", args)


def last_n(store, raw: sqlite3.Connection, sid: str, leaf: str, args) -> None:  # type: ignore[no-untyped-def]
    """The last ``--last`` entries on the branch ending at the leaf, against raw sqlite3.

    Raw reads them from the narrowest sensible schema (id, session, seq, entry id,
    parent, timestamp and the entry as one JSON text; unique on (session, entry id)),
    a copy of the session made here, with one recursive query — and decodes each
    JSON text, as a caller must; ``TreeStore.branch(sid, leaf, limit=N)`` returns
    hydrated ``EntryEntity`` values.
    """
    import json

    raw.executescript(
        "CREATE TABLE narrow (id INTEGER PRIMARY KEY, session_id TEXT NOT NULL,"
        " seq INTEGER NOT NULL, entry_id TEXT NOT NULL, parent_id TEXT,"
        " created_at TEXT NOT NULL, data TEXT NOT NULL,"
        " UNIQUE (session_id, seq), UNIQUE (session_id, entry_id));"
    )
    raw.execute(
        "INSERT INTO narrow SELECT id, session_id, seq, entry_id, parent_id, created_at,"
        " json_object('type', type, 'role', role, 'content', content, 'summary', summary)"
        " FROM agentstore_entry"
    )
    raw.commit()
    n = args.last
    narrow_sql = (
        "WITH RECURSIVE chain(id, parent_id, depth) AS ("
        " SELECT id, parent_id, 0 FROM narrow WHERE session_id = ? AND entry_id = ?"
        " UNION ALL SELECT e.id, e.parent_id, chain.depth + 1 FROM chain"
        " JOIN narrow e ON e.session_id = ? AND e.entry_id = chain.parent_id"
        " WHERE chain.depth < ?)"
        " SELECT e.entry_id, e.parent_id, e.created_at, e.data FROM chain"
        " JOIN narrow e ON e.id = chain.id ORDER BY chain.depth DESC"
    )

    def raw_read() -> None:
        rows = raw.execute(narrow_sql, [sid, leaf, sid, n - 1]).fetchall()
        entries = [(e, p, c, json.loads(d)) for e, p, c, d in rows]
        assert len(entries) == n

    def store_read() -> None:
        assert len(store.branch(sid, leaf, limit=n)) == n

    print(f"last {n} entries on the branch at {leaf}:")
    raw_median = show("raw sqlite3", timed(raw_read, args.repeats * 5), None)
    show("branch(limit)", timed(store_read, args.repeats * 5), raw_median)


if __name__ == "__main__":
    main()
