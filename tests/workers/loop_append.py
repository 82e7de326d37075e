"""A LoopStore worker: one OS process appending steps to its own loop session.

Used by ``tests/stores/test_loop_concurrency.py`` (the port of agentloop's
``TestConcurrentStoresOverOneFile``)::

    DATABASE_URL=sqlite:////tmp/x.sqlite3 python -m tests.workers.loop_append \
        --worker 3 --steps 12 --start-file /tmp/go

Appends ``--steps`` steps (indices 0..steps-1) to session ``session-<worker>``
through its own ``LoopStore``, reading its trace back with ``last_n`` after
every append as a loop would. Prints one JSON line: ``{"worker", "written",
"errors", "error_messages", "seconds"}``; errors are counted, never hidden.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from tests.workers.start import ready_then_wait


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worker", type=int, required=True)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--start-file", default="")
    args = parser.parse_args(argv)

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    import django

    django.setup()

    from django.db import connection

    from agentstore.stores import LoopStore
    from agentstore.types import RunStep

    store = LoopStore()
    session_id = f"session-{args.worker}"
    connection.ensure_connection()
    ready_then_wait(args.start_file)

    written = 0
    errors: list[str] = []
    started = time.monotonic()
    for i in range(args.steps):
        try:
            store.append(
                RunStep(
                    session_id=session_id,
                    step_index=i,
                    step_type="user" if i == 0 else "response",
                    content=f"worker {args.worker} step {i}",
                    tool_args=json.dumps({"worker": args.worker, "i": i}).encode(),
                )
            )
            written += 1
            store.last_n(session_id, 50)
        except Exception as exc:  # counted and reported, never hidden
            errors.append(f"{type(exc).__name__}: {exc}")
    print(
        json.dumps(
            {
                "worker": args.worker,
                "written": written,
                "errors": len(errors),
                "error_messages": sorted(set(errors))[:5],
                "seconds": round(time.monotonic() - started, 3),
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
