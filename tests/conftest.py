"""Shared fixtures and the backend markers of the agentstore test suite.

The suite runs on whatever ``DATABASE_URL`` names: a SQLite file by default,
PostgreSQL when ``DATABASE_URL=postgres://…``. Tests marked ``sqlite_only`` or
``postgres_only`` are skipped — visibly, with a reason — on the other backend.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import connection, connections

REPO_ROOT = Path(__file__).resolve().parent.parent


def database_vendor() -> str:
    engine = settings.DATABASES["default"]["ENGINE"]
    return "sqlite" if engine.endswith("sqlite3") else "postgresql"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    vendor = database_vendor()
    for item in items:
        if vendor != "sqlite" and item.get_closest_marker("sqlite_only"):
            item.add_marker(pytest.mark.skip(reason="SQLite-only behaviour; running on PostgreSQL"))
        if vendor != "postgresql" and item.get_closest_marker("postgres_only"):
            item.add_marker(pytest.mark.skip(reason="PostgreSQL-only behaviour; running on SQLite"))


def pytest_report_header(config: pytest.Config) -> str:
    db = settings.DATABASES["default"]
    return (
        f"agentstore database: {database_vendor()} ({db.get('TEST', {}).get('NAME') or db['NAME']})"
    )


@pytest.fixture
def now() -> datetime:
    return datetime(2026, 5, 31, 12, 34, 56, 789000, tzinfo=UTC)


def database_url_of_test_db() -> str:
    """A DATABASE_URL naming the test database the current test runs on."""
    config: dict[str, Any] = connection.settings_dict
    if connection.vendor == "sqlite":
        return "sqlite:///" + str(Path(config["NAME"]).resolve())
    auth = config["USER"] or ""
    if config["PASSWORD"]:
        auth += ":" + config["PASSWORD"]
    host = config["HOST"] or "127.0.0.1"
    port = f":{config['PORT']}" if config["PORT"] else ""
    return f"postgres://{auth}@{host}{port}/{config['NAME']}"


@pytest.fixture
def test_database_url(transactional_db: None) -> Iterator[str]:
    yield database_url_of_test_db()


@pytest.fixture(scope="session", autouse=True)
def _close_leftover_connections(request: pytest.FixtureRequest) -> Iterator[None]:
    """Close this process's other PostgreSQL connections before the test database is dropped.

    ``DROP DATABASE`` refuses a database with sessions ("is being accessed by
    other users"), and two kinds outlive the tests that opened them:

    * the LISTEN connection a follower or worker starts (agentstore/notify.py);
    * the connection of asgiref's one shared sync thread: an ORM call made
      through ``sync_to_async`` from a bare ``asyncio.run`` (``aenqueue``,
      ``aget_result``, ``LogStore.afollow`` in a test) runs in that thread,
      which lives as long as the process, and its connection with it.
      Thread-sensitive code run the same way lands in the same thread, so
      ``close_all`` there closes it.

    Requesting ``django_db_setup`` here makes this teardown run before its.
    """
    if database_vendor() != "postgresql":
        yield
        return
    request.getfixturevalue("django_db_setup")
    yield
    from agentstore import notify

    notify.shutdown()
    asyncio.run(sync_to_async(connections.close_all)())
