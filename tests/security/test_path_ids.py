"""An id no row can have — NUL in it — is the resource's 404 on both databases, never a 500.

The hostile pass (``bench/hostile_pass.py --postgres``) found it: ``GET
/api/v1/tasks/a%00b`` answered 500 on PostgreSQL (psycopg refuses a NUL in a text
parameter: ``DataError``) and 404 on SQLite, and so did every lookup by an id in
the path — sessions, entries, log sessions, tasks, tool tasks, agent tasks,
workflows — and ids named in bodies and filters. No stored id holds NUL (the stores
refuse it: docs/api.md "Names"), so such an id is simply not there: the lookups
answer "missing" without asking the database.
"""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.api.conftest import API, assert_error, create_session

pytestmark = pytest.mark.django_db

NUL_ID = "a%00b"


@pytest.mark.parametrize(
    ("path", "code"),
    [
        ("/sessions/{nul}", "no_session"),
        ("/sessions/{nul}/entries", "no_session"),
        ("/sessions/{nul}/follow", "no_session"),
        ("/sessions/{sid}/entries/{nul}", "no_entry"),
        ("/log-sessions/{nul}", "no_session"),
        ("/tasks/{nul}", "no_task"),
        ("/tasks/{nul}/events", "no_task"),
        ("/tool-tasks/{nul}", "no_tool_task"),
        ("/agent-tasks/{nul}", "no_agent_task"),
        ("/workflows/{nul}", "no_workflow"),
        ("/workflows/{nul}/links", "no_workflow"),
    ],
)
def test_a_nul_id_in_the_path_is_the_resources_404(api: APIClient, path: str, code: str) -> None:
    sid = create_session(api)["id"]
    response = api.get(API + path.format(nul=NUL_ID, sid=sid))
    assert_error(response, 404, code)


@pytest.mark.parametrize(
    "query",
    [
        "/sessions/{sid}/context?entry_id={nul}",
        "/sessions/{sid}/branch?entry_id={nul}",
        "/sessions?parent={nul}",
        "/tasks?session={nul}",
        "/tasks?parent_task={nul}",
        "/tool-tasks?session={nul}",
        "/agent-tasks?session={nul}",
        "/workflows?session={nul}",
    ],
)
def test_a_nul_id_in_a_filter_is_refused_or_not_found(api: APIClient, query: str) -> None:
    sid = create_session(api)["id"]
    response = api.get(API + query.format(nul=NUL_ID, sid=sid))
    assert response.status_code in (400, 404), response.content
    assert set(response.json()) == {"error"}


def _bodies(sid: str, workflow: str) -> list[tuple[str, dict[str, Any], str]]:
    """(path, a body valid but for one id with NUL, that field)."""
    tool = {
        "invocation_id": "i",
        "wrapper_call_id": "w",
        "cwd": "/r",
        "target_name": "t",
        "arguments": {},
        "definition": {},
        "timeout_seconds": 5,
    }
    agent = {"agent_name": "a", "prompt": "p", "cwd": "/c"}
    run = {"name": "w", "source": "s", "source_hash": "h"}
    nul = "a\x00b"
    return [
        ("/tasks", {"kind": "job", "owner_session_id": nul}, "owner_session_id"),
        (
            "/tasks",
            {"kind": "job", "owner_session_id": sid, "parent_task_id": nul},
            "parent_task_id",
        ),
        ("/tool-tasks", {**tool, "owner_session_id": nul}, "owner_session_id"),
        ("/agent-tasks", {**agent, "owner_session_id": nul}, "owner_session_id"),
        ("/workflows", {**run, "owner_session_id": nul}, "owner_session_id"),
        (f"/workflows/{workflow}/links", {"agent_task_id": nul, "node_key": "n"}, "agent_task_id"),
        ("/sessions", {"cwd": "/r", "parent_session": nul}, "parent_session"),
    ]


def test_a_nul_id_named_in_a_body_is_refused_by_name(api: APIClient) -> None:
    sid = create_session(api)["id"]
    run = {"owner_session_id": sid, "name": "w", "source": "s", "source_hash": "h"}
    workflow = api.post(f"{API}/workflows", run, format="json").json()["task"]["id"]
    for path, body, field in _bodies(sid, workflow):
        response = api.post(API + path, body, format="json")
        error = assert_error(response, 400, "validation_error")
        assert field in error["details"]["fields"], (path, error)
