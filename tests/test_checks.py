"""The system checks agentstore.W001 (not WAL) and agentstore.W002 (not IMMEDIATE)."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.checks import run_checks
from django.core.management import call_command

from agentstore.checks import check_sqlite_databases
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
