"""Live follow over a real server process: Server-Sent Events, resume, end on delete.

The server runs as its own OS process on the test database (``test_database_url``),
once as Django's dev server (WSGI, a thread per request) and once under uvicorn
(ASGI, the async generator). One client follows while another appends over HTTP.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import queue
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

from agentstore.stores import SessionStore, TreeStore
from tests.processes import API, SERVER_KINDS, serve

pytestmark = pytest.mark.slow


@pytest.fixture(params=SERVER_KINDS)
def server(request: Any, test_database_url: str) -> Iterator[int]:
    with serve(test_database_url, request.param) as port:
        yield port


class Follower:
    """Reads one SSE stream in a thread and queues its events as dicts."""

    def __init__(self, port: int, token: str, session_id: str, last_event_id: str = "") -> None:
        self.events: queue.Queue[dict[str, str]] = queue.Queue()
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        headers = {"Authorization": f"Token {token}", "Accept": "text/event-stream"}
        if last_event_id:
            headers["Last-Event-ID"] = last_event_id
        self.conn.request("GET", f"{API}/sessions/{session_id}/follow", headers=headers)
        # Kept for close(): once the response owns the socket the connection may drop it.
        self.sock = self.conn.sock
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
        got: list[dict[str, str]] = []
        deadline = time.monotonic() + timeout
        while len(got) < count:
            got.append(self.events.get(timeout=max(0.1, deadline - time.monotonic())))
        return got

    def close(self) -> None:
        """Hang up now: the server sees the connection end, the reader sees end of stream.

        ``conn.close()`` alone does not: the response's buffered reader keeps
        the socket open, and closing it waits for the reader thread's
        ``readline`` — until the server's next keep-alive (15 s).
        """
        if self.sock is not None:
            with contextlib.suppress(OSError):  # the server hung up first
                self.sock.shutdown(socket.SHUT_RDWR)
        self.thread.join(timeout=30)
        self.conn.close()
        self.response.close()


def post_json(port: int, token: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST ``body`` to ``API + path``; assert 201 and return the JSON answer."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request(
        "POST",
        f"{API}{path}",
        body=json.dumps(body),
        headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
    )
    response = conn.getresponse()
    data = json.loads(response.read())
    conn.close()
    assert response.status == 201, data
    return data  # type: ignore[no-any-return]


def post_message(port: int, token: str, session_id: str, content: str) -> dict[str, Any]:
    message = {"role": "user", "content": content}
    path = f"/sessions/{session_id}/append/message"
    return post_json(port, token, path, {"parent_id": None, "message": message})


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
    # An error before the stream starts is JSON, not a mislabelled event stream.
    assert response.getheader("Content-Type") == "application/json"
    assert set(body["error"]) == {"code", "message", "details"}
    assert session.id in body["error"]["message"]


def post_step(port: int, token: str, session_id: str, content: str) -> None:
    body = {"step_index": 0, "step_type": "user", "content": content}
    post_json(port, token, f"/sessions/{session_id}/steps", body)


def test_follow_a_loop_session_receives_its_steps(server: int) -> None:
    user = get_user_model().objects.create_user("looper", password="pw-loop-123")
    token = Token.objects.create(user=user).key
    sid = SessionStore().create("loop", owner=user).id
    post_step(server, token, sid, "before")
    follower = Follower(server, token, sid)
    first = follower.take(1)[0]
    assert first["event"] == "step"
    assert json.loads(first["data"])["content"] == "before"
    post_step(server, token, sid, "live")
    live = follower.take(1)[0]
    assert (live["event"], json.loads(live["data"])["content"]) == ("step", "live")
    assert int(live["id"]) > int(first["id"])
    follower.close()
