"""A LogStore worker: one OS process doing one thing to a log session, for the process tests.

Used by ``tests/stores/test_log_processes.py`` and ``bench/log_append.py``::

    DATABASE_URL=sqlite:////tmp/x.sqlite3 python -m tests.workers.log_worker \
        --mode hold --session s1 --start-file /tmp/go --done-file /tmp/done

Modes (each prints JSON lines; the last one is the result):

* ``hold``: wait for the start file, ``open`` the session, report ``{"held": …}``,
  keep the hold until the done file appears, then close the store.
* ``session_for``: wait for the start file, ``session_for(--ref, {})`` for
  ``--rounds`` rounds (names ``<ref>/<round>``), report each id or error code.
* ``append``: open the session, wait for the start file, append ``--count``
  entries ``--gap`` seconds apart, printing ``{"id", "committed"}`` (wall
  clock just after each commit) as it goes.
* ``victim``: open the session and append once, print ``{"ready": true}``, wait
  for the start file, then try two more appends and report each outcome.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from tests.workers.start import ready_then_wait


def emit(value: dict[str, Any]) -> None:
    print(json.dumps(value), flush=True)


def wait_for(path: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not Path(path).exists():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {path}")
        time.sleep(0.005)


def item(text: str, size: int = 0) -> dict[str, Any]:
    body = text if size <= len(text) else text + " " + "x" * (size - len(text) - 1)
    return {
        "type": "item",
        "item": {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": body}],
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--mode", choices=["hold", "session_for", "append", "victim"], required=True
    )
    parser.add_argument("--session", default="")
    parser.add_argument("--ref", default="")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--count", type=int, default=3)
    parser.add_argument("--gap", type=float, default=0.2)
    parser.add_argument("--size", type=int, default=0)
    parser.add_argument("--start-file", required=True)
    parser.add_argument("--done-file", default="")
    args = parser.parse_args(argv)

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    import django

    django.setup()

    from agentstore import exceptions
    from agentstore.stores import LogStore

    store = LogStore()
    try:
        if args.mode == "hold":
            ready_then_wait(args.start_file)
            try:
                store.open(args.session)
                emit({"held": True, "pid": os.getpid()})
            except exceptions.SessionLocked as exc:
                emit({"held": False, "pid": os.getpid(), "error": str(exc)})
            if args.done_file:
                wait_for(args.done_file)
        elif args.mode == "session_for":
            ready_then_wait(args.start_file)
            results = []
            for n in range(args.rounds):
                try:
                    results.append({"id": store.session_for(f"{args.ref}/{n}", {}).id})
                except exceptions.AgentStoreError as exc:
                    results.append({"error": exc.code})
            emit({"results": results})
        elif args.mode == "append":
            store.open(args.session)
            ready_then_wait(args.start_file)
            for n in range(args.count):
                eid = store.append(args.session, item(f"from {os.getpid()} #{n}", args.size))
                emit({"id": eid, "committed": time.time()})
                if args.gap:
                    time.sleep(args.gap)
        elif args.mode == "victim":
            store.append(args.session, item("victim's first"))
            emit({"ready": True})
            ready_then_wait(args.start_file)
            outcomes = []
            for n in range(2):
                try:
                    store.append(args.session, item(f"victim's #{n}"))
                    outcomes.append({"ok": True})
                except exceptions.AgentStoreError as exc:
                    outcomes.append({"error": exc.code, "message": str(exc)})
            emit({"outcomes": outcomes})
    finally:
        store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
