"""An API server as its own OS process, with the ready handshake of ``tests/processes.py``.

    python -m tests.workers.server --kind uvicorn --database-url postgres://… --start-file F

It binds a loopback socket on a free port *first* and prints ``{"port": N}``,
so clients can connect as soon as the launcher releases it (connections made
before the server runs wait in the socket's backlog), then announces ready,
waits for the start file and serves ``project`` on that socket:

* ``uvicorn`` — ASGI (``project.asgi``), one process;
* ``gunicorn`` — WSGI (``project.wsgi``), ``--workers`` gthread workers (1)
  with ``--threads`` threads each (8), on the inherited socket (``--bind fd://N``).

``DJANGO_SETTINGS_MODULE`` in the environment picks the settings.

Also the ``echo`` task handler of ``tests/workers/multiserver_settings.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from typing import Any

from tests.workers.start import ready_then_wait


def echo(job: Any) -> dict[str, Any]:
    """The multi-server test's task: returns who ran it."""
    return {"task": job.task.id, "worker": job.worker_id}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kind", choices=["uvicorn", "gunicorn"], required=True)
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--start-file", default="")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args()
    os.environ["DATABASE_URL"] = args.database_url

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(256)
    print(json.dumps({"port": sock.getsockname()[1], "pid": os.getpid()}), flush=True)
    ready_then_wait(args.start_file)

    if args.kind == "uvicorn":
        import uvicorn

        config = uvicorn.Config(
            "project.asgi:application", log_level="warning", access_log=False, lifespan="off"
        )
        uvicorn.Server(config).run(sockets=[sock])
        return
    os.set_inheritable(sock.fileno(), True)
    os.execv(
        sys.executable,
        [
            sys.executable,
            "-m",
            "gunicorn",
            "--bind",
            f"fd://{sock.fileno()}",
            "--workers",
            str(args.workers),
            "--worker-class",
            "gthread",
            "--threads",
            str(args.threads),
            "--log-level",
            "warning",
            "project.wsgi:application",
        ],
    )


if __name__ == "__main__":
    main()
