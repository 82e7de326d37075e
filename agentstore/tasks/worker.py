"""The worker: claims ready tasks under a lease, runs their handlers, settles them fenced.

``manage.py agentstore worker`` runs :func:`run` (docs/tasks.md "Running tasks")::

    TaskWorker(queues=["default"], lease=30).run()     # until SIGTERM/SIGINT

One loop, one task at a time per worker:

1. **Claim** up to ``batch`` ready tasks (:meth:`TaskRepository.claim_ready`: a
   guarded UPDATE per task, one write transaction). Each claim counts an
   attempt and appends ``task_started`` naming this worker. Without an
   explicit ``batch`` a claim takes up to :data:`DEFAULT_PREFETCH`, but never
   more than its fair share — ceil(ready / live workers) — so it takes no
   task an idle worker could start (decision record 0046).
2. **Heartbeat**: a thread renews the leases of the claimed tasks every third
   of the lease and bumps this worker's ``Worker`` row. A worker that cannot
   renew (it lost the lease) keeps running its handler, but every write it
   then makes is refused — the lease *is* the fence.
3. **Run** the kind's handler (:mod:`agentstore.tasks.handlers`).
4. **Settle** fenced on the live lease: succeeded; or, on an exception, back
   to the queue with exponential backoff while attempts remain and the error
   is retryable (``task_retry_scheduled``), else failed with the error kept
   (``task_failed``). A refused settle is logged and dropped: someone else
   owns the task now.
5. **Sweep** (every half lease): tasks whose lease expired — a worker was
   killed — are handled by the one recovery policy
   (:mod:`agentstore.tasks.recovery`): a ``function`` task (or any kind but
   agent, tool and workflow) goes back to its queue with the crash counted and
   its retry attempts untouched (``task_lease_expired``) until its crash
   budget is spent, then fails (error ``crashed``); agent, tool and workflow
   tasks end ``interrupted``. This is at-least-once delivery with fencing: a
   killed worker's task runs again, and the killed worker's late finish, if
   any, is refused. A task that crashed before runs alone: the worker first
   stores what it finished and gives back the rest of its claim, so if it
   kills this worker too, no other task is charged for it.

SIGTERM/SIGINT stop claiming; claimed-but-unstarted tasks are released
unrun; the running task gets ``WORKER_GRACE`` seconds to finish, after which
it is interrupted and released; the process exits 0.
"""

from __future__ import annotations

import _thread
import json
import logging
import os
import random
import signal
import socket
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from types import FrameType
from typing import Any

from django.db import (
    DEFAULT_DB_ALIAS,
    InterfaceError,
    OperationalError,
    close_old_connections,
    connections,
)

from agentstore import notify
from agentstore.conf import agentstore_settings
from agentstore.ids import new_id
from agentstore.models import Task, Worker
from agentstore.models.tasks import LEASED_STATES
from agentstore.stores.base import utc_now
from agentstore.tasks.backends import (
    exception_payload,
    run_function,
    send_finished,
    send_recovered,
)
from agentstore.tasks.handlers import (
    FUNCTION_KIND,
    Canceled,
    Handler,
    Job,
    Postpone,
    handlers,
    is_retryable,
    plain_finish,
    settle,
)
from agentstore.tasks.recovery import rescue_expired
from agentstore.tasks.repository import TaskRepository
from agentstore.types.tasks import TaskEntity, TaskFinish

__all__ = ["TaskWorker", "sweep"]

logger = logging.getLogger("agentstore.worker")

#: Seconds between two of the worker's ``close_old_connections`` (see ``_recycle_connections``).
RECYCLE_INTERVAL = 1.0
#: The claim size of a worker given no ``batch`` (Celery's default prefetch is 4 too),
#: capped at its fair share of what is ready (decision record 0046).
DEFAULT_PREFETCH = 4


def sweep(tasks: TaskRepository, kinds: Sequence[str], now: datetime) -> dict[str, list[str]]:
    """Rerun or settle every expired lease of ``kinds`` (tasks/recovery.py); ids by outcome.

    Cheap when nothing expired (one indexed read, no write lock). A function
    task failed here (past its crash budget) gets ``django.tasks``'
    ``task_finished``, as every stored outcome does.
    """
    expired = Task.objects.using(tasks.using).filter(
        state__in=LEASED_STATES, lease_expires_at__lte=now, kind__in=list(kinds)
    )
    if not expired.exists():
        return {}
    done = rescue_expired(kinds, now=now, tasks=tasks)
    order = list(dict.fromkeys(kinds))
    for task_id in done.settled.get(FUNCTION_KIND, []):
        try:
            send_recovered(task_id, tasks.using)
        except Exception:  # a receiver's bug must not stop the sweep
            logger.exception("task %s: task_finished receiver failed", task_id)
    return {
        "requeued": [i for kind in order for i in done.requeued.get(kind, [])],
        "settled": [i for kind in order for i in done.settled.get(kind, [])],
    }


class _Heartbeat(threading.Thread):
    """Renews the leases of the held tasks and the worker row, every ``interval``."""

    def __init__(self, worker: TaskWorker, interval: float) -> None:
        super().__init__(name=f"agentstore-heartbeat-{worker.worker_id}", daemon=True)
        self.worker = worker
        self.interval = interval
        self.stopped = threading.Event()

    def run(self) -> None:
        try:
            while not self.stopped.wait(self.interval):
                try:
                    self.worker.beat()
                except Exception:  # keep beating: a missed renewal only shortens the lease
                    logger.exception("worker %s: heartbeat failed", self.worker.worker_id)
        finally:
            connections.close_all()


class TaskWorker:
    """One claim-run-settle loop (see the module docstring)."""

    def __init__(
        self,
        *,
        queues: Sequence[str] = ("default",),
        batch: int | None = None,
        lease: float | None = None,
        once: bool = False,
        max_tasks: int = 0,
        using: str = DEFAULT_DB_ALIAS,
        worker_id: str = "",
        poll_interval: float | None = None,
        grace: float | None = None,
        registry: dict[str, Handler] | None = None,
        stop: threading.Event | None = None,
        on_ready: Callable[[TaskWorker], None] | None = None,
    ) -> None:
        self.queues = list(queues) or ["default"]
        # No batch: up to DEFAULT_PREFETCH a claim, at most a fair share of what is
        # ready; an explicit batch is the claim size, as asked (decision record 0046).
        self.fair = batch is None
        self.batch = DEFAULT_PREFETCH if batch is None else max(1, batch)
        #: Live workers (the Worker table), counted on start, every sweep and
        #: whenever an idle worker finds work: the divisor of the fair share.
        self.workers = 1
        self.lease = float(lease or agentstore_settings.WORKER_LEASE)
        self.once = once
        self.max_tasks = max(0, max_tasks)
        self.using = using
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.worker_id = worker_id or f"{self.host}:{self.pid}:{new_id()[-12:]}"
        self.poll_interval = float(
            agentstore_settings.WORKER_POLL_INTERVAL if poll_interval is None else poll_interval
        )
        self.grace = float(agentstore_settings.WORKER_GRACE if grace is None else grace)
        self.registry = (
            registry
            if registry is not None
            else {
                FUNCTION_KIND: run_function,
                **handlers(),
            }
        )
        self.kinds = sorted(self.registry)
        self.stop = stop or threading.Event()
        self.on_ready = on_ready
        self.tasks = TaskRepository(using=using)
        self.done = 0
        self._held: dict[str, TaskEntity] = {}
        self._held_lock = threading.Lock()
        self._pending: list[tuple[TaskEntity, TaskFinish, str, float]] = []
        # django.tasks' task_finished of function tasks, sent once their finish is stored.
        self._on_stored: dict[str, Callable[[], None]] = {}
        # Function calls read with the claim, by task id (run_function's input).
        self._calls: dict[str, tuple[str, str, str]] = {}
        self._running = False
        self._last_sweep = 0.0
        self._last_recycle = 0.0
        # PostgreSQL: an enqueue on our queues wakes the idle wait at once
        # (agentstore/notify.py; subscribed by run()); else a timed wait.
        self._idle = notify.Subscription(())

    # -- lifecycle ---------------------------------------------------------------

    def run(self) -> int:
        """Work until stopped (or ``once``/``max_tasks``); return how many tasks ran."""
        self._register()
        self._idle = notify.subscribe(self.using, *(notify.queue_key(q) for q in self.queues))
        heartbeat = _Heartbeat(self, max(self.lease / 3, 0.05))
        heartbeat.start()
        try:
            if self.on_ready is not None:
                self.on_ready(self)
            self._loop()
        finally:
            self._flush()
            heartbeat.stopped.set()
            heartbeat.join(timeout=5)
            self._release_unstarted()
            self._unregister()
            self._idle.close()
        return self.done

    def _loop(self) -> None:
        busy = False
        self._count_workers()
        while not self.stop.is_set():
            self._maybe_sweep()
            # The last batch's finishes commit with the next claim: one transaction.
            pending, self._pending = self._pending, []
            self._calls.clear()  # every task of the last claim ran (or was released)
            try:
                stored, claimed = self.tasks.finish_and_claim(
                    [finish for _, finish, _, _ in pending],
                    self.queues,
                    self.kinds,
                    self.worker_id,
                    self._expiry(),
                    limit=self._claim_size(),
                    # Busy (the last claim found work): skip the lock-free look.
                    look_first=not busy,
                    calls=self._calls,
                    workers=self.workers if self.fair else 0,
                )
            except (OperationalError, InterfaceError):
                # The connection died (a database restart, a network cut). Nothing
                # of the statement is known to be stored: keep the finishes (each is
                # fenced, so one that did commit is refused the second time), drop
                # the broken connection and try again after the poll interval.
                logger.exception("worker %s: claim failed, reconnecting", self.worker_id)
                self._pending = pending + self._pending
                self._last_recycle = 0.0
                self._recycle_connections()
                self._idle.wait(max(self.poll_interval, 1.0), self.stop)
                continue
            self._settled(pending, stored)
            if claimed and not busy:
                self._count_workers()  # work after a lull: who else is there to share it
            busy = bool(claimed)
            if not claimed:
                if self.once:
                    return
                self._idle_wait()
                continue
            with self._held_lock:
                self._held.update((task.id, task) for task in claimed)
            for index, task in enumerate(claimed):
                if self.stop.is_set():
                    break  # the rest are released unrun
                alone = bool(task.crashes)
                if alone:
                    self._run_alone(claimed[index + 1 :])
                self._run_one(task)
                if self.max_tasks and self.done >= self.max_tasks:
                    self.stop.set()
                if alone:
                    break

    def _run_alone(self, rest: Sequence[TaskEntity]) -> None:
        """Make the next task, which crashed before, the only one this worker holds.

        Its crash may have been its own doing (a task that kills its worker);
        if it kills this one too, every task the worker holds is charged a
        crash. So first store the finishes that wait for the next claim and give
        the rest of the claim back unrun (``task_released``, attempt not
        counted): then only this task pays.
        """
        self._flush()
        for other in rest:
            self.tasks.release(other.id, self.worker_id)
            self._drop(other.id)

    def _idle_wait(self) -> None:
        """Nothing was ready: wait before the next look (or until stopped).

        The one place the idle worker waits, so a wake-up on new work (e.g.
        PostgreSQL LISTEN/NOTIFY) replaces just this body: an enqueue on one of
        this worker's queues wakes it at once (agentstore/notify.py).
        """
        self._idle.wait(self.poll_interval, self.stop)

    def _claim_size(self) -> int:
        if self.max_tasks:
            return max(1, min(self.batch, self.max_tasks - self.done))
        return self.batch

    def _expiry(self) -> datetime:
        return self.tasks.now() + timedelta(seconds=self.lease)

    # -- one task ----------------------------------------------------------------

    def _run_one(self, task: TaskEntity) -> None:
        started = time.monotonic()
        handler = self.registry.get(task.kind)
        job = Job(
            task=task,
            worker_id=self.worker_id,
            tasks=self.tasks,
            call=self._calls.pop(task.id, None),
        )
        self._running = True
        try:
            if handler is None:  # pragma: no cover - claims filter on registered kinds
                raise LookupError(f"no handler for task kind {task.kind!r}")
            value = handler(job)
        except KeyboardInterrupt:
            # The grace period ran out (or a second signal): give the task back.
            self._running = False
            self.tasks.release(task.id, self.worker_id)
            self._drop(task.id)
            logger.warning("worker %s: released %s task %s", self.worker_id, task.kind, task.id)
            self.stop.set()
            return
        except Postpone as later:
            self._running = False
            when = self.tasks.now() + timedelta(seconds=later.delay)
            stored = self.tasks.release(
                task.id, self.worker_id, run_after=when, reason=later.reason
            )
            self._log(task, f"postponed {later.delay:.1f}s ({later.reason})", stored, started)
            self._drop(task.id)
            return
        except Canceled as stopped:
            self._running = False
            finish = self._finish(
                task, "canceled", error_code="canceled", error_message=str(stopped) or "canceled"
            )
            self._settle(task, finish, None, "canceled", started)
        except Exception as error:
            self._running = False
            self._last_recycle = 0.0  # the handler may have broken the connection: check it now
            self._failed(task, error, started, job)
        else:
            self._running = False
            if job.task_result is not None:
                self._on_stored[task.id] = lambda: send_finished(job.task_result, return_json=value)
            self._settle(task, self._finish(task, "succeeded"), value, "succeeded", started)
        finally:
            self._recycle_connections()
        self.done += 1

    def _recycle_connections(self) -> None:
        """Django's request boundary (``close_old_connections``), at most once a second.

        It closes connections that errored or outlived ``CONN_MAX_AGE`` and, with
        ``CONN_HEALTH_CHECKS``, makes the next query pay a ``SELECT 1`` first. Per
        task that check was a third round trip on PostgreSQL for a no-op task
        (docs/tasks.md, "Performance"); once a second it still catches a dead
        connection early, a handler's exception brings it forward, and a claim
        that fails on a dead connection is retried on a new one (:meth:`_loop`).
        """
        now = time.monotonic()
        if now - self._last_recycle < RECYCLE_INTERVAL:
            return
        self._last_recycle = now
        close_old_connections()

    def _settle(
        self, task: TaskEntity, finish: TaskFinish, value: Any, outcome: str, started: float
    ) -> None:
        """Settle now (tool, agent), or — kinds without details — with the next claim."""
        plain = plain_finish(task.kind, finish, value)
        if plain is not None:
            # Still held (the heartbeat renews it) until that one commit.
            self._pending.append((task, plain, outcome, started))
            if time.monotonic() - self._pending[0][3] > self.lease / 3:
                self._flush()  # slow tasks: do not sit on finished work for long
            return
        stored = settle(self.tasks, task.kind, finish, value)
        self._log(task, outcome, stored, started)
        self._drop(task.id, stored)

    def _flush(self) -> None:
        """Settle the batch's finished tasks in one write transaction."""
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        self._settled(pending, self.tasks.finish_many([finish for _, finish, _, _ in pending]))

    def _settled(
        self, pending: list[tuple[TaskEntity, TaskFinish, str, float]], stored: list[bool]
    ) -> None:
        for (task, _, outcome, started), ok in zip(pending, stored, strict=True):
            self._log(task, outcome, ok, started)
            self._drop(task.id, ok)

    def _log(self, task: TaskEntity, outcome: str, stored: bool, started: float) -> None:
        if not stored:
            outcome += " (refused: lease lost)"
        logger.info(
            "task %s kind=%s queue=%s attempt=%d/%d%s %s in %.1f ms",
            task.id,
            task.kind,
            task.queue_name,
            task.attempts - task.crashes,
            task.max_attempts,
            f" crashes={task.crashes}" if task.crashes else "",
            outcome,
            (time.monotonic() - started) * 1000,
        )

    def _failed(self, task: TaskEntity, error: Exception, started: float, job: Job) -> None:
        payload = exception_payload(error, self.worker_id)
        code = payload["exception_class_path"][:255]
        message = str(error) or type(error).__name__
        # The retry budget counts the runs that failed, not those a crash ended.
        failures = task.attempts - task.crashes
        if is_retryable(error) and failures < task.max_attempts:
            delay = min(
                agentstore_settings.WORKER_RETRY_BACKOFF_BASE * 2 ** max(failures - 1, 0),
                agentstore_settings.WORKER_RETRY_BACKOFF_MAX,
            )
            # Jitter in [d/2, d]: retries of one burst do not all come back at once.
            delay *= random.uniform(0.5, 1.0)
            payload["retry_in_seconds"] = round(delay, 3)
            stored = self.tasks.retry(
                task.id,
                self.worker_id,
                self.tasks.now() + timedelta(seconds=delay),
                error_code=code,
                error_message=message,
                payload_json=json.dumps(payload),
            )
            self._log(task, f"retry in {delay:.1f}s ({code})", stored, started)
            self._drop(task.id)
            return
        if job.task_result is not None:
            self._on_stored[task.id] = lambda: send_finished(job.task_result, error=error)
        finish = self._finish(
            task, "failed", error_code=code, error_message=message, payload=payload
        )
        self._settle(task, finish, None, f"failed ({code})", started)

    def _finish(
        self,
        task: TaskEntity,
        state: str,
        *,
        error_code: str = "",
        error_message: str = "",
        payload: dict[str, Any] | None = None,
    ) -> TaskFinish:
        """This worker's settling of a run it held: ``state`` and its ``task_<state>`` event."""
        return TaskFinish(
            task_id=task.id,
            lease_owner=self.worker_id,
            from_states=("running", "canceling"),
            target_state=state,
            event_kind=f"task_{state}",
            error_code=error_code,
            error_message=error_message,
            payload_json=json.dumps(payload or {"worker_id": self.worker_id}),
        )

    def _drop(self, task_id: str, stored: bool = False) -> None:
        """The task is no longer ours; its finish was ``stored`` (or refused, or retried)."""
        with self._held_lock:
            self._held.pop(task_id, None)
        notify = self._on_stored.pop(task_id, None)
        if stored and notify is not None:
            try:
                notify()
            except Exception:  # a receiver's bug must not stop the worker
                logger.exception("worker %s: task_finished receiver failed", self.worker_id)

    def _release_unstarted(self) -> None:
        with self._held_lock:
            held = list(self._held)
            self._held.clear()
        for task_id in held:
            self.tasks.release(task_id, self.worker_id)

    # -- heartbeat, sweeping, the worker row ---------------------------------------

    def beat(self) -> None:
        """Renew the held leases and this worker's row (the heartbeat thread calls this)."""
        with self._held_lock:
            held = list(self._held)
        if held:
            kept = self.tasks.renew_leases(held, self.worker_id, self._expiry())
            with self._held_lock:
                # A task settled meanwhile is not renewed, and was not lost either.
                lost = (set(held) - set(kept)) & set(self._held)
            for task_id in sorted(lost):
                logger.warning("worker %s: lost the lease of task %s", self.worker_id, task_id)
        now = utc_now()
        beat = Worker.objects.using(self.using).filter(pk=self.worker_id)
        if not beat.update(
            heartbeat_at=now, expires_at=self._row_expiry(now), tasks_done=self.done
        ):
            self._register()  # a sweep took the row during a long stall: put it back

    def _maybe_sweep(self) -> None:
        if time.monotonic() - self._last_sweep < max(self.lease / 2, 0.05):
            return
        self._last_sweep = time.monotonic()
        now = self.tasks.now()
        outcome = sweep(self.tasks, self.kinds, now)
        for what, ids in outcome.items():
            for task_id in ids:
                logger.warning("task %s lease expired: %s", task_id, what)
        # A killed worker leaves its row behind: drop rows past their own expiry.
        Worker.objects.using(self.using).filter(expires_at__lt=now).delete()
        self._count_workers()

    def _count_workers(self) -> None:
        """Count the live workers (this one included) for the fair share of a claim."""
        if not self.fair:
            return
        live = Worker.objects.using(self.using).filter(expires_at__gte=utc_now()).count()
        self.workers = max(1, live)

    def _register(self) -> None:
        now = utc_now()
        Worker.objects.using(self.using).update_or_create(
            pk=self.worker_id,
            defaults={
                "host": self.host[:255],
                "pid": self.pid,
                "queues": ",".join(self.queues)[:1024],
                "started_at": now,
                "heartbeat_at": now,
                "expires_at": self._row_expiry(now),
                "tasks_done": self.done,
            },
        )

    def _row_expiry(self, now: datetime) -> datetime:
        return now + timedelta(seconds=3 * self.lease)

    def _unregister(self) -> None:
        Worker.objects.using(self.using).filter(pk=self.worker_id).delete()

    # -- signals -----------------------------------------------------------------

    def install_signal_handlers(self) -> None:
        """SIGTERM/SIGINT: stop claiming; interrupt the running task after the grace period."""

        def on_signal(signum: int, frame: FrameType | None) -> None:
            if self.stop.is_set():
                if self._running:
                    raise KeyboardInterrupt  # a second signal: release the task now
                return
            logger.info(
                "worker %s: %s, stopping (grace %.0fs)",
                self.worker_id,
                signal.Signals(signum).name,
                self.grace,
            )
            self.stop.set()
            timer = threading.Timer(self.grace, self._interrupt_if_running)
            timer.daemon = True
            timer.start()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)

    def _interrupt_if_running(self) -> None:
        if self._running:
            _thread.interrupt_main()


def run_pool(make: Callable[[threading.Event, int], TaskWorker], threads: int) -> int:
    """Run ``threads`` workers in threads of this process until stopped; total tasks run."""
    stop = threading.Event()
    workers = [make(stop, n) for n in range(threads)]

    def work(worker: TaskWorker) -> None:
        try:
            worker.run()
        finally:
            connections.close_all()

    pool = [threading.Thread(target=work, args=(w,), daemon=True) for w in workers]

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        for thread in pool:
            thread.start()
        grace = workers[0].grace if workers else 0.0
        for thread in pool:
            while thread.is_alive():
                thread.join(timeout=0.2)
                if stop.is_set():
                    # Threads cannot be interrupted: one still running after the grace
                    # period is abandoned; its lease expires and a sweep requeues it.
                    thread.join(timeout=grace)
                    break
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return sum(w.done for w in workers)
