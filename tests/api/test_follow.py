"""Live follow over a real server process: Server-Sent Events, resume, end on delete.

The server runs as its own OS process on the test database (``test_database_url``),
once as Django's dev server (WSGI, a thread per request) and once under uvicorn
(ASGI, the async generator). One client follows while another appends over HTTP.
"""

from __future__ import annotations

import http.client
import json
import os
import queue
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

from agentstore.stores import TreeStore
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.slow

API = "/api/v1"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_command(kind: str, port: int) -> list[str]:
    if kind == "runserver":
        return [sys.executable, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"]
    return [
        sys.executable,
        "-m",
        "uvicorn",
        "project.asgi:application",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--no-access-log",
    ]


@pytest.fixture(params=["runserver", "uvicorn"])
def server(request: Any, test_database_url: str) -> Iterator[int]:
    port = free_port()
    env = {
        **os.environ,
        "DATABASE_URL": test_database_url,
        "DJANGO_SETTINGS_MODULE": "project.settings",
    }
    proc = subprocess.Popen(
        server_command(request.param, port),
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
                conn.request("GET", f"{API}/sessions")
                conn.getresponse().read()
                conn.close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    err = proc.stderr.read().decode() if proc.stderr else ""
                    raise RuntimeError(f"server did not start: {err[-2000:]}") from None
                time.sleep(0.2)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Follower:
    """Reads one SSE stream in a thread and queues its events as dicts."""

    def __init__(self, port: int, token: str, session_id: str, last_event_id: str = "") -> None:
        self.events: queue.Queue[dict[str, str]] = queue.Queue()
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        headers = {"Authorization": f"Token {token}", "Accept": "text/event-stream"}
        if last_event_id:
            headers["Last-Event-ID"] = last_event_id
        self.conn.request("GET", f"{API}/sessions/{session_id}/follow", headers=headers)
        self.response = self.conn.getresponse()
        assert self.response.status == 200
        assert self.response.getheader("Content-Type", "").startswith("text/event-stream")
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        event: dict[str, str] = {}
        try:
            while True:
                line = self.response.readline()
                if not line:
                    break
                text = line.decode().rstrip("\r\n")
                if not text:
                    if "data" in event:
                        self.events.put(event)
                    event = {}
                elif not text.startswith(":"):
                    field, _, value = text.partition(":")
                    event[field] = value.removeprefix(" ")
        except (OSError, AttributeError, ValueError):
            pass  # the test closed the connection under the reader
        self.events.put({"event": "closed"})

    def take(self, count: int, timeout: float = 20) -> list[dict[str, str]]:
        got = []
        deadline = time.monotonic() + timeout
        while len(got) < count:
            got.append(self.events.get(timeout=max(0.1, deadline - time.monotonic())))
        return got

    def close(self) -> None:
        self.conn.close()


def post_message(port: int, token: str, session_id: str, content: str) -> dict[str, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    body = json.dumps({"message": {"role": "user", "content": content}})
    conn.request(
        "POST",
        f"{API}/sessions/{session_id}/append/message",
        body=body,
        headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
    )
    response = conn.getresponse()
    data = json.loads(response.read())
    conn.close()
    assert response.status == 201, data
    return data  # type: ignore[no-any-return]


def delete_session(port: int, token: str, session_id: str) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request(
        "DELETE", f"{API}/sessions/{session_id}", headers={"Authorization": f"Token {token}"}
    )
    status = conn.getresponse().status
    conn.close()
    return status


def test_follow_receives_appends_in_order_resumes_and_ends_on_delete(server: int) -> None:
    user = get_user_model().objects.create_user("follower", password="pw-follow-123")
    token = Token.objects.create(user=user).key
    session = TreeStore().create_session("/follow", owner=user)
    before = post_message(server, token, session.id, "before follow")

    follower = Follower(server, token, session.id)
    # The stream starts from the beginning: what was there already comes first.
    first = follower.take(1)[0]
    assert (first["event"], first["id"]) == ("entry", "1")
    assert json.loads(first["data"])["id"] == before["id"]

    sent = [post_message(server, token, session.id, f"live {i}") for i in range(5)]
    live = follower.take(5)
    assert [e["id"] for e in live] == ["2", "3", "4", "5", "6"]
    assert [json.loads(e["data"])["message"]["content"] for e in live] == [
        f"live {i}" for i in range(5)
    ]
    assert [json.loads(e["data"])["id"] for e in live] == [e["id"] for e in sent]
    follower.close()

    # Appends while nobody follows, then resume from the last event seen.
    missed = [post_message(server, token, session.id, f"missed {i}") for i in range(3)]
    resumed = Follower(server, token, session.id, last_event_id=live[-1]["id"])
    again = resumed.take(3)
    assert [e["id"] for e in again] == ["7", "8", "9"]
    assert [json.loads(e["data"])["id"] for e in again] == [e["id"] for e in missed]
    post_message(server, token, session.id, "after resume")
    assert resumed.take(1)[0]["id"] == "10"

    assert delete_session(server, token, session.id) == 204
    end = resumed.take(2)
    assert end[0]["event"] == "deleted"
    assert end[1]["event"] == "closed"
    resumed.close()


def test_follow_someone_elses_session_is_404(server: int) -> None:
    owner = get_user_model().objects.create_user("owner", password="pw-owner-123")
    other = get_user_model().objects.create_user("other", password="pw-other-123")
    token = Token.objects.create(user=other).key
    session = TreeStore().create_session("/private", owner=owner)
    conn = http.client.HTTPConnection("127.0.0.1", server, timeout=30)
    conn.request(
        "GET",
        f"{API}/sessions/{session.id}/follow",
        headers={"Authorization": f"Token {token}", "Accept": "text/event-stream"},
    )
    response = conn.getresponse()
    body = json.loads(response.read())
    conn.close()
    assert response.status == 404
    assert body["error"]["code"] == "no_session"
