"""Where an append's CPU goes: the narrow schema, agentstore's schema alone, the store.

    .venv/bin/python bench/append_floor.py                     # 3,000 appends x 3 rounds
    .venv/bin/python bench/append_floor.py --appends 10000 --rounds 5

One process, one SQLite file per schema (WAL, ``synchronous=NORMAL``, the
project's pragmas), one transaction per append of a 1 KB message, the three
writers of each kind taking turns every round so the machine's noise hits them
alike. Printed: process CPU per append (median of the rounds) — steadier than
rates on a shared machine — and three ratios per kind:

* ``raw-tree`` / ``raw-loop`` — ``store_appends.py``'s narrow-schema baseline
  (the issue-15 targets' 1.00x), its own statements;
* ``floor-tree`` / ``floor-loop`` — ``bench.floor``: the store's own statements
  sent bare on agentstore's migrated schema (every column, index, trigger and
  foreign key), nothing else;
* ``tree`` / ``loop`` — ``TreeStore.append_message`` / ``LoopStore.append``.

``raw / floor`` is the most the store can reach against the narrow baseline on
this schema, whatever its Python costs; ``floor / store`` is how close the
store's own code comes to SQLite's work (decision record 0077). Printed, never
asserted.
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
from bench import store_appends as narrow  # noqa: E402

KINDS = ("tree", "loop")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--appends", type=int, default=3000, help="per writer and round")
    parser.add_argument("--rounds", type=int, default=3, help="(default: %(default)r)")
    common.add_json_flag(parser)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        common.setup_django(common.database_url(tmp, "agentstore.sqlite3"))
        from django.db import connection

        from agentstore.ids import new_id
        from agentstore.stores import LoopStore, TreeStore
        from agentstore.types import MessageEntity, RunStep
        from bench import floor

        raw = floor.connect(Path(tmp) / "narrow.sqlite3")
        raw.executescript(narrow.NARROW_SCHEMA)
        bare = floor.connect(connection.settings_dict["NAME"])
        tree, loop = TreeStore(), LoopStore()

        def raw_tree(sid: str) -> floor.Append:
            raw.execute("INSERT INTO session VALUES (?, ?)", (sid, floor.stamp()))

            def append(n: int, parent: str | None) -> str | None:
                now, entry_id = floor.stamp(), new_id()
                raw.execute("BEGIN IMMEDIATE")
                raw.execute(narrow.RAW_TOUCH, (now, sid))
                params = (sid, entry_id, parent, now, narrow.PAYLOAD, sid, parent, sid, parent)
                raw.execute(narrow.RAW_ENTRY, params)
                raw.execute("COMMIT")
                return entry_id

            return append

        def raw_loop(sid: str) -> floor.Append:
            def append(n: int, parent: str | None) -> str | None:
                now = floor.stamp()
                raw.execute("BEGIN IMMEDIATE")
                raw.execute(narrow.RAW_UPSERT, (sid, now))
                raw.execute(narrow.RAW_STEP, (sid, n, narrow.PAYLOAD, now))
                raw.execute("COMMIT")
                return None

            return append

        def store_tree(sid: str) -> floor.Append:
            session_id = tree.create_session("/bench").id

            def append(n: int, parent: str | None) -> str | None:
                role = "user" if n % 2 == 0 else "assistant"
                entity = MessageEntity(role=role, content=narrow.TEXT)
                return tree.append_message(session_id, parent, entity).id

            return append

        def store_loop(sid: str) -> floor.Append:
            def append(n: int, parent: str | None) -> str | None:
                step = RunStep(
                    session_id=sid, step_index=n, step_type="response", content=narrow.TEXT
                )
                loop.append(step)
                return None

            return append

        writers = {
            "raw-tree": raw_tree,
            "floor-tree": lambda sid: floor.tree_appender(bare, sid, text=narrow.TEXT),
            "tree": store_tree,
            "raw-loop": raw_loop,
            "floor-loop": lambda sid: floor.loop_appender(bare, sid, text=narrow.TEXT),
            "loop": store_loop,
        }
        print(
            f"append_floor: {args.appends} appends of a 1 KB message per writer and round, "
            f"{args.rounds} rounds, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}"
        )
        cpu: dict[str, list[float]] = {name: [] for name in writers}
        for round_ in range(args.rounds):
            for name, make in writers.items():
                append = make(f"{name}-{round_}")
                parent: str | None = None
                started = time.process_time()
                for n in range(args.appends):
                    parent = append(n, parent)
                cpu[name].append((time.process_time() - started) / args.appends)
        raw.close()
        bare.close()
    median = {name: statistics.median(values) for name, values in cpu.items()}
    print("CPU per append (median of the rounds)")
    for name, value in median.items():
        print(f"  {name:<11} {value * 1e6:7.1f} µs")
    print("ratios (CPU; 1.00x = the narrow schema's raw sqlite3)")
    for kind in KINDS:
        base, least, store = median[f"raw-{kind}"], median[f"floor-{kind}"], median[kind]
        print(
            f"  {kind}: floor {base / least:.2f}x raw, store {base / store:.2f}x raw, "
            f"store at {least / store:.0%} of the floor"
        )
        # Appends per CPU second, so the table's ratios read as the rates' do.
        workload, unit = f"{kind} append, 1 process, CPU (narrow schema = 1.00x)", "ops/CPU-s"
        common.record(workload, "raw sqlite3", 1 / base, role="raw", unit=unit, better="higher")
        who = "raw sqlite3 on agentstore's schema"
        common.record(workload, who, 1 / least, role="other", unit=unit, better="higher")
        common.record(workload, f"{kind.capitalize()}Store", 1 / store, unit=unit, better="higher")
    common.emit("append_floor", args, engine_name="sqlite")


if __name__ == "__main__":
    main()
