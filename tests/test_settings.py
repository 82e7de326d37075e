"""``DATABASE_URL`` parsing and the ``AGENTSTORE`` settings namespace."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from agentstore.conf import DEFAULTS, agentstore_settings
from project.database_url import SQLITE_INIT_COMMAND, for_asgi, parse_database_url

BASE = Path("/srv/app")


def test_sqlite_url_relative_path_keeps_the_recommended_options() -> None:
    config = parse_database_url("sqlite:///var/agent.db", base_dir=BASE)

    assert config["ENGINE"] == "django.db.backends.sqlite3"
    assert config["NAME"] == "/srv/app/var/agent.db"
    assert config["TEST"] == {"NAME": "/srv/app/var/test_agent.db"}
    assert config["OPTIONS"]["transaction_mode"] == "IMMEDIATE"
    assert config["OPTIONS"]["timeout"] == 20
    assert config["OPTIONS"]["init_command"] == SQLITE_INIT_COMMAND
    assert "journal_mode=WAL" in SQLITE_INIT_COMMAND
    assert "synchronous=NORMAL" in SQLITE_INIT_COMMAND


def test_sqlite_url_absolute_path() -> None:
    assert parse_database_url("sqlite:////data/a.db", base_dir=BASE)["NAME"] == "/data/a.db"


def test_postgres_url() -> None:
    config = parse_database_url(
        "postgres://agent:p%40ss@db.local:6543/agentstore?sslmode=require", base_dir=BASE
    )

    assert config["ENGINE"] == "django.db.backends.postgresql"
    assert (config["NAME"], config["USER"], config["PASSWORD"]) == ("agentstore", "agent", "p@ss")
    assert (config["HOST"], config["PORT"]) == ("db.local", "6543")
    assert config["OPTIONS"] == {"sslmode": "require"}
    assert parse_database_url("postgresql://u@h/n", base_dir=BASE)["PORT"] == ""


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("mysql://u@h/n", "unsupported scheme"),
        ("sqlite://", "needs a path"),
        ("postgres://u@h/", "needs a database name"),
    ],
)
def test_bad_urls_are_refused_clearly(url: str, message: str) -> None:
    with pytest.raises(ImproperlyConfigured, match=message):
        parse_database_url(url, base_dir=BASE)


def test_agentstore_settings_have_defaults_and_follow_overrides() -> None:
    assert agentstore_settings.WRITE_ATTEMPTS == DEFAULTS["WRITE_ATTEMPTS"] == 3
    with override_settings(AGENTSTORE={"WRITE_ATTEMPTS": 7}):
        assert agentstore_settings.WRITE_ATTEMPTS == 7
    assert agentstore_settings.WRITE_ATTEMPTS == 3


def test_unknown_agentstore_settings_are_refused() -> None:
    with (
        override_settings(AGENTSTORE={"WRITE_ATTEMPT": 7}),
        pytest.raises(ImproperlyConfigured, match="unknown keys: WRITE_ATTEMPT"),
    ):
        _ = agentstore_settings.WRITE_ATTEMPTS
    with pytest.raises(AttributeError):
        _ = agentstore_settings.NOT_A_SETTING


def test_postgres_url_with_a_pool() -> None:
    config = parse_database_url("postgres://u@h/n?pool=1&sslmode=require", base_dir=BASE)
    assert config["OPTIONS"] == {"pool": True, "sslmode": "require"}
    assert config["CONN_MAX_AGE"] == 0  # Django refuses persistent connections with a pool
    sized = parse_database_url(
        "postgres://u@h/n?pool_min_size=2&pool_max_size=8&pool_timeout=2.5", base_dir=BASE
    )
    assert sized["OPTIONS"] == {"pool": {"min_size": 2, "max_size": 8, "timeout": 2.5}}
    assert parse_database_url("postgres://u@h/n?pool=0", base_dir=BASE)["OPTIONS"] == {}
    assert parse_database_url("postgres://u@h/n", base_dir=BASE)["CONN_MAX_AGE"] == 60
    with pytest.raises(ImproperlyConfigured, match="pool_max_size"):
        parse_database_url("postgres://u@h/n?pool_max_size=lots", base_dir=BASE)


def test_asgi_closes_unpooled_connections_per_request() -> None:
    databases = {
        "default": parse_database_url("postgres://u@h/n", base_dir=BASE),
        "pooled": parse_database_url("postgres://u@h/n?pool=1", base_dir=BASE),
        "local": parse_database_url("sqlite:///db.sqlite3", base_dir=BASE),
    }
    for_asgi(databases)
    assert {alias: c["CONN_MAX_AGE"] for alias, c in databases.items()} == {
        "default": 0,
        "pooled": 0,
        "local": 0,
    }
    assert databases["pooled"]["OPTIONS"]["pool"] is True
