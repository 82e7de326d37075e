"""Follow streams never take every thread of a WSGI server (gunicorn gthread, real processes).

Under WSGI a follow stream holds a server thread for its whole life. With the
old fixed default (16 followers a process) a gunicorn ``gthread`` worker with
8 threads gave every thread to followers and stopped answering anything else.
The per-process cap now follows the worker's threads (``agentstore.serving``):
unset, it is half of them; set above ``threads - 1`` the worker refuses to
start; and where the app was loaded before the worker existed (``--preload``)
the cap is lowered to ``threads - 1``. Each test serves the demo project
with gunicorn (one worker, 4 threads) on the test database, opens more streams
than the cap, and shows that an ordinary request is still answered.
"""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

from agentstore.stores import TreeStore
from tests.processes import API, serve

pytestmark = pytest.mark.slow

THREADS = 4
OVERCAP = "tests.security.follow_overcap_settings"


@pytest.fixture
def follower(transactional_db: None) -> tuple[str, str]:
    """A user's API token and one of their sessions (4 streams fit the per-user cap)."""
    user = get_user_model().objects.create_user("follower", password="pw-follow-123")
    token = Token.objects.create(user=user).key
    return token, TreeStore().create_session("/repo", owner=user).id


def open_follow(stack: ExitStack, port: int, token: str, sid: str) -> Any:
    """Open a follow stream (kept open until ``stack`` closes); return its response."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    stack.callback(conn.close)
    conn.request(
        "GET",
        f"{API}/sessions/{sid}/follow",
        headers={"Authorization": f"Token {token}", "Accept": "text/event-stream"},
    )
    response = conn.getresponse()
    stack.callback(response.close)
    if response.status == 200:
        response.readline()  # the stream is open on the server: it holds its thread
    return response


def ordinary_request(port: int, token: str) -> int:
    """GET /sessions: answered only if a thread is free (a generous bound, not a timing)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
    try:
        conn.request("GET", f"{API}/sessions", headers={"Authorization": f"Token {token}"})
        return conn.getresponse().status
    finally:
        conn.close()


@contextmanager
def more_streams_than_threads(port: int, token: str, sid: str) -> Iterator[list[Any]]:
    """Open ``THREADS + 2`` follow streams; the accepted ones stay open until the block ends."""
    with ExitStack() as stack:
        yield [open_follow(stack, port, token, sid) for _ in range(THREADS + 2)]


def assert_refused(response: Any, limit: int) -> None:
    assert response.status == 503
    assert response.getheader("Content-Type") == "application/json"
    assert response.getheader("Retry-After")
    error = json.loads(response.read())["error"]
    assert error["code"] == "follow_capacity"
    assert error["details"] == {"limit": limit}
    assert "FOLLOW_MAX_PER_PROCESS" in error["message"]


def test_the_derived_cap_leaves_half_the_threads_to_other_requests(
    test_database_url: str, follower: tuple[str, str]
) -> None:
    token, sid = follower
    with (
        serve(test_database_url, "gunicorn", threads=THREADS) as port,
        more_streams_than_threads(port, token, sid) as responses,
    ):
        statuses = [r.status for r in responses]
        assert statuses == [200] * (THREADS // 2) + [503] * (len(statuses) - THREADS // 2)
        for refused in responses[THREADS // 2 :]:
            assert_refused(refused, THREADS // 2)
        # With the streams open, an ordinary request still finds a thread.
        assert ordinary_request(port, token) == 200


def test_a_cap_above_the_threads_refuses_to_start(test_database_url: str) -> None:
    with (
        pytest.raises(RuntimeError) as failed,
        serve(test_database_url, "gunicorn", settings=OVERCAP, threads=THREADS),
    ):
        pass
    message = str(failed.value)
    assert "FOLLOW_MAX_PER_PROCESS'] is 16" in message
    assert f"{THREADS} thread(s)" in message
    assert f"at most {THREADS - 1}" in message
    assert "Worker failed to boot" in message


def test_a_preloaded_app_lowers_a_cap_above_the_threads(
    test_database_url: str, follower: tuple[str, str]
) -> None:
    # --preload loads the app in gunicorn's master, before any worker exists:
    # nothing can be refused at start-up, so the cap is lowered instead.
    token, sid = follower
    with (
        serve(
            test_database_url, "gunicorn", settings=OVERCAP, threads=THREADS, extra=["--preload"]
        ) as port,
        more_streams_than_threads(port, token, sid) as responses,
    ):
        statuses = [r.status for r in responses]
        assert statuses == [200] * (THREADS - 1) + [503] * (len(statuses) - THREADS + 1)
        for refused in responses[THREADS - 1 :]:
            assert_refused(refused, THREADS - 1)
        assert ordinary_request(port, token) == 200
