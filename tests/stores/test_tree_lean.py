"""Tree appends as the write driver runs them, and the plans of the entry-id index's lookups.

A plain tree append (not a compaction) is one body of two hand-written
statements — the session touch and the INSERT that checks the parent — for
``agentstore.db.write``, which on SQLite opens the transaction on the
``sqlite3`` connection itself. These tests check what is stored (the same rows
watched or not), that a refused append (missing parent, missing or foreign
session) writes nothing, and that the one ``(entry_id, session)`` unique index
still serves every lookup by entry id: with the session, alone, and in the
INSERT's parent check. They run outside a test transaction (``transaction=True``),
where the driver opens the transaction itself.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from agentstore import exceptions
from agentstore.models import Entry, MessagePart, Session
from agentstore.sql import sessions as session_sql
from agentstore.sql import tree as tree_sql
from agentstore.stores.tree import TreeStore
from agentstore.types.tree import MessagePartEntity
from tests.stores.conftest import TickClock, user

pytestmark = pytest.mark.django_db(transaction=True)


def _open_transaction() -> bool:
    """Whether the connection is left inside a transaction (SQLite's sqlite3 knows)."""
    if connection.vendor != "sqlite":
        return bool(connection.in_atomic_block)
    return bool(connection.connection.in_transaction)


@pytest.fixture
def store() -> TreeStore:
    return TreeStore(clock=TickClock())


def test_a_watched_append_shows_its_two_statements(store: TreeStore) -> None:
    session = store.create_session("/w")
    root = store.append_message(session.id, None, user("one"))
    with CaptureQueriesContext(connection) as queries:
        child = store.append_message(session.id, root.id, user("two"))
    sent = [q["sql"] for q in queries.captured_queries]
    writes = [s for s in sent if s.lstrip().upper().startswith(("UPDATE", "INSERT"))]
    assert len(writes) == 2, sent
    assert "agentstore_session" in writes[0] and "agentstore_entry" in writes[1]
    assert child.seq == 2 and store.entry(session.id, child.id) == child


def test_an_append_commits_and_moves_updated_at(store: TreeStore) -> None:
    session = store.create_session("/w")
    before = Session.objects.get(id=session.id).updated_at
    entry = store.append_message(session.id, None, user("hi"))
    row = Session.objects.get(id=session.id)
    assert row.updated_at == entry.created_at and row.updated_at > before
    assert not connection.in_atomic_block and not _open_transaction()
    assert store.entry(session.id, entry.id) == entry


def _stored(session_id: str) -> list[tuple[Any, ...]]:
    """Every column of the session's entries and parts but the ids the append draws."""
    entries = list(
        Entry.objects.filter(session_id=session_id)
        .order_by("seq")
        .values_list(
            *[
                f.attname
                for f in Entry._meta.concrete_fields
                if f.name not in ("id", "entry_id", "parent_id", "session", "created_at", "line")
            ]
        )
    )
    parts = list(
        MessagePart.objects.filter(entry__session_id=session_id)
        .order_by("entry__seq", "sequence")
        .values_list(
            *[f.attname for f in MessagePart._meta.concrete_fields if f.name not in ("id", "entry")]
        )
    )
    return [*entries, *parts]


def test_the_unwatched_and_the_watched_append_store_the_same_rows(store: TreeStore) -> None:
    image = MessagePartEntity(
        type="image", mime_type="image/png", data=b"\x89PNG", width=2, height=3
    )
    text = MessagePartEntity(type="text", text="look")

    def appends(session_id: str) -> list[Any]:
        root = store.append_message(session_id, None, user("hi"))
        child = store.append_message(session_id, root.id, user("look", parts=(text, image)))
        return [root, child, store.append_custom_entry(session_id, child.id, "note", '{"k": 1}')]

    unwatched = store.create_session("/u")
    made = appends(unwatched.id)
    watched = store.create_session("/w")
    with CaptureQueriesContext(connection) as queries:
        seen = appends(watched.id)
    assert len(queries.captured_queries) >= 6
    assert [e.seq for e in made] == [e.seq for e in seen] == [1, 2, 3]
    assert _stored(unwatched.id) == _stored(watched.id)
    assert [store.entry(unwatched.id, e.id) for e in made] == made
    assert made[1].message.parts == (text, image)


def test_entities_read_back_equal_the_appended_ones(store: TreeStore) -> None:
    # Reads build entities without the dataclasses' own constructor (decision record 0035):
    # equal, equally hashed and printed, and still frozen.
    session = store.create_session("/w")
    root = store.append_message(session.id, None, user("one"))
    child = store.append_custom_entry(session.id, root.id, "note", '{"k": 1}')
    read = store.branch(session.id, child.id, limit=2)
    assert read == [root, child]
    assert [repr(e) for e in read] == [repr(root), repr(child)]
    assert hash(read[0].message.parts) == hash(root.message.parts)
    with pytest.raises(AttributeError):
        read[0].seq = 5  # type: ignore[misc]


@pytest.mark.sqlite_only
def test_a_stamp_in_another_text_form_reads_back_right(store: TreeStore) -> None:
    # Branch reads parse Django's text form directly; a stamp written in another
    # form (an offset, by hand) takes sql.utc for that row (decision record 0035).
    session = store.create_session("/w")
    root = store.append_message(session.id, None, user("one"))
    child = store.append_message(session.id, root.id, user("two"))
    with connection.cursor() as cursor:
        cursor.execute(
            "UPDATE agentstore_entry SET created_at = %s WHERE session_id = %s AND entry_id = %s",
            ["2026-01-01 03:00:00+02:00", session.id, root.id],
        )
    first, second = store.branch(session.id, child.id, limit=2)
    assert first.created_at == first.message.timestamp == datetime(2026, 1, 1, 1, tzinfo=UTC)
    assert second == child


def test_a_refused_append_writes_nothing(store: TreeStore) -> None:
    session = store.create_session("/w")
    root = store.append_message(session.id, None, user("hi"))
    touched = Session.objects.get(id=session.id).updated_at
    with pytest.raises(exceptions.ValidationError) as missing:
        store.append_message(session.id, "no-such-entry", user("lost"))
    assert missing.value.field == "parent_id"
    # The touch ran first and was rolled back with the refused INSERT.
    assert Session.objects.get(id=session.id).updated_at == touched
    assert Entry.objects.filter(session_id=session.id).count() == 1
    assert not _open_transaction()
    with pytest.raises(exceptions.NoSession):
        store.append_message("no-such-session", None, user("lost"))
    now = Session.objects.get(id=session.id).created_at
    Session.objects.create(id="loop-1", kind="loop", created_at=now, updated_at=now)
    with pytest.raises(exceptions.WrongSessionKind):
        store.append_message("loop-1", None, user("wrong kind"))
    assert not Entry.objects.filter(session_id__in=["no-such-session", "loop-1"]).exists()
    # The connection is usable afterwards.
    assert store.append_message(session.id, root.id, user("again")).seq == 2


def test_a_back_dated_message_never_moves_updated_at_back(store: TreeStore) -> None:
    session = store.create_session("/w")
    first = store.append_message(session.id, None, user("now"))
    old = user("old")
    old = type(old)(role=old.role, content=old.content, timestamp=first.created_at - timedelta(1))
    store.append_message(session.id, first.id, old)
    assert Session.objects.get(id=session.id).updated_at == first.created_at


def _plan(statement: str, params: list[Any]) -> str:
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN QUERY PLAN {statement}", params)
        return "\n".join(str(row[-1]) for row in cursor.fetchall())


def test_every_lookup_by_entry_id_uses_the_one_entry_id_index() -> None:
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's query plan")
    index = "sqlite_autoindex_agentstore_entry_2"  # UNIQUE (entry_id, session_id)
    assert index in _plan(tree_sql.ENTRY_EXISTS, ["s", "e"])
    assert "(entry_id=? AND session_id=?)" in _plan(tree_sql.ENTRY_EXISTS, ["s", "e"])
    # The parent check folded into the INSERT.
    child = _plan(tree_sql.INSERT_CHILD_ENTRY, [None] * tree_sql.INSERT_CHILD_ENTRY.count("%s"))
    assert f"{index} (entry_id=? AND session_id=?)" in child, child
    # An entry by id alone (the API, the admin's search, the log store's fork origin).
    alone, params = Entry.objects.filter(entry_id="e").query.sql_with_params()
    assert f"{index} (entry_id=?)" in _plan(alone, list(params))
    assert "SCAN" not in _plan(alone, list(params))


def test_the_index_names_its_columns_entry_id_first() -> None:
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, Entry._meta.db_table)
    unique = [c for c in constraints.values() if c["unique"] and "entry_id" in c["columns"]]
    assert [c["columns"] for c in unique] == [["entry_id", "session_id"]]
    plain = [c for c in constraints.values() if c["index"] and c["columns"] == ["entry_id"]]
    assert plain == []


def test_every_lookup_of_parts_by_entry_uses_the_unique_entry_sequence_index() -> None:
    # MessagePart.entry has no index of its own (decision record 0020): the unique
    # (entry, sequence) serves the parts of a page of entries and the deletes.
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, MessagePart._meta.db_table)
    alone = [n for n, c in constraints.items() if c["index"] and c["columns"] == ["entry_id"]]
    assert alone == ["agentstore_part_image"]  # the partial "any image here?" index only
    if connection.vendor != "sqlite":
        return
    index = "sqlite_autoindex_agentstore_messagepart_1"  # UNIQUE (entry_id, sequence)
    for statement in (tree_sql.load_parts(3), tree_sql.delete_parts(3)):
        plan = _plan(statement, [1, 2, 3])
        assert f"{index} (entry_id=?)" in plan and "SCAN" not in plan, plan
    cascade = _plan(session_sql.DELETE_PARTS, ["s"])
    assert f"{index} (entry_id=?)" in cascade, cascade


@pytest.mark.sqlite_only
def test_an_append_is_the_touch_and_the_insert_in_one_transaction(store: TreeStore) -> None:
    session = store.create_session("/b")
    root = store.append_message(session.id, None, user("one"))
    seen: list[str] = []
    connection.ensure_connection()
    connection.connection.set_trace_callback(seen.append)
    try:
        store.append_message(session.id, root.id, user("two"))
    finally:
        connection.connection.set_trace_callback(None)
    # The INSERT's trigger programs (the search index) trace as the INSERT again
    # or as "--" lines: one statement each.
    sent = [s for s in seen if not s.startswith("--")]
    sent = [s for n, s in enumerate(sent) if n == 0 or s != sent[n - 1]]
    assert [s.split()[0].upper() for s in sent] == ["BEGIN", "UPDATE", "INSERT", "COMMIT"]


@pytest.mark.sqlite_only
def test_a_failed_insert_rolls_the_touch_back(
    store: TreeStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    from django.db import OperationalError

    from agentstore.sql import tree as statements

    session = store.create_session("/f")
    root = store.append_message(session.id, None, user("one"))
    touched = Session.objects.get(id=session.id).updated_at
    broken = "INSERT INTO no_such_table VALUES (1)"
    monkeypatch.setattr(statements, "INSERT_CHILD_ENTRY", broken)
    with pytest.raises(OperationalError, match="no_such_table"):  # raised as Django's
        store.append_message(session.id, root.id, user("lost"))
    monkeypatch.undo()
    assert Session.objects.get(id=session.id).updated_at == touched
    assert not _open_transaction()
    assert store.append_message(session.id, root.id, user("two")).seq == 2
