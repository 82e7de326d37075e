"""The bulk seeding helpers the demo, the benchmarks and tests share (agentstore.demo.seeding)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.contrib.auth import get_user_model

from agentstore import exceptions
from agentstore.demo import seeding
from agentstore.models import Entry, Session, Step, Task, TaskEvent
from agentstore.stores import SessionStore, TreeStore
from agentstore.tasks import TaskRepository

pytestmark = pytest.mark.django_db

START = datetime(2026, 2, 1, tzinfo=UTC)


def test_sessions_in_bulk_with_an_owner() -> None:
    alice = get_user_model().objects.create_user("alice")

    ids = seeding.sessions(
        3, cwd=lambda i: f"/repo/{i}", name="bulk", start=START, owner=alice, kind="loop"
    )

    rows = {r.id: r for r in SessionStore().list()}
    assert list(rows) == list(reversed(ids))  # one a minute: the last is the newest
    assert [(rows[i].kind, rows[i].cwd, rows[i].owner_id) for i in ids] == [
        ("loop", "/repo/0", alice.pk),
        ("loop", "/repo/1", alice.pk),
        ("loop", "/repo/2", alice.pk),
    ]
    assert rows[ids[0]].created_at == START


def test_bulk_sessions_refuse_a_taken_id_and_write_nothing() -> None:
    taken = seeding.session(cwd="/w")
    rows = [
        {"id": "fresh", "created_at": START, "updated_at": START},
        {"id": taken, "created_at": START, "updated_at": START},
    ]
    with pytest.raises(exceptions.SessionExists):
        SessionStore().create_many("tree", rows)
    assert list(Session.objects.values_list("id", flat=True)) == [taken]


def test_entries_form_a_chain_the_tree_store_reads() -> None:
    sid = seeding.session(cwd="/w")

    assert seeding.entries(sid, [seeding.message(seq) for seq in range(1, 8)]) == 7

    branch = TreeStore().branch(sid, "")
    assert [e.seq for e in branch] == [1, 2, 3, 4, 5, 6, 7]
    assert [e.message.role for e in branch[:2]] == ["user", "assistant"]
    assert branch[-1].message.content == "message 7"
    assert branch[0].parent_id is None and branch[1].parent_id == branch[0].id


def test_queued_tasks_are_claimed_in_order() -> None:
    owner = seeding.session(cwd="/w")

    ids = seeding.queued_tasks(owner, 3, kind="bench", start=START)

    assert (
        list(
            Task.objects.filter(state="queued").order_by("created_at").values_list("id", flat=True)
        )
        == ids
    )
    assert TaskEvent.objects.filter(kind="task_queued", sequence=1).count() == 3
    claimed = TaskRepository().claim_next_queued("bench", "w", datetime(2100, 1, 1, tzinfo=UTC))
    assert claimed == ids[0]


def test_a_generated_chain_with_compactions_reads_as_the_tree_store_writes() -> None:
    sid = seeding.session(cwd="/gen")
    seeding.chain(sid, 7, content="hi")
    seeding.compact_every(sid, 4, 3, 1)  # seq 3 and 7: compactions keeping 1 entry

    store = TreeStore()
    assert store.leaf_entry(sid).id == "e7"
    rows = list(Entry.objects.filter(session_id=sid).order_by("seq"))
    assert [(r.entry_id, r.parent_id, r.type, r.role) for r in rows] == [
        ("e1", None, "message", "user"),
        ("e2", "e1", "message", "assistant"),
        ("e3", "e2", "compaction", ""),
        ("e4", "e3", "message", "assistant"),
        ("e5", "e4", "message", "user"),
        ("e6", "e5", "message", "assistant"),
        ("e7", "e6", "compaction", ""),
    ]
    assert rows[2].compaction_first_kept_entry_id == "e2"
    assert rows[0].content == "hi" and rows[0].created_at == seeding.STAMP
    assert rows[0].line == "{}" and rows[0].model_facing and rows[0].display


def test_generated_steps_take_the_model_defaults() -> None:
    sid = seeding.session("loop", cwd="/gen")
    seeding.steps(sid, 3, content="step", duration_ms=5)

    assert list(
        Step.objects.filter(session_id=sid)
        .order_by("id")
        .values_list("step_index", "step_type", "content", "duration_ms", "prompt_tokens")
    ) == [
        (1, "assistant", "step", 5, 0),
        (2, "assistant", "step", 5, 0),
        (3, "assistant", "step", 5, 0),
    ]
