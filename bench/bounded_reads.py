"""Memory and time of a real API worker serving every read of a 100,000-entry session.

    .venv/bin/python bench/bounded_reads.py                  # 100,000 entries, 8 clients
    .venv/bin/python bench/bounded_reads.py --entries 20000 --clients 4

Seeds one session holding a single ``--entries``-long chain of messages (set
based, one ``INSERT … SELECT``), starts gunicorn (one ``gthread`` worker with
``--clients`` threads, ``DEBUG=0``) on loopback, and sends ``--clients``
simultaneous requests to every read endpoint of that session, one endpoint
after another. After each endpoint it prints the median/worst latency and the
worker's RSS and peak RSS (``VmRSS``/``VmHWM`` from ``/proc``), and the ratio
of the median to raw ``sqlite3`` reading the same number of rows. Issue 13
asks that the worker stay under 200 MB; printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import common  # noqa: E402
from bench.apiclient import free_port, start_server  # noqa: E402

CONTENT = ("Refactor the parser so that the tokenizer and the AST builder share one cursor. " * 3)[
    :200
]


def seed(entries: int) -> tuple[str, str]:
    """A user with a token and one session with an ``entries``-long chain: (session, token)."""
    from django.contrib.auth import get_user_model
    from django.db import connection
    from rest_framework.authtoken.models import Token

    from agentstore.demo import seeding
    from agentstore.stores import TreeStore

    user = get_user_model().objects.create_user("bench", password="bench-pw-123")
    token = Token.objects.create(user=user).key
    sid = TreeStore().create_session("/bench", owner=user).id
    started = time.perf_counter()
    seeding.chain(sid, entries, content=CONTENT, token_estimate=50)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    print(f"seeded {entries:,} entries in {time.perf_counter() - started:.1f} s")
    return sid, str(token)


def worker_pid(master: int) -> int:
    for _ in range(200):
        try:
            children = Path(f"/proc/{master}/task/{master}/children").read_text().split()
        except OSError:
            children = []
        if children:
            return int(children[0])
        time.sleep(0.05)
    raise RuntimeError("gunicorn started no worker")


def memory_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of ``pid`` in MB."""
    values = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, rest = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            values[key] = int(rest.split()[0]) / 1024
    return values["VmRSS"], values["VmHWM"]


def fetch(url: str, token: str) -> tuple[int, int, float]:
    request = urllib.request.Request(url, headers={"Authorization": f"Token {token}"})
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(request, timeout=600) as response:
            body = response.read()
            status = response.status
    except urllib.error.HTTPError as exc:
        body = exc.read()
        status = exc.code
    return status, len(body), time.perf_counter() - started


def together(url: str, token: str, clients: int) -> list[tuple[int, int, float]]:
    results: list[tuple[int, int, float]] = [(0, 0, 0.0)] * clients

    def run(i: int) -> None:
        results[i] = fetch(url, token)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument(
        "--page", type=int, default=500, help="the big page asked of tree/branch/messages"
    )
    parser.add_argument(
        "--arenas",
        type=int,
        default=0,
        help="set MALLOC_ARENA_MAX for the worker (glibc; 0: leave the default)",
    )
    common.add_json_flag(parser)
    args = parser.parse_args()

    tmp = tempfile.mkdtemp(prefix="agentstore-bench-bounded-")
    db_path = os.path.join(tmp, "bench.sqlite3")
    url = f"sqlite:///{db_path}"
    common.setup_django(url)
    sid, token = seed(args.entries)
    from django.db import connections

    connections.close_all()

    port = free_port()
    env = {"MALLOC_ARENA_MAX": str(args.arenas)} if args.arenas else {}
    server = start_server(
        "gunicorn", url, port, 1, args.clients, token, env=env, extra=["--timeout", "600"]
    )
    try:
        base = f"http://127.0.0.1:{port}/api/v1/sessions/{sid}"
        pid = worker_pid(server.pid)
        rss, peak = memory_mb(pid)
        print(f"worker pid {pid}: after start-up RSS {rss:.0f} MB, peak {peak:.0f} MB")
        raw = sqlite3.connect(db_path)

        def raw_rows(n: int) -> float:
            times = []
            for _ in range(5):
                started = time.perf_counter()
                raw.execute(
                    "SELECT * FROM agentstore_entry WHERE session_id = ? ORDER BY seq LIMIT ?",
                    [sid, n],
                ).fetchall()
                times.append(time.perf_counter() - started)
            return statistics.median(times)

        tail = f"e{args.entries}"
        big = args.page
        endpoints = [
            ("entries", "/entries", 100),
            ("entries ?limit=1000", "/entries?limit=1000", 1000),
            ("tree", "/tree", 100),
            (f"tree ?limit={big}", f"/tree?limit={big}", big),
            ("branch", "/branch", 100),
            (f"branch ?limit={big}", f"/branch?entry_id={tail}&limit={big}", big),
            ("messages", "/messages", 100),
            (f"transcript ?limit={big}", f"/transcript?limit={big}", big),
            ("context (too_large)", "/context", 0),
            ("context at e2000 (cap)", "/context?entry_id=e2000", 2000),
            ("entry", f"/entries/{tail}", 1),
        ]
        print(
            f"{args.clients} simultaneous requests per endpoint; session of "
            f"{args.entries:,} entries"
        )
        for name, path, rows in endpoints:
            results = together(base + path, token, args.clients)
            statuses = sorted({status for status, _, _ in results})
            median = statistics.median(t for _, _, t in results)
            worst = max(t for _, _, t in results)
            size = max(n for _, n, _ in results)
            rss, peak = memory_mb(pid)
            ratio = ""
            workload = f"api reads: {name}, {args.clients} at once"
            if rows:
                raw_median = raw_rows(rows)
                ratio = f"  vs raw sqlite3 ({rows} rows) {median / raw_median:7.1f}x"
                common.record(workload, "raw sqlite3", raw_median * 1000, role="raw", unit="ms")
            common.record(workload, "HTTP (gunicorn)", median * 1000, unit="ms")
            print(
                f"  {name:<24} {statuses} {size / 1024:8.1f} KB  median {median * 1000:8.1f} ms"
                f"  worst {worst * 1000:8.1f} ms  RSS {rss:6.1f} MB  peak {peak:6.1f} MB{ratio}"
            )
        rss, peak = memory_mb(pid)
        verdict = "under" if peak < 200 else "OVER"
        print(json.dumps({"worker_peak_mb": round(peak, 1), "limit_mb": 200}), verdict)
        common.record(
            "api reads: worker peak RSS", "gunicorn worker", peak, role="other", unit="MB"
        )
        common.emit("bounded_reads", args, engine_name="sqlite")
    finally:
        server.terminate()
        server.wait(30)


if __name__ == "__main__":
    main()
