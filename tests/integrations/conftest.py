"""Fixtures of the integration tests."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from asgiref.sync import sync_to_async
from django.db import connections


@pytest.fixture(autouse=True)
def _close_worker_thread_connections() -> Iterator[None]:
    """After each test, close connections the integrations keep on their own threads.

    The OpenAI coroutines do their database work on agentstore's own thread
    (``db_thread``), the Pydantic AI ones on asgiref's shared worker thread
    (sync_to_async, thread-sensitive), and the LangGraph
    savers on a connection they share across threads; PostgreSQL cannot drop
    the test database while those connections stay open.
    """
    yield
    asyncio.run(sync_to_async(connections.close_all)())
    from agentstore.db import thread as db_thread

    db_thread.close_connections()
    from agentstore.integrations.langgraph import close_connections

    close_connections()
