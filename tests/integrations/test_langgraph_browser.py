"""The LangGraph thread page in a real browser (headless Chromium), with a screenshot.

Runs a graph that waits for approval twice, resumes once and forks from an old
checkpoint, then opens its thread page; and a ``MessagesState`` chat, whose
messages the page shows like conversation items. Both pages are measured at 1366
and 1920 px: nothing overflows, and the checkpoint tree never overlaps the
checkpoint beside it. The screenshot goes to
``var/screenshots/admin-langgraph-thread.png`` (docs/images/ holds a copy for
docs/integrations/langgraph.md). Same browser rules as tests/admin/test_browser.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import User
from langgraph.types import Command

from agentstore.integrations.langgraph import AgentStoreSaver
from tests.admin.test_browser import CHROMIUM, fits, page, shot  # noqa: F401 (the page fixture)
from tests.integrations.graphs import approval_graph, chat_graph

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="needs Debian's Chromium at /usr/bin/chromium"
    ),
]


@pytest.mark.django_db(transaction=True)
def test_thread_page_in_the_browser(page: Any, live_server: Any) -> None:  # noqa: F811
    User.objects.create_superuser("admin", "admin@example.com", "tour-password")
    graph = approval_graph(AgentStoreSaver())
    config = {"configurable": {"thread_id": "refunds-42"}}
    graph.invoke({"request": "refund order 41"}, config)
    first_wait = graph.get_state(config)
    graph.invoke(Command(resume="yes"), config)
    # Time travel: answer the first question differently, on a fork …
    graph.invoke(Command(resume="no"), first_wait.config)
    # … and carry on from there: the next request waits for approval.
    graph.invoke({"request": "refund order 42"}, config)
    chat = chat_graph()
    for text in ("Weather in Paris?", "And in Oslo? " + "Please be thorough. " * 20):
        chat.invoke({"messages": [("human", text)]}, {"configurable": {"thread_id": "chat-9"}})

    base = live_server.url
    page.goto(f"{base}/admin/login/?next=/admin/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", "tour-password")
    page.click("input[type=submit]")
    page.goto(f"{base}/admin/agentstore/session/refunds-42/checkpoints/")
    page.wait_for_selector("#checkpoint-tree")
    assert "1 fork" in page.inner_text("#thread-summary")
    assert "2 branches" in page.inner_text("#checkpoint-tree")
    assert "approve refund order 42?" in page.inner_text("#interrupts")
    shot(page, "langgraph-thread")
    # Clicking a checkpoint shows the state there.
    page.locator("#checkpoint-tree .as-node a").first.click()
    page.wait_for_selector("#channels")
    channels = page.inner_text("#channels")
    assert "refund order 41" in channels
    assert "Interrupt(" not in page.inner_text("#checkpoint-detail")  # no Python repr

    # A MessagesState's messages read like a conversation: role, then text.
    page.goto(f"{base}/admin/agentstore/session/chat-9/checkpoints/")
    messages = page.inner_text("#channels .as-messages")
    assert "message\tuser" in messages or "message user" in messages
    for text in ("Weather in Paris?", "#1 echo: Weather in Paris?", "#2 echo: And in Oslo?"):
        assert text in messages
    assert "HumanMessage(" not in page.inner_text("#checkpoint-detail")

    session = f"{base}/admin/agentstore/session"
    problems = fits(
        page,
        [
            ("langgraph-thread", f"{session}/refunds-42/checkpoints/"),
            ("langgraph-chat", f"{session}/chat-9/checkpoints/"),
        ],
    )
    assert not problems, "\n".join(problems)
