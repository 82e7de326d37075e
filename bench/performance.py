"""The user's path beside the frameworks' own stores: run the benchmarks, write the page.

    .venv/bin/python bench/performance.py                 # SQLite and the local PostgreSQL
    .venv/bin/python bench/performance.py --quick         # a smoke run (tiny sizes; not written)
    .venv/bin/python bench/performance.py --postgres postgres://postgres@db:5432/agentstore_perf

What a user of agentstore does, measured beside the store they would use instead, on
the same work, in one run:

* an OpenAI Agents SDK **turn** (``bench/sdk_turn.py``: ``get_items`` then ``add_items``
  of 8 items, 200 conversations × 10 turns, 1 and 8 processes) — ``AgentStoreSession``
  beside the SDK's ``SQLiteSession`` (SQLite) and ``SQLAlchemySession`` on asyncpg
  (PostgreSQL), with the growth of each database on disk;
* a **LangGraph** graph of 6 nodes invoked with ``durability="sync"``
  (``bench/langgraph_saver.py --nodes 6``) — ``AgentStoreSaver`` beside ``SqliteSaver`` and
  ``PostgresSaver``;
* a user's **50 newest sessions** (``bench/session_list.py``) — the selector every list
  starts from, beside the same statement sent by the driver alone (no framework lists
  sessions).

Each script runs as its own process with ``--json``; this one collects their figures and
writes the table, the machine, the versions and the commands to ``docs/performance.md``
(``--out`` elsewhere, ``--quick`` prints only). PostgreSQL databases are created (and
dropped first) under the names given; name ones nobody else uses. Nothing is asserted: on
a shared machine read the ratios and the load beside them.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import common  # noqa: E402

PY = sys.executable
DEFAULT_POSTGRES = "postgres://postgres@127.0.0.1:5432/agentstore_perf"


def run(script: str, args: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``bench/<script>.py args --json``; its JSON document (figures, machine)."""
    command = [PY, str(ROOT / "bench" / f"{script}.py"), *args, "--json"]
    print("$", " ".join(command[1:]), flush=True)
    done = subprocess.run(
        command, cwd=ROOT, env={**os.environ, **(env or {})}, capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(f"{script} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    document: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return document


def figure(documents: list[dict[str, Any]], workload: str, role: str) -> dict[str, Any] | None:
    """The first recorded figure of ``workload`` by a contender of ``role``."""
    for document in documents:
        for r in document["results"]:
            if r["workload"] == workload and r["role"] == role:
                return {**r, "load": document["machine"]["load_average"][0]}
    return None


def cell(r: dict[str, Any] | None) -> str:
    if r is None:
        return "—"
    unit, value = r["unit"], r["value"]
    if unit == "ms":
        return f"{value:.3g} ms"
    if unit == "MB":
        return f"{value:.1f} MB"
    return f"{value:,.0f} {unit}"


def ratio(ours: dict[str, Any] | None, theirs: dict[str, Any] | None) -> str:
    """agentstore beside the other, "higher is better" for rates, "lower" for costs."""
    if ours is None or theirs is None or not ours["value"] or not theirs["value"]:
        return "—"
    if ours["better"] == "higher":
        return f"{ours['value'] / theirs['value']:.2f}x"
    return f"{ours['value'] / theirs['value']:.2f}x the cost"


#: (label, database, workload, the other's role, the target) — one row each.
ROWS: list[tuple[str, str, str, str, str]] = [
    ("SDK turn, 1 process", "SQLite", "openai: turn, sqlite, 1 process(es)", "peer", "≥ 1.0x"),
    ("SDK turn, 8 processes", "SQLite", "openai: turn, sqlite, 8 process(es)", "peer", "≥ 1.0x"),
    ("CPU a turn, 1 process", "SQLite", "openai: CPU a turn, sqlite, 1 process(es)", "peer", ""),
    (
        "SDK turn, 1 process",
        "PostgreSQL",
        "openai: turn, postgresql, 1 process(es)",
        "peer",
        "≥ 1.5x",
    ),
    (
        "SDK turn, 8 processes",
        "PostgreSQL",
        "openai: turn, postgresql, 8 process(es)",
        "peer",
        "≥ 1.5x",
    ),
    (
        "CPU a turn, 1 process",
        "PostgreSQL",
        "openai: CPU a turn, postgresql, 1 process(es)",
        "peer",
        "",
    ),
    ("Growth on disk, 2,000 turns", "SQLite", "openai: growth on disk, sqlite", "peer", "≤ 1.5x"),
    ("Growth on disk, 2,000 turns", "PostgreSQL", "openai: growth on disk, postgresql", "peer", ""),
]
#: Rows of the scripts that run once per database: (label, workload prefix, other's role, target).
PER_DATABASE: list[tuple[str, str, str, str]] = [
    (
        "LangGraph, 6 nodes, invoke/s",
        "langgraph, 6 nodes: invoke, durability=sync",
        "peer",
        "≥ 1.0x",
    ),
    ("A user's 50 newest sessions", "newest 50 sessions of a user", "raw", "≤ 5x the raw"),
]


def per_database(
    documents: list[dict[str, Any]], workload: str, role: str
) -> list[tuple[str, dict[str, Any] | None, dict[str, Any] | None]]:
    """``(database, agentstore's figure, the other's)`` of each database that ran ``workload``.

    A document may hold both databases (``langgraph_saver`` runs its halves in one
    command, each recording agentstore then its peer): the figures pair up in order,
    and the peer's name says the database.
    """
    found: list[tuple[str, dict[str, Any] | None, dict[str, Any] | None]] = []
    for document in documents:
        load = document["machine"]["load_average"][0]
        pending: dict[str, dict[str, Any]] = {}
        for r in document["results"]:
            if r["workload"] != workload or r["role"] not in {"agentstore", role}:
                continue
            pending[r["role"]] = {**r, "load": load}
            if len(pending) < 2:
                continue
            theirs = pending[role]
            engine = document["engine"]
            if "Postgres" in theirs["who"]:
                engine = "postgresql"
            elif "Sqlite" in theirs["who"] or "SQLite" in theirs["who"]:
                engine = "sqlite"
            found.append((engine, pending["agentstore"], theirs))
            pending = {}
    return found


def render(documents: list[dict[str, Any]], commands: list[str]) -> str:
    machine = common.machine()
    postgres = next(
        (d["machine"]["postgresql"] for d in documents if "postgresql" in d["machine"]), ""
    )
    lines = [
        "# Performance: the user's path beside the frameworks' own stores",
        "",
        "Generated by `.venv/bin/python bench/performance.py` on "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC.",
        "Rerun it on your machine: the scripts it runs (below) include the peers, so every",
        "figure has its comparison from the same run.",
        "",
        f"- **Machine:** {machine['cpus']} CPUs; beside each row the 1-minute load average when",
        "  its script ended (the 8-process runs put 8 workers on the machine)",
        f"- **Versions:** Python {machine['python']}, SQLite {machine['sqlite']}, "
        f"Django {machine.get('django', '?')}" + (f", PostgreSQL {postgres}" if postgres else ""),
        "- **Settings:** SQLite in WAL mode with `synchronous=NORMAL` for every store (the",
        "  SDK's `SQLiteSession` subclassed to set it too); PostgreSQL at its defaults",
        "  (`synchronous_commit=on`), each store on its own database; `DEBUG` off.",
        "",
        "| work | database | agentstore | the other | agentstore ÷ other | target | load |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    rows: list[tuple[str, str, dict[str, Any] | None, dict[str, Any] | None, str]] = []
    for label, database, workload, role, target in ROWS:
        ours, theirs = figure(documents, workload, "agentstore"), figure(documents, workload, role)
        if ours is not None or theirs is not None:
            rows.append((label, database, ours, theirs, target))
    for label, workload, role, target in PER_DATABASE:
        for engine, ours, theirs in per_database(documents, workload, role):
            name = "PostgreSQL" if engine == "postgresql" else "SQLite"
            rows.append((label, name, ours, theirs, target))
    for label, database, ours, theirs, target in rows:
        other = f"{theirs['who']}: {cell(theirs)}" if theirs else "—"
        load = f"{ours['load']:.1f}" if ours else ""
        lines.append(
            f"| {label} | {database} | {cell(ours)} | {other} | {ratio(ours, theirs)} "
            f"| {target} | {load} |"
        )
    lines += [
        "",
        "`raw` is the same statement sent by the database driver alone: nothing lists",
        "sessions in the SDK, and LangGraph's `list()` is not the same work.",
        "",
        "## The commands",
        "",
        "The peers' drivers (SQLAlchemy with asyncpg) are the `bench` dependency group:",
        "",
        "```bash",
        ".venv/bin/pip install --group bench",
        *commands,
        "```",
        "",
        "Earlier runs, with the reasoning behind the figures, are in",
        "[bench/results](../bench/results/README.md).",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--postgres", default=DEFAULT_POSTGRES, help="a database this may own")
    parser.add_argument("--skip-postgres", action="store_true")
    parser.add_argument("--quick", action="store_true", help="tiny sizes; print, do not write")
    parser.add_argument("--out", default=str(ROOT / "docs" / "performance.md"))
    args = parser.parse_args()
    missing = [m for m in ("sqlalchemy", "asyncpg") if importlib.util.find_spec(m) is None]
    if missing:
        # The peers' drivers are benchmark-only dependencies: say so before running anything.
        parser.exit(2, f"missing {', '.join(missing)}: .venv/bin/pip install --group bench\n")
    q = args.quick
    database = "sqlite" if args.skip_postgres else "both"
    turn = ["--quick"] if q else ["--processes", "1", "8"]
    graph = ["--nodes", "6", "--invocations", "10" if q else "2000", "--reads", "5" if q else "500"]
    listing = ["--sessions", "300" if q else "100000", "--repeats", "5" if q else "2000"]
    listing += ["--users", "3" if q else "100"]
    plan: list[tuple[str, list[str], dict[str, str]]] = [
        ("sdk_turn", [*turn, "--database", database], {}),
        (
            "langgraph_saver",
            graph + ([] if args.skip_postgres else ["--postgres", args.postgres, "--peer-pool"]),
            {},
        ),
        ("session_list", listing, {}),
    ]
    if not args.skip_postgres:
        plan.append(("session_list", listing, {"DATABASE_URL": args.postgres + "_list"}))
    documents, commands = [], []
    for script, script_args, env in plan:
        documents.append(run(script, script_args, env))
        prefix = "".join(f"{k}={v} " for k, v in env.items())
        commands.append(f"{prefix}.venv/bin/python bench/{script}.py {' '.join(script_args)}")
    text = render(documents, commands)
    if q:
        print(text)
        return 0
    Path(args.out).write_text(text, encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
