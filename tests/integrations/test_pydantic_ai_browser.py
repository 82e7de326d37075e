"""A Pydantic AI conversation in the admin, in a real browser (headless Chromium).

Runs two turns of a real agent (offline ``FunctionModel``: system prompt,
thinking, a refused tool call and its validation errors, the corrected call,
the return, the answer) through ``MessageHistory``, then opens the session's
tree, transcript and context view at 1366 and 1920 px and checks what a person
sees — roles, texts, tool calls and returns — and that nothing overflows. Saves
``var/screenshots/pydantic-ai-session-tree.png`` (the image in
docs/integrations/pydantic-ai.md is a copy of it) and ``fit-<width>-pydantic-*.png``.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connections

from agentstore.integrations.pydantic_ai import MessageHistory
from tests.admin.test_browser import CHROMIUM, SHOTS, fits, log_in, page  # noqa: F401
from tests.integrations.pydantic_fakes import thoughtful_weather_agent

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="needs Debian's Chromium at /usr/bin/chromium"
    ),
]


def converse() -> None:
    try:
        with MessageHistory("weather-pydantic", header={"cwd": "/srv/weather"}) as history:
            for city in ("Paris", "Oslo"):
                result = thoughtful_weather_agent().run_sync(
                    f"Weather in {city}?", message_history=history.load()
                )
                history.save(result)
    finally:
        connections.close_all()


@pytest.mark.django_db(transaction=True)
def test_conversation_in_the_admin(page: Any, live_server: Any) -> None:  # noqa: F811
    User.objects.create_superuser("admin", "admin@example.com", "tour-password")
    # Playwright's sync API runs an event loop in this thread: converse in another.
    worker = threading.Thread(target=converse)
    worker.start()
    worker.join()
    base = live_server.url
    session = f"{base}/admin/agentstore/session/weather-pydantic"
    log_in(page, base)

    page.goto(f"{session}/tree/")
    tree = page.inner_text("#entry-tree")
    for text in (
        "system",
        "You are a weather bot.",
        "Weather in Paris?",
        "The user wants the weather; the tool knows it.",
        'get_weather({"town": "Paris"})',
        "city: Field required",
        'get_weather({"city": "Oslo"})',
        "snow, -3°C",
        "In Oslo it is snow, -3°C.",
    ):
        assert text in tree, text
    assert "part_kind" not in tree
    page.set_viewport_size({"width": 1366, "height": 900})
    page.screenshot(path=str(SHOTS / "pydantic-ai-session-tree.png"), full_page=True)

    page.goto(f"{session}/transcript/")
    transcript = page.inner_text("#transcript")
    assert "No items." not in transcript and "Let me look that up." in transcript
    page.goto(f"{session}/context/")
    context = page.inner_text("#context-messages")
    assert "No input items" not in context
    assert "Weather in Oslo?" in context and "MessageHistory.load()" in context

    problems = fits(
        page,
        [
            (f"pydantic-{view}", f"{session}/{view}/")
            for view in ("change", "tree", "context", "transcript")
        ],
    )
    assert not problems, "\n".join(problems)
