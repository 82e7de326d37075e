"""The API requires a signed-in user by itself, whatever the project's DRF defaults.

A project made with ``startproject`` has no ``REST_FRAMEWORK`` setting, so DRF's
defaults apply: ``AllowAny`` and session + basic authentication. Followed
literally, the README's install steps left agentstore's views on those
defaults, and an anonymous client could create sessions (an ownerless one over
``/log-sessions``; a 500 *after* writing over ``/sessions``). Every view now
carries its own permission classes; these tests run every URL pattern of
``agentstore.api.urls`` (not a hand-kept list) under those defaults.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.apps import apps
from django.contrib.auth.models import AnonymousUser
from django.test import override_settings
from django.urls import URLPattern, reverse
from rest_framework.test import APIClient

from agentstore import exceptions
from agentstore.api import urls as api_urls
from agentstore.stores import LogStore, SessionStore, TreeStore
from tests.api.conftest import API, assert_error, create_session, token_client

#: A new project's REST_FRAMEWORK: none at all, so DRF's defaults (AllowAny,
#: SessionAuthentication + BasicAuthentication, DRF's own exception handler).
FRESH_PROJECT: dict[str, Any] = {}


def _row_counts() -> dict[str, int]:
    """Rows of every agentstore table and of the token table: "nothing written" means equal."""
    models = [*apps.get_app_config("agentstore").get_models()]
    models.append(apps.get_model("authtoken", "Token"))
    return {model._meta.label: model._default_manager.count() for model in models}


def _endpoints(session_id: str) -> list[tuple[str, str]]:
    """(method, path) of every method of every named URL pattern of the API."""
    values = {
        "pk": session_id,
        "entry_id": "e1",
        "kind": "message",
        "namespace": "ns",
        "key": "k",
        "name": "team/main",
        "format": "json",
    }
    found: list[tuple[str, str]] = []
    for pattern in api_urls.urlpatterns:
        assert isinstance(pattern, URLPattern)
        if pattern.name is None:  # the catch-all 404 of unknown paths
            continue
        names = pattern.pattern.regex.groupindex
        path = reverse(
            f"agentstore-api:{pattern.name}", kwargs={name: values[name] for name in names}
        )
        callback: Any = pattern.callback
        actions = getattr(callback, "actions", None)
        if actions:
            methods = list(actions)
        else:
            view_class = callback.view_class
            methods = [m for m in view_class.http_method_names if hasattr(view_class, m)]
        found.extend((method, path) for method in methods)
    return found


@pytest.mark.django_db(transaction=True)
def test_anonymous_requests_to_every_endpoint_are_refused_under_a_new_projects_defaults(
    alice: Any,
) -> None:
    sid = create_session(token_client(alice))["id"]
    endpoints = _endpoints(sid)
    # Every resource family is in the walk (a guard on the walk itself).
    paths = {path for _method, path in endpoints}
    for family in ("sessions", "log-sessions", "tasks", "tool-tasks", "refs", "documents"):
        assert any(path.startswith(f"{API}/{family}") for path in paths), family
    assert f"{API}/" in paths  # the API root
    before = _row_counts()
    anon = APIClient()
    with override_settings(REST_FRAMEWORK=FRESH_PROJECT):
        for method, path in endpoints:
            body = {"cwd": "/x", "header": {}, "parent_id": None, "kind": "job"}
            if method in ("get", "head", "options", "delete"):
                response = getattr(anon, method)(path)
            else:
                response = getattr(anon, method)(path, body, format="json")
            assert response.status_code in (401, 403), (method, path, response.content)
            if method == "head":
                continue  # no body to check
            error = assert_error(response, response.status_code, "not_authenticated")
            assert "credentials" in error["message"], (method, path)
    assert _row_counts() == before


@pytest.mark.django_db(transaction=True)
def test_staff_only_endpoints_stay_staff_only_under_a_new_projects_defaults(alice: Any) -> None:
    client = APIClient()
    client.force_login(alice)  # DRF's default SessionAuthentication
    with override_settings(REST_FRAMEWORK=FRESH_PROJECT):
        mine = client.post(f"{API}/sessions", {"cwd": "/x"}, format="json")
        assert mine.status_code == 201, mine.content
        assert mine.json()["owner"] == "alice"
        for method, path in [
            ("get", f"{API}/documents"),
            ("put", f"{API}/documents/ns/k"),
            ("post", f"{API}/tasks/claim-next"),
            ("post", f"{API}/tasks/recover-expired"),
        ]:
            response = getattr(client, method)(path, {"value": 1}, format="json")
            assert_error(response, 403, "permission_denied")


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "create",
    [
        lambda owner: SessionStore().create("loop", owner=owner),
        lambda owner: TreeStore().create_session("/x", owner=owner),
        lambda owner: LogStore().create({}, owner=owner),
        lambda owner: LogStore().import_jsonl(
            '{"type":"session","format":"agentsession/0.11","id":"s1",'
            '"created_at":"2026-01-02T03:04:05Z","payload":"openresponses/2026-04-24"}\n',
            owner=owner,
        ),
    ],
    ids=["session-store", "tree", "log", "log-import"],
)
def test_the_stores_refuse_an_anonymous_owner_and_write_nothing(create: Any) -> None:
    # The root of the half-write: AnonymousUser's pk is None, so the row was
    # stored ownerless and the API's read-back (as that user) then failed.
    before = _row_counts()
    with pytest.raises(exceptions.ValidationError) as caught:
        create(AnonymousUser())
    assert caught.value.field == "owner"
    assert _row_counts() == before
