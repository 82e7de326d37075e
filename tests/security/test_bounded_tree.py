"""Walks over parents are iterative, and tree reads are bounded (issue 13, item 1).

``GET /sessions/{id}/tree`` answered 500 (RecursionError in the nested tree
serializer) for a chain about 200 deep. Now the API lists the tree flat and
depth-first in pages, and the store, the API and the admin handle a
100,000-deep chain. Paging never changes what the store answers: the pages of
``tree_page`` are ``tree`` flattened, the pages of ``branch`` are ``branch``.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from agentstore.stores import TreeStore
from agentstore.types.tree import MessageEntity, TreeNodeEntity
from tests.api.conftest import API, append_message, create_session
from tests.security.chains import insert_chain

DEEP = 100_000


def _flatten(nodes: list[TreeNodeEntity]) -> list[tuple[str, int, int]]:
    out: list[tuple[str, int, int]] = []
    stack = [(node, 0) for node in reversed(nodes)]
    while stack:
        node, depth = stack.pop()
        out.append((node.entry.id, depth, len(node.children)))
        stack.extend((child, depth + 1) for child in reversed(node.children))
    return out


def _all_tree_pages(store: TreeStore, sid: str, limit: int) -> list[tuple[str, int, int]]:
    rows: list[tuple[str, int, int]] = []
    after = ""
    while True:
        page = store.tree_page(sid, after, limit)
        rows += [(r.entry.id, r.depth, r.child_count) for r in page]
        if len(page) < limit:
            return rows
        after = page[-1].entry.id


@pytest.mark.django_db
def test_tree_pages_are_the_nested_tree_flattened() -> None:
    store = TreeStore()
    sid = store.create_session("/repo").id
    msg = MessageEntity
    root = store.append_message(sid, None, msg(role="user", content="q"))
    a = store.append_message(sid, root.id, msg(role="assistant", content="a"))
    b = store.append_message(sid, root.id, msg(role="assistant", content="b"))
    store.append_message(sid, a.id, msg(role="user", content="a2"))
    store.append_message(sid, b.id, msg(role="user", content="b2"))
    # A chain deeper than the walk climbs one query at a time, so leaving it
    # for b's subtree takes the recursive query.
    parent = a.id
    for i in range(40):
        parent = store.append_message(sid, parent, msg(role="user", content=f"deep {i}")).id
    store.append_message(sid, None, msg(role="user", content="second root"))
    expected = _flatten(store.tree(sid))
    assert len(expected) == 46
    for limit in (1, 2, 4, 7, 100):
        assert _all_tree_pages(store, sid, limit) == expected
    for limit in (1, 2, 3):
        assert store.branch(sid, b.id, limit) == store.branch(sid, b.id)[-limit:]
    assert store.branch(sid, "", 1) == store.branch(sid, "")[-1:]


@pytest.mark.django_db
def test_api_tree_of_a_200_deep_chain(api: Any) -> None:
    sid = create_session(api)["id"]
    parent = None
    for i in range(200):
        parent = append_message(api, sid, f"m{i}", parent)["id"]
    response = api.get(f"{API}/sessions/{sid}/tree?limit=500")
    assert response.status_code == 200, response.content[:300]
    rows = response.json()["results"]
    assert [row["depth"] for row in rows] == list(range(200))
    assert rows[-1]["entry"]["id"] == parent


@pytest.mark.slow
@pytest.mark.django_db
def test_a_100000_deep_chain_through_store_api_and_admin(api: Any) -> None:
    sid = create_session(api)["id"]
    insert_chain(sid, DEEP)
    store = TreeStore()

    nodes = store.tree(sid)
    depth, node = 0, nodes[0]
    while node.children:
        node, depth = node.children[0], depth + 1
    assert depth == DEEP - 1 and node.entry.id == f"e{DEEP}"

    # The API tree: flat pages, the last page reached through cursors.
    page = api.get(f"{API}/sessions/{sid}/tree?limit=500").json()
    assert [r["depth"] for r in page["results"]] == list(range(500))
    page = api.get(page["next"]).json()
    assert page["results"][0]["entry"]["id"] == "e501"
    assert page["results"][0]["depth"] == 500

    # The branch, one page from the leaf, then the page above it.
    branch = api.get(f"{API}/sessions/{sid}/branch?limit=500").json()
    assert [e["id"] for e in branch["results"]][-1] == f"e{DEEP}"
    assert branch["results"][0]["id"] == f"e{DEEP - 499}"
    above = api.get(branch["next"]).json()
    assert above["results"][-1]["id"] == f"e{DEEP - 500}"

    # The store still walks the whole path (SQL, no recursion in Python).
    assert len(store.branch(sid, f"e{DEEP}")) == DEEP
    assert store.branch_length(sid, f"e{DEEP}") == DEEP
    assert len(store.build_context(sid, f"e{DEEP}").messages) == DEEP

    # The admin's tree view draws it (runs collapsed, no recursion).
    admin = get_user_model().objects.create_superuser("tree-admin", "a@example.com", "pw")
    client = Client()
    client.force_login(admin)
    response = client.get(f"/admin/agentstore/session/{sid}/tree/")
    assert response.status_code == 200
    assert f"e{DEEP}".encode() in response.content
