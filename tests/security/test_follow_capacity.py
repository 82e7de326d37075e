"""The follow cap of a process follows its server's threads (``agentstore.serving``), in process.

The real-server half (gunicorn gthread, streams held open, an ordinary request
still answered, a cap above the threads refusing to start) is
``test_follow_capacity_server.py``. Here: the rules of ``derive_follow_cap``
for every kind of server and setting, the start-up check, a bad setting, and
what a client of a ``sync`` worker (one thread: no stream fits) gets.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from agentstore import serving
from agentstore.serving import DEFAULT_CAP, ThreadServer, check_follow_cap, derive_follow_cap
from tests.api.conftest import API, assert_error, create_session

GTHREAD_8 = ThreadServer("gunicorn gthread worker", 8)
SYNC = ThreadServer("gunicorn sync worker", 1)


@pytest.mark.parametrize(
    ("configured", "server", "limit"),
    [
        (None, None, DEFAULT_CAP),  # ASGI or an unknown server: the default
        (0, None, None),  # 0 is "no cap" where no thread is held
        (40, None, 40),
        (None, GTHREAD_8, 4),  # derived: half the threads
        (7, GTHREAD_8, 7),  # at most threads - 1 is taken as given
        (16, GTHREAD_8, 7),  # above it: lowered (and refused at start-up)
        (0, GTHREAD_8, 7),  # "no cap" on a thread-bounded worker: the same
        (None, SYNC, 0),  # one thread: no stream at all
        (3, SYNC, 0),
        (None, ThreadServer("gunicorn gthread worker", 2), 1),
        (None, ThreadServer("gunicorn gthread worker", 3), 1),
    ],
)
def test_the_cap_never_reaches_a_thread_bounded_servers_threads(
    configured: int | None, server: ThreadServer | None, limit: int | None
) -> None:
    cap = derive_follow_cap(configured, server)
    assert cap.limit == limit
    if server is not None:
        assert cap.limit is not None and cap.limit <= server.threads - 1


@pytest.mark.parametrize("configured", [0, 8, 16])
def test_start_up_refuses_a_cap_the_threads_cannot_carry(
    monkeypatch: pytest.MonkeyPatch, configured: int
) -> None:
    monkeypatch.setattr(serving, "thread_server", lambda: GTHREAD_8)
    with (
        override_settings(AGENTSTORE={"FOLLOW_MAX_PER_PROCESS": configured}),
        pytest.raises(ImproperlyConfigured, match="at most 7, or leave it unset to derive 4"),
    ):
        check_follow_cap()


def test_start_up_accepts_a_cap_that_leaves_a_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(serving, "thread_server", lambda: GTHREAD_8)
    for configured in (None, 1, 7):
        with override_settings(AGENTSTORE={"FOLLOW_MAX_PER_PROCESS": configured}):
            check_follow_cap()
    # Outside a thread-bounded server any whole number is fine.
    monkeypatch.setattr(serving, "thread_server", lambda: None)
    with override_settings(AGENTSTORE={"FOLLOW_MAX_PER_PROCESS": 1000}):
        check_follow_cap()


@pytest.mark.parametrize("value", [-1, "16", 1e999, True, 2.5])
def test_a_cap_that_is_not_a_whole_number_is_refused(value: Any) -> None:
    with (
        override_settings(AGENTSTORE={"FOLLOW_MAX_PER_PROCESS": value}),
        pytest.raises(ImproperlyConfigured, match="FOLLOW_MAX_PER_PROCESS"),
    ):
        check_follow_cap()


def test_no_gunicorn_worker_is_found_outside_gunicorn() -> None:
    assert serving.thread_server() is None


@pytest.mark.django_db(transaction=True)
def test_a_sync_worker_refuses_every_stream_and_says_where_to_follow(
    api: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(serving, "thread_server", lambda: SYNC)
    sid = create_session(api)["id"]
    response = api.get(f"{API}/sessions/{sid}/follow", HTTP_ACCEPT="text/event-stream")
    error = assert_error(response, 503, "follow_capacity")
    assert response["Content-Type"] == "application/json"
    assert response["Retry-After"]
    assert error["details"] == {"limit": 0}
    assert "serves no follow streams" in error["message"]
    assert "ASGI" in error["message"]
    # An ordinary request of the same process is answered.
    assert api.get(f"{API}/sessions/{sid}").status_code == 200
