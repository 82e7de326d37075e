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


# -- a lone surrogate echoed in an error message --------------------------------------------

#: A lone surrogate as JSON text: valid JSON, but no UTF-8 can encode the string.
LONE = "\\ud800"


def _input_serializers() -> list[type[Any]]:
    """Every request-body serializer of the API (StrictSerializer and its subclasses)."""
    from agentstore.api import log_serializers, serializers, task_serializers  # noqa: F401

    found, pending = [], [serializers.StrictSerializer]
    while pending:
        cls = pending.pop()
        found.append(cls)
        pending.extend(cls.__subclasses__())
    return found


def test_every_choice_field_renders_a_lone_surrogate_in_its_error() -> None:
    from rest_framework import serializers as drf_serializers
    from rest_framework.renderers import JSONRenderer

    from agentstore.api.exceptions import exception_handler

    checked = set()
    for cls in _input_serializers():
        for name, field in cls().fields.items():
            if not isinstance(field, drf_serializers.ChoiceField):
                continue
            value = (
                ["\ud800"] if isinstance(field, drf_serializers.MultipleChoiceField) else "\ud800"
            )
            form = cls(data={name: value})
            assert not form.is_valid()
            response = exception_handler(drf_serializers.ValidationError(form.errors), {})
            text = JSONRenderer().render(response.data).decode()  # raised UnicodeEncodeError
            assert "\\\\ud800" in text, (cls.__name__, name, text)
            checked.add(f"{cls.__name__}.{name}")
    assert {"SessionCreateInput.kind", "MessageSerializer.role", "FinishInput.target_state"} <= (
        checked
    )


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("sessions", f'{{"cwd": "/x", "kind": "{LONE}"}}', "kind"),
        (
            "append",
            f'{{"parent_id": null, "message": {{"role": "{LONE}", "content": "hi"}}}}',
            "message.role",
        ),
        (
            "append",
            '{"parent_id": null, "message": {"role": "user", "parts": [{"type": "' + LONE + '"}]}}',
            "message.parts[0].type",
        ),
        ("finish", f'{{"lease_owner": "w", "target_state": "{LONE}"}}', "target_state"),
    ],
    ids=["session-kind", "message-role", "part-type", "target-state"],
)
def test_a_lone_surrogate_in_an_enum_is_a_json_400(
    api: APIClient, path: str, body: str, field: str
) -> None:
    sid = create_session(api)["id"]
    task = api.post(f"{API}/tasks", {"kind": "job", "owner_session_id": sid}, format="json")
    url = {
        "sessions": f"{API}/sessions",
        "append": f"{API}/sessions/{sid}/append/message",
        "finish": f"{API}/tasks/{task.json()['id']}/finish",
    }[path]
    response = api.post(url, body, content_type="application/json")
    error = assert_error(response, 400, "validation_error")
    assert error["details"]["field"] == field
    assert "\\ud800" in error["message"]
