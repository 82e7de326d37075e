"""Fixtures of the API tests: users, authenticated clients, a session helper."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

API = "/api/v1"


@pytest.fixture
def alice(db: None) -> Any:
    return get_user_model().objects.create_user("alice", password="pw-alice-123")


@pytest.fixture
def bob(db: None) -> Any:
    return get_user_model().objects.create_user("bob", password="pw-bob-123")


@pytest.fixture
def staff(db: None) -> Any:
    return get_user_model().objects.create_user("root", password="pw-root-123", is_staff=True)


def token_client(user: Any) -> APIClient:
    """A client that authenticates like a service would: with a token header."""
    client = APIClient()
    token, _ = Token.objects.get_or_create(user=user)
    client.credentials(HTTP_AUTHORIZATION=f"Token {token.key}")
    return client


@pytest.fixture
def api(alice: Any) -> APIClient:
    return token_client(alice)


@pytest.fixture
def bob_api(bob: Any) -> APIClient:
    return token_client(bob)


@pytest.fixture
def staff_api(staff: Any) -> APIClient:
    return token_client(staff)


@pytest.fixture
def anon() -> APIClient:
    return APIClient()


def create_session(client: APIClient, **body: Any) -> dict[str, Any]:
    body.setdefault("cwd", "/work/repo")
    response = client.post(f"{API}/sessions", body, format="json")
    assert response.status_code == 201, response.content
    return response.json()  # type: ignore[no-any-return]


def append_message(
    client: APIClient,
    session_id: str,
    content: str,
    parent_id: str | None = None,
    role: str = "user",
) -> dict[str, Any]:
    response = client.post(
        f"{API}/sessions/{session_id}/append/message",
        {"parent_id": parent_id, "message": {"role": role, "content": content}},
        format="json",
    )
    assert response.status_code == 201, response.content
    return response.json()  # type: ignore[no-any-return]


def assert_error(response: Any, status: int, code: str) -> dict[str, Any]:
    """Assert the one error shape, the status and the code; return the error body."""
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) == {"error"}
    error = body["error"]
    assert set(error) == {"code", "message", "details"}
    assert error["code"] == code, error
    assert isinstance(error["message"], str) and error["message"]
    assert isinstance(error["details"], dict)
    return error  # type: ignore[no-any-return]
