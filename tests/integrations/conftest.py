"""Fixtures of the integration tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(autouse=True)
def _close_saver_connections() -> Iterator[None]:
    # The savers' worker thread keeps its connection open between calls; close
    # it so no connection outlives the test database (PostgreSQL refuses to
    # drop a database in use).
    yield
    from agentstore.integrations.langgraph import close_connections

    close_connections()
