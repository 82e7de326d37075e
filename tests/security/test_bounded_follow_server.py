"""Follow caps on real servers: a client that leaves gives its slot back (issue 13, item 4).

The server runs as its own OS process on the test database, under Django's dev
server (WSGI, a thread per follower) and under uvicorn (ASGI), with
``FOLLOW_MAX_PER_USER=1`` (``tests/security/follow_settings.py``). A second
stream of the same user is refused with 429 in the error shape; once the first
client disconnects, a new stream is accepted. Under ASGI the disconnect is seen
at once; under WSGI only when the server next writes to the dead socket (an
entry or a keep-alive), so the test appends an entry to make it write.
"""

from __future__ import annotations

import http.client
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

from agentstore.stores import TreeStore
from agentstore.types.tree import MessageEntity
from tests.processes import API, SERVER_KINDS, serve

pytestmark = pytest.mark.slow


@pytest.fixture(params=SERVER_KINDS)
def capped_server(request: Any, test_database_url: str) -> Iterator[int]:
    with serve(test_database_url, request.param, settings="tests.security.follow_settings") as port:
        yield port


def open_follow(port: int, token: str, sid: str) -> tuple[http.client.HTTPConnection, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    conn.request(
        "GET",
        f"{API}/sessions/{sid}/follow",
        headers={"Authorization": f"Token {token}", "Accept": "text/event-stream"},
    )
    return conn, conn.getresponse()


def test_a_second_stream_is_refused_until_the_first_client_leaves(
    capped_server: int, transactional_db: None
) -> None:
    user = get_user_model().objects.create_user("follower", password="pw-follow-123")
    token = Token.objects.create(user=user).key
    store = TreeStore()
    sid = store.create_session("/repo", owner=user).id
    first_conn, first = open_follow(capped_server, token, sid)
    assert first.status == 200
    first.readline()  # the stream is open on the server

    second_conn, second = open_follow(capped_server, token, sid)
    assert second.status == 429
    body = json.loads(second.read())
    assert body["error"]["code"] == "too_many_followers"
    assert body["error"]["details"] == {"limit": 1}
    second_conn.close()

    first.close()  # the client leaves (the response holds the socket too)
    first_conn.close()
    deadline = time.monotonic() + 30
    parent = None
    while True:
        # Under WSGI the server notices the dead socket when it next writes.
        parent = store.append_message(sid, parent, MessageEntity(role="user", content="x")).id
        conn, again = open_follow(capped_server, token, sid)
        status = again.status
        conn.close()
        if status == 200:
            break
        assert status == 429
        assert time.monotonic() < deadline, "the slot of the client that left was never freed"
        time.sleep(0.3)
