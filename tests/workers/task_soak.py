"""A task-contention worker: one OS process claiming, working, finishing or recovering tasks.

Used by ``tests/tasks/test_contention.py``::

    DATABASE_URL=… python -m tests.workers.task_soak --mode claim --worker 3 \
        --task-id <id> --start-file /tmp/go

Modes (each prints one JSON line, with ``errors`` listing every exception text):

* ``claim`` — ``claim_queued`` one task once; reports ``claimed``.
* ``work`` — loop ``claim_next_queued(kind)`` → two running events → (for half
  the tasks, a short lease and a random sleep that may outlast it) → owner
  ``finish``; reports per task what each call returned, until nothing is queued.
* ``recover`` — run ``recover_expired(kind)`` until the stop file appears;
  reports the recovered ids.
* ``link`` — ``link_agent_task`` once; reports the link.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tests.workers.start import ready_then_wait


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--mode", choices=["claim", "work", "recover", "link"], required=True)
    parser.add_argument("--worker", type=int, default=0)
    parser.add_argument("--task-id", default="")
    parser.add_argument("--kind", default="soak")
    parser.add_argument("--lease-ms", type=float, default=30.0)
    parser.add_argument("--max-sleep-ms", type=float, default=60.0)
    parser.add_argument("--workflow-id", default="")
    parser.add_argument("--start-file", default="")
    parser.add_argument("--stop-file", default="")
    args = parser.parse_args(argv)

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    import django

    django.setup()

    from django.db import connection

    from agentstore.tasks import TaskRepository, WorkflowRepository
    from agentstore.types import TaskClaim, TaskEventDraft, TaskFinish, TaskRecovery

    tasks = TaskRepository()
    owner = f"worker-{args.worker}"
    errors: list[str] = []
    result: dict[str, Any] = {"worker": args.worker, "mode": args.mode}
    connection.ensure_connection()
    rng = random.Random(args.worker)
    ready_then_wait(args.start_file)

    def now() -> datetime:
        return datetime.now(UTC)

    if args.mode == "claim":
        try:
            result["claimed"] = tasks.claim_queued(
                TaskClaim(
                    task_id=args.task_id,
                    lease_owner=owner,
                    lease_expires_at=datetime(1970, 1, 1, tzinfo=UTC),  # dead on arrival
                    event_kind="soak_started",
                )
            )
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {exc}")

    elif args.mode == "work":
        log: dict[str, dict[str, bool]] = {}
        while True:
            try:
                # Half the claims take a long lease and finish at once (they
                # succeed); the rest take a short one and may sleep past it
                # (they race the sweeper) — so both outcomes always happen.
                steady = rng.random() < 0.5
                lease_ms = 10_000 if steady else args.lease_ms
                lease = now() + timedelta(milliseconds=lease_ms)
                task_id = tasks.claim_next_queued(args.kind, owner, lease)
                if task_id is None:
                    break
                entry = log[task_id] = {}
                drafts = [
                    TaskEventDraft(
                        kind="progress", payload_json=json.dumps({"worker": owner, "n": n})
                    )
                    for n in range(2)
                ]
                _, entry["appended"] = tasks.append_running_events(task_id, owner, drafts)
                if not steady:
                    time.sleep(rng.uniform(0, args.max_sleep_ms) / 1000)
                entry["finished"] = tasks.finish(
                    TaskFinish(
                        task_id=task_id,
                        lease_owner=owner,
                        from_states=["running", "canceling"],
                        target_state="succeeded",
                        event_kind="task_succeeded",
                        result=owner,
                        payload_json="{}",
                    )
                )
            except Exception as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
                break
        result["tasks"] = log

    elif args.mode == "recover":
        recovered: list[str] = []
        while True:
            stopping = os.path.exists(args.stop_file)
            try:
                recovered += tasks.recover_expired(
                    TaskRecovery(
                        kind=args.kind,
                        expires_before=now(),
                        target_state="interrupted",
                        event_kind="task_interrupted",
                        error_code="lease_expired",
                        payload_json="{}",
                    )
                )
            except Exception as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
            if stopping:
                break
            time.sleep(0.005)
        result["recovered"] = recovered

    else:  # link
        try:
            link = WorkflowRepository(tasks=tasks).link_agent_task(
                args.workflow_id, args.task_id, " same ", 3
            )
            result["link"] = [
                link.sequence,
                link.node_key,
                link.invocation_index,
                link.agent_task_id,
            ]
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {exc}")

    result["errors"] = errors
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
