"""``bench/performance.py``: the page of the user's path, built from the scripts' JSON.

The benchmarks themselves run in ``bench/`` (and ``run_all``'s smoke test); here the
page builder is checked on canned documents: each figure lands in its database's row
beside the right contender, LangGraph's two halves in one document are told apart by
the peer's name, and ratios read "higher is better" for rates and as a cost otherwise.
"""

from __future__ import annotations

from typing import Any

from bench import performance
from tests.test_bench_run_all import result


def document(bench: str, engine: str, results: list[dict[str, Any]]) -> dict[str, Any]:
    machine = {"load_average": [1.5, 1.0, 1.0], "cpus": 2, "python": "3.11", "sqlite": "3.40"}
    return {"bench": bench, "engine": engine, "machine": machine, "results": results}


def rows(page: str) -> list[list[str]]:
    return [
        [c.strip() for c in line.strip("|").split("|")]
        for line in page.splitlines()
        if line.startswith("| ") and not line.startswith("| work")
    ]


def test_the_page_pairs_each_figure_with_its_databases_contender() -> None:
    turn = "openai: turn, sqlite, 1 process(es)"
    graph = "langgraph, 6 nodes: invoke, durability=sync"
    listing = "newest 50 sessions of a user"
    documents = [
        document(
            "sdk_turn",
            "sqlite+postgresql",
            [
                result(turn, "AgentStoreSession", 500.0, "agentstore", "turns/s"),
                result(turn, "SQLiteSession", 1000.0, "peer", "turns/s"),
            ],
        ),
        document(
            "langgraph_saver",
            "sqlite",
            [
                result(graph, "AgentStoreSaver", 90.0, "agentstore"),
                result(graph, "SqliteSaver", 60.0, "peer"),
                result(graph, "AgentStoreSaver", 12.0, "agentstore"),
                result(graph, "PostgresSaver", 16.0, "peer"),
            ],
        ),
        document(
            "session_list",
            "postgresql",
            [
                result(listing, "raw", 0.5, "raw", "ms"),
                result(listing, "agentstore", 1.5, "agentstore", "ms"),
            ],
        ),
    ]
    page = performance.render(documents, ["python bench/sdk_turn.py"])
    found = {(r[0], r[1]): r for r in rows(page)}
    assert found[("SDK turn, 1 process", "SQLite")][2:5] == [
        "500 turns/s",
        "SQLiteSession: 1,000 turns/s",
        "0.50x",
    ]
    assert found[("LangGraph, 6 nodes, invoke/s", "SQLite")][4] == "1.50x"
    assert found[("LangGraph, 6 nodes, invoke/s", "PostgreSQL")][3] == "PostgresSaver: 16 ops/s"
    assert found[("LangGraph, 6 nodes, invoke/s", "PostgreSQL")][4] == "0.75x"
    assert found[("A user's 50 newest sessions", "PostgreSQL")][4] == "3.00x the cost"
    assert ("SDK turn, 8 processes", "SQLite") not in found  # not run: no row
    assert "python bench/sdk_turn.py" in page
