"""An AgentStoreSession conversation in the admin, in a real browser (headless Chromium).

Runs a three-turn conversation with tool calls through the real ``Runner``
(offline model), pops the last answer and asks again, then opens the session's
tree view in Playwright-driven Chromium and checks what a person sees: the
questions, the tool calls, the answers, and the popped answer on its own
closed branch. Saves ``var/screenshots/openai-agents-session-tree.png`` (the
image in docs/integrations/openai-agents.md is a copy of it).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from agents import Runner
from django.contrib.auth.models import User

from agentstore.integrations.openai_agents import AgentStoreSession
from tests.admin.test_browser import CHROMIUM, SHOTS, page  # noqa: F401  (the fixture)
from tests.integrations.agents_fakes import WeatherModel, offline, weather_agent

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="needs Debian's Chromium at /usr/bin/chromium"
    ),
]


def converse() -> None:
    offline()
    model = WeatherModel()

    async def turns() -> None:
        async with AgentStoreSession("weather-chat", header={"cwd": "/srv/weather"}) as session:
            for city in ("Paris", "Oslo"):
                await Runner.run(weather_agent(model), f"Weather in {city}?", session=session)
            await session.pop_item()  # take the Oslo answer back…
            await session.add_items(  # …and give a better one
                [
                    {
                        "type": "message",
                        "role": "assistant",
                        "id": "msg_retry",
                        "status": "completed",
                        "content": [
                            {
                                "type": "output_text",
                                "text": "Oslo: snow, -3°C. Wrap up!",
                                "annotations": [],
                            }
                        ],
                    }
                ]
            )
            await Runner.run(weather_agent(model), "Weather in Rome?", session=session)

    asyncio.run(turns())


@pytest.mark.django_db(transaction=True)
def test_conversation_in_the_admin_tree(page: Any, live_server: Any) -> None:  # noqa: F811
    User.objects.create_superuser("admin", "admin@example.com", "tour-password")
    # Playwright's sync API runs an event loop in this thread: converse in another.
    worker = threading.Thread(target=converse)
    worker.start()
    worker.join()
    base = live_server.url
    page.goto(f"{base}/admin/login/?next=/admin/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", "tour-password")
    page.click("input[type=submit]")
    page.goto(f"{base}/admin/agentstore/session/weather-chat/tree/")
    page.wait_for_selector("#entry-tree")
    tree = page.inner_text("#entry-tree")
    for text in ("Weather in Paris?", "get_weather", "sunny, 21°C", "Wrap up!", "fog, 9°C"):
        assert text in tree
    # The popped answer is on a branch off the path to the leaf: drawn closed.
    popped = page.locator("details.as-branch", has_text="The weather: snow, -3°C.")
    assert popped.count() >= 1
    assert popped.last.get_attribute("open") is None
    page.screenshot(path=str(SHOTS / "openai-agents-session-tree.png"), full_page=True)
