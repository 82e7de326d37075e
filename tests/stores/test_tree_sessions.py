"""TreeStore sessions: create, get, latest, list, children, delete.

See docs/tree-store.md, "Sessions".
"""

from __future__ import annotations

import pytest

from agentstore import exceptions
from agentstore.ids import is_uuid7
from agentstore.models import AgentTask, Entry, MessagePart, Session, Task, TaskEvent
from agentstore.stores.tree import TreeStore
from agentstore.types.tree import MessageEntity, MessagePartEntity
from tests.stores.conftest import START, user

pytestmark = pytest.mark.django_db


def test_create_session_uses_uuid7_and_the_clock(tree: TreeStore) -> None:
    created = tree.create_session("/w", "first", "")

    assert is_uuid7(created.id)
    assert created.cwd == "/w" and created.name == "first" and created.parent_session == ""
    assert created.created_at == created.updated_at > START
    assert tree.get_session(created.id) == created
    assert Session.objects.get(pk=created.id).kind == "tree"


@pytest.mark.parametrize("cwd", ["", "   "])
def test_blank_cwd_is_refused_and_nothing_written(tree: TreeStore, cwd: str) -> None:
    with pytest.raises(exceptions.ValidationError, match="session.cwd is required") as info:
        tree.create_session(cwd)
    assert info.value.field == "session.cwd"
    assert not Session.objects.exists()


def test_loads_and_lists_sessions(tree: TreeStore) -> None:
    old = tree.create_session("/w")
    new = tree.create_session("/w", "", old.id)
    other = tree.create_session("/o")

    assert tree.get_session(new.id).parent_session == old.id  # type: ignore[union-attr]
    assert [s.id for s in tree.list_sessions("/w")] == [old.id]
    assert [s.id for s in tree.list_child_sessions(old.id)] == [new.id]
    assert tree.latest_session("/w").id == old.id  # type: ignore[union-attr]
    assert tree.latest_session("/o").id == other.id  # type: ignore[union-attr]
    assert tree.latest_session("/nowhere") is None
    assert tree.get_session("missing") is None


def test_latest_session_follows_appends(tree: TreeStore) -> None:
    first = tree.create_session("/w")
    second = tree.create_session("/w")
    assert tree.latest_session("/w").id == second.id  # type: ignore[union-attr]

    tree.append_message(first.id, None, user("back to the first"))

    assert [s.id for s in tree.list_sessions("/w")] == [first.id, second.id]


def test_updated_at_never_moves_backwards(tree: TreeStore) -> None:
    session = tree.create_session("/w")
    before = tree.get_session(session.id).updated_at  # type: ignore[union-attr]

    tree.append_message(session.id, None, user("old news", timestamp=START.replace(year=2020)))

    assert tree.get_session(session.id).updated_at == before  # type: ignore[union-attr]


def test_delete_session_removes_rows_and_keeps_children(tree: TreeStore) -> None:
    parent = tree.create_session("/w")
    child = tree.create_session("/w", "", parent.id)
    image = MessagePartEntity(type="image", mime_type="image/png", data=b"\x89", width=1, height=1)
    entry = tree.append_message(parent.id, None, MessageEntity(role="user", parts=(image,)))

    tree.delete_session(parent.id)

    assert tree.get_session(parent.id) is None
    assert tree.entry(parent.id, entry.id) is None
    assert tree.message_for_entry(parent.id, entry.id) is None
    assert not Entry.objects.exists() and not MessagePart.objects.exists()
    assert tree.get_session(child.id) == child
    with pytest.raises(exceptions.NoSession):  # missing: as every store's delete
        tree.delete_session(parent.id)


def _agent_task(owner: str, child: str) -> Task:
    from django.utils import timezone

    from agentstore.ids import new_id

    now = timezone.now()
    task = Task.objects.create(
        id=new_id(),
        kind="agent",
        state="queued",
        owner_session_id=owner,
        created_at=now,
        updated_at=now,
    )
    AgentTask.objects.create(
        task=task, child_session_id=child, agent_name="general", prompt="inspect", depth=1
    )
    for seq, kind in enumerate(["task_queued", "extra"], start=1):
        TaskEvent.objects.create(
            task=task, sequence=seq, event_id=new_id(), kind=kind, created_at=now
        )
    return task


def test_deleting_the_owner_removes_its_agent_tasks_and_keeps_the_child(tree: TreeStore) -> None:
    owner = tree.create_session("/w")
    child = tree.create_session("/w", "", owner.id)
    task = _agent_task(owner.id, child.id)

    tree.delete_session(owner.id)

    assert not Task.objects.filter(pk=task.pk).exists()
    assert not AgentTask.objects.exists() and not TaskEvent.objects.exists()
    assert tree.get_session(child.id) == child


def test_deleting_the_child_removes_the_agent_task_and_keeps_the_owner(tree: TreeStore) -> None:
    owner = tree.create_session("/w")
    child = tree.create_session("/w", "", owner.id)
    task = _agent_task(owner.id, child.id)

    tree.delete_session(child.id)

    assert not Task.objects.filter(pk=task.pk).exists()
    assert not AgentTask.objects.exists() and not TaskEvent.objects.exists()
    assert tree.get_session(owner.id) == owner


def test_other_kinds_of_session_are_invisible_and_refuse_tree_appends(tree: TreeStore) -> None:
    Session.objects.create(id="loop-1", kind="loop", created_at=START, updated_at=START)

    assert tree.get_session("loop-1") is None
    with pytest.raises(exceptions.WrongSessionKind, match="not a tree session") as wrong:
        tree.append_message("loop-1", None, user("hi"))
    assert (wrong.value.kind, wrong.value.expected) == ("loop", "tree")
    with pytest.raises(exceptions.WrongSessionKind):
        tree.delete_session("loop-1")
    assert Session.objects.filter(pk="loop-1").exists()


def test_appending_to_a_missing_session_raises_no_session(tree: TreeStore) -> None:
    with pytest.raises(exceptions.NoSession, match="no such session: nope"):
        tree.append_message("nope", None, user("hi"))
    assert not Entry.objects.exists()
