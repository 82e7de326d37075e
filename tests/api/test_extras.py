"""Holds (who writes a session, breaking it) and documents over HTTP."""

from __future__ import annotations

from datetime import UTC, datetime

from rest_framework.test import APIClient

from agentstore.models import Document, Holder
from agentstore.selectors.holds import break_hold, hold_of
from tests.api.conftest import API, assert_error, create_session

SINCE = datetime(2026, 5, 31, 12, 0, tzinfo=UTC)


def hold(session_id: str) -> None:
    Holder.objects.create(
        session_id=session_id,
        pid=4242,
        host="box",
        token="secret-token",
        since=SINCE,
        heartbeat=SINCE,
    )


def test_hold_shows_who_holds_it_without_the_token(api: APIClient) -> None:
    sid = create_session(api)["id"]
    assert api.get(f"{API}/sessions/{sid}/hold").json()["held"] is False
    hold(sid)
    response = api.get(f"{API}/sessions/{sid}/hold")
    body = response.json()
    assert (body["held"], body["pid"], body["host"]) == (True, 4242, "box")
    assert body["since"] == "2026-05-31T12:00:00Z"
    assert "secret-token" not in response.content.decode()


def test_breaking_a_hold_is_staff_only(
    api: APIClient, bob_api: APIClient, staff_api: APIClient
) -> None:
    sid = create_session(api)["id"]
    hold(sid)
    assert_error(api.delete(f"{API}/sessions/{sid}/hold"), 403, "permission_denied")
    assert_error(bob_api.delete(f"{API}/sessions/{sid}/hold"), 404, "no_session")
    assert Holder.objects.filter(session_id=sid).exists()
    assert staff_api.delete(f"{API}/sessions/{sid}/hold").json() == {"broken": True}
    assert not Holder.objects.filter(session_id=sid).exists()
    assert staff_api.delete(f"{API}/sessions/{sid}/hold").json() == {"broken": False}


def test_hold_selectors(api: APIClient) -> None:
    sid = create_session(api)["id"]
    assert hold_of(sid) is None and break_hold(sid) is False
    hold(sid)
    info = hold_of(sid)
    assert info is not None and (info.pid, info.host, info.since) == (4242, "box", SINCE)
    assert break_hold(sid) is True and hold_of(sid) is None


def test_session_documents(api: APIClient, bob_api: APIClient) -> None:
    sid = create_session(api)["id"]
    url = f"{API}/sessions/{sid}/documents/plan"
    assert_error(api.get(url), 404, "no_document")
    put = api.put(url, {"value": {"steps": [1, 2]}}, format="json")
    assert put.status_code == 200, put.content
    assert put.json()["value"] == {"steps": [1, 2]}
    assert api.get(url).json()["value"] == {"steps": [1, 2]}
    assert Document.objects.get().namespace == f"session:{sid}"
    assert_error(bob_api.get(url), 404, "no_session")
    assert_error(bob_api.put(url, {"value": 1}, format="json"), 404, "no_session")
    assert_error(bob_api.delete(url), 404, "no_session")
    assert_error(api.put(url, {}, format="json"), 400, "validation_error")
    assert api.delete(url).status_code == 204
    assert_error(api.delete(url), 404, "no_document")


def test_any_namespace_documents_are_staff_only(api: APIClient, staff_api: APIClient) -> None:
    url = f"{API}/documents/settings/theme"
    assert_error(api.put(url, {"value": "dark"}, format="json"), 403, "permission_denied")
    assert_error(api.get(url), 403, "permission_denied")
    assert staff_api.put(url, {"value": "dark"}, format="json").json()["value"] == "dark"
    assert staff_api.get(url).json()["value"] == "dark"
    assert staff_api.delete(url).status_code == 204
    assert_error(staff_api.get(url), 404, "no_document")
