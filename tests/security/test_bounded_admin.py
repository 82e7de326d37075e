"""Admin pages cost a page, not a session (issue 13, item 3).

The context view was quadratic (100,000 entries: minutes of CPU) and the tree,
transcript and steps views read the whole session to show one page. Now the
tree draws a window of ``TREE_WINDOW`` entries with links to older windows,
the transcript and steps page through an index, and the context view refuses
a branch longer than ``MAX_CONTEXT_BRANCH`` with an explanation. Times are
measured by ``bench/admin_pages.py``, never asserted here.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from agentstore.models import Step
from agentstore.selectors.admin_views import TREE_WINDOW
from agentstore.stores import SessionStore, TreeStore
from tests.security.chains import STAMP, compact_every, insert_chain

BIG = 100_000


@pytest.fixture
def admin(db: None) -> Client:
    user = get_user_model().objects.create_superuser("bounded-admin", "b@example.com", "pw")
    client = Client()
    client.force_login(user)
    return client


def page(client: Client, name: str, sid: str, **query: Any) -> str:
    response = client.get(reverse(f"admin:agentstore_session_{name}", args=[sid]), query)
    assert response.status_code == 200, response.content[:500]
    return response.content.decode()


def drawn_seqs(html: str) -> list[int]:
    return [int(seq) for seq in re.findall(r'<div class="as-node[^"]*" id="e-(\d+)"', html)]


@pytest.mark.slow
def test_every_session_page_of_a_100000_entry_session_is_one_page(admin: Client) -> None:
    sid = TreeStore().create_session("/big").id
    insert_chain(sid, BIG)

    # The tree: the latest window, cut from the part above, with a link to it.
    tree = page(admin, "tree", sid)
    seqs = drawn_seqs(tree)
    assert seqs and min(seqs) > BIG - TREE_WINDOW and max(seqs) == BIG
    assert f"#{BIG - TREE_WINDOW + 1}–#{BIG}" in tree
    assert f"?before={BIG - TREE_WINDOW + 1}" in tree
    assert "continues from" in tree and "parent missing" not in tree
    older = page(admin, "tree", sid, before=BIG - TREE_WINDOW + 1)
    seqs = drawn_seqs(older)
    assert seqs and max(seqs) <= BIG - TREE_WINDOW and min(seqs) > BIG - 2 * TREE_WINDOW
    assert "latest entries" in older

    # The context view says the branch is too long instead of building it.
    context = page(admin, "context", sid)
    assert 'class="errornote"' in context and "MAX_CONTEXT_BRANCH=2000" in context
    # An entry with a shorter branch is still explained.
    short = page(admin, "context", sid, entry="e50")
    assert short.count("model-facing message on the branch") == 50

    # The transcript: the first page, then the next one through ?after=.
    first = page(admin, "transcript", sid)
    assert "?after=e200" in first
    with CaptureQueriesContext(connection) as queries:
        second = page(admin, "transcript", sid, after="e200")
    assert "?after=e400" in second
    # django session + user + the session row + the cursor's key + one page.
    assert len(queries) <= 6

    # The session page and the session's entries list.
    assert "100000" in page(admin, "change", sid).replace(",", "")
    entries = admin.get(reverse("admin:agentstore_entry_changelist"), {"session__id__exact": sid})
    assert entries.status_code == 200


def test_steps_view_reads_one_page(admin: Client) -> None:
    sid = SessionStore().create("loop", model="m", system_prompt="p", cwd="/loop").id
    Step.objects.bulk_create(
        [
            Step(
                session_id=sid,
                step_index=i,
                step_type="assistant",
                content=f"step {i}",
                created_at=STAMP,
            )
            for i in range(450)
        ]
    )
    with CaptureQueriesContext(connection) as queries:
        html = page(admin, "steps", sid)
    assert "step 199<" in html and "step 200<" not in html
    # The page reads its rows, not the whole trace.
    reads = [q["sql"] for q in queries if 'FROM "agentstore_step"' in q["sql"]]
    assert reads and all("LIMIT" in sql for sql in reads)
    html = page(admin, "steps", sid, page=3)
    assert "step 449<" in html and "step 399<" not in html


def test_the_context_view_explains_the_kept_part_of_a_long_compacted_branch(
    admin: Client,
) -> None:
    sid = TreeStore().create_session("/compacted").id
    insert_chain(sid, 60)
    compact_every(sid, 1000, 50, 5)  # e50 compacts, keeping e45 onwards
    with override_settings(AGENTSTORE={"MAX_CONTEXT_BRANCH": 20}):
        context = page(admin, "context", sid, entry="e60")
        assert 'class="errornote"' not in context
        assert "16 entries from the compaction" in context
        # Uncompacted and too long: still refused.
        assert 'class="errornote"' in page(admin, "context", sid, entry="e49")
