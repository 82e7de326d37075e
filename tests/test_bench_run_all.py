"""``bench/run_all.py``: one command runs the benchmarks and prints ratios (never timings asserted).

The smoke test runs two benchmarks at ``--quick`` size in a subprocess, on SQLite
(the run strips ``DATABASE_URL``, so it is the same on either test backend), and
checks the *shape* of what comes out: every benchmark's JSON document, the roles,
the table. The table builder is checked on canned documents, including the
PostgreSQL rows that borrow the SQLite pass's raw baseline.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from bench import run_all
from tests.conftest import REPO_ROOT


def result(workload: str, who: str, value: float, role: str, unit: str = "ops/s") -> dict[str, Any]:
    better = "higher" if unit.endswith("/s") else "lower"
    return {
        "workload": workload,
        "who": who,
        "role": role,
        "value": value,
        "unit": unit,
        "better": better,
    }


def test_quick_run_prints_one_table_of_ratios_from_every_benchmark() -> None:
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.run_all",
            "--quick",
            "--only",
            "agentsession_format",
            "tree_append",
            "--json",
        ],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:] + done.stdout[-3000:]
    lines = done.stdout.strip().splitlines()
    summary = json.loads(lines[-1])
    documents = {d["bench"]: d for d in summary["documents"]}
    assert sorted(documents) == ["agentsession_format", "tree_append"]
    tree = documents["tree_append"]
    assert tree["engine"] == "sqlite" and "error" not in tree
    assert {(r["who"], r["role"]) for r in tree["results"]} >= {
        ("raw sqlite3", "raw"),
        ("TreeStore", "agentstore"),
        ("naive ORM", "other"),
    }
    assert all(r["value"] > 0 for r in tree["results"])
    assert set(tree["machine"]) >= {"load_average", "python", "django", "sqlite"}
    assert len(summary["before"]["load_average"]) == 3

    text = "\n".join(lines[:-1])
    assert "| workload | engine | raw sqlite3 (= 1.00x) | agentstore | peer | load |" in text
    append_row = next(line for line in lines if line.startswith("| tree: append 1 KB message"))
    assert "| sqlite |" in append_row and "TreeStore " in append_row and "x" in append_row
    assert "load average before" in text


def test_postgres_rows_take_the_sqlite_pass_raw_figure_and_peers_stand_in_for_raw() -> None:
    append = "tree: append 1 KB message, 1 process"
    invoke = "langgraph: invoke"
    documents = [
        {
            "bench": "tree_append",
            "engine": "sqlite",
            "machine": {"load_average": [1.5, 1.0, 0.5]},
            "results": [
                result(append, "raw sqlite3", 1000.0, "raw"),
                result(append, "TreeStore", 500.0, "agentstore"),
            ],
        },
        {
            "bench": "tree_append",
            "engine": "postgresql",
            "machine": {"load_average": [2.0, 1.0, 0.5]},
            "results": [result(append, "TreeStore", 250.0, "agentstore")],
        },
        {
            "bench": "langgraph_saver",
            "engine": "sqlite",
            "machine": {"load_average": [1.0, 1.0, 1.0]},
            "results": [
                result(invoke, "AgentStoreSaver", 300.0, "agentstore"),
                result(invoke, "SqliteSaver", 200.0, "peer"),
            ],
        },
        {"bench": "search", "engine": "sqlite", "error": "exit 1: boom"},
    ]

    rows = run_all.rows(documents)

    assert [(r["engine"], r["agentstore"][0]["ratio"]) for r in rows] == [
        ("sqlite", 0.5),
        ("postgresql", 0.25),
        ("sqlite", 1.5),
    ]
    assert rows[1]["raw"]["note"] == "SQLite pass" and rows[1]["raw"]["value"] == 1000.0
    assert rows[2]["raw"] is None and rows[2]["base"] == "SqliteSaver"
    table = run_all.table(documents)
    assert (
        "| tree: append 1 KB message, 1 process (ops/s ↑) | postgresql "
        "| 1,000 ops/s, SQLite pass | TreeStore 0.25x | — | 2.0 |" in table
    )
    assert "AgentStoreSaver 1.50x | SqliteSaver 200 ops/s" in table
    assert "search on sqlite: exit 1: boom" in table


def test_every_script_in_bench_is_in_the_plan() -> None:
    assert run_all.unplanned() == []
