"""Two API servers and two task workers on one PostgreSQL, as two hosts would run them.

docs/operations.md, "Scaling out" (issue 21, item 3). Server A is uvicorn
(ASGI) on Django's connection pool; server B is gunicorn (WSGI, gthread) on
ordinary persistent connections; the workers are ``manage.py agentstore
worker`` processes. Nothing is shared between them but the database: every
"seen through B" below crossed processes through PostgreSQL (and its NOTIFY).

* a client appends through A while another follows through B and receives
  every entry once, in order;
* a hold on a session is seen through both servers, and appends through
  either are refused (423) until it is released; a task claimed (leased)
  through A is refused through B (409);
* a task enqueued through A is run by one of the workers;
* SIGKILL of A while a client appends through it loses no acknowledged write.

The servers start with the ready handshake of ``tests/processes.py``
(``tests/workers/server.py`` binds its socket before announcing ready); the
workers say ``ready`` on stderr once registered. No sleep is a start barrier.
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from queue import Empty, Queue
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

from agentstore.models import Entry
from agentstore.stores import LogStore, TreeStore
from tests.api.test_follow import API, Follower, post_message
from tests.conftest import REPO_ROOT
from tests.processes import Launcher

pytestmark = [
    pytest.mark.postgres_only,
    pytest.mark.slow,
    pytest.mark.django_db(transaction=True),
]

SETTINGS = "tests.workers.multiserver_settings"
#: Bounds on waits that must end (never timing assertions).
DEADLINE = 60.0


def call(port: int, token: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Authorization": f"Token {token}"}
    payload = None
    if body is not None:
        payload = json.dumps(body)
        headers["Content-Type"] = "application/json"
    try:
        conn.request(method, f"{API}{path}", body=payload, headers=headers)
        response = conn.getresponse()
        raw = response.read()
        return response.status, json.loads(raw) if raw else None
    finally:
        conn.close()


class Workers:
    """``manage.py agentstore worker`` processes; started once each said ``ready``."""

    def __init__(self, count: int, env: dict[str, str]) -> None:
        self.procs: list[subprocess.Popen[str]] = []
        ready: Queue[str] = Queue()
        for _ in range(count):
            proc = subprocess.Popen(
                [sys.executable, "manage.py", "agentstore", "worker", "--lease", "5"],
                cwd=REPO_ROOT,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            self.procs.append(proc)
            threading.Thread(target=self._drain, args=(proc, ready), daemon=True).start()
        self.ids = set()
        for _ in range(count):
            try:
                self.ids.add(ready.get(timeout=180))
            except Empty:
                raise AssertionError("a worker never said ready") from None

    @staticmethod
    def _drain(proc: subprocess.Popen[str], ready: Queue[str]) -> None:
        assert proc.stderr is not None
        for line in proc.stderr:  # drained to the end so a worker never blocks on it
            if line.startswith("ready "):
                ready.put(line.split()[1])

    def stop(self) -> None:
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture
def cluster(test_database_url: str) -> Iterator[dict[str, Any]]:
    env = {"DJANGO_SETTINGS_MODULE": SETTINGS}
    pooled = f"{test_database_url}?pool_min_size=1&pool_max_size=4"
    with Launcher(test_database_url, env=env) as launcher:
        a = launcher.spawn(
            "-m", "tests.workers.server", "--kind", "uvicorn", "--database-url", pooled
        )
        b = launcher.spawn(
            "-m", "tests.workers.server", "--kind", "gunicorn", "--database-url", test_database_url
        )
        ports = {"a": launcher.read_line(a)["port"], "b": launcher.read_line(b)["port"]}
        launcher.release()
        workers = Workers(2, {**launcher.env})
        try:
            yield {"ports": ports, "a": a, "workers": workers}
        finally:
            workers.stop()


def test_two_servers_two_workers_one_database(cluster: dict[str, Any]) -> None:
    a, b = cluster["ports"]["a"], cluster["ports"]["b"]
    user = get_user_model().objects.create_user("ops", password="pw-ops-12345", is_staff=True)
    token = Token.objects.create(user=user).key

    # -- follow through B what is appended through A: every entry once, in order.
    session = TreeStore().create_session("/multi", owner=user)
    follower = Follower(b, token, session.id)
    sent = [post_message(a, token, session.id, f"m{i}")["id"] for i in range(20)]
    got = follower.take(20, timeout=DEADLINE)
    assert [json.loads(e["data"])["id"] for e in got] == sent
    assert [int(e["id"]) for e in got] == list(range(1, 21))
    follower.close()

    # -- a hold is seen, and refused, through both servers.
    holder = LogStore()
    log_sid = holder.create({"cwd": "/multi/log"}, owner=user).id  # creating holds it
    for port in (a, b):
        status, body = call(port, token, "GET", f"/sessions/{log_sid}/hold")
        assert (status, body["held"], body["pid"]) == (200, True, os.getpid())
        entry = {"entry": {"type": "config", "model": f"m-{port}"}}
        status, body = call(port, token, "POST", f"/log-sessions/{log_sid}/entries", entry)
        assert status == 423, body
    holder.close()
    status, body = call(b, token, "POST", f"/log-sessions/{log_sid}/entries", entry)
    assert status == 201, body

    # -- a lease taken through A is refused through B.
    status, task = call(
        a, token, "POST", "/tasks", {"kind": "manual", "owner_session_id": session.id}
    )
    assert status == 201, task
    lease = {"lease_owner": "client-a", "lease_seconds": 60}
    status, body = call(a, token, "POST", f"/tasks/{task['id']}/claim", lease)
    assert status == 200, body
    status, body = call(
        b, token, "POST", f"/tasks/{task['id']}/claim", {**lease, "lease_owner": "b"}
    )
    assert status == 409, body
    assert body["error"]["code"] == "task_conflict"
    assert body["error"]["details"]["task"]["lease_owner"] == "client-a"

    # -- a task enqueued through A is run by a worker (seen through B).
    status, echo = call(
        a, token, "POST", "/tasks", {"kind": "echo", "owner_session_id": session.id}
    )
    assert status == 201, echo
    done = wait_for_state(b, token, echo["id"], "succeeded")
    assert json.loads(done["result"])["worker"] in cluster["workers"].ids

    # -- SIGKILL A while a client appends through it: no acknowledged write is lost,
    # and B goes on serving the same session.
    acknowledged = append_until_killed(a, token, session.id, cluster["a"])
    assert len(acknowledged) >= 5
    stored = set(Entry.objects.filter(session_id=session.id).values_list("entry_id", flat=True))
    assert set(acknowledged) <= stored
    after = post_message(b, token, session.id, "after the kill")
    status, body = call(b, token, "GET", f"/sessions/{session.id}/entries?limit=1000")
    assert (status, body["next"]) == (200, None)
    listed = {e["id"] for e in body["results"]}
    assert set(acknowledged) | {after["id"]} <= listed


def wait_for_state(port: int, token: str, task_id: str, state: str) -> dict[str, Any]:
    done = threading.Event()
    found: dict[str, Any] = {}
    for _ in range(int(DEADLINE * 10)):
        status, body = call(port, token, "GET", f"/tasks/{task_id}")
        assert status == 200, body
        if body["state"] == state:
            return body  # type: ignore[no-any-return]
        found = body
        done.wait(0.1)  # polling a result, not a start barrier
    raise AssertionError(f"task never reached {state}: {found}")


def append_until_killed(
    port: int, token: str, session_id: str, server: subprocess.Popen[str]
) -> list[str]:
    """Three clients append through ``port``; ``server`` is SIGKILLed mid-stream.

    Each client grows its own branch (``parent_id`` is its previous entry).
    Returns the ids of the appends answered 201 (acknowledged) before it died.
    Any other answer fails the test: a killed server answers nothing, so
    only a broken connection may end a client.
    """
    acknowledged: list[str] = []
    refused: list[tuple[int, Any]] = []
    changed = threading.Condition()

    def client(n: int) -> None:
        parent: str | None = None
        for i in range(10_000):
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                message = {"role": "user", "content": f"c{n}-{i}"}
                conn.request(
                    "POST",
                    f"{API}/sessions/{session_id}/append/message",
                    body=json.dumps({"parent_id": parent, "message": message}),
                    headers={
                        "Authorization": f"Token {token}",
                        "Content-Type": "application/json",
                    },
                )
                response = conn.getresponse()
                data = json.loads(response.read())
                conn.close()
            except (OSError, http.client.HTTPException, ValueError):
                return  # the server is gone
            with changed:
                if response.status != 201:
                    refused.append((response.status, data))
                    changed.notify_all()
                    return
                parent = data["id"]
                acknowledged.append(data["id"])
                changed.notify_all()

    clients = [threading.Thread(target=client, args=(n,), daemon=True) for n in range(3)]
    for thread in clients:
        thread.start()
    with changed:
        assert changed.wait_for(lambda: refused or len(acknowledged) >= 15, timeout=DEADLINE)
        assert not refused, refused
    server.kill()  # SIGKILL while the clients' requests are in flight
    server.wait(timeout=30)
    for thread in clients:
        thread.join(timeout=DEADLINE)
    with changed:
        assert not refused, refused
        return list(acknowledged)
