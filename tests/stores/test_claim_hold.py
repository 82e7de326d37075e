"""``SessionStore.claim_hold`` / ``release_hold``: a hold under a token of the caller's own.

A run holds its session under ``run:<id>`` so every attempt of the run, on any
worker, holds it too. The rules are the stores' (a live holder refuses, a dead
one on this host is taken over); a free session or one already held under the
same token is one statement.
"""

from __future__ import annotations

import os
import socket

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agentstore import exceptions
from agentstore.models import Holder
from agentstore.stores.sessions import SessionStore

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def sid() -> str:
    return SessionStore().create("log", session_id="held-1").id


def test_a_free_session_is_held_in_one_statement(sid: str) -> None:
    store = SessionStore()
    with CaptureQueriesContext(connection) as seen:
        assert store.claim_hold(sid, "run:a") is None
    writes = [q["sql"] for q in seen if not q["sql"].startswith(("BEGIN", "COMMIT"))]
    assert len(writes) == 1, writes
    holder = Holder.objects.get(session_id=sid)
    assert (holder.token, holder.pid, holder.host) == ("run:a", os.getpid(), socket.gethostname())


def test_the_same_token_holds_it_again_and_becomes_the_holder(sid: str) -> None:
    store = SessionStore()
    store.claim_hold(sid, "run:a")
    Holder.objects.filter(session_id=sid).update(pid=999_999_999, host="gone-host")
    assert store.claim_hold(sid, "run:a") is None  # a rerun elsewhere takes it over
    holder = Holder.objects.get(session_id=sid)
    assert (holder.pid, holder.host) == (os.getpid(), socket.gethostname())


def test_another_token_is_refused_while_the_holder_lives(sid: str) -> None:
    store = SessionStore()
    store.claim_hold(sid, "run:a")
    with pytest.raises(exceptions.SessionLocked):
        store.claim_hold(sid, "run:b")
    Holder.objects.filter(session_id=sid).update(host="another-host")  # liveness unknown
    with pytest.raises(exceptions.SessionLocked):
        store.claim_hold(sid, "run:b")


def test_a_dead_holder_on_this_host_is_taken_over(sid: str) -> None:
    store = SessionStore()
    store.claim_hold(sid, "run:a")
    Holder.objects.filter(session_id=sid).update(pid=999_999_999)  # no such process
    dead = store.claim_hold(sid, "run:b")
    assert dead is not None and dead.pid == 999_999_999
    assert Holder.objects.get(session_id=sid).token == "run:b"


def test_release_drops_only_its_own_hold(sid: str) -> None:
    store = SessionStore()
    store.claim_hold(sid, "run:a")
    assert store.release_hold(sid, "run:b") is False
    assert store.release_hold(sid, "run:a") is True
    assert not Holder.objects.filter(session_id=sid).exists()


def test_no_session_no_hold() -> None:
    with pytest.raises(exceptions.NoSession):
        SessionStore().claim_hold("never-made", "run:a")
    assert not Holder.objects.exists()
    with pytest.raises(exceptions.ValidationError):
        SessionStore().claim_hold("a\x00b", "run:a")
