"""The demo project's settings with small follow caps, for the real-server follow test.

DJANGO_SETTINGS_MODULE=tests.security.follow_settings uvicorn project.asgi:application
"""

from __future__ import annotations

from project.settings import *  # noqa: F403

AGENTSTORE = {"FOLLOW_MAX_PER_USER": 1, "FOLLOW_MAX_PER_PROCESS": 2, "FOLLOW_MAX_SECONDS": 300}
