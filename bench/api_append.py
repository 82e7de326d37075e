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
import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TEXT = ("The quick brown fox jumps over the lazy dog. " * 5)[:200]


def setup_django(url: str) -> None:
    os.environ["DATABASE_URL"] = url
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    os.environ["DJANGO_DEBUG"] = "0"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def percentile(ordered: list[float], fraction: float) -> float:
    return ordered[max(0, int(len(ordered) * fraction) - 1)] * 1000


def start_server(url: str, port: int, workers: int, threads: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "DATABASE_URL": url, "DJANGO_DEBUG": "0"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gunicorn",
            "project.wsgi:application",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(workers),
            "--worker-class",
            "gthread",
            "--threads",
            str(threads),
            "--keep-alive",
            "30",
            "--log-level",
            "warning",
        ],
        cwd=ROOT,
        env=env,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("gunicorn did not start")


class Client(threading.Thread):
    def __init__(self, port: int, token: str, session_id: str, stop_at: float) -> None:
        super().__init__(daemon=True)
        self.port, self.token, self.session_id, self.stop_at = port, token, session_id, stop_at
        self.latencies: list[float] = []
        self.errors: list[str] = []

    def run(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        headers = {"Authorization": f"Token {self.token}", "Content-Type": "application/json"}
        path = f"/api/v1/sessions/{self.session_id}/append/message"
        parent = None
        while time.monotonic() < self.stop_at:
            body = json.dumps({"parent_id": parent, "message": {"role": "user", "content": TEXT}})
            start = time.perf_counter()
            try:
                conn.request("POST", path, body=body, headers=headers)
                response = conn.getresponse()
                data = response.read()
            except (OSError, http.client.HTTPException) as exc:
                self.errors.append(repr(exc))
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
                continue
            self.latencies.append(time.perf_counter() - start)
            if response.status != 201:
                self.errors.append(f"{response.status}: {data[:200]!r}")
                continue
            parent = json.loads(data)["id"]
        conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2, help="threads per gunicorn worker")
    args = parser.parse_args()

    tmp = tempfile.TemporaryDirectory()
    url = os.environ.get("DATABASE_URL") or f"sqlite:///{Path(tmp.name) / 'bench.sqlite3'}"
    setup_django(url)
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    from agentstore.stores import TreeStore
    from agentstore.types.tree import MessageEntity

    user, _ = get_user_model().objects.get_or_create(username="bench")
    token = Token.objects.get_or_create(user=user)[0].key
    store = TreeStore()
    sessions = [store.create_session("/bench", owner=user).id for _ in range(args.clients)]

    port = free_port()
    server = start_server(url, port, args.workers, args.threads)
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
    tmp.cleanup()


if __name__ == "__main__":
    main()
