"""The admin's searches find by id *and* by text: an id match first, then every text match.

A search box that takes ids and words used to stop at the id: words that also
named a session (a short id is a suffix: ``weather`` names ``demo-loop-weather``)
or an entry's operation id listed that one row and hid every message that says
them, while the API's ``?search=`` found the messages. Now the id match is
listed first and the text matches follow, as the API finds them.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from agentstore.stores import LoopStore, TreeStore
from agentstore.types import AppendCompactionInput, MessageEntity, RunStep

pytestmark = pytest.mark.django_db

SESSIONS = reverse("admin:agentstore_session_changelist")
ENTRIES = reverse("admin:agentstore_entry_changelist")


def _listed(client: Client, url: str, q: str) -> list[object]:
    response = client.get(url, {"q": q})
    assert response.status_code == 200
    return [row.pk for row in response.context["cl"].result_list]


def _talk(text: str, name: str = "") -> str:
    store = TreeStore()
    sid = store.create_session("/repo", name).id
    store.append_message(sid, None, MessageEntity(role="user", content=text))
    return sid


def test_a_word_that_is_also_a_short_id_finds_that_session_first_then_the_text(
    admin_client: Client,
) -> None:
    # A loop session (its steps are not text-indexed) whose id ends with the word.
    LoopStore().append(
        RunStep(session_id="bot-loop-weather", step_index=0, step_type="user", content="hi")
    )
    asked = _talk("What is the weather in Lisbon tomorrow?")
    named = _talk("hello", name="weather report")
    _talk("unrelated")

    listed = _listed(admin_client, SESSIONS, "weather")
    assert listed[0] == "bot-loop-weather"
    assert set(listed) == {"bot-loop-weather", asked, named}

    # What the API's ?search= finds by text, the admin finds too.
    api = APIClient()
    api.force_authenticate(User.objects.create_superuser("s", "s@example.com", "pw"))
    found = api.get("/api/v1/sessions", {"search": "weather"}).json()["results"]
    by_api = {row["id"] for row in found}
    assert by_api == {asked, named}
    assert by_api <= set(listed)


def test_a_full_or_short_id_is_listed_first_even_when_newer_sessions_match_the_text(
    admin_client: Client,
) -> None:
    target = _talk("the first session")
    short = target[-12:]  # what the admin and the commands print
    mention = _talk(f"see {short} for the logs")  # newer: listed first by date
    listed = _listed(admin_client, SESSIONS, short)
    assert listed[0] == target
    assert mention in listed  # its text holds the word
    assert _listed(admin_client, SESSIONS, target)[0] == target


def test_an_ambiguous_short_id_is_searched_as_words(admin_client: Client) -> None:
    for sid in ("alpha-common", "beta-common"):
        LoopStore().append(RunStep(session_id=sid, step_index=0, step_type="user", content="x"))
    said = _talk("common ground")
    assert set(_listed(admin_client, SESSIONS, "common")) == {said}


def test_an_operation_id_that_is_also_a_word_finds_both_entries(admin_client: Client) -> None:
    store = TreeStore()
    sid = store.create_session("/repo").id
    ask = store.append_message(sid, None, MessageEntity(role="user", content="the rollout failed"))
    compaction = store.append_compaction(
        AppendCompactionInput(
            session_id=sid,
            parent_id=ask.id,
            summary="summary of the incident",
            first_kept_entry_id=ask.id,
            tokens_before=10,
            operation_id="rollout",
        )
    )
    later = store.append_message(sid, compaction.id, MessageEntity(role="user", content="rollout"))
    rows = admin_client.get(ENTRIES, {"q": "rollout"}).context["cl"].result_list
    seq = {e.id: e.seq for e in store.entries(sid)}
    assert rows[0].seq == seq[compaction.id]  # the id match first
    assert {row.seq for row in rows} == {seq[ask.id], seq[compaction.id], seq[later.id]}
