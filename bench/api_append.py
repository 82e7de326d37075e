"""Message appends over HTTP: 4 concurrent clients against gunicorn with 2 workers.

    .venv/bin/python bench/api_append.py                    # SQLite file in a temp dir, 20 s
    .venv/bin/python bench/api_append.py --seconds 5 --clients 8 --workers 2
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/agentstore_bench \\
        .venv/bin/python bench/api_append.py                 # on PostgreSQL

Each client is a thread with one keep-alive HTTP connection, appending 200-byte
user messages (``POST /api/v1/sessions/{id}/append/message``, token auth) to
its own session, each under the previous entry, as fast as the server answers.
The server is ``gunicorn project.wsgi`` (gthread workers, so keep-alive holds),
``DJANGO_DEBUG=0``. Printed: requests/s, p50/p99 latency, errors, and — as the
reference measured in the same run — ``TreeStore.append_message`` called
in-process the same number of times, so the ratio shows what HTTP, DRF, auth
and owner scoping cost on top of the store. Never asserted.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import common  # noqa: E402
from bench.apiclient import API, Connection, free_port, percentile, start_server  # noqa: E402

TEXT = ("The quick brown fox jumps over the lazy dog. " * 5)[:200]


class Client(threading.Thread):
    def __init__(self, port: int, token: str, session_id: str, stop_at: float) -> None:
        super().__init__(daemon=True)
        self.port, self.token, self.session_id, self.stop_at = port, token, session_id, stop_at
        self.latencies: list[float] = []
        self.errors: list[str] = []

    def run(self) -> None:
        api = Connection(self.port, self.token, timeout=30)
        path = f"{API}/sessions/{self.session_id}/append/message"
        parent = None
        while time.monotonic() < self.stop_at:
            body = {"parent_id": parent, "message": {"role": "user", "content": TEXT}}
            start = time.perf_counter()
            status, data = api.call("POST", path, body)
            if status == 0:  # the connection broke (and was reopened)
                self.errors.append(str(data))
                continue
            self.latencies.append(time.perf_counter() - start)
            if status != 201:
                self.errors.append(f"{status}: {str(data)[:200]}")
                continue
            parent = data["id"]
        api.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2, help="threads per gunicorn worker")
    common.add_json_flag(parser)
    args = parser.parse_args()

    tmp = tempfile.TemporaryDirectory()
    url = os.environ.get("DATABASE_URL") or f"sqlite:///{Path(tmp.name) / 'bench.sqlite3'}"
    common.setup_django(url)
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    from agentstore.stores import TreeStore
    from agentstore.types.tree import MessageEntity

    user, _ = get_user_model().objects.get_or_create(username="bench")
    token = Token.objects.get_or_create(user=user)[0].key
    store = TreeStore()
    sessions = [store.create_session("/bench", owner=user).id for _ in range(args.clients)]

    port = free_port()
    server = start_server("gunicorn", url, port, args.workers, args.threads, token)
    try:
        # Warm up: the first request of each worker imports and connects.
        warm = Client(port, token, sessions[0], time.monotonic() + 1.0)
        warm.run()
        stop_at = time.monotonic() + args.seconds
        clients = [Client(port, token, sid, stop_at) for sid in sessions]
        started = time.monotonic()
        for client in clients:
            client.start()
        for client in clients:
            client.join()
        elapsed = time.monotonic() - started
    finally:
        server.terminate()
        server.wait(timeout=10)

    latencies = sorted(x for c in clients for x in c.latencies)
    errors = [e for c in clients for e in c.errors]
    rate = len(latencies) / elapsed
    engine = "PostgreSQL" if url.startswith("postgres") else "SQLite (WAL)"
    print(
        f"api_append on {engine}: {args.clients} clients, gunicorn {args.workers} workers x "
        f"{args.threads} threads, {args.seconds:.0f} s"
    )
    print(
        f"  HTTP     {rate:8.0f} appends/s   p50 {percentile(latencies, 0.5):6.2f} ms   "
        f"p99 {percentile(latencies, 0.99):6.2f} ms   errors {len(errors)}"
    )
    for error in errors[:5]:
        print(f"    {error}")

    # The same number of appends in-process, one session, as the reference.
    sid = store.create_session("/bench-ref", owner=user).id
    count = min(len(latencies), 5000) or 1
    parent = None
    started = time.perf_counter()
    for _ in range(count):
        parent = store.append_message(sid, parent, MessageEntity(role="user", content=TEXT)).id
    direct = count / (time.perf_counter() - started)
    print(f"  store    {direct:8.0f} appends/s   (TreeStore.append_message in-process, 1 thread)")
    print(f"  ratio    {rate / direct:8.2f}x  HTTP / in-process store")
    # No raw sqlite3 here: the reference is the store itself, in-process.
    workload = f"api: append 200 B message over HTTP, {args.clients} clients"
    common.record(workload, "TreeStore in-process", direct, role="other")
    common.record(workload, "HTTP (gunicorn)", rate)
    common.emit("api_append", args)
    tmp.cleanup()


if __name__ == "__main__":
    main()
