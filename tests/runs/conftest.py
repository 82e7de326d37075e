"""The run tests' settings (the test runners of :mod:`tests.runs.runners`), and the
integrations' cleanup of the connections their threads keep (runners use them)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from django.conf import settings
from django.test import override_settings

from tests.integrations.conftest import (  # noqa: F401 - the integrations' connection cleanup
    _close_worker_thread_connections,
)
from tests.runs.names import RUNNERS


@pytest.fixture(autouse=True)
def _runners() -> Iterator[None]:
    with override_settings(AGENTSTORE={**settings.AGENTSTORE, "RUNNERS": RUNNERS}):
        yield
