"""SessionStore: the one owner of session rows (create, import, transfer, delete, holds).

Every test here runs on both backends; the duplicate-id tests are the ones the
PostgreSQL run exists for (a unique violation there must surface as
``SessionExists``, never as a raw ``IntegrityError``).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model

from agentstore import exceptions
from agentstore.ids import is_uuid7
from agentstore.models import (
    AgentTask,
    Entry,
    Grant,
    Holder,
    MessagePart,
    Session,
    Step,
    Task,
    TaskEvent,
)
from agentstore.stores import LogStore, LoopStore, SessionStore, TreeStore
from agentstore.tasks import AgentTaskRepository, TaskRepository
from agentstore.types import (
    AgentTaskEntity,
    ChildSessionRequest,
    ImportedEntry,
    ImportedSession,
    MessageEntity,
    MessagePartEntity,
    RunStep,
    TaskEntity,
)
from tests.stores.conftest import START, TickClock

pytestmark = pytest.mark.django_db


@pytest.fixture
def sessions(clock: TickClock) -> SessionStore:
    return SessionStore(clock=clock)


@pytest.fixture
def alice(db: None) -> Any:
    return get_user_model().objects.create_user("alice")


@pytest.fixture
def bob(db: None) -> Any:
    return get_user_model().objects.create_user("bob")


# -- create, get, list -------------------------------------------------------------


@pytest.mark.parametrize("kind", ["tree", "loop", "log"])
def test_create_with_an_owner(sessions: SessionStore, alice: Any, kind: str) -> None:
    record = sessions.create(kind, owner=alice, cwd="/w", name="n", model="m")

    assert is_uuid7(record.id)
    assert (record.kind, record.owner_id, record.cwd, record.name) == (kind, alice.pk, "/w", "n")
    assert record.created_at == record.updated_at > START
    row = Session.objects.get(pk=record.id)
    assert (row.kind, row.owner_id, row.model, row.incarnation) == (
        kind,
        alice.pk,
        "m",
        record.incarnation,
    )
    assert sessions.get(record.id) == record


def test_get_and_list_by_kind(sessions: SessionStore) -> None:
    tree = sessions.create("tree", cwd="/w")
    loop = sessions.create("loop", cwd="/w")
    child = sessions.create("tree", cwd="/w", parent_session=tree.id)

    assert sessions.get(loop.id, "tree") is None
    assert sessions.get(loop.id, "loop") == loop
    assert sessions.kind_of(loop.id) == "loop"
    assert sessions.kind_of("missing") is None
    assert [r.id for r in sessions.list("tree")] == [child.id, tree.id]
    assert [r.id for r in sessions.list("tree", top_level=True)] == [tree.id]
    assert [r.id for r in sessions.list(parent_session=tree.id)] == [child.id]
    assert [r.id for r in sessions.list(cwd="/w", limit=2)] == [child.id, loop.id]


def test_an_unknown_kind_is_refused(sessions: SessionStore) -> None:
    with pytest.raises(exceptions.ValidationError) as info:
        sessions.create("chat")
    assert info.value.field == "kind"
    assert not Session.objects.exists()


# -- a duplicate id is SessionExists on every path and backend --------------------


def test_create_refuses_a_taken_id_of_any_kind(sessions: SessionStore) -> None:
    sessions.create("loop", session_id="s-1", model="first")

    with pytest.raises(exceptions.SessionExists, match="s-1"):
        sessions.create("tree", session_id="s-1")
    assert Session.objects.get(pk="s-1").model == "first"


def test_tree_import_of_a_taken_id_is_session_exists(clock: TickClock) -> None:
    SessionStore(clock=clock).create("log", session_id="taken")
    imported = ImportedSession(
        id="taken",
        cwd="/w",
        entries=(
            ImportedEntry(
                id="e1",
                type="message",
                created_at=START,
                message=MessageEntity(role="user", content="hi"),
            ),
        ),
    )

    with pytest.raises(exceptions.SessionExists, match="taken"):
        TreeStore(clock=clock).import_session(imported)
    assert Session.objects.get(pk="taken").kind == "log"
    assert not Entry.objects.exists()


def test_log_create_of_a_taken_id_is_session_exists(clock: TickClock) -> None:
    SessionStore(clock=clock).create("tree", session_id="taken", cwd="/w")
    store = LogStore(clock=clock)
    try:
        with pytest.raises(exceptions.SessionExists, match="taken"):
            store.create({"id": "taken", "cwd": "/w"})
    finally:
        store.close()
    assert Session.objects.get(pk="taken").kind == "tree"


# -- ownership ---------------------------------------------------------------------


def test_transfer_moves_the_owner(sessions: SessionStore, alice: Any, bob: Any) -> None:
    record = sessions.create("tree", owner=alice, cwd="/w")

    assert sessions.transfer(record.id, bob) is True
    assert Session.objects.get(pk=record.id).owner_id == bob.pk
    assert sessions.transfer("missing", bob) is False


def test_transfer_only_unowned_never_takes_a_session_away(
    sessions: SessionStore, alice: Any, bob: Any
) -> None:
    mine = sessions.create("tree", owner=alice, cwd="/w")
    free = sessions.create("tree", cwd="/w")

    assert sessions.transfer(mine.id, bob, only_unowned=True) is False
    assert sessions.transfer(free.id, bob, only_unowned=True) is True
    assert dict(Session.objects.values_list("id", "owner_id")) == {
        mine.id: alice.pk,
        free.id: bob.pk,
    }


def test_log_create_and_import_take_an_owner(clock: TickClock, alice: Any) -> None:
    store = LogStore(clock=clock)
    try:
        created = store.create({"cwd": "/w"}, owner=alice)
        text = store.export_jsonl(created.id)
        store.delete(created.id)
        imported = store.import_jsonl(text, owner=alice)
    finally:
        store.close()
    assert Session.objects.get(pk=imported.id).owner_id == alice.pk


# -- delete runs each kind's cascade ------------------------------------------------


def test_delete_a_tree_session_with_everything_it_owns(clock: TickClock) -> None:
    tree = TreeStore(clock=clock)
    parent = tree.create_session("/w")
    tasks = TaskRepository(clock=clock)
    agents = AgentTaskRepository(tasks=tasks)
    spawned = agents.create_with_child_session(
        AgentTaskEntity(
            task=TaskEntity(owner_session_id=parent.id),
            agent_name="general",
            prompt="inspect",
            depth=1,
            policy_json="{}",
            usage_json="{}",
        ),
        ChildSessionRequest(cwd="/w", parent_session_id=parent.id),
    )
    child = spawned.child_session_id
    image = MessagePartEntity(
        type="image", mime_type="image/png", data=b"\x89PNG", width=1, height=1
    )
    tree.append_message(child, None, MessageEntity(role="user", content="", parts=(image,)))
    owned = tasks.create(TaskEntity(kind="job", owner_session_id=child))
    Holder.objects.create(
        session_id=child, pid=1, host="h", token="t", since=START, heartbeat=START
    )
    Grant.objects.create(session_id=child, prompt="p", prompt_digest="d", granted_at=START)

    SessionStore(clock=clock).delete(child)

    assert not Session.objects.filter(pk=child).exists()
    assert not Entry.objects.filter(session_id=child).exists()
    assert not MessagePart.objects.exists()
    assert not Holder.objects.exists()
    # The task it owned and the agent task that ran in it (the parent's task).
    assert not Task.objects.filter(pk__in=[owned.id, spawned.task.id]).exists()
    assert not AgentTask.objects.exists() and not TaskEvent.objects.exists()
    # A tree session's grants are not its to purge; the parent survives.
    assert Grant.objects.filter(session_id=child).count() == 1
    assert Session.objects.filter(pk=parent.id).exists()


def test_delete_a_loop_session_purges_steps_and_grants(clock: TickClock) -> None:
    loop = LoopStore(clock=clock)
    loop.append(RunStep(session_id="l-1", step_type="user", content="hi"))
    loop.grant("l-1", "rm -rf build")

    SessionStore(clock=clock).delete("l-1")

    assert not Session.objects.exists() and not Step.objects.exists()
    assert not Grant.objects.exists()


def test_delete_refuses_another_kind_and_a_missing_session(sessions: SessionStore) -> None:
    record = sessions.create("loop")

    with pytest.raises(exceptions.WrongSessionKind) as wrong:
        sessions.delete(record.id, "tree")
    assert (wrong.value.kind, wrong.value.expected) == ("loop", "tree")
    with pytest.raises(exceptions.NoSession):
        sessions.delete("missing")
    assert Session.objects.filter(pk=record.id).exists()


def test_delete_a_log_session_and_create_it_again(clock: TickClock) -> None:
    store = LogStore(clock=clock)
    try:
        created = store.create({"cwd": "/w"})
        store.append(created.id, {"type": "info", "name": "n"})
        store.release(created.id)
        incarnation = Session.objects.get(pk=created.id).incarnation

        SessionStore(clock=clock).delete(created.id)
        assert not Entry.objects.exists()

        again = store.create(dict(created.header))
    finally:
        store.close()
    assert again.id == created.id
    assert Session.objects.get(pk=created.id).incarnation != incarnation


# -- holds -------------------------------------------------------------------------


def test_hold_and_break_hold(clock: TickClock) -> None:
    store = LogStore(clock=clock)
    sessions = SessionStore(clock=clock)
    try:
        created = store.create({"cwd": "/w"})
        info = sessions.hold(created.id)
        assert info is not None
        assert (info.pid, info.since) == (store.pid, info.heartbeat)
        assert store.lock_holder(created.id) == info  # the Go name, same answer

        assert sessions.break_hold(created.id) is True
        assert sessions.hold(created.id) is None
        assert sessions.break_hold(created.id) is False
        with pytest.raises(exceptions.SessionLocked, match="lost"):
            store.append(created.id, {"type": "info", "name": "late"})
    finally:
        store.close()


def test_upsert_refuses_another_kind(clock: TickClock) -> None:
    SessionStore(clock=clock).create("tree", session_id="t-1", cwd="/w")

    with pytest.raises(exceptions.WrongSessionKind, match="tree session, not a loop session"):
        LoopStore(clock=clock).append(RunStep(session_id="t-1", step_type="user"))
    assert not Step.objects.exists()
    assert Session.objects.get(pk="t-1").updated_at < START + timedelta(seconds=1)
