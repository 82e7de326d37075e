"""The admin in a real browser: Playwright driving Debian's Chromium (headless).

Logs in, opens a seeded session, expands the tree, opens the context view of
the leaf, breaks a hold and reads a task's timeline, saving a screenshot of each
step under ``var/screenshots/`` (CI keeps them as artifacts).

Never downloads a browser: it runs ``/usr/bin/chromium`` (``apt-get install
chromium``) and is skipped, with the reason, when that or the ``playwright``
package is missing.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connections

from agentstore.models import Holder
from tests.admin.seed import World, seed_world
from tests.conftest import REPO_ROOT

CHROMIUM = Path("/usr/bin/chromium")
SHOTS = REPO_ROOT / "var" / "screenshots"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="needs Debian's Chromium at /usr/bin/chromium"
    ),
]


@pytest.fixture
def page(live_server: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    sync_api = pytest.importorskip("playwright.sync_api", reason="needs the playwright package")
    # Playwright's sync API runs an event loop in this thread; the test's own
    # ORM calls (seeding, checks) are still plain synchronous code.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    SHOTS.mkdir(parents=True, exist_ok=True)
    # Playwright's sync API runs on greenlets with their own context variables,
    # so Django sees a different connection inside and outside the block: close
    # them on both sides, or PostgreSQL keeps one open past the test database.
    connections.close_all()
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            headless=True,
            chromium_sandbox=False,
            args=["--no-sandbox", "--disable-background-networking", "--disable-dev-shm-usage"],
        )
        context = browser.new_context(viewport={"width": 1400, "height": 1000})
        try:
            yield context.new_page()
        finally:
            context.close()
            browser.close()
            connections.close_all()


def shot(page: Any, name: str) -> None:
    page.screenshot(path=str(SHOTS / f"admin-{name}.png"), full_page=True)


@pytest.mark.django_db(transaction=True)
def test_admin_tour(page: Any, live_server: Any) -> None:
    User.objects.create_superuser("admin", "admin@example.com", "tour-password")
    world: World = seed_world()
    base = live_server.url

    page.goto(f"{base}/admin/login/?next=/admin/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", "tour-password")
    page.click("input[type=submit]")
    page.wait_for_selector("#agentstore-dashboard")
    assert "Expired leases" in page.inner_text("#agentstore-dashboard")
    shot(page, "1-index")

    page.goto(f"{base}/admin/agentstore/session/{world.tree_id}/change/")
    assert "build-7" in page.inner_text("#session-hold")
    shot(page, "2-session")

    page.click("ul.agentstore-nav >> text=Tree")
    page.wait_for_selector("#entry-tree")
    # Branch A (rejected) is off the path to the leaf: drawn closed.
    branch_a = page.locator(
        "details.as-branch", has=page.locator(f'[data-entry="{world.branch_a_id}"]')
    )
    assert branch_a.get_attribute("open") is None
    assert not page.locator(f'[data-entry="{world.branch_a_id}"]').is_visible()
    branch_a.locator("summary").first.click()
    assert branch_a.get_attribute("open") is not None
    assert page.locator(f'[data-entry="{world.branch_a_id}"]').is_visible()
    assert not page.locator("#e-20").is_visible()  # inside the folded run
    page.locator("details.as-run summary").first.click()
    assert page.locator("#e-20").is_visible()
    shot(page, "3-tree")

    page.locator(f'[data-entry="{world.leaf_id}"] a.as-context').click()
    page.wait_for_selector("#context-messages")
    facts = page.inner_text("#context-facts")
    assert "anthropic / claude-opus" in facts and "high" in facts
    assert "summary of compaction" in page.inner_text("#context-messages")
    shot(page, "4-context")

    page.goto(f"{base}/admin/agentstore/session/{world.tree_id}/change/")
    page.click("#break-lock")
    page.wait_for_selector("ul.messagelist")
    assert "Broke the hold of pid 4242" in page.inner_text("ul.messagelist")
    assert "Not held." in page.inner_text("#session-hold")
    assert not Holder.objects.filter(session_id=world.tree_id).exists()
    shot(page, "5-break-lock")

    page.goto(f"{base}/admin/agentstore/task/{world.tool_task_id}/change/")
    timeline = page.inner_text("#task-timeline")
    assert "task_queued" in timeline and "task_started" in timeline
    assert page.locator("#lease-expired").is_visible()
    shot(page, "6-task")
    assert os.path.getsize(SHOTS / "admin-6-task.png") > 0
