"""Settings of the multi-server test's processes (``tests/test_multiserver.py``).

The demo project's settings, a task kind the workers can run (``echo``), and
follow caps that do not get in the way of the test's streams (no per-user cap;
the per-process cap is derived from each server: ``agentstore.serving``).
"""

from __future__ import annotations

from project.settings import *  # noqa: F403

AGENTSTORE = {
    "WORKER_HANDLERS": {"echo": "tests.workers.server.echo"},
    "FOLLOW_MAX_PER_USER": 0,
    "FOLLOW_MAX_SECONDS": 300.0,
}
