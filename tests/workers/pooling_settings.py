"""Settings of the pooling test's uvicorn server (``tests/test_pooling.py``).

The multi-server test's settings, and a per-process follow cap above the test's
40 concurrent streams: under ASGI a stream holds no thread, and an explicit cap
is used as given (``agentstore.serving``), where the derived default (16) would
refuse the test's streams with ``503 follow_capacity``.
"""

from __future__ import annotations

from tests.workers.multiserver_settings import *  # noqa: F403
from tests.workers.multiserver_settings import AGENTSTORE as _SHARED

AGENTSTORE = {**_SHARED, "FOLLOW_MAX_PER_PROCESS": 64}
