"""Live follow is capped: per user, per process, and in duration.

Issue 13, "Bounded work" item 4: under WSGI every follower holds a worker
thread, so ~30 followers took a whole server. Past ``FOLLOW_MAX_PER_USER`` a
user gets ``429 too_many_followers``, past ``FOLLOW_MAX_PER_PROCESS`` anyone
gets ``503 follow_capacity`` (both in the one error shape), closing a stream
gives its slot back, and a stream ends after ``FOLLOW_MAX_SECONDS`` with a
``reconnect`` event whose ``id`` is the last seq, so ``Last-Event-ID`` resumes it.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connections
from django.test import override_settings

from tests.api.conftest import API, append_message, assert_error, create_session

# Closing a response fires request_finished, which closes the database
# connection: that needs real transactions, not the test's wrapping one.
pytestmark = pytest.mark.django_db(transaction=True)

CAPS = {"FOLLOW_MAX_PER_USER": 2, "FOLLOW_MAX_PER_PROCESS": 3, "FOLLOW_MAX_SECONDS": 300}


def follow(client: Any, session_id: str, **headers: str) -> Any:
    return client.get(
        f"{API}/sessions/{session_id}/follow", HTTP_ACCEPT="text/event-stream", **headers
    )


@pytest.fixture
def open_streams() -> Any:
    streams: list[Any] = []
    yield streams
    for response in streams:
        response.close()


@override_settings(AGENTSTORE=CAPS)
def test_followers_are_capped_per_user_then_per_process(
    api: Any, bob_api: Any, staff_api: Any, open_streams: list[Any]
) -> None:
    mine = create_session(api)["id"]
    bobs = create_session(bob_api)["id"]
    for _ in range(2):
        response = follow(api, mine)
        open_streams.append(response)
        assert response.status_code == 200
    error = assert_error(follow(api, mine), 429, "too_many_followers")
    assert error["details"]["limit"] == 2
    assert "FOLLOW_MAX_PER_USER" in error["message"]

    # Bob has his own per-user budget, but the process has one slot left.
    response = follow(bob_api, bobs)
    open_streams.append(response)
    assert response.status_code == 200
    error = assert_error(follow(bob_api, bobs), 503, "follow_capacity")
    assert error["details"]["limit"] == 3

    # Closing a stream (what the server does when a client leaves) frees its slot.
    open_streams.pop(0).close()
    response = follow(bob_api, bobs)
    open_streams.append(response)
    assert response.status_code == 200


@override_settings(AGENTSTORE=CAPS)
def test_a_stream_that_ended_by_itself_frees_its_slot(api: Any, open_streams: list[Any]) -> None:
    sid = create_session(api)["id"]
    with override_settings(AGENTSTORE={**CAPS, "FOLLOW_MAX_SECONDS": 0.2}):
        for _ in range(3):  # more than the per-user cap, one after another
            response = follow(api, sid)
            assert response.status_code == 200
            chunks = _drain(response)
            assert b"event: reconnect" in chunks[-1]


def _drain(response: Any, give_up: float = 30.0) -> list[bytes]:
    """Read a streaming response to its end in a thread, so a stream that never ends fails."""
    chunks: list[bytes] = []

    def read() -> None:
        try:
            chunks.extend(response.streaming_content)
            response.close()
        finally:
            connections.close_all()  # this thread's own connection

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    thread.join(give_up)
    assert not thread.is_alive(), "the follow stream did not end at FOLLOW_MAX_SECONDS"
    return chunks


@override_settings(AGENTSTORE={**CAPS, "FOLLOW_MAX_SECONDS": 0.2})
def test_streams_end_at_the_maximum_duration_with_a_resumable_id(api: Any) -> None:
    sid = create_session(api)["id"]
    first = append_message(api, sid, "one")
    second = append_message(api, sid, "two", parent_id=first["id"])
    chunks = _drain(follow(api, sid))
    text = b"".join(chunks).decode()
    assert f"id: {second['seq']}\nevent: reconnect" in text
    # Resuming with Last-Event-ID (as EventSource does) sends nothing already seen.
    third = append_message(api, sid, "three", parent_id=second["id"])
    resumed = b"".join(_drain(follow(api, sid, HTTP_LAST_EVENT_ID=str(second["seq"])))).decode()
    assert f"id: {third['seq']}\nevent: entry" in resumed
    assert f"id: {first['seq']}\nevent: entry" not in resumed
    assert "\nevent: entry" not in resumed.split(f"id: {third['seq']}\nevent: entry", 1)[0]
