"""Django's psycopg pool under ASGI: follow streams that end or are dropped leak no connection.

docs/operations.md, "Scaling out" (issue 21, item 2). A uvicorn server (its own
OS process) runs the API on the test database, once with Django's connection
pool (``?pool_max_size=4``) and once without one (the demo project's ASGI entry
point then closes each request's connection when it ends:
``project.database_url.for_asgi``). 200 follow streams are opened in sessions
of 20, ``PARALLEL`` sessions at a time: in each, half the clients hang up after
their first event, and the session is then deleted through the API, which ends
the other half's streams (``event: deleted``). Afterwards the server's
connections — counted in ``pg_stat_activity`` by the ``application_name`` the
server's URL sets — are no more than at the start: its pool (or nothing) plus
its one LISTEN connection (agentstore/notify.py), however many streams came
and went.
"""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from rest_framework.authtoken.models import Token

from tests.api.test_follow import API, Follower, delete_session, post_message
from tests.processes import Launcher

pytestmark = [
    pytest.mark.postgres_only,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
]

#: Streams in all, per session, and sessions followed at once (40 concurrent streams).
STREAMS, BATCH, PARALLEL = 200, 20, 2
POOL_MAX = 4
DEADLINE = 60.0


def server_connections(name: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND application_name = %s",
            [name],
        )
        return int(cursor.fetchone()[0])


def settled(name: str, limit: int) -> int:
    """The server's connection count once it is at most ``limit`` (or at the deadline).

    A server closes a dropped stream's resources when it notices the client
    left, a moment after the client did: this looks again until then.
    """
    pause = threading.Event()
    count = server_connections(name)
    for _ in range(int(DEADLINE * 10)):
        if count <= limit:
            break
        pause.wait(0.1)  # waiting for a condition, not a start barrier
        count = server_connections(name)
    return count


@pytest.fixture(params=["pooled", "unpooled"])
def server(request: Any, test_database_url: str) -> Iterator[tuple[int, str, str]]:
    name = f"agentstore-leak-{request.param}"
    query = f"application_name={name}"
    if request.param == "pooled":
        query += f"&pool_min_size=1&pool_max_size={POOL_MAX}"
    env = {"DJANGO_SETTINGS_MODULE": "tests.workers.pooling_settings"}
    with Launcher(test_database_url, env=env) as launcher:
        proc = launcher.spawn(
            "-m",
            "tests.workers.server",
            "--kind",
            "uvicorn",
            "--database-url",
            f"{test_database_url}?{query}",
        )
        port = launcher.read_line(proc)["port"]
        launcher.release()
        yield port, name, request.param


def test_200_follow_streams_leave_no_connection_behind(server: tuple[int, str, str]) -> None:
    port, name, kind = server
    user = get_user_model().objects.create_user("streams", password="pw-streams-123")
    token = Token.objects.create(user=user).key

    def batch(n: int) -> None:
        sid = create_session(port, token, f"/leak/{n}")
        post_message(port, token, sid, "first")
        followers = [Follower(port, token, sid) for _ in range(BATCH)]
        for follower in followers:
            assert follower.take(1, timeout=DEADLINE)[0]["event"] == "entry"
        for follower in followers[: BATCH // 2]:
            follower.close()  # the client hangs up
        assert delete_session(port, token, sid) == 204
        for follower in followers[BATCH // 2 :]:
            end = follower.take(2, timeout=DEADLINE)
            assert [e["event"] for e in end] == ["deleted", "closed"]
            follower.close()

    batch(0)  # warm up: the pool and the listener
    limit = POOL_MAX + 1 if kind == "pooled" else 2
    before = settled(name, limit)
    with ThreadPoolExecutor(max_workers=PARALLEL) as sessions:
        for done in [sessions.submit(batch, n) for n in range(1, STREAMS // BATCH)]:
            done.result()  # a failed batch fails the test
    after = settled(name, before)
    assert after <= before
    assert 1 <= after <= limit


def create_session(port: int, token: str, cwd: str) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request(
        "POST",
        f"{API}/sessions",
        body=json.dumps({"cwd": cwd}),
        headers={"Authorization": f"Token {token}", "Content-Type": "application/json"},
    )
    response = conn.getresponse()
    data = json.loads(response.read())
    conn.close()
    assert response.status == 201, data
    return str(data["id"])
