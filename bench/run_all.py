"""Every benchmark in ``bench/`` in one command, printed as one table of ratios.

    .venv/bin/python -m bench.run_all                      # SQLite, the documented sizes
    .venv/bin/python -m bench.run_all --postgres           # and PostgreSQL (local, own database)
    .venv/bin/python -m bench.run_all --postgres postgres://postgres@db:5432/agentstore_bench
    .venv/bin/python -m bench.run_all --quick              # a smoke run: tiny sizes, seconds each
    .venv/bin/python -m bench.run_all --only tree_append loop_steps --json
    .venv/bin/python -m bench.run_all --save run.jsonl     # keep each result as it comes
    .venv/bin/python -m bench.run_all --from run.jsonl     # the table of a saved run
    .venv/bin/python -m bench.run_all --postgres-only --save run.jsonl   # PostgreSQL later

Each benchmark runs as its own subprocess through its command line with ``--json``
(``bench/common.py``), at the sizes in :data:`PLAN` — at least 10,000 operations of
1 KB payloads where issue 15 asks for them, 100,000-entry sessions for the reads.
Then one Markdown table: per workload, the raw ``sqlite3`` baseline (stdlib
``sqlite3`` doing the same logical work, in the same run), each agentstore store and
each peer (the OpenAI Agents SDK's ``SQLiteSession``, LangGraph's savers,
django-tasks-db) as a **ratio** of that baseline. Throughputs (``ops/s``) read
"higher is better" (0.50x: half the raw rate); latencies (``ms``) read "lower is
better" (1.5x: half as slow again as raw). Rows without a raw baseline are ratios of
the first peer. Beside every row: the 1-minute load average while it ran.

PostgreSQL (``--postgres [URL]`` or ``$AGENTSTORE_BENCH_POSTGRES_URL``; the URL defaults
to the local server's ``agentstore_bench`` database, which is dropped and created again
before each benchmark, so name one nobody else uses): the benchmarks that support it run
again with ``DATABASE_URL`` set; their ratios are against the raw ``sqlite3`` figure of
the same workload from the SQLite pass of the same run (there is no "raw PostgreSQL"
baseline: the question is what the move to a server costs against the embedded floor).

Nothing is asserted: the machine may be shared, so read ratios, not absolute figures,
and the load average beside them (docs/operations.md, "Performance").
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import common  # noqa: E402

DEFAULT_POSTGRES = "postgres://postgres@127.0.0.1:5432/agentstore_bench"
PY = sys.executable


@dataclass(frozen=True)
class Bench:
    """How ``run_all`` runs one script: its arguments at full and quick size, and on PostgreSQL.

    ``postgres``: ``"env"`` (it reads ``$DATABASE_URL``), ``"database-url"``
    (``--database-url URL``), ``"flag"`` (``--postgres URL --skip-sqlite``), or ``""``
    (SQLite only: it measures SQLite itself, or has no database).
    """

    name: str
    full: list[str]
    quick: list[str]
    postgres: str = "env"
    pg_extra: list[str] = field(default_factory=list)


PLAN: list[Bench] = [
    Bench(
        "append_floor",
        ["--appends", "10000", "--rounds", "3"],
        ["--appends", "30", "--rounds", "1"],
        postgres="",
    ),
    Bench(
        "store_appends",
        ["--ops", "10000", "--rounds", "2"],
        ["--ops", "30", "--rounds", "1", "--processes", "1"],
        postgres="",
    ),
    Bench(
        # Its PostgreSQL setups use --pg-url (the local server by default).
        "follow_latency",
        ["--appends", "1000"],
        ["--appends", "10", "--followers", "2", "--processes", "1", "--setups", "sqlite-poll"],
        postgres="",
    ),
    Bench(
        "tree_append",
        ["--appends", "10000", "--context-entries", "10000", "--runs", "15"],
        ["--appends", "30", "--context-entries", "60", "--runs", "2"],
    ),
    Bench(
        "loop_steps",
        ["--appends", "10000", "--history", "100000", "--reads", "500", "--oai-python", PY],
        ["--appends", "30", "--rounds", "1", "--history", "100", "--reads", "3"],
    ),
    Bench(
        "log_append",
        ["--appends", "10000", "--follow", "30"],
        ["--appends", "30", "--follow", "2", "--gap", "0.05"],
    ),
    Bench(
        "openai_session", ["--items", "100000", "--ops", "10000"], ["--items", "50", "--ops", "5"]
    ),
    Bench(
        # Its PostgreSQL side (--database postgresql) uses its own local databases.
        "sdk_turn",
        ["--sessions", "200", "--turns", "10", "--processes", "1", "8"],
        ["--quick"],
        postgres="",
    ),
    Bench("tree_context", ["--entries", "100000", "--repeats", "20"], ["--entries", "600"]),
    Bench(
        "session_list",
        ["--sessions", "100000", "--repeats", "2000"],
        ["--sessions", "300", "--users", "3", "--repeats", "5"],
    ),
    Bench(
        "tasks_claim",
        ["--tasks", "10000", "--workers", "1", "2", "4", "--dtdb-python", PY],
        ["--tasks", "20", "--workers", "1", "--skip-dtdb"],
        postgres="",
    ),
    Bench(
        "worker_throughput",
        ["--tasks", "10000", "--workers", "1", "2", "4"],
        ["--tasks", "10", "--workers", "1", "--samples", "2", "--batch", "1"],
        postgres="database-url",
        pg_extra=["--skip-raw"],
    ),
    Bench(
        "run_throughput",
        ["--runs", "10000", "--workers", "1", "4"],
        ["--runs", "10", "--workers", "1"],
        postgres="database-url",
    ),
    Bench(
        "write_contention",
        ["--processes", "1", "4", "8", "--writes", "1250", "--rounds", "2"],
        ["--processes", "1", "--writes", "10", "--rounds", "1"],
        postgres="",
    ),
    Bench(
        "langgraph_saver",
        ["--invocations", "10000", "--reads", "500"],
        ["--invocations", "5", "--reads", "3"],
        postgres="flag",
    ),
    Bench(
        "agentsession_format",
        ["--entries", "10000", "--rounds", "3"],
        ["--entries", "50", "--rounds", "1"],
        postgres="",
    ),
    Bench(
        "api_append", ["--seconds", "20", "--clients", "4"], ["--seconds", "1", "--clients", "1"]
    ),
    Bench(
        "api_soak",
        ["--seconds", "20", "--clients", "8"],
        ["--seconds", "1", "--clients", "1", "--servers", "gunicorn"],
    ),
    Bench(
        "bounded_reads",
        ["--entries", "100000", "--clients", "8"],
        ["--entries", "300", "--clients", "1"],
        postgres="",
    ),
    Bench(
        "admin_pages",
        ["--entries", "200000", "--sessions", "100", "--runs", "15"],
        ["--entries", "400", "--sessions", "3", "--big", "300", "--runs", "1"],
    ),
    Bench(
        "search",
        ["--entries", "200000", "--sessions", "200", "--runs", "21"],
        ["--entries", "300", "--sessions", "3", "--runs", "1"],
    ),
    Bench(
        # Instructions under cachegrind, not time: needs valgrind (docs/development.md).
        "op_instructions",
        ["--n", "1000", "--watched"],
        ["--n", "50", "--ops", "loop"],
        postgres="",
    ),
]

#: Files in bench/ that are not benchmarks (the two passes check behaviour and time nothing).
HELPERS = {
    "common",
    "apiclient",
    "floor",
    "run_all",
    "performance",
    "__init__",
    "hostile_pass",
    "newuser_pass",
    "probe",
}


# -- running ------------------------------------------------------------------------------


def command(bench: Bench, quick: bool, postgres: str) -> tuple[list[str], dict[str, str]]:
    """The subprocess's argv and environment for one benchmark on one engine."""
    argv = [PY, str(ROOT / "bench" / f"{bench.name}.py"), *(bench.quick if quick else bench.full)]
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    env["PYTHONUNBUFFERED"] = "1"
    if postgres:
        if bench.postgres == "env":
            env["DATABASE_URL"] = postgres
        elif bench.postgres == "database-url":
            argv += ["--database-url", postgres]
        elif bench.postgres == "flag":
            argv += ["--postgres", postgres, "--skip-sqlite"]
            env["DATABASE_URL"] = postgres
        argv += bench.pg_extra
    return [*argv, "--json"], env


def run(bench: Bench, quick: bool, postgres: str, timeout: float | None) -> dict[str, Any]:
    """Run one benchmark; its JSON document, or one saying why there is none."""
    engine = "postgresql" if postgres else "sqlite"
    argv, env = command(bench, quick, postgres)
    if postgres:
        common.ensure_postgres_database(postgres, fresh=True)
    print(f"[run_all] {bench.name} on {engine} …", file=sys.stderr, flush=True)
    started = time.monotonic()
    try:
        done = subprocess.run(
            argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        return {"bench": bench.name, "engine": engine, "error": f"timed out after {timeout} s"}
    seconds = time.monotonic() - started
    document = last_json(done.stdout)
    if done.returncode or document is None:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        return {
            "bench": bench.name,
            "engine": engine,
            "error": f"exit {done.returncode}: " + " | ".join(tail),
        }
    document["seconds"] = round(seconds, 1)
    document["engine"] = engine
    print(f"[run_all] {bench.name} on {engine}: {seconds:.0f} s", file=sys.stderr, flush=True)
    return document


def last_json(stdout: str) -> dict[str, Any] | None:
    """The last line of ``stdout`` that is a benchmark's JSON document."""
    for line in reversed(stdout.strip().splitlines()):
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict) and "results" in value:
                return value
    return None


# -- the table ----------------------------------------------------------------------------


def rows(documents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (workload, engine): the baseline and every contender as a ratio of it."""
    sqlite_raw: dict[str, dict[str, Any]] = {}
    for doc in documents:
        if doc.get("engine") != "postgresql":
            for r in doc.get("results", []):
                if r["role"] == "raw":
                    sqlite_raw.setdefault(r["workload"], r)
    out: list[dict[str, Any]] = []
    for doc in documents:
        load = doc.get("machine", {}).get("load_average", [None])[0]
        by_workload: dict[str, list[dict[str, Any]]] = {}
        for r in doc.get("results", []):
            by_workload.setdefault(r["workload"], []).append(r)
        for workload, results in by_workload.items():
            raw = next((r for r in results if r["role"] == "raw"), None)
            base_note = ""
            if raw is None and doc.get("engine") == "postgresql" and workload in sqlite_raw:
                raw, base_note = sqlite_raw[workload], "SQLite pass"
            peers = [r for r in results if r["role"] == "peer"]
            base = raw or (peers[0] if peers else None)

            def ratio(r: dict[str, Any], base: dict[str, Any] | None = base) -> float | None:
                if base is None or not base["value"]:
                    return None
                return float(r["value"]) / float(base["value"])

            out.append(
                {
                    "bench": doc["bench"],
                    "engine": doc.get("engine", ""),
                    "workload": workload,
                    "unit": results[0]["unit"],
                    "better": results[0]["better"],
                    "load": load,
                    "raw": None if raw is None else {**raw, "note": base_note},
                    "base": None if base is None else base["who"],
                    # Diagnostics (role "other": the naive ORM, a lost-writes count)
                    # follow our stores, in parentheses.
                    "agentstore": [
                        {**r, "ratio": ratio(r)} for r in results if r["role"] == "agentstore"
                    ]
                    + [
                        {**r, "ratio": ratio(r), "other": True}
                        for r in results
                        if r["role"] == "other"
                    ],
                    "peers": [{**r, "ratio": ratio(r)} for r in peers],
                }
            )
    return out


def _figure(value: float, unit: str) -> str:
    if unit == "ms":
        return f"{value:.3g} ms" if value < 10 else f"{value:,.0f} ms"
    return f"{value:,.0f} {unit}"


def _cells(entries: list[dict[str, Any]]) -> str:
    parts = []
    for e in entries:
        if e["ratio"] is None:
            text = f"{e['who']} {_figure(e['value'], e['unit'])}"
        else:
            text = f"{e['who']} {e['ratio']:.2f}x"
        parts.append(f"({text})" if e.get("other") else text)
    return "; ".join(parts) or "—"


def table(documents: list[dict[str, Any]]) -> str:
    """The Markdown table of :func:`rows`, with the failures listed under it."""
    lines = [
        "| workload | engine | raw sqlite3 (= 1.00x) | agentstore | peer | load |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows(documents):
        raw = row["raw"]
        if raw is not None:
            note = f", {raw['note']}" if raw["note"] else ""
            raw_cell = f"{_figure(raw['value'], raw['unit'])}{note}"
        else:
            raw_cell = f"— (ratios of {row['base']})" if row["base"] else "—"
        arrow = "↑" if row["better"] == "higher" else "↓"
        peers = row["peers"]
        if raw is None and peers:
            peer_cell = "; ".join(f"{p['who']} {_figure(p['value'], p['unit'])}" for p in peers)
        else:
            peer_cell = _cells(peers)
        load = f"{row['load']:.1f}" if row["load"] is not None else ""
        lines.append(
            f"| {row['workload']} ({row['unit']} {arrow}) | {row['engine']} | {raw_cell} | "
            f"{_cells(row['agentstore'])} | {peer_cell} | {load} |"
        )
    failed = [d for d in documents if "error" in d]
    for doc in failed:
        lines.append(f"\n{doc['bench']} on {doc['engine']}: {doc['error']}")
    return "\n".join(lines)


# -- main ---------------------------------------------------------------------------------


def select(only: list[str], skip: list[str]) -> list[Bench]:
    names = {b.name for b in PLAN}
    unknown = sorted(set(only + skip) - names)
    if unknown:
        raise SystemExit(f"unknown benchmark(s): {', '.join(unknown)} (known: {sorted(names)})")
    return [b for b in PLAN if (not only or b.name in only) and b.name not in skip]


def unplanned() -> list[str]:
    """Scripts in bench/ that :data:`PLAN` does not know (added since): said, not run."""
    planned = {b.name for b in PLAN} | HELPERS
    return sorted(p.stem for p in (ROOT / "bench").glob("*.py") if p.stem not in planned)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes: a smoke run")
    parser.add_argument(
        "--postgres",
        nargs="?",
        const=DEFAULT_POSTGRES,
        default=os.environ.get("AGENTSTORE_BENCH_POSTGRES_URL", ""),
        metavar="URL",
        help=f"also run on PostgreSQL (default URL: {DEFAULT_POSTGRES}; dropped and re-created)",
    )
    parser.add_argument(
        "--postgres-only",
        action="store_true",
        help="no SQLite pass: its raw figures come from the earlier runs in --save PATH",
    )
    parser.add_argument("--only", nargs="+", default=[], metavar="BENCH")
    parser.add_argument("--skip", nargs="+", default=[], metavar="BENCH")
    parser.add_argument("--timeout", type=float, default=None, help="seconds per benchmark")
    parser.add_argument("--json", action="store_true", help="print every document as JSON too")
    parser.add_argument(
        "--save", metavar="PATH", help="append each benchmark's document to PATH (JSON lines)"
    )
    parser.add_argument(
        "--from",
        dest="load",
        metavar="PATH",
        help="print the table of saved documents; run nothing",
    )
    args = parser.parse_args(argv)
    if args.postgres_only and not args.postgres:
        args.postgres = DEFAULT_POSTGRES

    before = common.machine()
    started = time.monotonic()
    if args.load:
        lines = Path(args.load).read_text().splitlines()
        documents = [json.loads(line) for line in lines if line.strip()]
    else:
        benches = select(args.only, args.skip)
        plan = [] if args.postgres_only else [(b, "") for b in benches]
        if args.postgres:
            plan += [(b, args.postgres) for b in benches if b.postgres]
        documents = []
        for bench, postgres in plan:
            document = run(bench, args.quick, postgres, args.timeout)
            documents.append(document)
            if args.save:  # as it goes: a long run stopped midway keeps what it measured
                with open(args.save, "a") as out:
                    out.write(json.dumps(document) + "\n")
        if args.save:  # the table of everything saved there, earlier runs included
            lines = Path(args.save).read_text().splitlines()
            documents = [json.loads(line) for line in lines if line.strip()]
    after = common.machine()
    versions = {}
    for doc in documents:
        versions.update({k: v for k, v in doc.get("machine", {}).items() if k != "load_average"})
    loads = [d["machine"]["load_average"][0] for d in documents if "machine" in d]
    during = f"{min(loads):.1f}–{max(loads):.1f}" if loads else "-"
    if args.load:
        when = f"saved run {args.load}"
    else:
        when = (
            f"{'quick' if args.quick else 'documented sizes'}, "
            f"{time.monotonic() - started:.0f} s, load average before "
            f"{' '.join(map(str, before['load_average']))}, after "
            f"{' '.join(map(str, after['load_average']))}"
        )
    print(
        f"bench/run_all ({when}); 1-minute load average during the benchmarks {during}; "
        + ", ".join(f"{k} {v}" for k, v in sorted(versions.items()))
    )
    print()
    print(table(documents))
    missing = unplanned()
    if missing and not args.only:
        print(f"\nnot in run_all's plan (not run): {', '.join(missing)}")
    if args.json:
        print(json.dumps({"before": before, "after": after, "documents": documents}))
    return 1 if any("error" in d for d in documents) else 0


if __name__ == "__main__":
    raise SystemExit(main())
