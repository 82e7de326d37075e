"""Reliability under SIGKILL: 4 worker processes, a chaos loop killing one every few hundred ms.

2,000 tasks, as docs/tasks.md "Reliability" says; ~10–15 s on a loaded 2-core machine
(claims of 4 at a time, so most kills land on claimed, unfinished work).

Every task must end exactly once in a terminal state, no terminal event may be
written by a worker that did not hold the lease at that point of the task's
event log, and every task whose worker was killed under it ran again. The
workers are real OS processes (``manage.py agentstore worker``); each says
``ready`` on stderr after it registered, which is the start barrier — never a
sleep. (The chaos loop's sleeps are the kill interval, not a barrier.)
"""

from __future__ import annotations

import collections
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from typing import Any

import pytest
from django.db import connection

from agentstore.models import Task, TaskEvent
from agentstore.tasks import TaskRepository
from tests.conftest import REPO_ROOT, database_url_of_test_db
from tests.tasks import jobs

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

# 2,000 short tasks, claimed 4 at a time: a kill then lands on claimed-but-unfinished
# work nearly every time, so the test proves recovery without long tasks.
TASKS = 2000
WORKERS = 4
BATCH = 4
LEASE = 1.0
DEADLINE = 180.0  # seconds; a bound against hangs, never a timing assertion
TERMINAL_EVENTS = {"task_succeeded", "task_failed", "task_canceled", "task_interrupted"}
RELEASING_EVENTS = {"task_lease_expired", "task_retry_scheduled", "task_released"}


class Supervisor:
    """``manage.py agentstore worker --processes N``; its children announce ``ready ID`` on stderr.

    A worker id is ``host:pid:suffix``; ``ready`` holds the pids of children
    that said so and were not killed since.
    """

    def __init__(self, env: dict[str, str]) -> None:
        self.ready: set[int] = set()
        self.changed = threading.Condition()
        #: The supervisor's last stderr lines, for a failure message.
        self.tail: collections.deque[str] = collections.deque(maxlen=40)
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "manage.py",
                "agentstore",
                "worker",
                "--processes",
                str(WORKERS),
                "--lease",
                str(LEASE),
                "--batch",
                str(BATCH),
            ],
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:  # drained to the end so no worker ever blocks
            self.tail.append(line)
            if line.startswith("ready "):
                with self.changed:
                    self.ready.add(int(line.split()[1].split(":")[-2]))
                    self.changed.notify_all()

    def wait_ready(self, count: int, timeout: float) -> bool:
        with self.changed:
            return self.changed.wait_for(lambda: len(self.ready) >= count, timeout)

    def kill_one(self, rng: random.Random) -> bool:
        with self.changed:
            if not self.ready:
                return False
            pid = rng.choice(sorted(self.ready))
            self.ready.discard(pid)
        os.kill(pid, signal.SIGKILL)  # a child of our supervisor, announced ready
        return True


#: The ``application_name`` of the workers' PostgreSQL sessions (``worker_database_url``).
WORKER_APPLICATION = "agentstore-test-worker"


def worker_database_url(url: str) -> str:
    """``url`` for a worker process: on PostgreSQL its sessions carry :data:`WORKER_APPLICATION`."""
    if not url.startswith("postgres"):
        return url
    return f"{url}{'&' if '?' in url else '?'}application_name={WORKER_APPLICATION}"


def _wait_for_other_sessions_to_close() -> None:
    """PostgreSQL: a SIGKILLed worker's server session ends a moment after it; let the test
    database be dropped cleanly (bounded wait for a condition, not a timing assumption).

    Only the workers' sessions are waited for: this process's own (its LISTEN
    connection, asgiref's thread) live until the session ends and are closed then
    (``tests/conftest.py``); counting them made every wait run to its deadline.
    """
    if connection.vendor != "postgresql":
        return
    deadline = time.monotonic() + 30
    with connection.cursor() as cursor:
        while time.monotonic() < deadline:
            cursor.execute(
                "SELECT COUNT(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND application_name = %s",
                [WORKER_APPLICATION],
            )
            if cursor.fetchone()[0] == 0:
                return
            time.sleep(0.1)  # polling a condition, not a barrier
    pytest.fail("the workers' database sessions did not end")


def test_workers_survive_sigkill_chaos() -> None:
    ids = [jobs.chaos_step.enqueue(n).id for n in range(TASKS)]
    succeeded = Task.objects.filter(state="succeeded")  # the test database holds only these
    env = {
        **os.environ,
        "DATABASE_URL": worker_database_url(database_url_of_test_db()),
        "DJANGO_SETTINGS_MODULE": "project.settings",
    }
    supervisor = Supervisor(env)
    kills = 0
    rng = random.Random(20)
    try:  # every way out stops the workers (a failed wait must not leak them)
        assert supervisor.wait_ready(WORKERS, 120), (
            f"the workers never became ready; ready pids {sorted(supervisor.ready)}, "
            f"supervisor exit {supervisor.proc.poll()}, its stderr:\n" + "".join(supervisor.tail)
        )
        started = time.monotonic()
        while succeeded.count() < TASKS:
            assert time.monotonic() - started < DEADLINE, "tasks did not all finish"
            time.sleep(rng.uniform(0.2, 0.5))  # the chaos interval, not a barrier
            kills += supervisor.kill_one(rng)
    finally:
        supervisor.proc.send_signal(signal.SIGTERM)
        code = supervisor.proc.wait(timeout=90)
    assert code == 0  # a clean stop exits 0
    _wait_for_other_sessions_to_close()
    assert kills >= 5

    events: dict[str, list[tuple[str, dict[str, Any]]]] = {task_id: [] for task_id in ids}
    for task_id, kind, payload in (
        TaskEvent.objects.filter(task_id__in=ids)
        .order_by("task_id", "sequence")
        .values_list("task_id", "kind", "payload_json")
    ):
        events[task_id].append((kind, json.loads(payload)))

    killed = 0
    for task_id, log in events.items():
        terminal = [kind for kind, _ in log if kind in TERMINAL_EVENTS]
        assert terminal == ["task_succeeded"], (task_id, log)
        # Replay the log: who holds the lease at each point; a terminal event
        # must come from the holder (the fence).
        holder: str | None = None
        for kind, payload in log:
            if kind == "task_started":
                assert holder is None, (task_id, log)
                holder = payload["worker_id"]
            elif kind in RELEASING_EVENTS:
                assert holder is not None and payload["worker_id"] == holder, (task_id, log)
                holder = None
            elif kind in TERMINAL_EVENTS:
                assert holder is not None and payload["worker_id"] == holder, (task_id, log)
        if any(kind == "task_lease_expired" for kind, _ in log):
            killed += 1
            # Killed under its worker: it was claimed again and that attempt finished.
            starts = [kind for kind, _ in log].count("task_started")
            assert starts >= 2, (task_id, log)
    assert killed >= 1, "no kill landed on a running task; the test proved nothing"
    results = Counter(TaskRepository().get(task_id).state for task_id in ids[:50])  # type: ignore[union-attr]
    assert results == {"succeeded": 50}
    print(f"chaos: {TASKS} tasks, {kills} kills, {killed} tasks killed mid-run and retried")
