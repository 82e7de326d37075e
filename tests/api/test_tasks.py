"""Tasks over HTTP: owner scoping, the worker lifecycle with 409 fencing, tool and agent
tasks, workflows and their links."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from agentstore.models import Task
from agentstore.stores import TreeStore
from agentstore.tasks import AgentTaskRepository
from agentstore.types.tasks import AgentTaskEntity, TaskEntity
from tests.api.conftest import API, assert_error, create_session


@pytest.fixture
def sid(api: APIClient) -> str:
    return str(create_session(api)["id"])


def new_task(client: APIClient, sid: str, kind: str = "job", **body: Any) -> dict[str, Any]:
    response = client.post(
        f"{API}/tasks", {"kind": kind, "owner_session_id": sid, **body}, format="json"
    )
    assert response.status_code == 201, response.content
    return response.json()  # type: ignore[no-any-return]


def call(client: APIClient, task_id: str, verb: str, body: dict[str, Any] | None = None) -> Any:
    return client.post(f"{API}/tasks/{task_id}/{verb}", body or {}, format="json")


LEASE = {"lease_owner": "worker-1", "lease_seconds": 30}


def test_create_list_retrieve_and_owner_scoping(
    api: APIClient, bob_api: APIClient, staff_api: APIClient, sid: str
) -> None:
    task = new_task(api, sid, concurrency_key="k")
    assert (task["state"], task["owner_session_id"]) == ("queued", sid)
    theirs = new_task(bob_api, create_session(bob_api)["id"])
    listed = [row["id"] for row in api.get(f"{API}/tasks").json()["results"]]
    assert listed == [task["id"]]
    assert api.get(f"{API}/tasks?state=queued&kind=job").json()["count"] == 1
    assert api.get(f"{API}/tasks?state=running").json()["count"] == 0
    assert api.get(f"{API}/tasks?session={theirs['owner_session_id']}").json()["count"] == 0
    assert staff_api.get(f"{API}/tasks").json()["count"] == 2
    assert api.get(f"{API}/tasks/{task['id']}").json()["id"] == task["id"]
    assert_error(api.get(f"{API}/tasks/{theirs['id']}"), 404, "no_task")
    # Queueing into someone else's session is a 404 too, and writes nothing.
    response = api.post(
        f"{API}/tasks",
        {"kind": "job", "owner_session_id": theirs["owner_session_id"]},
        format="json",
    )
    assert_error(response, 404, "no_session")
    assert Task.objects.count() == 2
    assert_error(api.post(f"{API}/tasks", {"kind": "job"}, format="json"), 400, "validation_error")


def test_worker_lifecycle_and_fencing(api: APIClient, sid: str) -> None:
    task_id = new_task(api, sid)["id"]
    claimed = call(api, task_id, "claim", LEASE)
    assert claimed.status_code == 200, claimed.content
    assert (claimed.json()["state"], claimed.json()["lease_owner"]) == ("running", "worker-1")
    # A second claim loses with the task as it is now.
    lost = call(api, task_id, "claim", {**LEASE, "lease_owner": "worker-2"})
    error = assert_error(lost, 409, "task_conflict")
    assert error["details"]["task"]["lease_owner"] == "worker-1"

    assert call(api, task_id, "renew-lease", LEASE).status_code == 200
    assert_error(
        call(api, task_id, "renew-lease", {**LEASE, "lease_owner": "worker-2"}),
        409,
        "task_conflict",
    )
    events = call(
        api,
        task_id,
        "events",
        {"lease_owner": "worker-1", "events": [{"kind": "progress", "payload": {"p": 50}}]},
    )
    assert events.status_code == 201, events.content
    assert events.json()[0]["payload"] == {"p": 50}
    stale = call(api, task_id, "events", {"lease_owner": "worker-2", "events": [{"kind": "x"}]})
    assert_error(stale, 409, "task_conflict")

    finish = {"target_state": "succeeded", "event_kind": "task_succeeded", "result": "done"}
    assert_error(
        call(api, task_id, "finish", {**finish, "lease_owner": "worker-2"}), 409, "task_conflict"
    )
    done = call(api, task_id, "finish", {**finish, "lease_owner": "worker-1"})
    assert done.status_code == 200, done.content
    assert (done.json()["state"], done.json()["result"]) == ("succeeded", "done")

    log = api.get(f"{API}/tasks/{task_id}/events?limit=2").json()
    kinds = [e["kind"] for e in log["results"]]
    while log["next"]:
        log = api.get(log["next"]).json()
        kinds += [e["kind"] for e in log["results"]]
    assert kinds == ["task_queued", "task_started", "progress", "task_succeeded"]
    tail = api.get(f"{API}/tasks/{task_id}/events?after=3").json()
    assert [e["sequence"] for e in tail["results"]] == [4]


def test_lifecycle_calls_on_someone_elses_task_are_404(
    api: APIClient, bob_api: APIClient, sid: str
) -> None:
    task_id = new_task(api, sid)["id"]
    for verb, body in [
        ("claim", LEASE),
        ("renew-lease", LEASE),
        ("events", {"lease_owner": "w", "events": []}),
        ("finish", {"target_state": "failed", "event_kind": "task_failed"}),
        ("cancel", {}),
        ("transition", {"from_states": ["queued"], "target_state": "canceled", "kind": "x"}),
    ]:
        assert_error(call(bob_api, task_id, verb, body), 404, "no_task")
    assert_error(bob_api.get(f"{API}/tasks/{task_id}/events"), 404, "no_task")
    assert Task.objects.get(pk=task_id).state == "queued"


def test_cancel_and_transition(api: APIClient, sid: str) -> None:
    queued = new_task(api, sid)["id"]
    assert call(api, queued, "cancel").json()["state"] == "canceled"
    assert_error(call(api, queued, "cancel"), 409, "task_conflict")
    running = new_task(api, sid)["id"]
    call(api, running, "claim", LEASE)
    assert call(api, running, "cancel").json()["state"] == "canceling"

    other = new_task(api, sid)["id"]
    moved = call(
        api,
        other,
        "transition",
        {"from_states": ["queued"], "target_state": "failed", "kind": "task_failed"},
    )
    assert moved.status_code == 200 and moved.json()["state"] == "failed"
    again = call(
        api,
        other,
        "transition",
        {"from_states": ["queued"], "target_state": "failed", "kind": "task_failed"},
    )
    assert_error(again, 409, "task_conflict")
    bad = call(api, other, "transition", {"from_states": [], "target_state": "failed", "kind": "k"})
    assert_error(bad, 400, "validation_error")


def test_claim_next_and_recover_are_staff_only(
    api: APIClient, staff_api: APIClient, sid: str
) -> None:
    first = new_task(api, sid, kind="batch")["id"]
    body = {"kind": "batch", **LEASE}
    assert_error(api.post(f"{API}/tasks/claim-next", body, format="json"), 403, "permission_denied")
    claimed = staff_api.post(f"{API}/tasks/claim-next", body, format="json").json()
    assert claimed["task"]["id"] == first
    assert staff_api.post(f"{API}/tasks/claim-next", body, format="json").json() == {"task": None}
    Task.objects.filter(pk=first).update(lease_expires_at=Task.objects.get(pk=first).started_at)
    recover = {"kind": "batch"}
    assert_error(
        api.post(f"{API}/tasks/recover-expired", recover, format="json"), 403, "permission_denied"
    )
    result = staff_api.post(f"{API}/tasks/recover-expired", recover, format="json").json()
    assert result == {"recovered": [first]}
    assert Task.objects.get(pk=first).state == "interrupted"


def test_tool_tasks_are_idempotent_on_invocation(
    api: APIClient, bob_api: APIClient, sid: str
) -> None:
    body = {
        "owner_session_id": sid,
        "invocation_id": "call-1",
        "wrapper_call_id": "wrap-1",
        "cwd": "/repo",
        "target_name": "shell",
        "arguments": {"cmd": "ls"},
        "definition": {"name": "shell"},
        "timeout_seconds": 60,
    }
    first = api.post(f"{API}/tool-tasks", body, format="json")
    assert first.status_code == 201, first.content
    replay = api.post(f"{API}/tool-tasks", {**body, "arguments": {"cmd": "rm"}}, format="json")
    assert replay.status_code == 200
    assert replay.json() == first.json()
    task_id = first.json()["task"]["id"]
    assert first.json()["arguments"] == {"cmd": "ls"}
    listed = api.get(f"{API}/tool-tasks?session={sid}").json()
    assert [x["task"]["id"] for x in listed["results"]] == [task_id]
    # ?session= is an optional filter: without it, every tool task you can see.
    assert api.get(f"{API}/tool-tasks").json()["count"] == 1
    assert bob_api.get(f"{API}/tool-tasks").json()["count"] == 0
    assert_error(bob_api.get(f"{API}/tool-tasks?session={sid}"), 404, "no_session")
    assert_error(bob_api.get(f"{API}/tool-tasks/{task_id}"), 404, "no_tool_task")
    assert_error(bob_api.post(f"{API}/tool-tasks", body, format="json"), 404, "no_session")

    call(api, task_id, "claim", LEASE)
    finish = {
        "lease_owner": "worker-1",
        "target_state": "succeeded",
        "event_kind": "task_succeeded",
        "outcome": {"exit": 0},
    }
    done = api.post(f"{API}/tool-tasks/{task_id}/finish", finish, format="json")
    assert done.status_code == 200, done.content
    assert done.json()["outcome"] == {"exit": 0}
    assert done.json()["task"]["state"] == "succeeded"
    again = api.post(f"{API}/tool-tasks/{task_id}/finish", finish, format="json")
    assert_error(again, 409, "task_conflict")


def test_agent_tasks_and_workflows(
    api: APIClient, bob_api: APIClient, sid: str, alice: Any
) -> None:
    child = TreeStore().create_session("/child", parent_session=sid, owner=alice)
    agent = AgentTaskRepository().create(
        AgentTaskEntity(
            task=TaskEntity(kind="agent", owner_session_id=sid),
            child_session_id=child.id,
            agent_name="general",
            prompt="look around",
            depth=1,
        )
    )
    agent_id = agent.task.id
    listed = api.get(f"{API}/agent-tasks?session={sid}").json()
    assert [a["task"]["id"] for a in listed["results"]] == [agent_id]
    assert api.get(f"{API}/agent-tasks/{agent_id}").json()["prompt"] == "look around"
    assert_error(bob_api.get(f"{API}/agent-tasks/{agent_id}"), 404, "no_agent_task")

    run = api.post(
        f"{API}/workflows",
        {"owner_session_id": sid, "name": "wf", "source": "run()", "source_hash": "h1"},
        format="json",
    )
    assert run.status_code == 201, run.content
    wf = run.json()["task"]["id"]
    listed = api.get(f"{API}/workflows?session={sid}").json()["results"]
    assert [w["task"]["id"] for w in listed] == [wf]
    assert api.get(f"{API}/workflows/{wf}").json()["name"] == "wf"
    link = {"agent_task_id": agent_id, "node_key": "n1", "invocation_index": 0}
    made = api.post(f"{API}/workflows/{wf}/links", link, format="json")
    assert made.status_code == 201, made.content
    other = AgentTaskRepository().create(
        AgentTaskEntity(
            task=TaskEntity(kind="agent", owner_session_id=sid),
            child_session_id=TreeStore().create_session("/c2", parent_session=sid, owner=alice).id,
            agent_name="general",
            prompt="again",
            depth=1,
        )
    )
    clash = api.post(
        f"{API}/workflows/{wf}/links", {**link, "agent_task_id": other.task.id}, format="json"
    )
    assert_error(clash, 409, "workflow_agent_invocation_conflict")
    links = api.get(f"{API}/workflows/{wf}/links").json()["results"]
    assert [x["agent_task_id"] for x in links] == [agent_id]
    assert_error(bob_api.get(f"{API}/workflows/{wf}/links"), 404, "no_workflow")
    error = assert_error(api.get(f"{API}/workflows/{agent_id}"), 404, "no_workflow")
    assert agent_id in error["message"] and "agent task" in error["message"]


def test_starting_a_subagent_creates_its_child_session(
    api: APIClient, bob_api: APIClient, sid: str
) -> None:
    body = {
        "owner_session_id": sid,
        "agent_name": "general",
        "prompt": "inspect the repository",
        "cwd": "/work/repo/sub",
        "name": "subagent",
        "policy": {"tools": ["read"]},
    }
    made = api.post(f"{API}/agent-tasks", body, format="json")

    assert made.status_code == 201, made.content
    agent = made.json()
    assert (agent["task"]["state"], agent["task"]["kind"], agent["depth"]) == ("queued", "agent", 1)
    assert agent["policy"] == {"tools": ["read"]}
    child = api.get(f"{API}/sessions/{agent['child_session_id']}")
    assert child.status_code == 200, child.content
    assert (child.json()["parent_session"], child.json()["name"]) == (sid, "subagent")
    listed = api.get(f"{API}/agent-tasks?session={sid}").json()["results"]
    assert [a["task"]["id"] for a in listed] == [agent["task"]["id"]]
    # Someone else's session is not there; bad input names the field.
    assert_error(bob_api.post(f"{API}/agent-tasks", body, format="json"), 404, "no_session")
    bad = api.post(f"{API}/agent-tasks", {**body, "prompt": ""}, format="json")
    assert_error(bad, 400, "validation_error")
    assert Task.objects.filter(kind="agent").count() == 1


def test_recovering_an_expired_tool_task_writes_its_outcome(
    api: APIClient, staff_api: APIClient, sid: str
) -> None:
    # Regression: the API's recovery used the generic path for every kind, so a
    # recovered tool task ended interrupted with a NULL outcome (the tool-task
    # rule in models/tasks.py: a settled tool task has its outcome).
    from agentstore.models import ToolTask
    from agentstore.tasks.tool import LEASE_EXPIRED_OUTCOME, OUTCOME_VERSION

    body = {
        "owner_session_id": sid,
        "invocation_id": "call-9",
        "wrapper_call_id": "wrap-9",
        "cwd": "/repo",
        "target_name": "shell",
        "arguments": {"cmd": "ls"},
        "definition": {"name": "shell"},
        "timeout_seconds": 60,
    }
    created = api.post(f"{API}/tool-tasks", body, format="json")
    assert created.status_code == 201, created.content
    task_id = created.json()["task"]["id"]
    assert call(api, task_id, "claim", LEASE).status_code == 200
    Task.objects.filter(pk=task_id).update(lease_expires_at=Task.objects.get(pk=task_id).started_at)

    result = staff_api.post(f"{API}/tasks/recover-expired", {"kind": "tool"}, format="json")

    assert result.json() == {"recovered": [task_id]}
    task = Task.objects.get(pk=task_id)
    assert (task.state, task.error_code) == ("interrupted", "lease_expired")
    tool = ToolTask.objects.get(pk=task_id)
    assert (tool.outcome_version, tool.outcome_json) == (OUTCOME_VERSION, LEASE_EXPIRED_OUTCOME)
