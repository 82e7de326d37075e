"""One API contract (issue 17): what a client author can rely on across every endpoint.

Explicit parents, strict input types, ``null`` for absent values, a ``no_*`` code per
resource and one ``wrong_session_kind``, one paged envelope for every collection, one
rule for replays, and the obvious default event of a finish (docs/api.md).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from agentstore.models import Entry, Session, Task
from agentstore.stores import DocumentStore, TreeStore
from agentstore.tasks import AgentTaskRepository, TaskRepository
from agentstore.types.tasks import AgentTaskEntity, TaskEntity
from agentstore.types.tree import MESSAGE_ROLES, DocumentEntity
from tests.api.conftest import API, append_message, assert_error, create_session

LEASE = {"lease_owner": "worker-1", "lease_seconds": 30}

#: Every append endpoint with a body that is valid once ``parent_id`` is added.
APPENDS: dict[str, dict[str, Any]] = {
    "message": {"message": {"role": "user", "content": "hi"}},
    "custom": {"custom_type": "ext", "data": {}},
    "custom-message": {"custom_type": "ext", "content": "c", "display": True},
    "model-change": {"provider": "p", "model": "m"},
    "thinking-level-change": {"thinking_level": "high"},
    "branch-summary": {"summary": "s"},
    "label": {"target_id": "x", "label": "l"},
    "session-info": {"name": "n"},
    "compaction": {"summary": "s", "operation_id": "op"},
}


@pytest.fixture
def sid(api: APIClient) -> str:
    return str(create_session(api)["id"])


def _append(client: APIClient, sid: str, kind: str, body: dict[str, Any]) -> Any:
    return client.post(f"{API}/sessions/{sid}/append/{kind}", body, format="json")


def _task(client: APIClient, sid: str, **body: Any) -> dict[str, Any]:
    made = client.post(f"{API}/tasks", {"kind": "job", "owner_session_id": sid, **body}, "json")
    assert made.status_code == 201, made.content
    return made.json()  # type: ignore[no-any-return]


def _agent_and_workflow(client: APIClient, sid: str, owner: Any) -> tuple[str, str]:
    """An agent task (with its child session) and a workflow run of ``sid``: their ids."""
    child = TreeStore().create_session("/c", parent_session=sid, owner=owner)
    agent = AgentTaskRepository().create(
        AgentTaskEntity(
            task=TaskEntity(kind="agent", owner_session_id=sid),
            child_session_id=child.id,
            agent_name="a",
            prompt="p",
            depth=1,
        )
    )
    run = {"owner_session_id": sid, "name": "w", "source": "s", "source_hash": "h"}
    made = client.post(f"{API}/workflows", run, format="json")
    assert made.status_code == 201, made.content
    return agent.task.id, made.json()["task"]["id"]


# -- 1. the parent is explicit ----------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(APPENDS))
def test_every_append_requires_the_parent_id_key(api: APIClient, sid: str, kind: str) -> None:
    error = assert_error(_append(api, sid, kind, APPENDS[kind]), 400, "validation_error")
    assert error["details"]["field"] == "parent_id"
    assert error["details"]["fields"] == {"parent_id": ["This field is required."]}
    assert error["message"] == "parent_id: This field is required."
    assert Entry.objects.count() == 0


def test_a_null_parent_is_a_deliberate_root(api: APIClient, sid: str) -> None:
    first = append_message(api, sid, "one")
    second = append_message(api, sid, "two", parent_id=None)
    assert first["parent_id"] is None and second["parent_id"] is None


def test_the_schema_marks_parent_id_required_and_nullable(tmp_path: Any, db: None) -> None:
    path = tmp_path / "schema.json"
    call_command("spectacular", "--format", "openapi-json", "--file", str(path))
    components = json.loads(path.read_text())["components"]["schemas"]
    bodies = [name for name in components if name.startswith("Append") and "Request" in name]
    assert len(bodies) == len(APPENDS)
    for name in bodies:
        assert "parent_id" in components[name]["required"], name
        assert components[name]["properties"]["parent_id"]["nullable"] is True, name


# -- 2. strict input types ----------------------------------------------------------------


def test_numbers_are_not_coerced_to_strings(api: APIClient, sid: str) -> None:
    body = {"parent_id": None, "message": {"role": "user", "content": 42}}
    error = assert_error(_append(api, sid, "message", body), 400, "validation_error")
    assert error["details"]["fields"] == {"message.content": ["Expected a string, got a number."]}
    made = api.post(f"{API}/sessions", {"cwd": 5}, format="json")
    assert assert_error(made, 400, "validation_error")["details"]["field"] == "cwd"
    assert Entry.objects.count() == 0 and Session.objects.count() == 1


def test_strings_booleans_and_floats_are_not_coerced_either(api: APIClient, sid: str) -> None:
    body = {"parent_id": None, "message": {"role": "user"}, "display": "yes"}
    fields = assert_error(_append(api, sid, "message", body), 400, "validation_error")
    assert fields["details"]["fields"] == {"display": ["Expected a boolean, got a string."]}
    task = _task(api, sid)
    claim = api.post(
        f"{API}/tasks/{task['id']}/claim", {"lease_owner": "w", "lease_seconds": "30"}, "json"
    )
    error = assert_error(claim, 400, "validation_error")
    assert error["details"]["fields"] == {"lease_seconds": ["Expected an integer, got a string."]}
    claim = api.post(f"{API}/tasks/{task['id']}/claim", {**LEASE, "lease_owner": 7}, "json")
    error = assert_error(claim, 400, "validation_error")
    assert error["details"]["fields"] == {"lease_owner": ["Expected a string, got a number."]}
    assert Task.objects.get(pk=task["id"]).state == "queued"


def test_unknown_roles_are_refused_and_every_tree_role_is_kept(api: APIClient, sid: str) -> None:
    body = {"parent_id": None, "message": {"role": "wizard", "content": "x"}}
    error = assert_error(_append(api, sid, "message", body), 400, "validation_error")
    assert error["details"]["field"] == "message.role"
    assert "wizard" in error["message"]
    for role in MESSAGE_ROLES:
        assert append_message(api, sid, role, role=role)["message"]["role"] == role


def test_every_bad_field_is_listed(api: APIClient, sid: str) -> None:
    body = {
        "message": {"role": "wizard", "content": 42, "parts": [{"type": "text"}, {"type": 1}]},
        "usage": {"input_tokens": -1},
    }
    error = assert_error(_append(api, sid, "message", body), 400, "validation_error")
    fields = error["details"]["fields"]
    assert set(fields) == {
        "parent_id",
        "message.role",
        "message.content",
        "message.parts[1].type",
        "usage.input_tokens",
    }
    assert error["details"]["field"] == "parent_id"
    for name in fields:
        assert name in error["message"]


def test_a_tree_session_without_a_cwd_names_the_body_key(api: APIClient) -> None:
    for body in ({}, {"kind": "tree"}, {"kind": "tree", "cwd": "  "}, {"name": 7}):
        response = api.post(f"{API}/sessions", body, format="json")
        error = assert_error(response, 400, "validation_error")
        # The key the client sent (or left out), not the store's `session.cwd`.
        assert "cwd" in error["details"]["fields"] and "session.cwd" not in str(error), body
    assert set(error["details"]["fields"]) == {"cwd", "name"}
    assert api.post(f"{API}/sessions", {"kind": "loop"}, format="json").status_code == 201


# -- 3. absent values are null --------------------------------------------------------------


def test_absent_task_values_are_null_in_create_detail_claim_and_list(
    api: APIClient, sid: str
) -> None:
    made = _task(api, sid)
    task_id = made["id"]
    detail = api.get(f"{API}/tasks/{task_id}").json()
    listed = api.get(f"{API}/tasks").json()["results"][0]
    for shape in (made, detail, listed):
        assert (shape["parent_task_id"], shape["lease_owner"]) == (None, None), shape
    assert made == detail == listed
    claimed = api.post(f"{API}/tasks/{task_id}/claim", LEASE, format="json").json()
    assert claimed["parent_task_id"] is None and claimed["lease_owner"] == "worker-1"
    assert claimed == api.get(f"{API}/tasks/{task_id}").json()
    assert claimed == api.get(f"{API}/tasks").json()["results"][0]
    child = _task(api, sid, parent_task_id=None)
    assert child["parent_task_id"] is None


# -- 4. codes that say what is wrong ----------------------------------------------------------


def test_each_resource_has_its_own_not_found_code(api: APIClient, staff_api: APIClient) -> None:
    missing = "01900000-0000-7000-8000-000000000000"
    for path, code in [
        (f"tasks/{missing}", "no_task"),
        (f"tool-tasks/{missing}", "no_tool_task"),
        (f"agent-tasks/{missing}", "no_agent_task"),
        (f"workflows/{missing}", "no_workflow"),
        (f"sessions/{missing}", "no_session"),
        (f"log-sessions/{missing}", "no_session"),
        ("refs/nothing/here", "no_ref"),
    ]:
        error = assert_error(api.get(f"{API}/{path}"), 404, code)
        assert path.split("/", 1)[1] in error["message"], error
    error = assert_error(staff_api.get(f"{API}/documents/ns/key"), 404, "no_document")
    assert "'key'" in error["message"] and "'ns'" in error["message"]


def test_a_named_session_that_is_not_there_names_the_field(
    api: APIClient, bob_api: APIClient, sid: str
) -> None:
    made = bob_api.post(f"{API}/tasks", {"kind": "job", "owner_session_id": sid}, "json")
    error = assert_error(made, 404, "no_session")
    assert error["message"] == f"no such session: {sid} (owner_session_id)"
    error = assert_error(bob_api.get(f"{API}/workflows?session={sid}"), 404, "no_session")
    assert error["message"] == f"no such session: {sid} (session)"


def test_a_task_of_another_kind_names_its_kind(api: APIClient, sid: str) -> None:
    job = _task(api, sid)["id"]
    error = assert_error(api.get(f"{API}/workflows/{job}"), 404, "no_workflow")
    assert error["message"] == f"no such workflow: {job} (it is a job task)"


def test_a_request_on_the_wrong_session_kind_is_one_code(api: APIClient, sid: str) -> None:
    loop = create_session(api, kind="loop")["id"]
    step = api.post(f"{API}/sessions/{sid}/steps", {"step_type": "user"}, format="json")
    tree_on_loop = _append(api, loop, "message", {"parent_id": None, **APPENDS["message"]})
    log_on_tree = api.get(f"{API}/log-sessions/{sid}")
    entries_of_loop = api.get(f"{API}/sessions/{loop}/entries")
    for response, session, kind, expected in [
        (step, sid, "tree", "loop"),
        (tree_on_loop, loop, "loop", "tree"),
        (log_on_tree, sid, "tree", "log"),
        (entries_of_loop, loop, "loop", "tree or log"),
    ]:
        error = assert_error(response, 409, "wrong_session_kind")
        assert error["details"] == {"session_id": session, "kind": kind, "expected": expected}
        assert f"is a {kind} session" in error["message"]


def test_a_ref_to_a_session_of_another_kind_says_so(api: APIClient, sid: str) -> None:
    put = api.put(f"{API}/refs/main", {"expected": None, "next": {"session": sid}}, format="json")
    error = assert_error(put, 409, "wrong_session_kind")
    assert error["details"] == {"session_id": sid, "kind": "tree", "expected": "log"}


def test_a_bad_ref_name_is_about_the_name(api: APIClient) -> None:
    log = api.post(f"{API}/log-sessions", {"header": {}}, format="json").json()["id"]
    put = api.put(f"{API}/refs/a%20b", {"expected": None, "next": {"session": log}}, "json")
    error = assert_error(put, 400, "ref_name")
    assert error["details"]["field"] == "name"
    assert "prefix" not in error["message"] and "'a b'" in error["message"]
    error = assert_error(api.get(f"{API}/ref-log/a%20b"), 400, "ref_name")
    assert error["details"]["field"] == "name" and "prefix" not in error["message"]


# -- 5. every collection is paged alike ---------------------------------------------------------

COLLECTIONS = [
    "sessions",
    "tasks",
    "tool-tasks",
    "agent-tasks",
    "workflows",
    "log-sessions",
    "runs",
    "refs",
    "documents",
]


def test_every_collection_answers_one_envelope(staff_api: APIClient, staff: Any) -> None:
    sid = create_session(staff_api)["id"]
    log = staff_api.post(f"{API}/log-sessions", {"header": {}}, format="json").json()["id"]
    staff_api.put(f"{API}/refs/main", {"expected": None, "next": {"session": log}}, "json")
    DocumentStore().put(DocumentEntity(namespace="ns", key="k", value_json="1"))
    agent, wf = _agent_and_workflow(staff_api, sid, staff)
    tool = {
        "owner_session_id": sid,
        "invocation_id": "i",
        "wrapper_call_id": "c",
        "cwd": "/",
        "target_name": "shell",
        "timeout_seconds": 5,
        "definition": {},
        "arguments": {},
    }
    assert staff_api.post(f"{API}/tool-tasks", tool, format="json").status_code == 201
    staff_api.put(f"{API}/sessions/{sid}/documents/plan", {"value": 1}, format="json")
    link = {"agent_task_id": agent, "node_key": "n", "invocation_index": 0}
    staff_api.post(f"{API}/workflows/{wf}/links", link, format="json")
    loop = create_session(staff_api, kind="loop")["id"]
    staff_api.post(f"{API}/sessions/{loop}/grants", {"prompt": "ls"}, format="json")
    started = {"runner": "weather", "input": "Weather in Oslo?", "session_id": sid}
    assert staff_api.post(f"{API}/runs", started, format="json").status_code == 201
    nested = [
        "ref-log/main",
        f"sessions/{sid}/documents",
        f"workflows/{wf}/links",
        f"sessions/{loop}/grants",
    ]
    for path in [*COLLECTIONS, *nested]:
        response = staff_api.get(f"{API}/{path}?page_size=1")
        assert response.status_code == 200, (path, response.content)
        body = response.json()
        assert set(body) == {"count", "next", "previous", "results"}, path
        assert body["count"] >= 1 and len(body["results"]) == 1, path


def test_workflows_no_longer_need_a_session(api: APIClient, bob_api: APIClient, sid: str) -> None:
    run = {"owner_session_id": sid, "name": "w", "source": "s", "source_hash": "h"}
    made = api.post(f"{API}/workflows", run, format="json").json()
    assert [w["task"]["id"] for w in api.get(f"{API}/workflows").json()["results"]] == [
        made["task"]["id"]
    ]
    assert bob_api.get(f"{API}/workflows").json()["count"] == 0


def test_pages_are_bounded(api: APIClient) -> None:
    log = api.post(f"{API}/log-sessions", {"header": {}}, format="json").json()["id"]
    for index in range(3):
        body = {"expected": None, "next": {"session": log}}
        api.put(f"{API}/refs/r{index}", body, format="json")
    page = api.get(f"{API}/refs?page_size=2").json()
    assert page["count"] == 3 and len(page["results"]) == 2 and page["next"]
    rest = api.get(page["next"]).json()
    assert [r["name"] for r in page["results"] + rest["results"]] == ["r0", "r1", "r2"]
    huge = api.get(f"{API}/refs?page_size=100000").json()
    assert len(huge["results"]) == 3  # capped at max_page_size (200), not refused


def test_the_root_lists_every_collection(api: APIClient) -> None:
    root = api.get(f"{API}/").json()
    assert sorted(root) == sorted(COLLECTIONS)
    for name, url in root.items():
        assert url.endswith(f"{API}/{name}"), (name, url)


# -- 6. replays: 201 on create, 200 with the stored object on replay ----------------------------


def test_replays_answer_200_with_the_stored_object(api: APIClient, sid: str, alice: Any) -> None:
    root = append_message(api, sid, "hi")["id"]
    compaction = {"parent_id": root, "summary": "s", "operation_id": "op-1"}
    first = _append(api, sid, "compaction", compaction)
    replay = _append(api, sid, "compaction", compaction)
    assert (first.status_code, replay.status_code) == (201, 200)
    assert replay.json() == first.json()

    loop = create_session(api, kind="loop")["id"]
    grant = {"prompt": "rm -rf build"}
    granted = api.post(f"{API}/sessions/{loop}/grants", grant, format="json")
    again = api.post(f"{API}/sessions/{loop}/grants", grant, format="json")
    assert (granted.status_code, again.status_code) == (201, 200)
    # A grant's replay refreshes granted_at (the loop store's rule); the answer is
    # the grant as stored, which is what the listing shows.
    assert again.json()["prompt"] == granted.json()["prompt"] == "rm -rf build"
    assert api.get(f"{API}/sessions/{loop}/grants").json()["results"] == [again.json()]

    agent, wf = _agent_and_workflow(api, sid, alice)
    link = {"agent_task_id": agent, "node_key": "n", "invocation_index": 0}
    linked = api.post(f"{API}/workflows/{wf}/links", link, format="json")
    relinked = api.post(f"{API}/workflows/{wf}/links", link, format="json")
    assert (linked.status_code, relinked.status_code) == (201, 200)
    assert relinked.json() == linked.json()


# -- 7. finish has an obvious default event -------------------------------------------------------


@pytest.mark.parametrize("target", ["succeeded", "failed", "canceled", "interrupted"])
def test_finish_defaults_the_event_to_the_target_state(
    api: APIClient, sid: str, target: str
) -> None:
    task_id = _task(api, sid)["id"]
    assert api.post(f"{API}/tasks/{task_id}/claim", LEASE, format="json").status_code == 200
    body = {"lease_owner": "worker-1", "target_state": target}
    done = api.post(f"{API}/tasks/{task_id}/finish", body, format="json")
    assert done.status_code == 200, done.content
    assert done.json()["state"] == target
    kinds = [event.event.kind for event in TaskRepository().list_events(task_id)]
    assert kinds[-1] == f"task_{target}"
    explicit = _task(api, sid)["id"]
    api.post(f"{API}/tasks/{explicit}/claim", LEASE, format="json")
    api.post(f"{API}/tasks/{explicit}/finish", {**body, "event_kind": "mine"}, format="json")
    assert TaskRepository().list_events(explicit)[-1].event.kind == "mine"
