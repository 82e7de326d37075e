"""The exception handler maps every kind of failure to the one shape."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework import exceptions as drf
from rest_framework.test import APIClient

from agentstore import exceptions as errors
from agentstore.api.exceptions import exception_handler
from agentstore.types.log import RefTarget
from tests.api.conftest import API, create_session


def body(response: Any) -> dict[str, Any]:
    return response.data["error"]  # type: ignore[no-any-return]


def test_throttled_carries_retry_after() -> None:
    response = exception_handler(drf.Throttled(wait=3), {})
    assert response.status_code == 429
    assert body(response)["code"] == "throttled"
    assert response["Retry-After"] == "3"


def test_database_busy_is_503_with_retry_after() -> None:
    response = exception_handler(errors.DatabaseBusy(attempts=5), {})
    assert (response.status_code, body(response)["code"]) == (503, "database_busy")
    assert response["Retry-After"] == "1"


@pytest.mark.parametrize(
    ("error", "status", "details"),
    [
        (errors.NoSession("gone"), 404, {}),
        (errors.SessionLocked(), 423, {}),
        (errors.RefMoved(name="r", current=RefTarget(session="s", entry="e")), 409, None),
        (errors.StaleCompactionParent(winner_entry_id="w"), 409, {"winner_entry_id": "w"}),
        (
            errors.ValidationError("bad", field="x.y"),
            400,
            {"field": "x.y", "fields": {"x.y": ["bad"]}},
        ),
        (errors.NoTask("no such task: t"), 404, {}),
        (errors.NoWorkflow(), 404, {}),
        (errors.NoDocument(), 404, {}),
        (
            errors.WrongSessionKind(session_id="s", kind="tree", expected="loop"),
            409,
            {"session_id": "s", "kind": "tree", "expected": "loop"},
        ),
        (errors.TaskConflict(), 409, {}),
        (errors.CallIDEmpty(), 400, {}),
        (errors.CallAnswered(), 409, {}),
        (errors.BaseRule(), 409, {}),
    ],
)
def test_domain_errors(error: Exception, status: int, details: Any) -> None:
    response = exception_handler(error, {})
    assert response.status_code == status
    assert body(response)["code"] == getattr(error, "code")  # noqa: B009
    if details is not None:
        assert body(response)["details"] == details
    else:
        assert body(response)["details"] == {
            "current": {"session": "s", "entry": "e"},
            "name": "r",
        }


def test_a_bug_is_a_500_in_the_same_shape_without_internals() -> None:
    response = exception_handler(KeyError("secret internals"), {})
    assert response.status_code == 500
    assert body(response) == {
        "code": "server_error",
        "message": "internal server error",
        "details": {},
    }


def test_options_and_head_and_browsable_api(api: APIClient, alice: Any) -> None:
    sid = create_session(api)["id"]
    for path in (
        f"{API}/sessions",
        f"{API}/sessions/{sid}",
        f"{API}/sessions/{sid}/append/message",
        f"{API}/tasks",
    ):
        assert api.options(path).status_code == 200, path
        assert api.head(path).status_code in (200, 405), path
    browser = APIClient()
    browser.force_login(alice)
    page = browser.get(f"{API}/sessions", HTTP_ACCEPT="text/html")
    assert page.status_code == 200 and b"<html" in page.content.lower()
