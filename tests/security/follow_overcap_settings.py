"""The demo project's settings with a per-process follow cap above a small server's threads.

DJANGO_SETTINGS_MODULE=tests.security.follow_overcap_settings gunicorn --threads 4 project.wsgi
"""

from __future__ import annotations

from project.settings import *  # noqa: F403

AGENTSTORE = {"FOLLOW_MAX_PER_PROCESS": 16, "FOLLOW_MAX_SECONDS": 300}
