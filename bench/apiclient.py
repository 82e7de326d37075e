"""The HTTP side the API benchmarks share: a loopback server and a keep-alive client.

    from bench.apiclient import Connection, free_port, start_server

    port = free_port()
    server = start_server("gunicorn", url, port, workers=2, threads=4, token=token)
    api = Connection(port, token)
    status, body = api.call("POST", "/api/v1/sessions", {"cwd": "/bench"})
    server.terminate()

``bench/api_append.py``, ``bench/api_soak.py`` and ``bench/bounded_reads.py``
used to carry their own copies of this (issue 14: the soak's client loop was
copied from the append bench). ``start_server`` returns once an authenticated
read answers 200 — every import done, the database reachable — rather than
when the port merely accepts connections, so the first timed request does not
pay the worker's start-up. Nothing here is timed or asserted.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["API", "Connection", "free_port", "percentile", "server_command", "start_server"]

ROOT = Path(__file__).resolve().parent.parent
API = "/api/v1"


def free_port() -> int:
    """A loopback port nobody listens on (the kernel picks it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def percentile(ordered: Sequence[float], fraction: float) -> float:
    """The ``fraction`` percentile of sorted seconds, in milliseconds (0 for no samples)."""
    return ordered[max(0, int(len(ordered) * fraction) - 1)] * 1000 if ordered else 0.0


def server_command(
    kind: str, port: int, workers: int, threads: int, extra: Sequence[str] = ()
) -> list[str]:
    """The command line of ``gunicorn`` (gthread, keep-alive) or ``uvicorn`` serving the project."""
    if kind == "gunicorn":
        return [
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
            *extra,
        ]
    return [
        sys.executable,
        "-m",
        "uvicorn",
        "project.asgi:application",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--workers",
        str(workers),
        "--log-level",
        "warning",
        "--no-access-log",
        *extra,
    ]


def start_server(
    kind: str,
    url: str,
    port: int,
    workers: int,
    threads: int,
    token: str,
    *,
    env: dict[str, str] | None = None,
    extra: Sequence[str] = (),
) -> subprocess.Popen[bytes]:
    """Start the server on ``url``'s database; return once an authenticated read answers 200."""
    environ = {**os.environ, **(env or {}), "DATABASE_URL": url, "DJANGO_DEBUG": "0"}
    proc = subprocess.Popen(
        server_command(kind, port, workers, threads, extra), cwd=ROOT, env=environ
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", f"{API}/sessions", headers={"Authorization": f"Token {token}"})
            if conn.getresponse().status == 200:
                conn.close()
                return proc
        except (OSError, http.client.HTTPException):
            pass
        if proc.poll() is not None:
            raise SystemExit(f"{kind} exited with {proc.returncode}")
        time.sleep(0.2)  # polling for readiness, not a start barrier
    proc.kill()
    raise SystemExit(f"{kind} did not start")


class Connection:
    """One keep-alive connection with token auth that reconnects after a failure."""

    def __init__(self, port: int, token: str, *, timeout: float = 60) -> None:
        self.port = port
        self.timeout = timeout
        self.headers = {"Authorization": f"Token {token}", "Content-Type": "application/json"}
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """``(status, parsed JSON body)``; ``(0, the error)`` when the connection broke."""
        payload = None if body is None else json.dumps(body)
        try:
            self.conn.request(method, path, body=payload, headers=self.headers)
            response = self.conn.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException) as exc:
            self.conn.close()
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
            return 0, repr(exc)
        try:
            return response.status, json.loads(data) if data else None
        except ValueError:
            return response.status, data[:200]

    def close(self) -> None:
        self.conn.close()
