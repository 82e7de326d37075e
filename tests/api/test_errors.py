"""Every failure answers in one shape, ``{"error": {"code", "message", "details"}}``."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from tests.api.conftest import API, assert_error, create_session


def test_unauthenticated_request_is_401_with_token_challenge(anon: APIClient, db: None) -> None:
    response = anon.get(f"{API}/sessions")
    assert_error(response, 401, "not_authenticated")
    assert response["WWW-Authenticate"] == "Token"


def test_bad_token_is_401(db: None) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-real-token")
    assert_error(client.get(f"{API}/sessions"), 401, "authentication_failed")


def test_session_login_works_too(alice: Any) -> None:
    client = APIClient()
    assert client.login(username="alice", password="pw-alice-123")
    assert client.get(f"{API}/sessions").status_code == 200


def test_unknown_api_path_is_404_in_the_error_shape(api: APIClient) -> None:
    assert_error(api.get(f"{API}/no-such-thing"), 404, "not_found")
    assert_error(api.get(f"{API}/sessions/x/no-such-action"), 404, "not_found")


def test_method_not_allowed(api: APIClient) -> None:
    session = create_session(api)
    assert_error(api.put(f"{API}/sessions/{session['id']}", {}), 405, "method_not_allowed")


def test_malformed_json_is_a_parse_error(api: APIClient) -> None:
    session = create_session(api)
    response = api.post(
        f"{API}/sessions/{session['id']}/append/message",
        data="{not json",
        content_type="application/json",
    )
    assert_error(response, 400, "parse_error")


def test_unsupported_media_type(api: APIClient) -> None:
    response = api.post(f"{API}/sessions", data="cwd=/x", content_type="text/csv")
    assert_error(response, 415, "unsupported_media_type")


def test_validation_error_names_the_field(api: APIClient) -> None:
    session = create_session(api)
    response = api.post(
        f"{API}/sessions/{session['id']}/append/message",
        {
            "parent_id": None,
            "message": {"role": "user", "content": "x", "parts": [{"type": "video"}]},
        },
        format="json",
    )
    error = assert_error(response, 400, "validation_error")
    assert error["details"]["field"] == "message.parts[0].type"
    assert error["message"].startswith("message.parts[0].type:")


def test_store_validation_error_carries_its_field(api: APIClient) -> None:
    session = create_session(api)
    response = api.post(
        f"{API}/sessions/{session['id']}/append/message",
        {"parent_id": "not-an-entry", "message": {"role": "user", "content": "x"}},
        format="json",
    )
    error = assert_error(response, 400, "validation_error")
    # The same details as a serializer's refusal: the field and every field's messages.
    assert error["details"]["field"] == "parent_id"
    assert list(error["details"]["fields"]) == ["parent_id"]
    assert "not-an-entry" in error["details"]["fields"]["parent_id"][0]


@pytest.mark.parametrize(
    "body",
    [
        [],
        "text",
        {"parent_id": None, "message": "not an object"},
        {"parent_id": None, "message": {"role": "user", "content": "\x00"}},
        {
            "parent_id": None,
            "message": {"role": "user", "parts": [{"type": "image", "data": "!!notbase64"}]},
        },
        {
            "parent_id": None,
            "message": {"role": "user", "parts": [{"type": "image", "width": 2**40}]},
        },
        {"parent_id": None, "message": {"role": "user", "timestamp": "yesterday"}},
        {"parent_id": None, "message": {"role": "user"}, "usage": {"input_tokens": -1}},
        {"message": {"role": "user"}, "parent_id": "x" * 129},
        {"message": {"role": "user"}},
    ],
)
def test_bad_bodies_are_400_never_500(api: APIClient, body: Any) -> None:
    session = create_session(api)
    response = api.post(f"{API}/sessions/{session['id']}/append/message", body, format="json")
    assert_error(response, 400, "validation_error")
    # Nothing was half-written.
    entries = api.get(f"{API}/sessions/{session['id']}/entries").json()
    assert entries["results"] == []


@pytest.mark.parametrize(
    "data",
    ['{"k": "\\u0000"}', '{"\\u0000": 1}', '{"k": ["ok", "\\ud800"]}'],
)
def test_json_values_the_database_cannot_hold_are_400(api: APIClient, data: str) -> None:
    session = create_session(api)
    response = api.post(
        f"{API}/sessions/{session['id']}/append/custom",
        data='{"custom_type": "ext", "data": ' + data + "}",
        content_type="application/json",
    )
    assert_error(response, 400, "validation_error")


def test_bad_query_parameters_are_400(api: APIClient) -> None:
    session = create_session(api)
    sid = session["id"]
    assert_error(api.get(f"{API}/sessions/{sid}/entries?after=-1"), 400, "validation_error")
    assert_error(api.get(f"{API}/sessions/{sid}/entries?after=abc"), 400, "validation_error")
    assert_error(api.get(f"{API}/sessions/{sid}/entries?cursor=%%%"), 400, "validation_error")
    assert_error(api.get(f"{API}/sessions/{sid}/entries?limit=0"), 400, "validation_error")
    loop = create_session(api, kind="loop")["id"]
    assert_error(api.get(f"{API}/sessions/{loop}/steps/last?n=x"), 400, "validation_error")
    assert_error(api.get(f"{API}/sessions?kind=bogus"), 400, "validation_error")
