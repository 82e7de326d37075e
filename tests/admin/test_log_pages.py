"""Log (agentsession) sessions in the admin: tree words, the format's context, hash checks."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from agentstore.demo import log as demo_log
from agentstore.models import Entry, Session
from agentstore.selectors.log_views import Verdict, log_context_view, read_log, response_checks

pytestmark = pytest.mark.django_db


def url(name: str, *args: str) -> str:
    return reverse(f"admin:agentstore_session_{name}", args=args)


@pytest.fixture
def lisbon(db: None) -> str:
    demo_log.seed(None)
    return demo_log.SESSION_ID


def test_tree_shows_roles_text_tool_calls_and_hash_checks(
    admin_client: Client, lisbon: str
) -> None:
    page = admin_client.get(url("tree", lisbon)).content.decode()
    tree = page[page.index('id="entry-tree"') :]
    assert "Plan one day in Lisbon." in tree
    assert 'role-user">user' in tree and 'role-assistant">assistant' in tree
    assert "get_weather(<code>{&quot;city&quot;:&quot;Lisbon&quot;" in tree
    assert "Sunny, 24 °C" in tree  # the tool's output
    assert "Outdoor plan: check the forecast." in tree  # the reasoning summary
    assert "model gpt-5" in tree and "+tools get_weather" in tree  # the config change
    assert "request hash verified" in tree and "request hash not recorded" in tree
    assert "label: leaf" in tree


def test_context_is_the_formats_own(admin_client: Client, lisbon: str) -> None:
    session = read_log(lisbon)
    expected = session.context_at(session.leaf)
    page = admin_client.get(url("context", lisbon)).content.decode()
    assert expected.request_hash() in page
    rows = page[page.index('id="context-messages"') :]
    rows = rows[: rows.index("</table>")]
    assert rows.count("<tr>") == len(expected.items) + 1  # a header row + one per item
    assert "Alfama" not in rows  # the first answer is on the other branch
    assert "get_weather" in page and "You are a concise travel helper." in page
    assert "settings (applied, not an input item)" in page


def test_context_accepts_a_short_entry_id(admin_client: Client, lisbon: str) -> None:
    question = Entry.objects.get(session_id=lisbon, seq=2).entry_id
    page = admin_client.get(url("context", lisbon), {"entry": question[7:19]}).content.decode()
    rows = page[page.index('id="context-messages"') :]
    assert "Plan one day in Lisbon." in rows and "Sunny" not in rows


def test_response_checks_tell_a_mismatch(lisbon: str) -> None:
    session = read_log(lisbon)
    responses = [e.id for e in session.entries if e.type == "response"]
    assert sorted(response_checks(session, responses).values()) == [
        Verdict.NOT_RECORDED,
        Verdict.VERIFIED,
        Verdict.VERIFIED,
    ]
    # The same response, recorded against a different request, no longer verifies.
    hashed = next(e for e in session.entries if e.data.get("request_hash"))
    hashed.data["request_hash"] = "sha256:" + "0" * 64
    assert response_checks(session, [hashed.id])[hashed.id] == Verdict.MISMATCH


def test_transcript_lists_items_in_append_order(admin_client: Client, lisbon: str) -> None:
    page = admin_client.get(url("transcript", lisbon)).content.decode()
    body = page[page.index('id="transcript"') :]
    order = ["Plan one day", "Alfama", "Outdoor plan", "get_weather", "Sunny", "LX Factory"]
    positions = [body.index(text) for text in order]
    assert positions == sorted(positions)


def test_log_rows_project_their_text_for_lists_and_search(lisbon: str) -> None:
    question = Entry.objects.get(session_id=lisbon, seq=2)
    assert (question.role, question.content) == ("user", "Plan one day in Lisbon.")
    call = Entry.objects.get(session_id=lisbon, seq=6)
    assert call.tool_name == "get_weather" and call.content.startswith("get_weather(")
    # the line itself stays byte for byte what the format wrote
    assert json.loads(call.line)["item"]["name"] == "get_weather"


def test_views_per_kind(admin_client: Client, lisbon: str) -> None:
    page = admin_client.get(url("change", lisbon)).content.decode()
    nav = page[page.index('class="agentstore-nav"') :]
    nav = nav[: nav.index("</ul>")]
    assert url("tree", lisbon) in nav and url("grants", lisbon) not in nav
    assert admin_client.get(url("grants", lisbon)).status_code == 404
    assert admin_client.get(url("steps", lisbon)).status_code == 404
    assert Session.objects.get(pk=lisbon).kind == "log"


def test_log_context_view_left_out_reasons(lisbon: str) -> None:
    view = log_context_view(lisbon)
    assert view is not None
    reasons = {w.kind: why for _seq, _id, w, why in view.left_out}
    assert reasons["config"].startswith("settings")
    assert reasons["response"].startswith("record of a model response")


def test_a_fork_shows_its_base_and_the_copied_prefix(admin_client: Client, lisbon: str) -> None:
    from agentstore.stores.log import LogStore

    question = Entry.objects.get(session_id=lisbon, seq=2).entry_id
    store = LogStore()
    store.create({"id": "lisbon-fork", "base": question, "parent_session": lisbon})
    store.append("lisbon-fork", {"type": "info", "name": "forked"})
    store.close()
    tree = admin_client.get(url("tree", "lisbon-fork")).content.decode()
    assert tree.count("from origin") == 1 and tree.count(">fork base<") == 1
    page = admin_client.get(url("change", "lisbon-fork")).content.decode()
    facts = page[page.index('id="fork-facts"') :]
    assert "#2" in facts and "copied from the origin" in facts


def test_log_context_is_bounded_like_the_tree_context(
    admin_client: Client, lisbon: str, settings: Any
) -> None:
    settings.AGENTSTORE = {"MAX_CONTEXT_BRANCH": 3}
    page = admin_client.get(url("context", lisbon)).content.decode()
    assert "MAX_CONTEXT_BRANCH=3" in page and 'id="context-messages"' not in page
