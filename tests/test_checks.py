"""The system checks: W001 (not WAL), W002 (not IMMEDIATE), E001/W003 (API authentication)."""

from __future__ import annotations

from typing import Any

import pytest
from django.conf import settings
from django.contrib import admin
from django.core.checks import run_checks
from django.core.management import call_command
from django.test import override_settings
from django.urls import URLResolver, include, path
from django.urls.resolvers import RegexPattern
from rest_framework.authentication import BasicAuthentication, SessionAuthentication
from rest_framework.authentication import TokenAuthentication as DRFToken

from agentstore.api.authentication import TokenAuthentication
from agentstore.checks import api_mounted, check_api_authentication, check_sqlite_databases
from project.database_url import sqlite_database


def ids(databases: dict[str, dict[str, Any]]) -> list[str]:
    return [message.id for message in check_sqlite_databases(databases)]


def test_the_recommended_sqlite_settings_pass() -> None:
    assert ids({"default": sqlite_database("/tmp/x.sqlite3")}) == []


def test_the_project_settings_pass() -> None:
    assert [m.id for m in run_checks() if (m.id or "").startswith("agentstore.")] == []
    call_command("check", "--fail-level", "WARNING", verbosity=0)


def test_a_sqlite_database_without_wal_warns() -> None:
    config = sqlite_database("/tmp/x.sqlite3")
    config["OPTIONS"]["init_command"] = "PRAGMA synchronous=NORMAL"

    messages = check_sqlite_databases({"default": config})

    assert [m.id for m in messages] == ["agentstore.W001"]
    assert "'default'" in messages[0].msg
    assert "journal_mode=WAL" in (messages[0].hint or "")


@pytest.mark.parametrize("mode", [None, "DEFERRED", "exclusive"])
def test_a_sqlite_database_not_immediate_warns(mode: str | None) -> None:
    config = sqlite_database("/tmp/x.sqlite3")
    if mode is None:
        del config["OPTIONS"]["transaction_mode"]
    else:
        config["OPTIONS"]["transaction_mode"] = mode

    assert ids({"default": config}) == ["agentstore.W002"]


def test_a_bare_sqlite_database_gets_both_warnings_per_alias() -> None:
    bare = {"ENGINE": "django.db.backends.sqlite3", "NAME": "x.sqlite3"}

    assert ids({"default": bare, "other": bare}) == ["agentstore.W001", "agentstore.W002"] * 2


@pytest.mark.parametrize(
    "init_command",
    [
        "PRAGMA journal_mode = 'wal'",
        "pragma synchronous=NORMAL; PRAGMA main.journal_mode=WAL;",
    ],
)
def test_wal_spellings_are_recognised(init_command: str) -> None:
    config = sqlite_database("/tmp/x.sqlite3")
    config["OPTIONS"]["init_command"] = init_command

    assert ids({"default": config}) == []


def test_wal_mentioned_only_in_another_pragma_is_not_enough() -> None:
    config = sqlite_database("/tmp/x.sqlite3")
    config["OPTIONS"]["init_command"] = "PRAGMA journal_mode=DELETE; PRAGMA wal_autocheckpoint=1000"

    assert ids({"default": config}) == ["agentstore.W001"]


def test_postgresql_is_not_checked() -> None:
    assert ids({"default": {"ENGINE": "django.db.backends.postgresql", "NAME": "x"}}) == []


# -- the API's authentication (agentstore.E001, agentstore.W003) ------------------------


def api_ids(classes: list[type[Any]], *, authtoken: bool = True, mounted: bool = True) -> list[str]:
    return [
        message.id
        for message in check_api_authentication(
            classes, authtoken_installed=authtoken, api_mounted=mounted
        )
    ]


@pytest.mark.parametrize("token", [DRFToken, TokenAuthentication], ids=["drf", "agentstore"])
def test_token_authentication_without_authtoken_is_an_error(token: type[Any]) -> None:
    messages = check_api_authentication(
        [token, SessionAuthentication], authtoken_installed=False, api_mounted=True
    )
    assert [m.id for m in messages] == ["agentstore.E001"]
    assert messages[0].is_serious()
    assert "rest_framework.authtoken" in messages[0].msg
    assert "drf_create_token" in (messages[0].hint or "")
    # Mounted or not: a token request fails wherever DRF serves one.
    assert api_ids([token], authtoken=False, mounted=False) == ["agentstore.E001"]


def test_token_authentication_with_authtoken_passes() -> None:
    assert api_ids([TokenAuthentication, SessionAuthentication]) == []
    assert api_ids([DRFToken]) == []


def test_a_token_class_with_its_own_model_does_not_need_authtoken() -> None:
    class OwnTokens(DRFToken):
        model = object  # a project's own token model

    assert api_ids([OwnTokens], authtoken=False) == []


@pytest.mark.parametrize("classes", [[], [SessionAuthentication]], ids=["empty", "session-only"])
def test_a_mounted_api_no_client_can_authenticate_to_warns(classes: list[type[Any]]) -> None:
    messages = check_api_authentication(classes, authtoken_installed=True, api_mounted=True)
    assert [m.id for m in messages] == ["agentstore.W003"]
    assert not messages[0].is_serious()
    assert "TokenAuthentication" in (messages[0].hint or "")


def test_no_warning_when_the_api_is_not_mounted_or_a_client_can_authenticate() -> None:
    assert api_ids([SessionAuthentication], mounted=False) == []
    assert api_ids([], mounted=False) == []
    # A new project's defaults: basic authentication can sign in a client.
    assert api_ids([SessionAuthentication, BasicAuthentication]) == []


def test_a_permissive_default_permission_alone_is_not_flagged() -> None:
    # agentstore's views carry their own permissions: AllowAny opens nothing.
    fresh = {"DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.AllowAny"]}
    with override_settings(REST_FRAMEWORK=fresh):
        found = [m.id for m in run_checks() if (m.id or "").startswith("agentstore.")]
    assert found == []


def test_the_registered_check_reads_the_projects_settings() -> None:
    assert api_mounted()  # project/urls.py includes agentstore.api.urls
    settings_ = {"DEFAULT_AUTHENTICATION_CLASSES": []}
    with override_settings(REST_FRAMEWORK=settings_):
        found = [m.id for m in run_checks() if (m.id or "").startswith("agentstore.")]
    assert found == ["agentstore.W003"]
    apps_without_authtoken = [a for a in settings.INSTALLED_APPS if a != "rest_framework.authtoken"]
    with override_settings(INSTALLED_APPS=apps_without_authtoken):
        found = [m.id for m in run_checks() if (m.id or "").startswith("agentstore.")]
    assert found == ["agentstore.E001"]


def test_api_mounted_looks_for_the_api_urlconf_at_any_depth() -> None:
    admin_only = [path("admin/", admin.site.urls)]
    assert not api_mounted(URLResolver(RegexPattern(r"^"), admin_only))
    nested = [path("v1/", include([path("api/", include("agentstore.api.urls"))]))]
    assert api_mounted(URLResolver(RegexPattern(r"^"), nested))
