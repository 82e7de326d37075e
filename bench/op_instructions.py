"""Instructions per store operation under cachegrind: a figure the machine's load cannot move.

    .venv/bin/python bench/op_instructions.py                        # this checkout, every op
    .venv/bin/python bench/op_instructions.py --ops tree loop --n 1000 \\
        --baseline /path/to/another/checkout                          # old beside new

On a shared machine wall-clock rates move with whatever else runs; instruction
counts do not. For each operation this runs ``valgrind --tool=cachegrind`` twice on
a child process — once doing ``n`` operations, once doing none, the same set-up
both times — and prints ``(I(n) - I(0)) / n``: the instructions one operation costs,
Python, Django, SQLite and the WAL copier's thread included. ``--watched`` also runs
each with an ``execute_wrapper`` installed (what OpenTelemetry's and Sentry's Django
instrumentations cost; docs/operations.md, "One door for every statement").
``--baseline`` runs the same operations with another checkout's code (its own
migrated database), so a change is measured beside what it changed. Noise between
identical runs is about ±2%. Printed, never asserted; needs ``valgrind``.

The operations: ``tree`` (``TreeStore.append_message`` of a 1 KB message onto the
branch), ``loop`` (``LoopStore.append``), ``log`` (``LogStore.append`` of a 1 KB item),
``claim`` (claim → two running events → finish, on ``TaskRepository``), ``lastn``
(``LoopStore.last_n(…, 50)`` of 1,000 steps), ``put`` (the LangGraph
``CheckpointStore.put`` of a small checkpoint).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# A child imports the code it measures (``$OP_ROOT``, this checkout or the
# baseline) first; the parent, this checkout's.
sys.path.insert(0, os.environ.get("OP_ROOT", str(ROOT)))

from bench import common  # noqa: E402

OPS = ("tree", "loop", "log", "claim", "lastn", "put")
PAYLOAD = "x" * 1000


def run_ops(op: str, n: int) -> None:
    """The child: ``n`` operations of ``op`` on the database ``$DATABASE_URL`` names."""
    import django

    django.setup()
    from django.db import connection

    if os.environ.get("OP_WATCHED") == "1":
        connection.execute_wrappers.append(
            lambda execute, sql, params, many, context: execute(sql, params, many, context)
        )
    if op == "tree":
        from agentstore.stores import TreeStore
        from agentstore.types import MessageEntity

        tree = TreeStore()
        sid, parent = tree.create_session("/bench").id, None
        for _ in range(n):
            message = MessageEntity(role="user", content=PAYLOAD)
            parent = tree.append_message(sid, parent, message).id
    elif op in ("loop", "lastn"):
        from agentstore.demo import seeding
        from agentstore.stores import LoopStore
        from agentstore.types import RunStep

        loop = LoopStore()
        loop.append(RunStep(session_id="bench", step_index=0, step_type="user", content="x"))
        if op == "lastn":
            seeding.steps("bench", 1000)
            for _ in range(n):
                loop.last_n("bench", 50)
        else:
            for i in range(n):
                loop.append(
                    RunStep(
                        session_id="bench", step_index=i, step_type="assistant", content=PAYLOAD
                    )
                )
    elif op == "log":
        from agentstore.stores import LogStore

        log = LogStore()
        sid = log.create({"id": "bench"}).id
        item = {"type": "item", "item": {"type": "message", "role": "user", "content": PAYLOAD}}
        log.append(sid, item)
        for _ in range(n):
            log.append(sid, item)
    elif op == "claim":
        from agentstore.demo import seeding
        from agentstore.tasks import TaskRepository
        from agentstore.types import TaskEventDraft, TaskFinish

        seeding.queued_tasks(seeding.session(cwd="/bench"), max(n, 1), kind="job")
        tasks = TaskRepository()
        drafts = [
            TaskEventDraft(kind="progress", payload_json='{"n":1}'),
            TaskEventDraft(kind="progress", payload_json='{"n":2}'),
        ]
        for _ in range(n):
            expires = datetime.now(UTC) + timedelta(seconds=30)
            task_id = tasks.claim_next_queued("job", "w", expires)
            assert task_id is not None
            tasks.append_running_events(task_id, "w", drafts)
            tasks.finish(
                TaskFinish(
                    task_id=task_id,
                    lease_owner="w",
                    from_states=("running",),
                    target_state="succeeded",
                    event_kind="task_succeeded",
                    payload_json="{}",
                )
            )
    elif op == "put":
        from agentstore.stores.checkpoints import CheckpointStore

        store = CheckpointStore()
        store.put("bench", "", "c0", None, "json", b"{}", {}, {})
        for i in range(n):
            value = b"{" + b"1" * 200 + b"}"
            store.put("bench", "", f"c{i + 1:08d}", None, "json", value, {"step": i}, {"a": i})
    else:  # pragma: no cover - argparse's choices
        raise SystemExit(f"unknown operation {op}")
    connection.close()


_REFS = re.compile(r"I\s+refs:\s+([\d,]+)")


def instructions(root: Path, database: Path, op: str, n: int, watched: bool) -> int:
    """Instructions of a child doing ``n`` operations of ``op`` with ``root``'s code."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "db.sqlite3"
        shutil.copy(database, copy)
        env = {
            **os.environ,
            "DATABASE_URL": f"sqlite:///{copy}",
            "DJANGO_SETTINGS_MODULE": "project.settings",
            "OP_ROOT": str(root),
            "OP_WATCHED": "1" if watched else "0",
        }
        done = subprocess.run(
            [
                "valgrind",
                "--tool=cachegrind",
                "--cache-sim=no",
                "--cachegrind-out-file=/dev/null",
                sys.executable,
                str(ROOT / "bench" / "op_instructions.py"),
                "--child",
                op,
                str(n),
            ],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
    found = _REFS.search(done.stderr)
    if found is None:  # pragma: no cover - valgrind's output changed
        raise SystemExit(f"no instruction count in valgrind's output:\n{done.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def migrated(root: Path, into: Path) -> Path:
    """A SQLite file migrated with ``root``'s schema."""
    path = into / f"{abs(hash(str(root)))}.sqlite3"
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{path}", "PYTHONPATH": str(root)}
    subprocess.run([sys.executable, "manage.py", "migrate", "-v0"], cwd=root, env=env, check=True)
    return path


def per_op(root: Path, database: Path, op: str, n: int, watched: bool) -> float:
    return (
        instructions(root, database, op, n, watched) - instructions(root, database, op, 0, watched)
    ) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", nargs="+", choices=OPS, default=list(OPS))
    parser.add_argument("--n", type=int, default=1000, help="operations per run")
    parser.add_argument("--watched", action="store_true", help="also with an execute_wrapper")
    parser.add_argument("--baseline", type=Path, help="another checkout measured beside this one")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    common.add_json_flag(parser)
    args = parser.parse_args()
    if args.child:
        run_ops(args.child[0], int(args.child[1]))
        return
    if shutil.which("valgrind") is None:
        raise SystemExit("needs valgrind (Debian: apt install valgrind)")
    roots = [("this checkout", ROOT)]
    if args.baseline is not None:
        roots.append(("baseline", args.baseline.resolve()))
    print(f"{'op':<6} {'code':<14} {'watched':<8} {'instructions/op':>16} {'x baseline':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        databases = {root: migrated(root, Path(tmp)) for _, root in roots}
        for op in args.ops:
            for watched in (False, True) if args.watched else (False,):
                figures = {
                    label: per_op(root, databases[root], op, args.n, watched)
                    for label, root in roots
                }
                base = figures.get("baseline")
                for label, value in figures.items():
                    ratio = f"{value / base:10.3f}" if base and label != "baseline" else f"{'':>10}"
                    print(
                        f"{op:<6} {label:<14} {str(watched):<8} {value:16,.0f} {ratio}", flush=True
                    )
                    # Fewer instructions are better: a latency-like figure.
                    common.record(
                        f"instructions per {op}" + (" (watched)" if watched else ""),
                        "agentstore" if label == "this checkout" else "agentstore (baseline)",
                        value,
                        role="agentstore" if label == "this checkout" else "other",
                        unit="instructions",
                    )
    common.emit("op_instructions", args, engine_name="sqlite")


if __name__ == "__main__":
    main()
