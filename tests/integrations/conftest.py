"""Fixtures of the integration tests."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from asgiref.sync import sync_to_async
from django.db import connections


@pytest.fixture(autouse=True)
def _close_worker_thread_connections() -> Iterator[None]:
    """After each test, close the connection of asgiref's shared worker thread.

    The integrations' coroutines do their database work there (sync_to_async,
    thread-sensitive); PostgreSQL cannot drop the test database while that
    connection stays open.
    """
    yield
    asyncio.run(sync_to_async(connections.close_all)())
