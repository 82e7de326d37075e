"""Nothing leaks between users (issue 13, items 11–13).

Alice and Bob each use their own token. Whatever Bob sends naming Alice's
objects — a ref name, a parent task, a parent session — must answer exactly as
if her object did not exist, and must not hang his objects under hers.
"""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from agentstore.ids import new_id
from agentstore.models import Session, Task
from tests.api.conftest import API, assert_error, create_session

pytestmark = pytest.mark.django_db


def new_log(client: APIClient) -> str:
    response = client.post(f"{API}/log-sessions", {"header": {}}, format="json")
    assert response.status_code == 201, response.content
    return str(response.json()["id"])


def put_ref(
    client: APIClient, name: str, expected: str | None, new: str | None, reason: str = ""
) -> Any:
    body = {
        "expected": {"session": expected} if expected else None,
        "next": {"session": new} if new else None,
        "reason": reason,
    }
    return client.put(f"{API}/refs/{name}", body, format="json")


# -- 11. the ref log is scoped to what the caller may see -----------------------------------


def test_a_deleted_refs_history_is_not_shown_to_the_next_holder(
    api: APIClient, bob_api: APIClient, staff_api: APIClient
) -> None:
    hers = new_log(api)
    assert put_ref(api, "team/x", None, hers, "alice: private plan").status_code == 200
    assert put_ref(api, "team/x", hers, None, "alice: done").status_code == 204
    his = new_log(bob_api)
    assert put_ref(bob_api, "team/x", None, his, "bob: mine now").status_code == 200

    log = bob_api.get(f"{API}/ref-log/team/x")
    assert log.status_code == 200, log.content
    assert [row["reason"] for row in log.json()["results"]] == ["bob: mine now"]
    assert hers not in log.content.decode() and "alice" not in log.content.decode()
    # Alice no longer sees the ref at all; staff see the whole history.
    assert_error(api.get(f"{API}/ref-log/team/x"), 404, "no_ref")
    everything = staff_api.get(f"{API}/ref-log/team/x").json()
    assert [row["reason"] for row in everything["results"]] == [
        "bob: mine now",
        "alice: done",
        "alice: private plan",
    ]


def test_the_ref_log_keeps_the_callers_own_history(api: APIClient) -> None:
    a, b = new_log(api), new_log(api)
    put_ref(api, "mine", None, a, "one")
    put_ref(api, "mine", a, b, "two")
    log = api.get(f"{API}/ref-log/mine").json()["results"]
    assert [r["reason"] for r in log] == ["two", "one"]


# -- 12. parent_task_id is checked against visibility everywhere ----------------------------


def _create_bodies(owner: str, parent: str) -> dict[str, dict[str, Any]]:
    return {
        "tasks": {"owner_session_id": owner, "kind": "job", "parent_task_id": parent},
        "tool-tasks": {
            "owner_session_id": owner,
            "parent_task_id": parent,
            "invocation_id": f"call-{parent[:8]}",
            "wrapper_call_id": "wrap",
            "cwd": "/w",
            "target_name": "shell",
            "arguments": {},
            "definition": {},
            "timeout_seconds": 60,
        },
        "workflows": {
            "owner_session_id": owner,
            "parent_task_id": parent,
            "name": "wf",
            "source": "run()",
            "source_hash": "h",
        },
        "agent-tasks": {
            "owner_session_id": owner,
            "parent_task_id": parent,
            "agent_name": "general",
            "prompt": "go",
            "depth": 1,
            "cwd": "/w",
        },
    }


@pytest.mark.parametrize("route", ["tasks", "tool-tasks", "workflows", "agent-tasks"])
def test_someone_elses_parent_task_is_a_404_like_a_missing_one(
    api: APIClient, bob_api: APIClient, route: str
) -> None:
    hers = create_session(api)["id"]
    her_task = api.post(f"{API}/tasks", {"owner_session_id": hers, "kind": "job"}, format="json")
    assert her_task.status_code == 201, her_task.content
    his = create_session(bob_api)["id"]

    for parent in (her_task.json()["id"], new_id()):
        body = _create_bodies(his, parent)[route]
        error = assert_error(bob_api.post(f"{API}/{route}", body, format="json"), 404, "no_task")
        assert error["message"] == f"no such task: {parent} (parent_task_id)"
    assert Task.objects.filter(owner_session_id=his).count() == 0

    # His own task is a fine parent.
    own = bob_api.post(f"{API}/tasks", {"owner_session_id": his, "kind": "job"}, format="json")
    body = _create_bodies(his, own.json()["id"])[route]
    made = bob_api.post(f"{API}/{route}", body, format="json")
    assert made.status_code == 201, made.content


def test_deleting_her_session_leaves_his_tasks_alone(api: APIClient, bob_api: APIClient) -> None:
    hers = create_session(api)["id"]
    her_task = api.post(f"{API}/tasks", {"owner_session_id": hers, "kind": "job"}, format="json")
    his = create_session(bob_api)["id"]
    for route, body in _create_bodies(his, her_task.json()["id"]).items():
        bob_api.post(f"{API}/{route}", body, format="json")
    kept = bob_api.post(f"{API}/tasks", {"owner_session_id": his, "kind": "job"}, format="json")
    before = set(Task.objects.filter(owner_session_id=his).values_list("id", flat=True))
    assert api.delete(f"{API}/sessions/{hers}").status_code == 204
    after = set(Task.objects.filter(owner_session_id=his).values_list("id", flat=True))
    assert after == before == {kept.json()["id"]}


# -- 13. refs and parent sessions of another user -------------------------------------------


def test_creating_a_name_someone_else_holds_says_nothing_about_it(
    api: APIClient, bob_api: APIClient
) -> None:
    hers = new_log(api)
    assert put_ref(api, "team/plan", None, hers).status_code == 200
    assert put_ref(api, "CASE/a", None, hers).status_code == 200
    his = new_log(bob_api)

    held = assert_error(put_ref(bob_api, "team/plan", None, his), 400, "ref_name")
    # A name that only clashes with hers (a ref under hers, another case) answers alike.
    under = assert_error(put_ref(bob_api, "team/plan/sub", None, his), 400, "ref_name")
    case = assert_error(put_ref(bob_api, "case/b", None, his), 400, "ref_name")
    for error, name in ((held, "team/plan"), (under, "team/plan/sub"), (case, "case/b")):
        assert error["message"] == f"ref name {name!r} is not available"
        assert error["details"] == {"field": "name", "fields": {"name": [error["message"]]}}
    # Naming her ref as expected is a plain "no such ref", as for a random name.
    stolen = assert_error(put_ref(bob_api, "team/plan", hers, his), 404, "no_ref")
    random = assert_error(put_ref(bob_api, "team/nothing", hers, his), 404, "no_ref")
    assert stolen["message"] == "no such ref: team/plan"
    assert random["message"] == "no such ref: team/nothing"
    assert api.get(f"{API}/refs/team/plan").json()["session"] == hers


def test_a_clash_with_your_own_ref_still_says_which(api: APIClient) -> None:
    mine = new_log(api)
    put_ref(api, "team/plan", None, mine)
    error = assert_error(put_ref(api, "team/plan/sub", None, mine), 400, "ref_name")
    assert "team/plan" in error["message"] and "conflicts" in error["message"]
    moved = assert_error(put_ref(api, "team/plan", None, mine), 409, "ref_moved")
    assert moved["details"]["current"]["session"] == mine


def test_parent_session_must_be_one_you_can_see(api: APIClient, bob_api: APIClient) -> None:
    hers = create_session(api)["id"]
    for parent in (hers, new_id()):
        for kind in ("tree", "loop"):
            response = bob_api.post(
                f"{API}/sessions",
                {"cwd": "/w", "parent_session": parent, "kind": kind},
                format="json",
            )
            error = assert_error(response, 404, "no_session")
            assert error["message"] == f"no such session: {parent} (parent_session)"
    assert not Session.objects.filter(parent_session=hers).exists()
    # Her own session is a fine parent, and the child is listed under it.
    child = create_session(api, parent_session=hers)
    listed = api.get(f"{API}/sessions?parent={hers}").json()
    assert [s["id"] for s in listed["results"]] == [child["id"]]
