"""Text search on a big database: the search index, the session search and the admin's search pages.

    .venv/bin/python bench/search.py                       # 1,000 sessions, 1,000,000 entries
    .venv/bin/python bench/search.py --entries 100000      # a quicker run
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/agentstore_bench_search \\
        .venv/bin/python bench/search.py --skip-raw

Seeds (in bulk, straight into the entry table, so the FTS5 triggers index every
row as the stores' own inserts would) ``--sessions`` sessions holding
``--entries`` entries of 12 words each: 10 from a 5,000-word vocabulary, one of
20 topic words (each in ~5% of the entries) and, in 20 entries only, the word
``zanzibar``. Then times, ``--runs`` times after two warm-ups:

* ``match_sql`` (the newest 1,000 matching entry pks) for a rare word, a common
  word, a prefix and two words;
* ``search_sessions`` (the API's ``?search=``: name substring or entry words),
  first 50 sessions;
* the admin's session and entry changelists with ``?q=`` (and without, for
  the cost of the page itself).

Prints p50 and p90 in ms, and the ratio to raw ``sqlite3`` running the same
FTS5 query on the same file. Printed, never asserted.
"""

from __future__ import annotations

import argparse
import os
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import common  # noqa: E402

TOPICS = [f"topic{i}" for i in range(20)]


def setup_django(url: str) -> None:
    common.setup_django(url)
    from django.test.utils import setup_test_environment

    setup_test_environment()  # lets the test client's "testserver" host in


def seed(total: int, sessions: int) -> None:
    """Sessions and their entries in bulk, through the shared helper (agentstore.demo.seeding)."""
    from agentstore.demo import seeding
    from agentstore.ids import new_id

    rng = random.Random(7)
    vocabulary = [f"w{i:04d}" for i in range(5000)]
    start = datetime(2026, 1, 1, tzinfo=UTC)
    ids = seeding.sessions(
        sessions, cwd="/repo", name=lambda i: f"session {i} " + rng.choice(TOPICS), start=start
    )
    rare = set(rng.sample(range(total), 20))
    per = total // sessions
    counter = iter(range(total))

    def rows() -> Iterator[dict[str, Any]]:
        for seq in range(1, per + 1):
            words = rng.choices(vocabulary, k=10) + [rng.choice(TOPICS)]
            if next(counter) in rare:
                words.append("zanzibar")
            yield {
                "seq": seq,
                "entry_id": new_id(),
                "type": "message",
                "created_at": start,
                "role": "user",
                "content": " ".join(words),
                "token_estimate": 10,
                "model_facing": True,
            }

    for sid in ids:
        seeding.entries(sid, rows())


def timed(fn: Callable[[], object], runs: int) -> tuple[float, float]:
    for _ in range(2):
        fn()
    samples = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t) * 1000)
    samples.sort()
    return statistics.median(samples), samples[int(0.9 * (len(samples) - 1))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--sessions", type=int, default=1_000)
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--skip-raw", action="store_true")
    common.add_json_flag(parser)
    args = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="agentstore-bench-search-")
    url = os.environ.get("DATABASE_URL") or f"sqlite:///{os.path.join(tmp, 'bench.sqlite3')}"
    setup_django(url)

    from django.contrib.auth.models import User
    from django.db import connection
    from django.test import Client

    from agentstore.models import Session
    from agentstore.search import FTS_TABLE, match_sql
    from agentstore.selectors.sessions import search_sessions

    t = time.perf_counter()
    seed(args.entries, args.sessions)
    print(
        f"seeded {args.entries:,} entries in {args.sessions:,} sessions "
        f"({connection.vendor}, index kept by triggers) in {time.perf_counter() - t:.0f} s"
    )
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE agentstore_entry")
    user = User.objects.create_superuser("bench", "bench@example.com", "pw")
    client = Client()
    client.force_login(user)
    raw = None
    if connection.vendor == "sqlite" and not args.skip_raw:
        raw = sqlite3.connect(connection.settings_dict["NAME"])

    def match(text: str) -> Callable[[], object]:
        def run() -> object:
            found = match_sql("default", text)
            assert found is not None
            with connection.cursor() as cursor:
                cursor.execute(*found)
                return cursor.fetchall()

        return run

    def raw_match(text: str) -> Callable[[], object] | None:
        if raw is None:
            return None
        found = match_sql("default", text)
        assert found is not None
        fts_query = found[1][0]

        def run() -> object:
            return raw.execute(
                f"SELECT rowid FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH ? "
                "ORDER BY rowid DESC LIMIT 1000",
                [fts_query],
            ).fetchall()

        return run

    def page(url: str) -> Callable[[], object]:
        def run() -> object:
            response = client.get(url)
            assert response.status_code == 200
            return response.content

        return run

    cases: list[tuple[str, Callable[[], object], Callable[[], object] | None]] = []
    for text in ("zanzibar", "topic3", "w012", "w0042 topic7"):
        cases.append((f"match_sql {text!r}", match(text), raw_match(text)))
    cases.append(
        (
            "search_sessions 'zanzibar' (50)",
            lambda: list(search_sessions(Session.objects.all(), "zanzibar")[:50]),
            None,
        )
    )
    cases.append(
        (
            "search_sessions 'topic3' (50)",
            lambda: list(search_sessions(Session.objects.all(), "topic3")[:50]),
            None,
        )
    )
    cases.append(
        ("admin sessions ?q=zanzibar", page("/admin/agentstore/session/?q=zanzibar"), None)
    )
    cases.append(("admin sessions (no search)", page("/admin/agentstore/session/"), None))
    cases.append(("admin entries (no search)", page("/admin/agentstore/entry/"), None))
    cases.append(("admin entries ?q=zanzibar", page("/admin/agentstore/entry/?q=zanzibar"), None))
    cases.append(("admin entries ?q=topic3", page("/admin/agentstore/entry/?q=topic3"), None))
    print(f"{'case':<36} {'p50 ms':>8} {'p90 ms':>8} {'raw p50':>8} {'ratio':>6}")
    for name, fn, raw_fn in cases:
        p50, p90 = timed(fn, args.runs)
        if raw_fn is not None:
            r50, _ = timed(raw_fn, args.runs)
            print(f"{name:<36} {p50:8.1f} {p90:8.1f} {r50:8.1f} {p50 / max(r50, 1e-6):6.1f}")
            common.record(f"search: {name}", "raw sqlite3 FTS5", r50, role="raw", unit="ms")
        else:
            print(f"{name:<36} {p50:8.1f} {p90:8.1f} {'-':>8} {'-':>6}")
        common.record(f"search: {name}", "agentstore", p50, unit="ms")
    common.emit("search", args)


if __name__ == "__main__":
    main()
