"""System checks: warn when the database or the API is set up in a way agentstore can't rely on.

* ``agentstore.W001`` — the database is SQLite but ``OPTIONS["init_command"]`` does
  not set ``PRAGMA journal_mode=WAL``. Without WAL, readers block writers and the
  read snapshots of the stores can stall appends.
* ``agentstore.W002`` — the database is SQLite but ``OPTIONS["transaction_mode"]``
  is not ``"IMMEDIATE"``. A deferred transaction that reads and then writes fails
  at once with "database is locked" when another writer is active, ignoring the
  timeout.

* ``agentstore.E001`` — ``REST_FRAMEWORK["DEFAULT_AUTHENTICATION_CLASSES"]``
  has a token authentication class (DRF's or agentstore's) that looks tokens up
  in ``rest_framework.authtoken``, but that app is not in ``INSTALLED_APPS``:
  every request carrying a token would answer 500 (its table does not exist).
* ``agentstore.W003`` — the API is mounted (``agentstore.api.urls`` is in the
  URLconf) but no authentication class can authenticate an API client: the
  list is empty (every request is refused), or it has only
  ``SessionAuthentication`` (browser logins; a service or the Python client
  cannot sign in).

There is deliberately no check on ``DEFAULT_PERMISSION_CLASSES``: agentstore's
views carry their own permissions (:mod:`agentstore.api.permissions`), so a
project default of ``AllowAny`` opens nothing of agentstore's.

All read settings only (no connection is opened), so they run on every
``manage.py`` command; W003 also loads the URLconf, as Django's own URL checks
do. Silence one with ``SILENCED_SYSTEM_CHECKS`` if you know why.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from django.apps import apps
from django.conf import settings
from django.core.checks import CheckMessage, Tags, register
from django.core.checks import Error as CheckError
from django.core.checks import Warning as CheckWarning
from django.urls import URLResolver, get_resolver
from rest_framework.authentication import SessionAuthentication, TokenAuthentication
from rest_framework.settings import api_settings

_WAL = re.compile(r"(^|;)\s*PRAGMA\s+(\w+\.)?journal_mode\s*=\s*['\"]?wal['\"]?\s*(;|$)", re.I)

RECOMMENDED_OPTIONS = (
    '{"transaction_mode": "IMMEDIATE", "timeout": 20, '
    '"init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL"}'
)


def check_sqlite_databases(databases: Mapping[str, Mapping[str, Any]]) -> list[CheckMessage]:
    """Return W001/W002 warnings for every SQLite database in ``databases``."""
    messages: list[CheckMessage] = []
    for alias, config in databases.items():
        if not str(config.get("ENGINE", "")).endswith("sqlite3"):
            continue
        options = config.get("OPTIONS") or {}
        init_command = str(options.get("init_command") or "")
        if not _WAL.search(init_command):
            messages.append(
                CheckWarning(
                    f"SQLite database {alias!r} is not put in WAL mode.",
                    hint=(
                        "Add 'PRAGMA journal_mode=WAL' to DATABASES"
                        f"[{alias!r}]['OPTIONS']['init_command'], e.g. OPTIONS = "
                        f"{RECOMMENDED_OPTIONS}."
                    ),
                    obj=f"DATABASES[{alias!r}]",
                    id="agentstore.W001",
                )
            )
        mode = str(options.get("transaction_mode") or "DEFERRED").upper()
        if mode != "IMMEDIATE":
            messages.append(
                CheckWarning(
                    f"SQLite database {alias!r} begins transactions {mode}, not IMMEDIATE.",
                    hint=(
                        f"Set DATABASES[{alias!r}]['OPTIONS']['transaction_mode'] = "
                        "'IMMEDIATE' so write transactions wait for the lock instead of "
                        "failing with 'database is locked'."
                    ),
                    obj=f"DATABASES[{alias!r}]",
                    id="agentstore.W002",
                )
            )
    return messages


@register(Tags.compatibility)
def sqlite_settings_check(
    app_configs: Sequence[Any] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    return check_sqlite_databases(settings.DATABASES)


#: The URL namespace of ``agentstore.api.urls`` (its ``app_name``).
API_APP_NAME = "agentstore-api"


def check_api_authentication(
    authentication_classes: Sequence[type[Any]],
    *,
    authtoken_installed: bool,
    api_mounted: bool,
) -> list[CheckMessage]:
    """Return E001/W003 for the project's DRF authentication classes."""
    messages: list[CheckMessage] = []
    token_classes = [
        cls
        for cls in authentication_classes
        # ``model = None`` means "rest_framework.authtoken's Token".
        if issubclass(cls, TokenAuthentication) and getattr(cls, "model", None) is None
    ]
    if token_classes and not authtoken_installed:
        names = ", ".join(f"{cls.__module__}.{cls.__qualname__}" for cls in token_classes)
        messages.append(
            CheckError(
                f"{names} looks tokens up in rest_framework.authtoken, which is not installed: "
                "every request with a token would fail with a server error.",
                hint=(
                    "Add 'rest_framework.authtoken' to INSTALLED_APPS and run "
                    "'manage.py migrate'; create a token with "
                    "'manage.py drf_create_token USERNAME'."
                ),
                obj="REST_FRAMEWORK['DEFAULT_AUTHENTICATION_CLASSES']",
                id="agentstore.E001",
            )
        )
    clients = [cls for cls in authentication_classes if not issubclass(cls, SessionAuthentication)]
    if api_mounted and not clients:
        what = (
            "has only SessionAuthentication (browser logins)"
            if authentication_classes
            else "is empty, so every API request is refused"
        )
        messages.append(
            CheckWarning(
                f"The agentstore API is mounted but DEFAULT_AUTHENTICATION_CLASSES {what}: "
                "no API client (a service, agentstore.client) can authenticate.",
                hint=(
                    "Add 'agentstore.api.authentication.TokenAuthentication' (or DRF's "
                    "TokenAuthentication) first, with 'rest_framework.authtoken' in "
                    "INSTALLED_APPS (docs/api.md, 'Mounting it')."
                ),
                obj="REST_FRAMEWORK['DEFAULT_AUTHENTICATION_CLASSES']",
                id="agentstore.W003",
            )
        )
    return messages


def api_mounted(resolver: URLResolver | None = None) -> bool:
    """Tell whether ``agentstore.api.urls`` is included anywhere in the URLconf."""
    pending: list[Any] = [resolver if resolver is not None else get_resolver()]
    while pending:
        item = pending.pop()
        if isinstance(item, URLResolver):
            if item.app_name == API_APP_NAME:
                return True
            pending.extend(item.url_patterns)
    return False


def _classes(values: Any) -> list[type[Any]]:
    # DRF's settings object has imported the dotted paths (typed as strings).
    return [value for value in values if isinstance(value, type)]


@register(Tags.security)
def api_authentication_check(
    app_configs: Sequence[Any] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    try:
        mounted = api_mounted()
    except Exception:  # noqa: BLE001 - a broken URLconf is reported by Django's own checks
        mounted = False
    return check_api_authentication(
        _classes(api_settings.DEFAULT_AUTHENTICATION_CLASSES),
        authtoken_installed=apps.is_installed("rest_framework.authtoken"),
        api_mounted=mounted,
    )
