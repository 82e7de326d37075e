"""Writes that must be all-or-nothing and fenced (issue 13, items 14–15).

* A non-terminal transition (``running → queued``) may not take a task from a
  worker holding a live lease; it is fenced like ``renew_lease``/``finish``.
* ``LogStore.continue_session`` is one transaction: a failure (injected) or a
  SIGKILL (a real process) midway never leaves a successor without the
  ``superseded_by`` link on its parent.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from datetime import timedelta
from typing import Any

import pytest
from django.db import connections
from rest_framework.test import APIClient

from agentstore.exceptions import ValidationError
from agentstore.models import Session as SessionRow
from agentstore.models import Task
from agentstore.stores import LogStore, SessionStore, TreeStore
from agentstore.tasks import TaskRepository
from agentstore.types import TaskEntity
from tests.api.conftest import API, assert_error
from tests.conftest import REPO_ROOT
from tests.tasks.conftest import TickingClock, claim_for

# -- 14. transitions are fenced on the lease -----------------------------------------------


@pytest.fixture
def tasks(db: None) -> TaskRepository:
    return TaskRepository(clock=TickingClock())


def _running(tasks: TaskRepository, worker: str, minutes: int = 5) -> str:
    owner = TreeStore().create_session("/w").id
    task = tasks.create(TaskEntity(kind="job", owner_session_id=owner))
    now = tasks.clock()
    assert tasks.claim_queued(claim_for(task.id, worker, now + timedelta(minutes=minutes)))
    return task.id


@pytest.mark.django_db
def test_a_live_lease_fences_a_non_terminal_transition(tasks: TaskRepository) -> None:
    task_id = _running(tasks, "worker-1")
    assert not tasks.transition(task_id, ["running"], "queued", "task_requeued")
    assert not tasks.transition(
        task_id, ["running"], "queued", "task_requeued", lease_owner="worker-2"
    )
    still = tasks.get(task_id)
    assert still is not None
    assert (still.state, still.lease_owner) == ("running", "worker-1")
    assert [e.event.kind for e in tasks.list_events(task_id)] == ["task_queued", "task_started"]

    # The holder may give its own task back; the lease goes with it.
    assert tasks.transition(task_id, ["running"], "queued", "task_requeued", lease_owner="worker-1")
    back = tasks.get(task_id)
    assert back is not None
    assert (back.state, back.lease_owner, back.lease_expires_at) == ("queued", "", None)
    later = tasks.clock() + timedelta(minutes=5)
    assert tasks.claim_queued(claim_for(task_id, "worker-2", later))


@pytest.mark.django_db
def test_an_expired_lease_no_longer_fences(tasks: TaskRepository) -> None:
    task_id = _running(tasks, "worker-1", minutes=-1)
    assert not tasks.transition(
        task_id, ["running"], "queued", "task_requeued", lease_owner="worker-1"
    )
    assert tasks.transition(task_id, ["running"], "queued", "task_requeued")


@pytest.mark.django_db
def test_a_cancel_request_still_reaches_a_leased_task(tasks: TaskRepository) -> None:
    task_id = _running(tasks, "worker-1")
    assert tasks.transition(task_id, ["running"], "canceling", "task_canceling")
    canceling = tasks.get(task_id)
    assert canceling is not None
    assert (canceling.state, canceling.lease_owner) == ("canceling", "worker-1")
    # …but nobody else may move it on while the worker holds it.
    assert not tasks.transition(task_id, ["canceling"], "running", "task_resumed")


@pytest.mark.django_db
def test_the_api_transition_is_fenced_too(api: APIClient) -> None:
    sid = api.post(f"{API}/sessions", {"cwd": "/w"}, format="json").json()["id"]
    task_id = api.post(f"{API}/tasks", {"owner_session_id": sid, "kind": "job"}, format="json")
    task_id = task_id.json()["id"]
    claimed = api.post(
        f"{API}/tasks/{task_id}/claim",
        {"lease_owner": "worker-1", "lease_seconds": 300},
        format="json",
    )
    assert claimed.status_code == 200, claimed.content
    body: dict[str, Any] = {"from_states": ["running"], "target_state": "queued", "kind": "requeue"}
    refused = api.post(f"{API}/tasks/{task_id}/transition", body, format="json")
    error = assert_error(refused, 409, "task_conflict")
    assert error["details"]["task"]["lease_owner"] == "worker-1"
    mine = api.post(
        f"{API}/tasks/{task_id}/transition", {**body, "lease_owner": "worker-1"}, format="json"
    )
    assert mine.status_code == 200, mine.content
    assert mine.json()["state"] == "queued"
    assert Task.objects.get(pk=task_id).lease_owner is None


# -- 15. continue_session is one transaction ----------------------------------------------


def _unlinked_successors() -> list[tuple[str, str]]:
    """(parent, successor) pairs where the successor exists but the parent does not point to it."""
    rows = SessionRow.objects.filter(kind="log").values_list("id", "parent_session")
    links = dict(SessionRow.objects.filter(kind="log").values_list("id", "superseded_by"))
    return [(parent, sid) for sid, parent in rows if parent and links.get(parent) != sid]


@pytest.mark.django_db(transaction=True)
def test_a_failure_midway_leaves_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    store = LogStore()
    old = store.create({})
    store.append(old.id, {"type": "info", "name": "first"})
    real = SessionStore.update_held

    def fail_on_the_old_session(
        self: SessionStore, cursor: Any, session_id: str, *args: Any, **values: Any
    ) -> Any:
        # The link on the old session (its fenced touch) is the last write of a
        # continuation: the successor's rows are already inserted.
        if session_id == old.id:
            raise RuntimeError("killed between the successor and the link")
        return real(self, cursor, session_id, *args, **values)

    monkeypatch.setattr(SessionStore, "update_held", fail_on_the_old_session)
    with pytest.raises(RuntimeError):
        store.continue_session(old.id)
    assert list(SessionRow.objects.filter(kind="log").values_list("id", flat=True)) == [old.id]
    assert SessionRow.objects.get(pk=old.id).superseded_by == ""
    assert len(LogStore(read_only=True).read(old.id).entries) == 1

    monkeypatch.setattr(SessionStore, "update_held", real)
    successor = store.continue_session(old.id)
    assert SessionRow.objects.get(pk=old.id).superseded_by == successor.id
    assert [e.type for e in LogStore(read_only=True).read(successor.id).entries] == [
        "config",
        "info",
    ]
    assert _unlinked_successors() == []
    store.close()


@pytest.mark.django_db(transaction=True)
def test_a_bad_summary_item_writes_nothing() -> None:
    store = LogStore()
    old = store.create({})
    with pytest.raises(ValidationError):
        store.continue_session(old.id, {"type": "item_reference", "id": "x"})
    assert list(SessionRow.objects.filter(kind="log").values_list("id", flat=True)) == [old.id]
    store.close()


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_sigkill_midway_never_leaves_an_unlinked_successor(test_database_url: str) -> None:
    """Kill a process that continues sessions in a loop, at varied points, several times."""
    store = LogStore()
    first = store.create({})
    store.close()
    for conn in connections.all():
        conn.close()
    env = {**os.environ, "DATABASE_URL": test_database_url}
    rng = random.Random(13)
    continued = 0
    for _round in range(6):
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.workers.continue_worker", "--session", first.id],
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stdout is not None
            ready = json.loads(proc.stdout.readline() or "{}")
            assert ready.get("ready"), proc.stderr.read() if proc.stderr else ""
            for _ in range(rng.randint(1, 4)):
                line = proc.stdout.readline()
                assert line, proc.stderr.read() if proc.stderr else ""
                continued += 1
            # Not a start barrier: a varied moment inside the next continuation.
            time.sleep(rng.uniform(0, 0.02))
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
    assert continued >= 6
    assert _unlinked_successors() == []
