"""append_compaction: validation, idempotent replay, conflicts and the parent race.

See docs/tree-store.md, "Compactions".
"""

from __future__ import annotations

import pytest

from agentstore import exceptions
from agentstore.ids import new_id
from agentstore.models import Entry
from agentstore.stores.tree import TreeStore
from agentstore.types.tree import AppendCompactionInput
from tests.stores.conftest import assistant, user

pytestmark = pytest.mark.django_db


def compaction(
    sid: str, parent: str | None, operation_id: str = "op-1", **kw: object
) -> AppendCompactionInput:  # noqa: E501
    return AppendCompactionInput(
        session_id=sid,
        parent_id=parent,
        summary="summary",
        operation_id=operation_id,
        **kw,  # type: ignore[arg-type]
    )


def test_validation(tree: TreeStore) -> None:
    session = tree.create_session("/w")
    with pytest.raises(exceptions.ValidationError, match="compaction input is required"):
        tree.append_compaction(None)  # type: ignore[arg-type]
    for blank in ("", "  "):
        with pytest.raises(exceptions.ValidationError, match="operation_id is required") as info:
            tree.append_compaction(compaction(session.id, None, blank))
        assert info.value.field == "compaction.operation_id"
    with pytest.raises(exceptions.ValidationError, match="is not an entry of session"):
        tree.append_compaction(compaction(session.id, new_id()))
    with pytest.raises(exceptions.ValidationError, match="tokens_before"):
        tree.append_compaction(compaction(session.id, None, tokens_before=-1))
    assert not Entry.objects.exists()


def test_replay_returns_the_stored_entry_and_writes_nothing(tree: TreeStore) -> None:
    session = tree.create_session("/w")
    root = tree.append_message(session.id, None, user("root"))
    first = tree.append_compaction(compaction(session.id, root.id, details={"files": ["a"]}))
    updated = tree.get_session(session.id).updated_at  # type: ignore[union-attr]

    # Summary/first-kept/tokens are not compared: the operation id decides.
    again = tree.append_compaction(
        AppendCompactionInput(
            session_id=session.id, parent_id=root.id, summary="other", operation_id="op-1"
        )
    )

    assert again == first
    assert Entry.objects.filter(type="compaction").count() == 1
    assert tree.get_session(session.id).updated_at == updated  # type: ignore[union-attr]


def test_same_operation_on_another_parent_is_a_conflict(tree: TreeStore) -> None:
    session = tree.create_session("/w")
    root = tree.append_message(session.id, None, user("root"))
    other = tree.append_message(session.id, root.id, assistant("other"))
    tree.append_compaction(compaction(session.id, root.id))

    with pytest.raises(exceptions.CompactionConflict) as info:
        tree.append_compaction(compaction(session.id, other.id))
    assert info.value.code == "compaction_operation_mismatch"
    assert tree.children(session.id, other.id) == []
    assert [e.type for e in tree.children(session.id, root.id)] == ["message", "compaction"]


def test_same_operation_in_another_session_is_a_conflict(tree: TreeStore) -> None:
    first = tree.create_session("/w")
    second = tree.create_session("/w")
    tree.append_compaction(compaction(first.id, None))

    with pytest.raises(exceptions.CompactionConflict):
        tree.append_compaction(compaction(second.id, None))


def test_a_second_compactor_of_the_same_parent_loses(tree: TreeStore) -> None:
    session = tree.create_session("/w")
    root = tree.append_message(session.id, None, user("root"))
    winner = tree.append_compaction(compaction(session.id, root.id, "summary-a"))

    with pytest.raises(exceptions.StaleCompactionParent) as info:
        tree.append_compaction(compaction(session.id, root.id, "summary-b"))

    assert info.value.winner_entry_id == winner.id
    assert info.value.code == "stale_compaction_parent"
    assert [e.id for e in tree.children(session.id, root.id)] == [winner.id]


def test_one_root_level_compaction_per_session(tree: TreeStore) -> None:
    session = tree.create_session("/w")
    winner = tree.append_compaction(compaction(session.id, None, "root-a"))

    with pytest.raises(exceptions.StaleCompactionParent) as info:
        tree.append_compaction(compaction(session.id, None, "root-b"))
    assert info.value.winner_entry_id == winner.id
