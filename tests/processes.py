"""The one launcher of worker processes for concurrency tests, with a ready handshake.

    with Launcher(database_url) as launcher:
        procs = [launcher.spawn("-m", "tests.workers.writer", "--worker", str(n)) for n in range(4)]
        launcher.release()                     # waits until all 4 are ready, then starts them
        results = [launcher.result(p) for p in procs]

    results = run_together(database_url, [["-m", "tests.workers.writer", …], …])   # the same

Each worker runs as ``python <args> --start-file F`` with ``DATABASE_URL`` set.
It sets itself up and calls ``tests.workers.start.ready_then_wait(F)``, which
announces readiness (a file beside ``F``) and waits for ``F``. :meth:`release`
creates ``F`` only once *every* spawned worker is ready — never after a fixed
sleep, which on a loaded machine lets the first worker finish before the last
one starts and turns a race into a sequential run (a false pass). A worker
that exits before it is ready fails the test with its stderr.

Workers print JSON lines; :meth:`result` returns the last one, :meth:`lines`
all of them, :meth:`read_line` the next one while the worker runs.

API servers (live follow, the Python client) start through :func:`serve`::

    with serve(database_url, "uvicorn") as port:      # or "runserver"
        ...  # http://127.0.0.1:{port}/api/v1/...

Its handshake is the server's own: it is ready once it answers an HTTP request
(a process that exits first fails the test with its stderr).
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any

from tests.conftest import REPO_ROOT
from tests.workers.start import ready_path

__all__ = [
    "API",
    "SERVER_KINDS",
    "Launcher",
    "free_port",
    "release",
    "run_together",
    "serve",
    "server_command",
    "wait_ready",
    "wait_serving",
]

#: How long :meth:`Launcher.release` waits for slow starters (a loaded CI machine).
READY_TIMEOUT = 180.0


class Launcher:
    """Spawn workers, release them together once all are ready, collect their output."""

    def __init__(self, database_url: str, *, env: dict[str, str] | None = None) -> None:
        self._tmp = tempfile.TemporaryDirectory()
        self.dir = Path(self._tmp.name)
        self.start = self.dir / "go"
        self.env = {
            **os.environ,
            "DATABASE_URL": database_url,
            "DJANGO_SETTINGS_MODULE": "project.settings",
            "DJANGO_DEBUG": "0",
            **(env or {}),
        }
        self.procs: list[subprocess.Popen[str]] = []

    def __enter__(self) -> Launcher:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.kill_all()
        self._tmp.cleanup()

    def spawn(self, *args: str) -> subprocess.Popen[str]:
        """Start ``python <args> --start-file F``; it waits for :meth:`release`."""
        proc = subprocess.Popen(
            [sys.executable, *args, "--start-file", str(self.start)],
            cwd=REPO_ROOT,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.procs.append(proc)
        return proc

    def wait_ready(self, procs: list[subprocess.Popen[str]] | None = None) -> None:
        """Block until every worker (of ``procs``, default all) announced it is ready."""
        wait_ready(self.start, self.procs if procs is None else procs)

    def release(self) -> None:
        """Wait until every spawned worker is ready, then start them all at once."""
        release(self.start, self.procs)

    def lines(self, proc: subprocess.Popen[str], timeout: float = 300) -> list[dict[str, Any]]:
        """Every JSON line the worker printed (waits for it to exit; non-zero fails)."""
        out, err = proc.communicate(timeout=timeout)
        assert proc.returncode == 0, err
        return [json.loads(line) for line in out.splitlines() if line.strip()]

    def result(self, proc: subprocess.Popen[str], timeout: float = 300) -> dict[str, Any]:
        """The worker's last JSON line."""
        found = self.lines(proc, timeout)
        assert found, "worker printed nothing"
        return found[-1]

    @staticmethod
    def read_line(proc: subprocess.Popen[str], timeout: float = 120.0) -> dict[str, Any]:
        """The next JSON line of a running worker (``timeout`` only bounds a hang)."""
        box: list[str] = []
        assert proc.stdout is not None
        stdout = proc.stdout
        reader = threading.Thread(target=lambda: box.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout)
        assert box and box[0], "worker printed nothing"
        return dict(json.loads(box[0]))

    def kill_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def wait_ready(
    start: Path, procs: Sequence[subprocess.Popen[Any]], *, timeout: float = READY_TIMEOUT
) -> None:
    """Block until each of ``procs`` announced it is ready for ``start`` (tests.workers.start).

    The launcher's half of the handshake, for :class:`Launcher` and for the
    benchmarks that start their own worker commands (``bench/``). A worker
    that exits first, or a deadline passed, raises ``RuntimeError`` (with the
    worker's stderr when piped).
    """
    waiting = list(procs)
    deadline = time.monotonic() + timeout
    while waiting:
        for proc in list(waiting):
            if ready_path(start, proc.pid).exists():
                waiting.remove(proc)
            elif proc.poll() is not None:
                _out, err = proc.communicate()
                raise RuntimeError(f"worker exited ({proc.returncode}) before ready: {err}")
        if waiting and time.monotonic() > deadline:
            raise RuntimeError(f"{len(waiting)} worker(s) never became ready")
        if waiting:
            time.sleep(0.005)  # polling the workers' ready files, not a start barrier


def release(start: Path, procs: Sequence[subprocess.Popen[Any]]) -> None:
    """Start ``procs`` together: once every one is ready (:func:`wait_ready`), create ``start``."""
    wait_ready(start, procs)
    start.touch()


def run_together(
    database_url: str, commands: list[list[str]], *, timeout: float = 300
) -> list[dict[str, Any]]:
    """Start every command, release them together once all are ready, return last JSON lines."""
    with Launcher(database_url) as launcher:
        procs = [launcher.spawn(*command) for command in commands]
        launcher.release()
        return [launcher.result(proc, timeout) for proc in procs]


# -- API servers ---------------------------------------------------------------------

#: The API prefix of the demo project.
API = "/api/v1"
#: Django's dev server (WSGI, a thread per request) and uvicorn (ASGI).
SERVER_KINDS = ("runserver", "uvicorn")


def free_port() -> int:
    """A loopback port nobody listens on (the kernel picks it)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_command(
    kind: str,
    port: int,
    *,
    workers: int = 0,
    threads: int = 1,
    log_level: str = "",
    extra: Sequence[str] = (),
) -> list[str]:
    """The command line serving the demo project: ``runserver``, ``uvicorn`` or ``gunicorn``.

    ``workers`` 0 leaves the server's default; gunicorn runs gthread workers
    with keep-alive (the benchmarks' shape, ``bench/apiclient.py``).
    """
    if kind == "runserver":
        return [sys.executable, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"]
    logging = ["--log-level", log_level] if log_level else []
    if kind == "gunicorn":
        return [
            sys.executable,
            "-m",
            "gunicorn",
            "project.wsgi:application",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            str(max(1, workers)),
            "--worker-class",
            "gthread",
            "--threads",
            str(threads),
            "--keep-alive",
            "30",
            *logging,
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
        *(["--workers", str(workers)] if workers else []),
        *logging,
        "--no-access-log",
        *extra,
    ]


def _answers(port: int, token: str) -> bool:
    """Whether the API answers a read: any answer, or 200 with ``token`` (imports done, DB up)."""
    headers = {"Authorization": f"Token {token}"} if token else {}
    try:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        try:
            conn.request("GET", f"{API}/sessions", headers=headers)
            status = conn.getresponse().status
        finally:
            conn.close()
    except (OSError, http.client.HTTPException):
        return False
    return status == 200 or not token


def wait_serving(
    proc: subprocess.Popen[Any], port: int, *, token: str = "", timeout: float = READY_TIMEOUT
) -> None:
    """Return once the server ``proc`` answers on ``port`` (see :func:`_answers`).

    The one readiness handshake of a server process (tests and ``bench/``):
    polling the server itself, never a sleep that guesses how long it takes.
    ``RuntimeError`` (with the end of its stderr, when piped) if it exits or
    the deadline passes.
    """
    deadline = time.monotonic() + timeout
    while not _answers(port, token):
        if proc.poll() is not None or time.monotonic() > deadline:
            if proc.poll() is None:
                proc.kill()
            err = proc.stderr.read() if proc.stderr else b""
            text = err.decode() if isinstance(err, bytes) else str(err)
            raise RuntimeError(f"server on port {port} did not start: {text[-2000:]}")
        time.sleep(0.05)  # polling the server for readiness, not a start barrier


@contextmanager
def serve(
    database_url: str,
    kind: str = "uvicorn",
    *,
    settings: str = "project.settings",
    threads: int = 1,
    extra: Sequence[str] = (),
) -> Iterator[int]:
    """Serve the demo project on a free loopback port until the block ends; yields the port.

    ``threads`` and ``extra`` as for :func:`server_command` (gunicorn's threads, more
    arguments). A server that exits before it answers raises ``RuntimeError``
    with the end of its stderr.
    """
    port = free_port()
    env = {**os.environ, "DATABASE_URL": database_url, "DJANGO_SETTINGS_MODULE": settings}
    proc = subprocess.Popen(
        server_command(kind, port, threads=threads, extra=extra),
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        wait_serving(proc, port)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
