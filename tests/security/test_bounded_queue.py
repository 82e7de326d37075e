"""A writer frozen while it holds the SQLite writer queue must not stall every write.

Issue 13, "Bounded work" item 5: waiting for the queue has a deadline
(``WRITE_QUEUE_TIMEOUT``); past it the store raises ``DatabaseBusy`` and the API
answers ``503 database_busy`` in the one error shape. The holder is a real OS
process (``tests/security/queue_holder.py``) that enters a store write, says
``ready``, and is then ``SIGSTOP``ped; cleanup resumes and kills it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import override_settings
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from agentstore import exceptions
from agentstore.stores import TreeStore
from tests.conftest import REPO_ROOT

pytestmark = [pytest.mark.sqlite_only, pytest.mark.slow]

#: Generous bound on how long a deadline-respecting write may take here (the
#: machine is shared); the deadline under test is far shorter.
GIVE_UP = 30.0


@pytest.fixture
def frozen_holder(test_database_url: str) -> Iterator[subprocess.Popen[str]]:
    env = {**os.environ, "DATABASE_URL": test_database_url}
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.security.queue_holder"],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # the ready handshake: it holds the queue now
        assert line.strip() == "ready", proc.stderr.read() if proc.stderr else line
        os.kill(proc.pid, signal.SIGSTOP)
        yield proc
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
        proc.communicate(timeout=GIVE_UP)


def _in_thread(fn: Any) -> tuple[threading.Thread, dict[str, Any]]:
    """Run ``fn`` in a thread, so a stalled write fails the test instead of hanging it."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - reported to the test
            outcome["error"] = exc
        finally:
            from django.db import connections

            connections.close_all()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(GIVE_UP)
    return thread, outcome


@override_settings(AGENTSTORE={"WRITE_QUEUE_TIMEOUT": 0.5})
def test_store_write_raises_database_busy_past_the_queue_deadline(
    frozen_holder: subprocess.Popen[str],
) -> None:
    thread, outcome = _in_thread(lambda: TreeStore().create_session("/repo"))
    assert not thread.is_alive(), "the write stalled behind the frozen writer"
    error = outcome.get("error")
    assert isinstance(error, exceptions.DatabaseBusy), outcome
    assert "WRITE_QUEUE_TIMEOUT" in str(error)


@pytest.fixture
def token_key(transactional_db: None) -> str:
    # Made before the holder freezes the database (fixtures run in argument order).
    user = get_user_model().objects.create_user("queue-user", password="pw-queue-123")
    return str(Token.objects.create(user=user).key)


@override_settings(AGENTSTORE={"WRITE_QUEUE_TIMEOUT": 0.5})
def test_api_answers_503_database_busy_past_the_queue_deadline(
    token_key: str, frozen_holder: subprocess.Popen[str]
) -> None:
    def post() -> Any:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {token_key}")
        return client.post("/api/v1/sessions", {"cwd": "/repo"}, format="json")

    thread, outcome = _in_thread(post)
    assert not thread.is_alive(), "the request stalled behind the frozen writer"
    response = outcome["value"]
    assert response.status_code == 503, response.content
    body = response.json()
    assert body["error"]["code"] == "database_busy"
    assert set(body["error"]) == {"code", "message", "details"}
    assert response["Retry-After"]


def test_writes_go_on_once_the_frozen_writer_resumes(
    frozen_holder: subprocess.Popen[str],
) -> None:
    # An abandoned wait must not keep the queue: after a deadline passes and
    # the holder resumes and finishes, the next write goes through.
    with override_settings(AGENTSTORE={"WRITE_QUEUE_TIMEOUT": 0.3}):
        thread, outcome = _in_thread(lambda: TreeStore().create_session("/repo"))
        assert isinstance(outcome.get("error"), exceptions.DatabaseBusy), outcome
    os.kill(frozen_holder.pid, signal.SIGCONT)
    frozen_holder.kill()
    frozen_holder.wait(GIVE_UP)
    thread, outcome = _in_thread(lambda: TreeStore().create_session("/repo"))
    assert not thread.is_alive()
    assert "error" not in outcome, outcome
    assert TreeStore().get_session(outcome["value"].id) is not None
