"""Text search: the index follows every write, and the admin and the API find by words."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from agentstore.demo import log as demo_log
from agentstore.models import Entry, Session
from agentstore.search import has_search_index, match_sql
from agentstore.selectors.sessions import search_sessions
from agentstore.stores.tree import TreeStore
from agentstore.types import MessageEntity

pytestmark = pytest.mark.django_db


def _ids(text: str, session_id: str = "") -> set[int]:
    match = match_sql("default", text, session_id=session_id)
    assert match is not None
    with connection.cursor() as cursor:
        cursor.execute(*match)
        return {row[0] for row in cursor.fetchall()}


def _session(content: str, name: str = "") -> tuple[str, int]:
    store = TreeStore()
    sid = store.create_session("/repo", name).id
    entry = store.append_message(sid, None, MessageEntity(role="user", content=content))
    return sid, Entry.objects.get(session_id=sid, entry_id=entry.id).pk


def test_index_exists_after_migrate_and_follows_writes() -> None:
    assert has_search_index()
    sid, pk = _session("Fix the flaky parser test")
    assert _ids("flaky") == {pk}
    assert _ids("fla") == {pk}  # the last word is a prefix
    assert _ids("parser flak") == {pk} and _ids("parser banana") == set()
    Entry.objects.filter(pk=pk).update(content="now about bananas")
    assert _ids("flaky") == set() and _ids("banana") == {pk}
    TreeStore().delete_session(sid)
    assert _ids("banana") == set()


def test_log_entries_are_searchable_by_tool_calls_and_outputs() -> None:
    demo_log.seed(None)
    hits = Entry.objects.filter(pk__in=_ids("get_weather")).values_list("seq", flat=True)
    assert sorted(hits) == [6]  # the tool call (its arguments name the city)
    assert Entry.objects.get(pk__in=_ids("sunny")).seq == 8  # the tool's output
    assert _ids("Lisbon", session_id="nope") == set()


def test_user_text_is_never_fts_syntax() -> None:
    _session('He said "hi" OR NOT (x*) AND -y')
    assert len(_ids('"hi" OR NOT (x*')) == 1  # words only, quoted


def test_session_search_finds_by_name_substring_and_message_words() -> None:
    by_message, _ = _session("Fix the flaky parser test")
    by_name, _ = _session("hello", name="reflaky builds")
    found = set(search_sessions(Session.objects.all(), "flaky").values_list("id", flat=True))
    assert found == {by_message, by_name}


def test_admin_and_api_search(admin_client: Client) -> None:
    sid, _ = _session("Fix the flaky parser test")
    _session("unrelated")
    page = admin_client.get(reverse("admin:agentstore_session_changelist"), {"q": "flaky"})
    assert page.context["cl"].result_count == 1
    entries = admin_client.get(reverse("admin:agentstore_entry_changelist"), {"q": "parser"})
    assert entries.context["cl"].result_count == 1
    api = APIClient()
    api.force_authenticate(User.objects.create_superuser("s", "s@example.com", "pw"))
    listed = api.get("/api/v1/sessions", {"search": "flak"}).json()
    assert [row["id"] for row in listed["results"]] == [sid]
