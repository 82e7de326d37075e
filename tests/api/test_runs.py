"""Runs over HTTP: start on a new or your own session, read, list, runners; hostile input."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings
from rest_framework.test import APIClient

from agentstore.models import Session, Task
from agentstore.tasks.worker import TaskWorker
from tests.api.conftest import API, assert_error, create_session
from tests.runs.names import RUNNERS


@pytest.fixture(autouse=True)
def _runners() -> Iterator[None]:
    with override_settings(AGENTSTORE={**settings.AGENTSTORE, "RUNNERS": RUNNERS}):
        yield


def start(client: APIClient, **body: Any) -> Any:
    return client.post(f"{API}/runs", body, format="json")


def test_a_run_started_without_a_session_makes_one_for_the_caller(
    api: APIClient, alice: Any
) -> None:
    response = start(api, runner="echo", input={"text": "hi"}, overrides={"model": "m"})
    assert response.status_code == 201, response.content
    run = response.json()
    assert run["state"] == "queued" and run["input"] == {"text": "hi"} and run["output"] is None
    assert run["overrides"] == {"model": "m"} and run["queue"] == "default"
    session = Session.objects.get(pk=run["session_id"])
    assert session.owner_id == alice.pk  # the caller's, before any worker ran
    assert api.get(f"{API}/sessions/{run['session_id']}").status_code == 200


@pytest.mark.django_db(transaction=True)
def test_read_a_run_once_the_worker_ran_it(api: APIClient) -> None:
    run = start(api, runner="echo", input="hi").json()
    TaskWorker(once=True).run()
    done = api.get(f"{API}/runs/{run['id']}").json()
    assert done["state"] == "succeeded" and done["attempts"] == 1
    assert done["output"] == {"text": "echo hi", "attempt": 1, "overrides": {}}
    listed = api.get(f"{API}/runs?session={run['session_id']}").json()
    assert [r["id"] for r in listed["results"]] == [run["id"]] and listed["count"] == 1


def test_runs_continue_only_your_own_sessions(
    api: APIClient, bob_api: APIClient, staff_api: APIClient
) -> None:
    mine = create_session(api)["id"]
    assert start(api, runner="echo", session_id=mine).status_code == 201
    theirs = start(bob_api, runner="echo", session_id=mine)
    assert_error(theirs, 404, "no_session")
    assert_error(start(api, runner="echo", session_id="never-made"), 404, "no_session")
    assert not Session.objects.filter(pk="never-made").exists()  # no session made under it
    assert start(staff_api, runner="echo", session_id=mine).status_code == 201


def test_someone_elses_run_is_not_there(
    api: APIClient, bob_api: APIClient, staff_api: APIClient
) -> None:
    run = start(api, runner="echo").json()
    assert_error(bob_api.get(f"{API}/runs/{run['id']}"), 404, "no_run")
    assert_error(api.get(f"{API}/runs/01a2524c-0000-7000-8000-000000000000"), 404, "no_run")
    assert bob_api.get(f"{API}/runs").json()["results"] == []
    assert_error(bob_api.get(f"{API}/runs?session={run['session_id']}"), 404, "no_session")
    assert [r["id"] for r in api.get(f"{API}/runs").json()["results"]] == [run["id"]]
    assert staff_api.get(f"{API}/runs/{run['id']}").status_code == 200
    task = Task.objects.create(
        id="01a2524c-0000-7000-8000-000000000001",
        kind="job",
        state="queued",
        owner_session_id=run["session_id"],
        created_at=Task.objects.get(pk=run["id"]).created_at,
        updated_at=Task.objects.get(pk=run["id"]).updated_at,
    )
    assert_error(api.get(f"{API}/runs/{task.id}"), 404, "no_run")  # a task, not a run


def test_the_runners_a_run_may_name(api: APIClient, anon: APIClient) -> None:
    assert api.get(f"{API}/runs/runners").json() == sorted(RUNNERS)
    assert anon.get(f"{API}/runs/runners").status_code == 401
    assert anon.post(f"{API}/runs", {"runner": "echo"}, format="json").status_code == 401


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"runner": "nope"}, "runner"),
        ({}, "runner"),
        ({"runner": ""}, "runner"),
        ({"runner": 5}, "runner"),
        ({"runner": "a\u0000"}, "runner"),
        ({"runner": "x" * 65}, "runner"),
        ({"runner": "echo", "input": "a\u0000"}, "input"),
        ({"runner": "echo", "overrides": []}, "overrides"),
        ({"runner": "echo", "overrides": "model"}, "overrides"),
        ({"runner": "echo", "priority": 1000}, "priority"),
        ({"runner": "echo", "priority": True}, "priority"),
        ({"runner": "echo", "max_attempts": 0}, "max_attempts"),
        ({"runner": "echo", "queue": "a/b"}, "task.queue_name"),
        ({"runner": "echo", "session_id": "x" * 256}, "session_id"),
        ({"runner": "echo", "colour": "red"}, "colour"),
    ],
)
def test_bad_bodies_are_400_and_write_nothing(
    api: APIClient, body: dict[str, Any], field: str
) -> None:
    before = (Session.objects.count(), Task.objects.count())
    error = assert_error(start(api, **body), 400, "validation_error")
    assert error["details"]["field"] == field, error
    assert (Session.objects.count(), Task.objects.count()) == before


def test_hostile_raw_bodies(api: APIClient) -> None:
    before = Task.objects.count()
    for raw in [
        b'{"runner": "echo", "input": 1e999}',
        b'{"runner": "echo", "input": ' + b"[" * 5000 + b"]" * 5000 + b"}",
        b"\xff\xfe",
        b'{"runner": "echo", "input": "' + b"x" * 1_100_000 + b'"}',
    ]:
        response = api.generic("POST", f"{API}/runs", raw, content_type="application/json")
        assert 400 <= response.status_code < 500, (raw[:40], response.content[:200])
        assert set(response.json()) == {"error"}
    surrogate = b'{"runner": "echo", "input": {"k\\ud800": 1}}'
    response = api.generic("POST", f"{API}/runs", surrogate, content_type="application/json")
    assert_error(response, 400, "validation_error")
    response = api.post(f"{API}/runs", {"runner": "echo"}, format="multipart")
    assert response.status_code in (400, 415)
    assert Task.objects.count() == before


@pytest.mark.django_db(transaction=True)
def test_identical_requests_racing_each_start_their_own_run(api: APIClient, alice: Any) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connections

    from tests.api.conftest import token_client

    session = create_session(api)["id"]

    def one(_: int) -> int:
        try:
            return int(start(token_client(alice), runner="echo", session_id=session).status_code)
        finally:
            connections.close_all()

    with ThreadPoolExecutor(4) as pool:
        codes = list(pool.map(one, range(8)))
    assert codes == [201] * 8
    assert Task.objects.filter(owner_session_id=session, kind="run").count() == 8


@pytest.mark.django_db(transaction=True)
def test_cancel_a_run_over_http(api: APIClient, bob_api: APIClient) -> None:
    run = start(api, runner="say", input="never").json()
    assert_error(bob_api.post(f"{API}/runs/{run['id']}/cancel"), 404, "no_run")
    canceled = api.post(f"{API}/runs/{run['id']}/cancel")
    assert canceled.status_code == 200 and canceled.json()["state"] == "canceled"
    assert api.post(f"{API}/runs/{run['id']}/cancel").json()["state"] == "canceled"  # as is
    done = start(api, runner="echo").json()
    TaskWorker(once=True).run()
    error = assert_error(api.post(f"{API}/runs/{done['id']}/cancel"), 409, "task_conflict")
    assert error["details"]["run"]["state"] == "succeeded"
    assert_error(api.post(f"{API}/runs/nope/cancel"), 404, "no_run")


def test_a_second_run_on_a_busy_session(api: APIClient) -> None:
    first = start(api, runner="say", input="first").json()
    sid = first["session_id"]
    busy = start(api, runner="say", input="second", session_id=sid, if_busy="reject")
    error = assert_error(busy, 409, "session_busy")
    assert first["id"] in error["message"]
    after = start(api, runner="say", input="third", session_id=sid, if_busy="interrupt")
    assert after.status_code == 201
    assert api.get(f"{API}/runs/{first['id']}").json()["state"] == "canceled"
    assert_error(start(api, runner="say", if_busy="later"), 400, "validation_error")
