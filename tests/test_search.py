"""Text search: the index follows every write, and the admin and the API find by words."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.urls import reverse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rest_framework.test import APIClient

from agentstore.demo import log as demo_log
from agentstore.models import Entry, Session
from agentstore.search import (
    FTS_TABLE,
    MARK_TABLE,
    TAIL_IDS,
    flush_search_index,
    has_search_index,
    match_sql,
    terms,
)
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


# -- SQLite: the unindexed tail (decision record 0023)

sqlite_only = pytest.mark.skipif(
    connection.vendor != "sqlite", reason="the tail is SQLite's (PostgreSQL indexes on write)"
)


def _mark() -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT upto FROM {MARK_TABLE} WHERE id = 1")
        return int(cursor.fetchone()[0])


def _indexed() -> set[int]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT rowid FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH %s", ['"zebra"'])
        return {row[0] for row in cursor.fetchall()}


@sqlite_only
def test_appends_are_indexed_in_batches_and_search_sees_both_parts() -> None:
    flush_search_index()
    store = TreeStore()
    sid = store.create_session("/repo").id
    parent = None
    pks = []
    for n in range(TAIL_IDS + 5):
        parent = store.append_message(
            sid, parent, MessageEntity(role="user", content=f"zebra number w{n}")
        ).id
        pks.append(Entry.objects.get(session_id=sid, entry_id=parent).pk)
    # The batch went in when the tail reached TAIL_IDS ids; the rest waits.
    assert _mark() == pks[TAIL_IDS - 1]
    assert _indexed() == set(pks[:TAIL_IDS])
    assert _ids("zebra") == set(pks)
    assert _ids("zebra w6") == {pks[6], *pks[60:69]}  # w6, w60…w68 (prefix)
    # Updates and deletes keep the indexed part in step and leave the tail alone.
    Entry.objects.filter(pk__in=[pks[0], pks[-1]]).update(content="okapi")
    assert _ids("okapi") == {pks[0], pks[-1]}
    assert pks[0] not in _indexed() and pks[-1] not in _indexed()
    Entry.objects.filter(pk__in=[pks[1], pks[-2]]).delete()
    assert _ids("zebra") == set(pks[2:-2])
    assert _ids("zebra", session_id=sid) == set(pks[2:-2])
    assert _ids("zebra", session_id="nope") == set()
    # A flush indexes the tail now: same answers.
    assert flush_search_index() == pks[-1] - pks[TAIL_IDS - 1]
    assert _mark() == pks[-1] and _ids("zebra") == set(pks[2:-2])
    assert _ids("okapi") == {pks[0], pks[-1]}


_ALPHABET = "aAeéÉiïoöuüßñ_1 .,-'\"*()"
_texts = st.lists(st.text(alphabet=_ALPHABET, max_size=30), min_size=1, max_size=6)


@sqlite_only
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(texts=_texts, query=st.text(alphabet=_ALPHABET, min_size=1, max_size=12))
def test_the_tail_matches_exactly_as_the_index(texts: list[str], query: str) -> None:
    """The same query over the same rows, unindexed then indexed: the same entries."""
    flush_search_index()
    store = TreeStore()
    sid = store.create_session("/repo").id
    for text in texts:
        store.append_message(sid, None, MessageEntity(role="user", content=text))
    # Queries made of the rows' own words (whole, prefixes, accents changed) and the drawn text.
    words = [w for text in texts for w in terms(text)]
    queries = [query, *words[:4], *(w[:2] for w in words[:3]), " ".join(words[:3])]
    queries = [q for q in queries if terms(q)]
    in_tail = {q: _ids(q, session_id=sid) for q in queries}
    flush_search_index()
    assert {q: _ids(q, session_id=sid) for q in queries} == in_tail


# -- one copy of the text: an item line is indexed from the line (decision record 0090)


def _long_item_session() -> tuple[str, list[int]]:
    from agentstore.stores.log import LogStore

    filler = "lorem ipsum " * 400  # ~4,800 characters: past the old 4,000 cut, too
    items = [
        {"type": "message", "role": "user",
         "content": [{"type": "input_text", "text": f"{filler} walrusbeginning"}]},
        {"type": "function_call", "call_id": "c1", "name": "lookup_walrus",
         "arguments": f'{{"q": "{filler} capybaraargument"}}'},
        {"type": "function_call_output", "call_id": "c1", "output": f"{filler} quokkaoutput"},
        {"type": "message", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": "plain numbatanswer", "annotations": []}]},
    ]  # fmt: skip
    store = LogStore()
    try:
        sid = store.create({"cwd": "/repo"}).id
        for item in items:
            store.append(sid, {"type": "item", "item": item})
    finally:
        store.close()
    rows = Entry.objects.filter(session_id=sid, type="item").order_by("seq")
    pks = list(rows.values_list("pk", flat=True))
    return sid, pks


def test_an_item_is_found_by_words_its_row_does_not_keep() -> None:
    from agentstore.stores.log_rows import ITEM_PREVIEW_CHARS

    sid, (user, call, output, answer) = _long_item_session()
    rows = Entry.objects.filter(pk__in=[user, call, output])
    # The row keeps a preview; the words past it are found through the line.
    assert all(len(row.content) == ITEM_PREVIEW_CHARS for row in rows)
    assert all("walrusbeginning" not in row.content for row in rows)
    assert _ids("walrusbeginning") == {user}
    assert _ids("capybaraargument") == {call}
    assert _ids("lookup_walrus") == {call}  # the tool's name
    assert _ids("quokkaoutput") == {output}
    assert _ids("numbatanswer") == _ids("numbat") == {answer}
    # Kinds, roles, statuses and ids are no words of an item.
    assert not _ids("function_call_output", session_id=sid)
    assert not _ids("assistant completed", session_id=sid)
    flush_search_index()  # the same answers from the index as from the tail
    assert _ids("walrusbeginning quokkaoutput") == set()
    assert _ids("quokkaoutput") == {output} and _ids("lookup_walrus") == {call}


def test_a_changed_or_deleted_line_leaves_the_index_in_step() -> None:
    sid, (user, call, output, answer) = _long_item_session()
    flush_search_index()
    line = Entry.objects.get(pk=answer).line
    Entry.objects.filter(pk=answer).update(line=line.replace("numbatanswer", "erased"))
    assert _ids("numbatanswer") == set() and _ids("erased") == {answer}
    Entry.objects.filter(pk=output).delete()
    assert _ids("quokkaoutput") == set()
    if connection.vendor == "sqlite":
        # What the index holds of each row, word by word: the old words were
        # taken out exactly (a 'delete' given other text would leave them).
        with connection.cursor() as cursor:
            cursor.execute(f"INSERT INTO {FTS_TABLE}({FTS_TABLE}) VALUES ('integrity-check')")
            cursor.execute(
                f"CREATE VIRTUAL TABLE temp.words USING fts5vocab(main, {FTS_TABLE}, 'instance')"
            )
            cursor.execute("SELECT term FROM temp.words WHERE doc = %s", [answer])
            assert {row[0] for row in cursor.fetchall()} == {"plain", "erased"}
            cursor.execute("SELECT COUNT(*) FROM temp.words WHERE doc = %s", [output])
            assert cursor.fetchone()[0] == 0
            cursor.execute("DROP TABLE temp.words")


@sqlite_only
def test_a_session_scoped_search_does_not_look_up_the_index_once_per_entry() -> None:
    """The session's ids filter the index's matches; they are not FTS5 look-ups one by one
    (a session of 100,000 entries took seconds that way)."""
    sid, _pk = _session("zebra crossing")
    match = match_sql("default", "zebra", session_id=sid)
    assert match is not None
    sql, params = match
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
        plan = [str(row[-1]) for row in cursor.fetchall()]
    scans = [step for step in plan if f"SCAN {FTS_TABLE} VIRTUAL TABLE" in step]
    assert scans and not [step for step in scans if ":=" in step], plan
