"""What the benchmarks share: the database, payloads, timing, and one machine-readable line.

    from bench import common

    parser = argparse.ArgumentParser()
    common.add_json_flag(parser)                      # --json
    args = parser.parse_args()
    url = common.database_url(tmp)                    # $DATABASE_URL, else a SQLite file in tmp
    common.setup_django(url)                          # DEBUG off, migrated
    ...
    common.record("append 1 KB message", "raw sqlite3", raw_rate, role="raw")
    common.record("append 1 KB message", "TreeStore", rate)
    common.emit("tree_append", args)                  # with --json: the last line, one object

Every benchmark in ``bench/`` prints a table for people. Given ``--json`` it also
prints, as its *last* line, one JSON object::

    {"bench": "tree_append", "engine": "sqlite", "machine": {...},
     "results": [{"workload": "...", "who": "TreeStore", "role": "agentstore",
                  "value": 2110.5, "unit": "ops/s", "better": "higher"}, ...]}

``bench/run_all.py`` runs each benchmark as a subprocess through that flag and
divides every figure by the raw ``sqlite3`` figure of the same workload in the same
run (docs/operations.md, "Performance"). ``role`` says which column a figure
belongs to: ``raw`` (the floor: stdlib ``sqlite3`` doing the same logical work),
``agentstore`` (one of our stores), ``peer`` (another library doing the same job:
the OpenAI Agents SDK's ``SQLiteSession``, LangGraph's savers, django-tasks-db) or
``other`` (diagnostics such as the naive ORM path, kept in the JSON only).

Nothing here asserts a timing: the figures are for reading, on a machine whose
load average is printed beside them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

__all__ = [
    "ROOT",
    "TEXT_1K",
    "add_json_flag",
    "database_url",
    "emit",
    "engine",
    "ensure_postgres_database",
    "machine",
    "median_ms",
    "payload_1k",
    "percentile_ms",
    "record",
    "setup_django",
    "summarise",
    "timed",
]

ROOT = Path(__file__).resolve().parent.parent

#: 1,024 characters of prose: the body of a "1 KB" message.
TEXT_1K = ("The quick brown fox jumps over the lazy dog. " * 24)[:1024]

_results: list[dict[str, Any]] = []


# -- the database -------------------------------------------------------------------------


def database_url(tmp: str | Path, name: str = "bench.sqlite3") -> str:
    """``$DATABASE_URL`` when set (PostgreSQL), else a SQLite file ``name`` in ``tmp``."""
    return os.environ.get("DATABASE_URL") or f"sqlite:///{Path(tmp).resolve() / name}"


def engine(url: str) -> str:
    """``"postgresql"`` or ``"sqlite"``, from a database URL."""
    return "postgresql" if url.startswith(("postgres://", "postgresql://")) else "sqlite"


def setup_django(url: str, *, migrate: bool = True) -> None:
    """Point the project at ``url`` (DEBUG off, as in production) and migrate it.

    With DEBUG on Django records and formats every query, which would be timed
    too; the project's settings read ``DATABASE_URL`` once, at setup.
    """
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    os.environ["DJANGO_DEBUG"] = "0"
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    if migrate:
        from django.core.management import call_command

        call_command("migrate", verbosity=0)


def ensure_postgres_database(url: str, *, fresh: bool = False) -> None:
    """Create the PostgreSQL database ``url`` names if it is missing (dropped first if ``fresh``).

    Connects to the server's ``postgres`` database to do it, with psycopg (the
    ``postgres`` extra). Only ever pass a database the benchmarks own.
    """
    import psycopg
    from psycopg import sql

    parts = urlsplit(url)
    name = parts.path.lstrip("/")
    if not name:
        raise SystemExit(f"{url}: name a database the benchmarks may own")
    admin = urlunsplit(parts._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        if fresh:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone()
        if not exists:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))


# -- payloads -----------------------------------------------------------------------------


def payload_1k(n: int) -> dict[str, Any]:
    """A chat message as JSON whose text makes it about 1 KB, numbered ``n``."""
    return {"role": "user" if n % 2 == 0 else "assistant", "content": f"{n:06d} {TEXT_1K}"[:1024]}


# -- timing -------------------------------------------------------------------------------


def timed(call: Callable[[], object], repeats: int, *, warmups: int = 0) -> list[float]:
    """``repeats`` durations of ``call()`` in seconds, sorted (after ``warmups`` untimed calls)."""
    from time import perf_counter

    for _ in range(warmups):
        call()
    samples = []
    for _ in range(repeats):
        started = perf_counter()
        call()
        samples.append(perf_counter() - started)
    return sorted(samples)


def median_ms(samples: Sequence[float]) -> float:
    """The median of durations in seconds, in milliseconds."""
    return statistics.median(samples) * 1000 if samples else 0.0


def percentile_ms(samples: Sequence[float], fraction: float) -> float:
    """The ``fraction`` percentile of durations in seconds, in milliseconds (nearest rank)."""
    if not samples:
        return 0.0
    ordered = sorted(samples)
    return ordered[max(0, int(len(ordered) * fraction + 0.5) - 1)] * 1000


def summarise(
    name: str, latencies: list[float], total: float, raw_rate: float | None, *, width: int = 8
) -> float:
    """Print one append row (rate, p50, p99, ratio to ``raw_rate``); return the rate per second.

    The append benches' (``log_append``, ``tree_append``) one row format.
    """
    rate = len(latencies) / total
    ordered = sorted(latencies)
    p50 = ordered[len(ordered) // 2] * 1000
    p99 = ordered[max(int(len(ordered) * 0.99) - 1, 0)] * 1000
    ratio = f"{rate / raw_rate:.2f}x" if raw_rate else "—"
    times = f"p50 {p50:6.3f} ms   p99 {p99:6.3f} ms"
    print(f"  {name:<{width}} {rate:>9.0f} appends/s   {times}   {ratio}")
    return rate


# -- results ------------------------------------------------------------------------------


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    """Add ``--json``: print the results as one JSON object on the last line."""
    parser.add_argument(
        "--json",
        action="store_true",
        help="also print the results as one JSON object on the last line (for bench/run_all.py)",
    )


def record(
    workload: str,
    who: str,
    value: float,
    *,
    role: str = "agentstore",
    unit: str = "ops/s",
    better: str = "",
) -> None:
    """Keep one figure for :func:`emit`.

    ``workload`` names the logical work (the same string for the raw baseline and
    every contender, so their ratio can be taken); ``better`` is ``"higher"`` for
    throughputs and ``"lower"`` for latencies (from ``unit`` when not given).
    """
    if role not in {"raw", "agentstore", "peer", "other"}:
        raise ValueError(f"role {role!r}")
    _results.append(
        {
            "workload": workload,
            "who": who,
            "role": role,
            "value": float(value),
            "unit": unit,
            "better": better or ("higher" if unit.endswith("/s") else "lower"),
        }
    )


def machine() -> dict[str, Any]:
    """Load average, CPUs and versions: what to print beside the figures."""
    info: dict[str, Any] = {
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
    }
    try:
        import django

        info["django"] = django.get_version()
    except ImportError:  # pragma: no cover - Django is a dependency
        pass
    try:
        from django.db import connection

        if connection.vendor == "postgresql":
            version = connection.pg_version  # type: ignore[attr-defined]
            info["postgresql"] = f"{version // 10000}.{version % 10000}"
    except Exception:  # noqa: BLE001 - Django not set up: no server version to report
        pass
    return info


def emit(bench: str, args: argparse.Namespace, *, engine_name: str = "") -> None:
    """With ``--json``, print the recorded figures as one JSON object (the last line)."""
    if not getattr(args, "json", False):
        return
    url = os.environ.get("DATABASE_URL", "")
    document = {
        "bench": bench,
        "engine": engine_name or engine(url),
        "machine": machine(),
        "results": list(_results),
    }
    print(json.dumps(document), flush=True)
