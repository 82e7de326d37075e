"""Racing identical creates: exactly one caller is told "created" (docs/api.md "Replays").

A hostile probe's report: identical tool-task creates and workflow links sent
at once each answered 201 (one row was stored), because the view asked "was it
there before?" in a read before the store's write. The store now says whether
*its* write created the row, decided inside the write: one 201, the others the
replay's 200 with the same object. A ref created by two racing calls of the
same user answered the loser 400 "name not available" — for the caller's own
ref; it is now the compare-and-swap's 409 ``ref_moved`` with the ref as it is.

The callers are real threads on the test database (a file on SQLite), each
with its own client and connection, released together by a barrier.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from rest_framework.test import APIClient

from agentstore.models import Ref, ToolTask, WorkflowAgentTask
from agentstore.stores import TreeStore
from agentstore.tasks import AgentTaskRepository
from agentstore.types.tasks import AgentTaskEntity, TaskEntity
from tests.api.conftest import API, assert_error, create_session, token_client

pytestmark = pytest.mark.django_db(transaction=True)

CALLERS = 4
ROUNDS = 5


def race(user: Any, request: Callable[[APIClient], Any]) -> list[Any]:
    """Send ``request`` from CALLERS threads released at once; their responses."""
    barrier = threading.Barrier(CALLERS)
    responses: list[Any] = []
    errors: list[BaseException] = []

    def run() -> None:
        client = token_client(user)
        try:
            barrier.wait()
            responses.append(request(client))
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run) for _ in range(CALLERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    return responses


def test_racing_tool_task_creates_answer_one_201(alice: Any) -> None:
    sid = create_session(token_client(alice))["id"]
    for round_ in range(ROUNDS):
        body = {
            "owner_session_id": sid,
            "invocation_id": f"call-{round_}",
            "wrapper_call_id": "wrap-1",
            "cwd": "/repo",
            "target_name": "shell",
            "arguments": {"cmd": "ls"},
            "definition": {"name": "shell"},
            "timeout_seconds": 60,
        }
        responses = race(alice, lambda c: c.post(f"{API}/tool-tasks", body, format="json"))  # noqa: B023
        statuses = sorted(r.status_code for r in responses)
        assert statuses == [200] * (CALLERS - 1) + [201], [r.content for r in responses]
        assert len({r.json()["task"]["id"] for r in responses}) == 1
        assert ToolTask.objects.filter(invocation_id=f"call-{round_}").count() == 1


def _agent(sid: str, alice: Any) -> str:
    child = TreeStore().create_session("/child", parent_session=sid, owner=alice)
    agent = AgentTaskRepository().create(
        AgentTaskEntity(
            task=TaskEntity(kind="agent", owner_session_id=sid),
            child_session_id=child.id,
            agent_name="general",
            prompt="look",
            depth=1,
        )
    )
    return agent.task.id


def _workflow(client: APIClient, sid: str) -> str:
    run = client.post(
        f"{API}/workflows",
        {"owner_session_id": sid, "name": "wf", "source": "run()", "source_hash": "h1"},
        format="json",
    )
    assert run.status_code == 201, run.content
    return str(run.json()["task"]["id"])


def test_racing_identical_workflow_links_answer_one_201(alice: Any) -> None:
    api = token_client(alice)
    sid = create_session(api)["id"]
    wf = _workflow(api, sid)
    for round_ in range(ROUNDS):
        link = {"agent_task_id": _agent(sid, alice), "node_key": "n", "invocation_index": round_}
        responses = race(
            alice,
            lambda c: c.post(f"{API}/workflows/{wf}/links", link, format="json"),  # noqa: B023
        )
        statuses = sorted(r.status_code for r in responses)
        assert statuses == [200] * (CALLERS - 1) + [201], [r.content for r in responses]
        assert len({r.json()["sequence"] for r in responses}) == 1
    assert WorkflowAgentTask.objects.filter(workflow_id=wf).count() == ROUNDS


def test_a_linked_agent_task_under_another_node_key_is_409_not_500(alice: Any) -> None:
    api = token_client(alice)
    sid = create_session(api)["id"]
    wf, other_wf = _workflow(api, sid), _workflow(api, sid)
    agent = _agent(sid, alice)
    link = {"agent_task_id": agent, "node_key": "n1", "invocation_index": 0}
    assert api.post(f"{API}/workflows/{wf}/links", link, format="json").status_code == 201
    for body, where in [
        ({**link, "node_key": "n2"}, wf),
        ({**link, "invocation_index": 1}, wf),
        (link, other_wf),
    ]:
        response = api.post(f"{API}/workflows/{where}/links", body, format="json")
        error = assert_error(response, 409, "agent_task_already_linked")
        assert agent in error["message"]
        if where == wf:
            assert "'n1'[0]" in error["message"]
        else:
            assert wf not in error["message"]  # another workflow's id is not said
    assert WorkflowAgentTask.objects.count() == 1


def test_racing_creates_of_ones_own_ref_lose_with_409_ref_moved(alice: Any) -> None:
    api = token_client(alice)
    log = api.post(f"{API}/log-sessions", {"header": {}}, format="json").json()["id"]
    for round_ in range(ROUNDS):
        name = f"team/main-{round_}"
        body = {"expected": None, "next": {"session": log, "entry": ""}, "reason": "race"}
        responses = race(alice, lambda c: c.put(f"{API}/refs/{name}", body, format="json"))  # noqa: B023
        statuses = sorted(r.status_code for r in responses)
        assert statuses == [200] + [409] * (CALLERS - 1), [r.content for r in responses]
        for response in responses:
            if response.status_code == 409:
                error = assert_error(response, 409, "ref_moved")
                assert error["details"]["current"]["session"] == log
        assert Ref.objects.filter(name=name).count() == 1
