"""The benchmarks' schema floor writes what the stores write (bench/floor.py).

A floor row is only a floor if its statements do the store's work on the
store's schema: these tests send them on a second ``sqlite3`` connection to
the test database and read the result back through the stores, so a floor
that drifted from the schema (a column, a statement, a parameter order) fails
here rather than printing a meaningless figure.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.db import connection

from agentstore.models import Entry
from agentstore.stores import LogStore, LoopStore, TreeStore
from agentstore.types import MessageEntity
from bench import floor

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.sqlite_only]


@pytest.fixture
def bare() -> Iterator[sqlite3.Connection]:
    con = floor.connect(connection.settings_dict["NAME"])
    yield con
    con.close()


def test_tree_appends_are_a_branch_the_tree_store_reads(bare: sqlite3.Connection) -> None:
    append = floor.tree_appender(bare, "floor-tree", text="hello")
    ids: list[str] = []
    parent = None
    for n in range(4):
        parent = append(n, parent)
        assert parent is not None
        ids.append(parent)

    branch = TreeStore().branch("floor-tree", ids[-1])
    assert [e.id for e in branch] == ids
    assert [e.seq for e in branch] == [1, 2, 3, 4]
    assert branch[0].parent_id is None and branch[1].parent_id == ids[0]


def test_a_floor_message_row_is_the_tree_store_s(bare: sqlite3.Connection) -> None:
    text = "The quick brown fox. " * 50
    store = TreeStore()
    session = store.create_session("/floor")
    store.append_message(session.id, None, MessageEntity(role="user", content=text))
    floor.tree_appender(bare, "floor-same", text=text)(0, None)

    fields = ("type", "line", "role", "content", "token_estimate", "model_facing", "display")
    ours, theirs = (
        Entry.objects.filter(session_id=sid).values_list(*fields).get()
        for sid in ("floor-same", session.id)
    )
    assert ours == theirs


def test_a_missing_parent_writes_nothing(bare: sqlite3.Connection) -> None:
    append = floor.tree_appender(bare, "floor-orphan", text="x")
    with pytest.raises(RuntimeError, match="missing"):
        append(0, "no-such-entry")
    assert not bare.in_transaction
    assert Entry.objects.filter(session_id="floor-orphan").count() == 0


def test_loop_appends_are_steps_the_loop_store_reads(bare: sqlite3.Connection) -> None:
    append = floor.loop_appender(bare, "floor-loop", text="step text")
    for n in range(3):
        append(n, None)

    steps = LoopStore().last_n("floor-loop", 10)
    assert [(s.step_index, s.content) for s in steps] == [(n, "step text") for n in range(3)]


def test_log_replay_writes_the_store_s_rows_again(tmp_path: Path) -> None:
    store = LogStore()
    session = store.create({"id": "floor-log"})
    copy = tmp_path / "copy.sqlite3"
    floor.snapshot(copy)  # held, before the appends below
    for n in range(3):
        store.append(session.id, {"type": "item", "item": {"type": "message", "n": n}})

    seconds, cpu = floor.log_replay(copy, "floor-log", 3)

    assert len(seconds) == 3 and cpu > 0
    columns = "seq, entry_id, parent_id, type, line, content"
    query = f"SELECT {columns} FROM agentstore_entry WHERE session_id = ? ORDER BY seq"
    with (
        sqlite3.connect(copy) as replayed,
        sqlite3.connect(connection.settings_dict["NAME"]) as live,
    ):
        assert (
            replayed.execute(query, ("floor-log",)).fetchall()
            == live.execute(query, ("floor-log",)).fetchall()
        )
    store.close()
