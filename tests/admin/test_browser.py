"""The admin in a real browser: Playwright driving Debian's Chromium (headless).

``test_admin_tour`` logs in, opens a seeded session, expands the tree, opens
the context view of the leaf, breaks a hold (through its confirmation page) and
reads a task's timeline. ``test_every_page_fits`` opens every agentstore page —
for every session kind — at a laptop's 1366 px and a desktop's 1920 px and
checks that nothing overflows horizontally (the page, and every changelist
table inside its scroll box). Each step saves a screenshot under
``var/screenshots/`` (CI keeps them as artifacts).

Never downloads a browser: it runs ``/usr/bin/chromium`` (``apt-get install
chromium``) and is skipped, with the reason, when that or the ``playwright``
package is missing.
"""

from __future__ import annotations

import os
import threading
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
    page.wait_for_selector("#confirm")
    assert "SessionLocked" in page.inner_text("#confirm")
    assert Holder.objects.filter(session_id=world.tree_id).exists()  # not yet
    shot(page, "5-break-lock-confirm")
    page.click("#confirm-yes")
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


#: Viewport widths every page must fit: a 1366 px laptop and a 1920 px desktop.
WIDTHS = (1366, 1920)

# Horizontal overflow of the page, of every changelist table inside the scroll
# box the admin gives it (which hides an overflow from the page check), and of
# the content of agentstore's own views — and overlap inside a page of columns
# (the LangGraph thread page's tree beside its checkpoint): a column whose
# content is wider than the column spills over its neighbour without making
# anything scroll, so each column's content must fit it and nothing drawn in
# one column may reach into the next.
_OVERFLOW = """() => {
  const doc = document.documentElement;
  const out = [];
  if (doc.scrollWidth > doc.clientWidth + 1)
    out.push(`page ${doc.scrollWidth} > ${doc.clientWidth}`);
  for (const box of document.querySelectorAll('.results, .agentstore-view #content-main')) {
    if (box.scrollWidth > box.clientWidth + 1)
      out.push(`${box.className || box.id} ${box.scrollWidth} > ${box.clientWidth}`);
  }
  for (const grid of document.querySelectorAll('.agentstore-thread')) {
    const cells = [...grid.children];
    for (const cell of cells) {
      if (cell.scrollWidth > cell.clientWidth + 1)
        out.push(`column #${cell.id} ${cell.scrollWidth} > ${cell.clientWidth}`);
    }
    for (let i = 0; i + 1 < cells.length; i++) {
      const next = cells[i + 1].getBoundingClientRect();
      for (const el of cells[i].querySelectorAll('*')) {
        const r = el.getBoundingClientRect();
        if (r.width && r.right > next.left + 1 && r.top < next.bottom && r.bottom > next.top) {
          out.push(`#${cells[i].id} overlaps #${cells[i + 1].id}: ${el.tagName} ends at ` +
                   `${Math.round(r.right)} > ${Math.round(next.left)}`);
          break;
        }
      }
    }
  }
  return out;
}"""


def fits(page: Any, pages: list[tuple[str, str]]) -> list[str]:
    """Open each ``(name, url)`` at every width of :data:`WIDTHS`; what overflows or overlaps.

    Every fold is opened first, so what hides inside a ``<details>`` is measured
    too; a screenshot of each goes to ``var/screenshots/fit-<width>-<name>.png``.
    """
    problems: list[str] = []
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        for name, url in pages:
            response = page.goto(url)
            assert response is not None and response.status == 200, (name, url)
            page.evaluate("() => document.querySelectorAll('details').forEach(d => d.open = true)")
            problems += [f"{width}px {name}: {p}" for p in page.evaluate(_OVERFLOW)]
            page.screenshot(path=str(SHOTS / f"fit-{width}-{name}.png"), full_page=True)
    return problems


def log_in(page: Any, base: str) -> None:
    page.goto(f"{base}/admin/login/?next=/admin/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", "tour-password")
    page.click("input[type=submit]")
    page.wait_for_selector("#agentstore-dashboard")


def _pages(world: World, log_id: str, base: str) -> list[tuple[str, str]]:
    session = f"{base}/admin/agentstore/session"
    pages = [
        ("index", f"{base}/admin/"),
        ("sessions", f"{session}/"),
        ("entries", f"{base}/admin/agentstore/entry/"),
        ("entries-log", f"{base}/admin/agentstore/entry/?session__id__exact={log_id}"),
        ("tasks", f"{base}/admin/agentstore/task/"),
        ("task", f"{base}/admin/agentstore/task/{world.tool_task_id}/change/"),
        ("workflow", f"{base}/admin/agentstore/workflowrun/{world.workflow_id}/change/"),
        ("runs", f"{base}/admin/agentstore/runtask/"),
        ("run", f"{base}/admin/agentstore/runtask/{world.run_id}/change/"),
        ("holds", f"{base}/admin/agentstore/holder/"),
        ("grants-list", f"{base}/admin/agentstore/grant/"),
        ("usage", f"{base}/admin/agentstore/session/usage/?days=30"),
    ]
    for kind, sid in (("tree", world.tree_id), ("log", log_id)):
        for view in ("change", "tree", "context", "transcript"):
            pages.append((f"{kind}-{view}", f"{session}/{sid}/{view}/"))
    for view in ("change", "steps", "grants"):
        pages.append((f"loop-{view}", f"{session}/{world.loop_id}/{view}/"))
    return pages


def seed_integrations() -> dict[str, str]:
    """A Pydantic AI conversation and a LangGraph thread with a fork and an open interrupt.

    What the integrations store, as their own code stores it (offline models and
    graphs): ``{"pydantic": session id, "graph": thread id}``. Long texts and
    deep forks are what make a page overflow if anything does.
    """
    from langgraph.types import Command

    from agentstore.integrations.langgraph import AgentStoreSaver
    from agentstore.integrations.pydantic_ai import MessageHistory
    from tests.integrations.graphs import approval_graph, chat_graph
    from tests.integrations.pydantic_fakes import thoughtful_weather_agent

    with MessageHistory("weather-pydantic") as history:
        for city in ("Paris", "Oslo"):
            result = thoughtful_weather_agent().run_sync(
                f"Weather in {city}?", message_history=history.load()
            )
            history.save(result)
    graph = approval_graph(AgentStoreSaver())
    config = {"configurable": {"thread_id": "refunds-42"}}
    graph.invoke({"request": "refund order 41 " + "with-a-long-unbroken-reason-" * 6}, config)
    first_wait = graph.get_state(config)
    graph.invoke(Command(resume="yes"), config)
    graph.invoke(Command(resume="no"), first_wait.config)  # a fork from the first wait
    graph.invoke({"request": "refund order 42"}, config)  # waits again
    chat = chat_graph()
    chat_config = {"configurable": {"thread_id": "chat-7"}}
    for text in ("hello", "x" * 300, "the weather in Paris?"):
        chat.invoke({"messages": [("human", text)]}, chat_config)
    return {"pydantic": "weather-pydantic", "graph": "refunds-42", "chat": "chat-7"}


def seeded_integrations() -> dict[str, str]:
    """:func:`seed_integrations` on a thread of its own.

    Playwright's sync API runs an event loop in the test's thread, and the
    agents and graphs run their own.
    """
    out: dict[str, str] = {}
    errors: list[BaseException] = []

    def seed() -> None:
        try:
            out.update(seed_integrations())
        except BaseException as exc:  # re-raised in the test's thread
            errors.append(exc)
        finally:
            connections.close_all()

    worker = threading.Thread(target=seed)
    worker.start()
    worker.join()
    if errors:
        raise errors[0]
    return out


@pytest.mark.django_db(transaction=True)
def test_every_page_fits(page: Any, live_server: Any) -> None:
    from agentstore.demo import log as demo_log
    from agentstore.stores.tree import TreeStore
    from agentstore.types import MessageEntity

    User.objects.create_superuser("admin", "admin@example.com", "tour-password")
    world: World = seed_world()
    demo_log.seed(None)
    integrations = seeded_integrations()
    # Long names, paths and unbroken text: what makes a page overflow if anything does.
    tree = TreeStore()
    long = tree.create_session("/srv/" + "very-long-directory-name/" * 8, "a long name " * 12)
    tree.append_message(long.id, None, MessageEntity(role="user", content="x" * 400))
    base = live_server.url
    log_in(page, base)
    session = f"{base}/admin/agentstore/session"
    pages = [
        *_pages(world, demo_log.SESSION_ID, base),
        ("long-tree", f"{session}/{long.id}/tree/"),
        ("long-change", f"{session}/{long.id}/change/"),
        *[
            (f"pydantic-{view}", f"{session}/{integrations['pydantic']}/{view}/")
            for view in ("change", "tree", "context", "transcript")
        ],
        ("graph-thread", f"{session}/{integrations['graph']}/checkpoints/"),
        ("graph-chat", f"{session}/{integrations['chat']}/checkpoints/"),
    ]
    problems = fits(page, pages)
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        # The confirmation page of an operation fits too.
        page.goto(f"{base}/admin/agentstore/session/{world.tree_id}/change/")
        page.click("#break-lock")
        page.wait_for_selector("#confirm")
        problems += [f"{width}px confirm: {p}" for p in page.evaluate(_OVERFLOW)]
        page.screenshot(path=str(SHOTS / f"fit-{width}-confirm.png"), full_page=True)
    assert not problems, "\n".join(problems)
