"""Settings of the SDK-turn server (``tests/integrations/test_openai_agents_gunicorn.py``).

The demo project's settings with one more URL: ``POST /turn/<conversation>``
runs one OpenAI Agents SDK turn (:mod:`tests.workers.sdk_turn_urls`).
"""

from __future__ import annotations

from project.settings import *  # noqa: F403

ROOT_URLCONF = "tests.workers.sdk_turn_urls"
