"""A bounded soak of the API: 8 client processes against gunicorn and uvicorn, nothing lost.

    .venv/bin/python bench/api_soak.py                        # SQLite file, 20 s per server
    .venv/bin/python bench/api_soak.py --seconds 5 --clients 8
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/agentstore_soak \\
        .venv/bin/python bench/api_soak.py                     # on PostgreSQL

For each server — ``gunicorn project.wsgi`` (gthread) and ``uvicorn
project.asgi`` — on a loopback port, ``--clients`` OS processes each make their
own tree session, log session and user, wait at a barrier (the ready
handshake), then for ``--seconds`` cycle through four writes on one keep-alive
connection: a message appended under the previous one, an agentsession line
appended to the log session, a task queued, a document replaced. A write is
*acknowledged* when the server answered 2xx; every other answer or a broken
connection is an error. Afterwards the script reads everything back — entries
page by page and the log session over HTTP, tasks and documents from the
database — and prints ``lost: N`` (acknowledged writes that are not there,
or a document whose last acknowledged value is not what is stored; it must be
0), acknowledged writes/s, errors and p50/p99 latency per server.

As the reference measured in the same run, ``--clients`` processes commit
one-row ``INSERT`` transactions into a raw ``sqlite3`` WAL file for the same
time; the ratio is acknowledged API writes/s over raw commits/s. Never
asserted; the machine is shared, so read the figures as orders of magnitude.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import common  # noqa: E402
from bench.apiclient import API, Connection, free_port, percentile, start_server  # noqa: E402

TEXT = ("The quick brown fox jumps over the lazy dog. " * 5)[:200]


def client(number: int, port: int, token: str, seconds: float, barrier: Any, results: Any) -> None:
    """One client process: set up, wait at the barrier, write until the time is up."""
    api = Connection(port, token)
    status, tree = api.call("POST", f"{API}/sessions", {"cwd": f"/soak/{number}"})
    assert status == 201, tree
    status, log = api.call("POST", f"{API}/log-sessions", {"header": {}})
    assert status == 201, log
    status, owner = api.call("POST", f"{API}/sessions", {"cwd": f"/soak/{number}/tasks"})
    assert status == 201, owner
    barrier.wait()
    stop_at = time.monotonic() + seconds
    acked: dict[str, list[str]] = {"entry": [], "log": [], "task": []}
    document: int | None = None
    latencies: list[float] = []
    errors: list[str] = []
    parent: str | None = None
    step = 0
    while time.monotonic() < stop_at:
        kind = ("entry", "log", "task", "document")[step % 4]
        step += 1
        if kind == "entry":
            call = (
                "POST",
                f"{API}/sessions/{tree['id']}/append/message",
                {"parent_id": parent, "message": {"role": "user", "content": TEXT}},
            )
        elif kind == "log":
            item = {"type": "message", "role": "user", "content": [{"type": "input_text"}]}
            item["content"][0]["text"] = f"{number}:{step} {TEXT[:80]}"
            call = (
                "POST",
                f"{API}/log-sessions/{log['id']}/entries",
                {"entry": {"type": "item", "item": item}},
            )
        elif kind == "task":
            call = ("POST", f"{API}/tasks", {"owner_session_id": owner["id"], "kind": "soak"})
        else:
            call = ("PUT", f"{API}/documents/soak/client-{number}", {"value": step})
        started = time.perf_counter()
        status, body = api.call(*call)
        latencies.append(time.perf_counter() - started)
        if not 200 <= status < 300:
            errors.append(f"{kind} {status}: {str(body)[:200]}")
            continue
        if kind == "entry":
            parent = body["id"]
            acked["entry"].append(body["id"])
        elif kind == "log":
            acked["log"].append(body["id"])
        elif kind == "task":
            acked["task"].append(body["id"])
        else:
            document = step
    results.put(
        {
            "number": number,
            "tree": tree["id"],
            "log": log["id"],
            "acked": acked,
            "document": document,
            "latencies": latencies,
            "errors": errors,
        }
    )


# -- read back ----------------------------------------------------------------------------


def read_back(port: int, token: str, result: dict[str, Any], number: int) -> tuple[int, int]:
    """(acknowledged writes, of them lost) for one client's results."""
    from agentstore.models import Document, Task

    api = Connection(port, token)
    stored: set[str] = set()
    path: str | None = f"{API}/sessions/{result['tree']}/entries?limit=500"
    while path:
        status, page = api.call("GET", path)
        assert status == 200, page
        stored.update(entry["id"] for entry in page["results"])
        path = None
        if page["next"]:
            parts = urlsplit(page["next"])
            path = f"{parts.path}?{parts.query}"
    lost = len(set(result["acked"]["entry"]) - stored)
    # A log session's read is paged too: walk its next links.
    lines: set[str] = set()
    path = f"{API}/log-sessions/{result['log']}?limit=1000"
    while path:
        status, log = api.call("GET", path)
        assert status == 200, log
        lines.update(entry["id"] for entry in log["entries"])
        path = None
        if log["next"]:
            parts = urlsplit(log["next"])
            path = f"{parts.path}?{parts.query}"
    lost += len(set(result["acked"]["log"]) - lines)
    tasks = set(Task.objects.filter(pk__in=result["acked"]["task"]).values_list("pk", flat=True))
    lost += len(set(result["acked"]["task"]) - tasks)
    acked = sum(len(ids) for ids in result["acked"].values())
    if result["document"] is not None:
        acked += 1
        row = Document.objects.filter(namespace="soak", key=f"client-{number}").first()
        if row is None or json.loads(row.value_json) != result["document"]:
            lost += 1
    return acked, lost


# -- the raw sqlite3 reference ------------------------------------------------------------


def raw_writer(path: str, seconds: float, barrier: Any, results: Any) -> None:
    conn = sqlite3.connect(path, timeout=20, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    barrier.wait()
    stop_at = time.monotonic() + seconds
    count = 0
    while time.monotonic() < stop_at:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t (body) VALUES (?)", (TEXT,))
        conn.execute("COMMIT")
        count += 1
    conn.close()
    results.put(count)


def raw_sqlite3(clients: int, seconds: float, tmp: Path) -> float:
    path = str(tmp / "raw.sqlite3")
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, body TEXT)")
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(clients + 1), ctx.Queue()
    procs = [
        ctx.Process(target=raw_writer, args=(path, seconds, barrier, results))
        for _ in range(clients)
    ]
    for proc in procs:
        proc.start()
    barrier.wait()
    total = sum(results.get(timeout=seconds + 60) for _ in procs)
    for proc in procs:
        proc.join()
    return total / seconds


# -- main ---------------------------------------------------------------------------------


def soak(kind: str, url: str, args: argparse.Namespace, token: str) -> dict[str, Any]:
    port = free_port()
    server = start_server(kind, url, port, args.workers, args.threads, token)
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(args.clients + 1), ctx.Queue()
    procs = [
        ctx.Process(target=client, args=(n, port, token, args.seconds, barrier, results))
        for n in range(args.clients)
    ]
    try:
        for proc in procs:
            proc.start()
        barrier.wait(timeout=120)
        started = time.monotonic()
        outcomes = [results.get(timeout=args.seconds + 120) for _ in procs]
        elapsed = time.monotonic() - started
        for proc in procs:
            proc.join()
        acked = lost = 0
        for outcome in outcomes:
            a, lost_here = read_back(port, token, outcome, outcome["number"])
            acked += a
            lost += lost_here
    finally:
        server.terminate()
        server.wait(timeout=20)
    latencies = sorted(x for o in outcomes for x in o["latencies"])
    errors = [e for o in outcomes for e in o["errors"]]
    return {
        "acked": acked,
        "lost": lost,
        "errors": errors,
        "rate": acked / elapsed,
        "p50": percentile(latencies, 0.5),
        "p99": percentile(latencies, 0.99),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2, help="server worker processes")
    parser.add_argument("--threads", type=int, default=4, help="threads per gunicorn worker")
    parser.add_argument("--servers", nargs="+", default=["gunicorn", "uvicorn"])
    common.add_json_flag(parser)
    args = parser.parse_args()

    tmp = tempfile.TemporaryDirectory()
    url = os.environ.get("DATABASE_URL") or f"sqlite:///{Path(tmp.name) / 'soak.sqlite3'}"
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    os.environ["DJANGO_DEBUG"] = "0"
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from rest_framework.authtoken.models import Token

    call_command("migrate", verbosity=0)
    # Staff: the soak writes documents in a shared namespace (staff only).
    user, _ = get_user_model().objects.get_or_create(username="soak", is_staff=True)
    token = Token.objects.get_or_create(user=user)[0].key

    engine = "PostgreSQL" if url.startswith("postgres") else "SQLite (WAL)"
    print(
        f"api_soak on {engine}: {args.clients} client processes, {args.seconds:.0f} s per server, "
        f"{args.workers} workers ({args.threads} threads each for gunicorn), "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    raw = raw_sqlite3(args.clients, args.seconds, Path(tmp.name))
    print(f"  raw sqlite3  {raw:8.0f} commits/s ({args.clients} processes, one-row transactions)")
    workload = f"api: mixed writes over HTTP, {args.clients} client processes"
    common.record(workload, "raw sqlite3", raw, role="raw")
    for kind in args.servers:
        r = soak(kind, url, args, token)
        print(
            f"  {kind:<10} acknowledged writes: {r['acked']}  ({r['rate']:.0f}/s, "
            f"{r['rate'] / raw:.3f}x raw sqlite3)  errors: {len(r['errors'])}  "
            f"p50 {r['p50']:.1f} ms  p99 {r['p99']:.1f} ms  lost: {r['lost']}"
        )
        for error in r["errors"][:5]:
            print(f"      {error}")
        common.record(workload, kind, r["rate"])
        common.record(f"api: lost writes, {kind}", kind, r["lost"], role="other", unit="writes")
    common.emit("api_soak", args)
    tmp.cleanup()


if __name__ == "__main__":
    main()
