"""The session page and its tree, context, transcript, step and grant views."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from agentstore.stores.tree import TreeStore
from agentstore.types import MessageEntity
from tests.admin.seed import RUN, World

pytestmark = pytest.mark.django_db


def url(name: str, *args: str) -> str:
    return reverse(f"admin:agentstore_session_{name}", args=args)


def test_session_page_shows_header_facts_hold_children_and_tasks(
    admin_client: Client, world: World
) -> None:
    page = admin_client.get(url("change", world.tree_id)).content.decode()
    facts = page[page.index('id="session-facts"') :]
    assert "/repo/demo" in facts
    assert f"{10 + RUN}" in facts  # entry count
    # agent, queued tool, workflow and its agent are queued; the expired tool task runs.
    assert "queued 5" in facts and "running 1" in facts  # the run is one of them
    hold = page[page.index('id="session-hold"') :]
    assert "pid <strong>4242</strong> on <strong>build-7</strong>" in hold
    assert 'id="break-lock"' in hold
    # Its form must not sit inside the change form (nested forms submit the outer one).
    assert page.index('id="break-lock"') < page.index('id="session_form"')
    children = page[page.index('id="session-children"') :]
    assert "explore" in children and "review" in children
    assert url("tree", world.tree_id) in page
    assert url("context", world.tree_id) in page


def test_child_session_page_links_parent_and_agent_task(admin_client: Client, world: World) -> None:
    page = admin_client.get(url("change", world.child_session_id)).content.decode()
    assert url("change", world.tree_id) in page
    assert reverse("admin:agentstore_task_change", args=[world.agent_task_id]) in page


def test_unknown_session_views_are_404(admin_client: Client, db: None) -> None:
    for name in ("tree", "context", "transcript", "steps", "grants"):
        assert admin_client.get(url(name, "nope")).status_code == 404


def test_tree_view_draws_structure(admin_client: Client, world: World) -> None:
    page = admin_client.get(url("tree", world.tree_id)).content.decode()
    tree = page[page.index('id="entry-tree"') :]
    assert "2 branch points" in page and "1 compaction" in page
    assert tree.count('class="as-branch') == 4  # two branch points of two branches
    assert "label: rejected" in tree  # the label of branch A
    assert "thinking → high" in tree and "→ anthropic/claude-opus" in tree
    assert 'kept from <a href="#e-8">#8</a> · 5400 tokens before' in tree
    node = re.search(r'<div class="as-node[^"]*"[^>]*data-entry="' + world.hidden_id, tree)
    assert node and "hidden-entry" in node.group(0)
    leaf = re.search(r'<div class="as-node[^"]*"[^>]*data-entry="' + world.leaf_id, tree)
    assert leaf and " leaf" in leaf.group(0)
    # The 30-message run after the compaction folds its middle (3 kept each end).
    assert f"{RUN - 6 - 1} more entries (#14–#36)" in tree
    # The path to the leaf is open; the rejected branch A is closed.
    branches = re.findall(r'<details class="as-branch[^>]*>', tree)
    assert sum(" open" in b for b in branches) == 2


def test_tree_view_query_count_is_constant(admin_client: Client, world: World) -> None:
    admin_client.get(url("tree", world.tree_id))
    with CaptureQueriesContext(connection) as before:
        admin_client.get(url("tree", world.tree_id))
    tree = TreeStore()
    parent = world.leaf_id
    for i in range(60):
        parent = tree.append_message(
            world.tree_id, parent, MessageEntity(role="user", content=f"more {i}")
        ).id
    with CaptureQueriesContext(connection) as after:
        page = admin_client.get(url("tree", world.tree_id)).content.decode()
    # django session + user + the session row + the window's lower edge (one
    # index probe) + one query for every entry of the window.
    assert len(before) == len(after) == 5
    assert "more 59" in page


@pytest.mark.slow
def test_tree_view_of_a_deep_chain(admin_client: Client, db: None) -> None:
    """1,500 single-child entries: deeper than Python's recursion limit, folded to a link."""
    tree = TreeStore()
    sid = tree.create_session("/deep").id
    parent = None
    for i in range(1500):
        parent = tree.append_message(sid, parent, MessageEntity(role="user", content=f"m{i}")).id
    with CaptureQueriesContext(connection) as queries:
        page = admin_client.get(url("tree", sid)).content.decode()
    assert len(queries) == 5
    # Three kept at each end of the plain run, then the leaf; the middle is a link.
    assert "1493 more entries (#4–#1496)" in page
    assert "seq__gte=4&amp;seq__lte=1496" in page
    assert page.count('<div class="as-node') == 7


def test_context_view_explains_every_message(admin_client: Client, world: World) -> None:
    page = admin_client.get(url("context", world.tree_id)).content.decode()
    assert world.leaf_id in page  # defaults to the latest leaf
    rows = page[page.index('id="context-messages"') :]
    assert "summary of compaction" in rows
    assert rows.count("kept by the compaction (retained tail)") == 2
    assert rows.count("model-facing message on the branch") == RUN
    assert "anthropic / claude-opus" in page and ">high<" in page
    assert "usage anchor" in rows and 'class="anchor"' in rows
    left_out = page[page.index("branch entries not sent") :]
    assert "replaced by the compaction summary" in left_out


def test_context_view_at_another_entry(admin_client: Client, world: World) -> None:
    page = admin_client.get(url("context", world.tree_id), {"entry": world.branch_a_id})
    text = page.content.decode()
    rows = text[text.index('id="context-messages"') :]
    assert "Plan A" in rows and "Plan B" not in rows
    assert "none (no provider usage" in text


def test_context_view_of_an_unknown_entry_says_so(admin_client: Client, world: World) -> None:
    response = admin_client.get(url("context", world.tree_id), {"entry": "missing"})
    assert response.status_code == 200
    assert 'class="errornote"' in response.content.decode()
    assert "missing" in response.content.decode()


def test_transcript_lists_displayed_messages(admin_client: Client, world: World) -> None:
    page = admin_client.get(url("transcript", world.tree_id)).content.decode()
    assert "Plan the refactor" in page and "step 29" in page
    assert "internal note" not in page  # display=False


def test_steps_and_grants_of_a_loop_session(admin_client: Client, world: World) -> None:
    steps = admin_client.get(url("steps", world.loop_id)).content.decode()
    assert (
        "execute_js" in steps and "Sunny" in steps and "{&quot;code&quot;:&quot;1+1&quot;}" in steps
    )
    grants = admin_client.get(url("grants", world.loop_id)).content.decode()
    assert "Allow fetch from api.example.com?" in grants and 'id="revoke-grants"' in grants


def test_dashboard_on_the_admin_index(admin_client: Client, world: World) -> None:
    page = admin_client.get(reverse("admin:index")).content.decode()
    board = page[page.index('id="agentstore-dashboard"') :]
    board = board[: board.index("</div>")]
    text = re.sub(r"\s+", " ", re.sub("<[^>]+>", " ", board))
    assert "Sessions 4 (loop 1, tree 3)" in text  # the tree, the loop and two children
    assert "Active holds 1 " in text
    assert "queued 5 running 1" in text  # the world's run is one of the queued
    assert re.search(r'agentstore-expired">1<', board)


def test_views_of_an_empty_session(admin_client: Client, db: None) -> None:
    sid = TreeStore().create_session("/empty").id
    tree = admin_client.get(url("tree", sid)).content.decode()
    assert "This session has no entries." in tree
    context = admin_client.get(url("context", sid)).content.decode()
    assert "This session has no entries." in context
    assert "No displayed messages." in admin_client.get(url("transcript", sid)).content.decode()


def test_session_ids_with_slashes_and_spaces(admin_client: Client, db: None) -> None:
    # The stores refuse such ids now (docs/api.md "Names"), but a row written
    # around them (raw SQL, another program, an older version) must still render.
    from django.contrib.admin.utils import quote
    from django.utils import timezone

    from agentstore.models import Session

    now = timezone.now()
    session = Session.objects.create(
        id="team/a b", kind="tree", cwd="/repo", created_at=now, updated_at=now
    )

    page = admin_client.get(url("change", quote(session.id)))
    assert page.status_code == 200 and "team/a b" in page.content.decode()
    assert admin_client.get(url("tree", quote(session.id))).status_code == 200


def test_log_session_pages_render(admin_client: Client, db: None) -> None:
    """agentsession entries share the entry table: the tree and context views draw them too."""
    from agentstore.stores.log import LogStore

    store = LogStore()
    session = store.create({"id": "log-tour", "cwd": "/repo"})
    config = store.append(session.id, {"type": "config", "model": "m"})
    item = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}
    leaf = store.append(session.id, {"type": "item", "item": item})
    store.close()
    tree = admin_client.get(url("tree", session.id)).content.decode()
    assert config in tree and leaf in tree and "leaf" in tree
    context = admin_client.get(url("context", session.id))
    assert context.status_code == 200 and leaf in context.content.decode()
    page = admin_client.get(url("change", session.id)).content.decode()
    assert "Not held." in page  # close() released the hold
