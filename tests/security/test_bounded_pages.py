"""Reads of a session are paged or capped (issue 13, item 2).

``/branch``, ``/messages`` and ``/transcript`` on a 100,000-entry session took
seconds and ~100 MB a response. They now answer one page (``limit``, default
100) with a ``next`` link; ``/context`` refuses a branch longer than
``MAX_CONTEXT_BRANCH`` with ``400 too_large`` saying how to page. Paging never
changes what the store answers: the pages put together are the unpaged read.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import override_settings

from agentstore.stores import TreeStore
from agentstore.types.tree import MessageEntity
from tests.api.conftest import API, assert_error, create_session
from tests.security.chains import compact_every, insert_chain

BIG = 100_000


def _all_pages(api: Any, url: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    while url:
        response = api.get(url)
        assert response.status_code == 200, response.content[:300]
        body = response.json()
        rows += body["results"]
        url = body["next"]
    return rows


@pytest.mark.django_db
def test_message_pages_keep_append_order_with_back_dated_messages(api: Any) -> None:
    sid = create_session(api)["id"]
    store = TreeStore()
    base = datetime(2026, 3, 1, tzinfo=UTC)
    parent = None
    # Timestamps out of insertion order, with ties: append order is (time, seq).
    for i, minutes in enumerate([5, 1, 3, 1, 9, 0, 3, 7]):
        message = MessageEntity(
            role="user" if i % 2 == 0 else "assistant",
            content=f"m{i}",
            timestamp=base + timedelta(minutes=minutes),
        )
        parent = store.append_message(sid, parent, message, display=i != 3).id
    expected = [m.entry_id for m in store.messages(sid)]
    shown = [m.entry_id for m in store.transcript_messages(sid)]
    for limit in (1, 3, 100):
        got = _all_pages(api, f"{API}/sessions/{sid}/messages?limit={limit}")
        assert [m["entry_id"] for m in got] == expected
        got = _all_pages(api, f"{API}/sessions/{sid}/transcript?limit={limit}")
        assert [m["entry_id"] for m in got] == shown


@pytest.mark.django_db
def test_branch_pages_put_together_are_the_branch(api: Any) -> None:
    sid = create_session(api)["id"]
    insert_chain(sid, 250)
    pages: list[list[str]] = []
    url = f"{API}/sessions/{sid}/branch?entry_id=e240&limit=100"
    while url:
        body = api.get(url).json()
        pages.append([e["id"] for e in body["results"]])
        url = body["next"]
    assert [len(page) for page in pages] == [100, 100, 40]
    joined = [entry_id for page in reversed(pages) for entry_id in page]
    assert joined == [e.id for e in TreeStore().branch(sid, "e240")]


@pytest.mark.django_db
def test_context_over_a_branch_longer_than_the_cap_is_refused(api: Any) -> None:
    sid = create_session(api)["id"]
    insert_chain(sid, 30)
    with override_settings(AGENTSTORE={"MAX_CONTEXT_BRANCH": 29}):
        error = assert_error(api.get(f"{API}/sessions/{sid}/context"), 400, "too_large")
        assert error["details"]["limit"] == 29
        assert "/branch" in error["message"]
        # A shorter branch of the same session is still answered.
        ok = api.get(f"{API}/sessions/{sid}/context?entry_id=e29")
        assert ok.status_code == 200
        assert len(ok.json()["messages"]) == 29
    with override_settings(AGENTSTORE={"MAX_CONTEXT_BRANCH": 30}):
        assert len(api.get(f"{API}/sessions/{sid}/context").json()["messages"]) == 30


@pytest.mark.django_db
def test_the_cap_counts_what_a_compacted_context_reads(api: Any) -> None:
    """A branch longer than the cap is served when its compaction keeps less."""
    sid = create_session(api)["id"]
    insert_chain(sid, 60)
    compact_every(sid, 1000, 50, 5)  # e50 compacts, keeping e45 onwards
    with override_settings(AGENTSTORE={"MAX_CONTEXT_BRANCH": 20}):
        ok = api.get(f"{API}/sessions/{sid}/context?entry_id=e60")
        assert ok.status_code == 200, ok.content[:300]
        # The summary, e45-e49 kept, e51-e60 after the compaction.
        assert len(ok.json()["messages"]) == 1 + 5 + 10
        # Before the compaction the branch is still uncompacted and too long.
        error = assert_error(
            api.get(f"{API}/sessions/{sid}/context?entry_id=e49"), 400, "too_large"
        )
        assert error["details"]["limit"] == 20
    with override_settings(AGENTSTORE={"MAX_CONTEXT_BRANCH": 15}):
        # 16 entries read (e45..e60): one past the cap.
        assert_error(api.get(f"{API}/sessions/{sid}/context?entry_id=e60"), 400, "too_large")


@pytest.mark.slow
@pytest.mark.django_db
def test_reads_of_a_100000_entry_session_are_pages(api: Any) -> None:
    sid = create_session(api)["id"]
    insert_chain(sid, BIG)
    for reader in ("tree", "branch", "messages", "transcript", "entries"):
        response = api.get(f"{API}/sessions/{sid}/{reader}")
        assert response.status_code == 200, (reader, response.content[:300])
        body = response.json()
        assert len(body["results"]) == 100, reader
        assert body["next"], reader
    last = api.get(f"{API}/sessions/{sid}/messages?limit=500").json()
    assert last["results"][-1]["entry_id"] == "e500"
    assert_error(api.get(f"{API}/sessions/{sid}/messages?limit=501"), 400, "validation_error")
    error = assert_error(api.get(f"{API}/sessions/{sid}/context"), 400, "too_large")
    assert error["details"]["limit"] == 2_000
