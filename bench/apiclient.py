"""The HTTP side the API benchmarks share: a loopback server and a keep-alive client.

    from bench.apiclient import Connection, free_port, start_server

    port = free_port()
    server = start_server("gunicorn", url, port, workers=2, threads=4, token=token)
    api = Connection(port, token)
    status, body = api.call("POST", "/api/v1/sessions", {"cwd": "/bench"})
    server.terminate()

``bench/api_append.py``, ``bench/api_soak.py`` and ``bench/bounded_reads.py``
used to carry their own copies of this (issue 14: the soak's client loop was
copied from the append bench); the server command line and the readiness
wait are ``tests/processes.py``'s, shared with the tests. ``start_server`` returns
once an authenticated read answers 200 — every import done, the database reachable — rather than
when the port merely accepts connections, so the first timed request does not
pay the worker's start-up. Nothing here is timed or asserted.
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["API", "Connection", "free_port", "percentile", "server_command", "start_server"]

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# The one server launcher and readiness handshake (tests/processes.py).
from tests.processes import free_port, server_command, wait_serving  # noqa: E402

API = "/api/v1"


def percentile(ordered: Sequence[float], fraction: float) -> float:
    """The ``fraction`` percentile of sorted seconds, in milliseconds (0 for no samples)."""
    return ordered[max(0, int(len(ordered) * fraction) - 1)] * 1000 if ordered else 0.0


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
    command = server_command(
        kind, port, workers=workers, threads=threads, log_level="warning", extra=extra
    )
    proc = subprocess.Popen(command, cwd=ROOT, env=environ)
    try:
        wait_serving(proc, port, token=token, timeout=60)
    except RuntimeError as exc:
        raise SystemExit(f"{kind}: {exc}") from None
    return proc


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
