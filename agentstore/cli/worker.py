"""Worker subcommands: ``worker`` runs tasks, ``workers`` shows who runs what.

    manage.py agentstore worker --queue default --queue mail --processes 4
    manage.py agentstore worker --once                 # run what is ready, then exit
    manage.py agentstore workers --json                # workers and queue depth

``worker`` is :class:`agentstore.tasks.worker.TaskWorker` (docs/tasks.md
"Running tasks"): one loop per process (``--processes``) or thread
(``--threads``). SIGTERM/SIGINT stop it cleanly and it exits 0.
"""

from __future__ import annotations

import logging
import multiprocessing
import signal
import sys
import threading
import time
from types import FrameType
from typing import Any

from django.db import connections

from agentstore.cli import Context, Subcommand, stamp, table, usage
from agentstore.validation import name_problem

__all__ = ["COMMANDS"]


def _worker_arguments(parser: Any) -> None:
    parser.add_argument(
        "--queue",
        action="append",
        help="serve this queue (repeatable; default: default)",
    )
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--processes", type=int, default=1, help="worker processes (default: 1)")
    size.add_argument("--threads", type=int, default=0, help="worker threads in one process")
    parser.add_argument(
        "--batch",
        type=int,
        default=None,
        help="tasks per claim (default: up to 4, at most ready tasks / live workers)",
    )
    parser.add_argument(
        "--once", action="store_true", help="run the tasks that are ready, then exit"
    )
    parser.add_argument("--max-tasks", type=int, default=0, help="exit after N tasks (per loop)")
    parser.add_argument(
        "--lease", type=float, default=None, help="lease seconds (default: AGENTSTORE WORKER_LEASE)"
    )
    parser.add_argument("--database", default="default", help="database alias")


def _setup_logging(ctx: Context) -> None:
    log = logging.getLogger("agentstore.worker")
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
        log.propagate = False


def _make(ctx: Context, stop: threading.Event | None = None, n: int = 0) -> Any:
    from agentstore.tasks.worker import TaskWorker

    return TaskWorker(
        queues=ctx.opt("queue") or ["default"],
        batch=ctx.opt("batch"),
        lease=ctx.opt("lease"),
        once=ctx.opt("once"),
        max_tasks=ctx.opt("max_tasks"),
        using=ctx.opt("database"),
        stop=stop,
        on_ready=lambda w: print(f"ready {w.worker_id}", file=sys.stderr, flush=True),
    )


def _child(options: dict[str, Any], n: int, stopping: threading.Event) -> None:
    """A process of ``--processes``: its own connections, its own signal handling.

    ``stopping`` is the fork's copy of the supervisor's flag: a SIGTERM that
    arrives before this child installed its own handlers runs the inherited
    supervisor handler, which sets it — the child then stops at once instead
    of missing the signal (and being killed after the grace period).
    """
    ctx = Context(stdout=sys.stdout, stderr=sys.stderr, style=None, options=options)  # type: ignore[arg-type]
    # The parent forwards SIGTERM; a terminal's Ctrl-C reaches the parent only once.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    worker = _make(ctx, None, n)
    worker.install_signal_handlers()
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if stopping.is_set():
        worker.stop.set()
    worker.run()
    connections.close_all()


def _worker(name: str, ctx: Context) -> None:
    for option in ("processes", "batch"):
        if ctx.opt(option) is not None and ctx.opt(option) < 1:
            raise usage(f"--{option.replace('_', '-')} must be 1 or more")
    if ctx.opt("threads") < 0 or ctx.opt("max_tasks") < 0:
        raise usage("--threads and --max-tasks must be 0 or more")
    if ctx.opt("lease") is not None and ctx.opt("lease") <= 0:
        raise usage("--lease must be positive")
    for queue in ctx.opt("queue") or ():
        # The rule enqueue applies: a queue no task can be on is a typo.
        problem = name_problem(queue, 64)
        if problem:
            raise usage(f"--queue {queue!r} {problem}")
    _setup_logging(ctx)
    if ctx.opt("threads"):
        from agentstore.tasks.worker import run_pool

        run_pool(lambda stop, n: _make(ctx, stop, n), ctx.opt("threads"))
        return
    if ctx.opt("processes") == 1:
        worker = _make(ctx)
        worker.install_signal_handlers()
        worker.run()
        return
    _supervise(ctx)


def _supervise(ctx: Context) -> None:
    """Start ``--processes`` children, restart any that die, stop them all on a signal."""
    import agentstore.tasks.worker  # noqa: F401 - imported once here, so children start fast

    fork = multiprocessing.get_context("fork")
    connections.close_all()  # never share a connection across fork()
    stopping = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    options = dict(ctx.options)

    def start(n: int) -> Any:
        connections.close_all()
        process = fork.Process(target=_child, args=(options, n, stopping), daemon=False)
        process.start()
        return process

    children = {n: start(n) for n in range(ctx.opt("processes"))}
    exiting = ctx.opt("once") or ctx.opt("max_tasks")
    while not stopping.is_set():
        time.sleep(0.2)
        for n, child in list(children.items()):
            if child.exitcode is None:
                continue
            if exiting and child.exitcode == 0:
                del children[n]
            elif not stopping.is_set():  # never start a child after the stop signal
                ctx.note(f"worker process {child.pid} exited ({child.exitcode}); restarting")
                children[n] = start(n)
        if not children:
            return
    from agentstore.conf import agentstore_settings

    for child in children.values():
        if child.is_alive() and child.pid:
            child.terminate()  # SIGTERM: the child's grace period starts
    deadline = time.monotonic() + float(agentstore_settings.WORKER_GRACE) + 5
    for child in children.values():
        child.join(timeout=max(deadline - time.monotonic(), 0.1))
        if child.is_alive():
            child.kill()


def _workers_arguments(parser: Any) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON document on stdout")


def _workers(name: str, ctx: Context) -> None:
    from agentstore.selectors.workers import queue_depths, worker_rows

    workers = worker_rows(using=ctx.opt("database", "default"))
    depths = queue_depths()
    if ctx.opt("json"):
        ctx.json(
            {
                "workers": [
                    {
                        "id": w.id,
                        "host": w.host,
                        "pid": w.pid,
                        "queues": w.queues.split(",") if w.queues else [],
                        "started_at": w.started_at,
                        "heartbeat_at": w.heartbeat_at,
                        "tasks_done": w.tasks_done,
                        "current_tasks": list(w.current_tasks),
                    }
                    for w in workers
                ],
                "queues": [
                    {"queue": d.queue_name, "queued": d.queued, "running": d.running}
                    for d in depths
                ],
            }
        )
        return
    if workers:
        table(
            ctx,
            ["WORKER", "HOST", "PID", "HEARTBEAT (UTC)", "DONE", "CURRENT TASK"],
            [
                [
                    w.id,
                    w.host,
                    str(w.pid),
                    stamp(w.heartbeat_at),
                    str(w.tasks_done),
                    ", ".join(w.current_tasks) or "-",
                ]
                for w in workers
            ],
        )
    else:
        ctx.note("No workers.")
    ctx.out("")
    table(
        ctx,
        ["QUEUE", "QUEUED", "RUNNING"],
        [[d.queue_name, str(d.queued), str(d.running)] for d in depths] or [["-", "0", "0"]],
    )


COMMANDS = [
    Subcommand(
        ("worker",), "Run tasks: claim, run their handlers, settle.", _worker_arguments, _worker
    ),
    Subcommand(("workers",), "Show running workers and queue depth.", _workers_arguments, _workers),
]
