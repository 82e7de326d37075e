"""TreeStore appends and readers (docs/tree-store.md; the session_repository catalogue)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone

import pytest

from agentstore import exceptions
from agentstore.ids import is_uuid7
from agentstore.models import Entry, Session
from agentstore.stores.tree import TreeStore
from agentstore.types.tree import (
    AppendCompactionInput,
    EntryTokenUsageEntity,
    MessageEntity,
    MessagePartEntity,
)
from tests.stores.conftest import assistant, user

pytestmark = pytest.mark.django_db


def test_appends_messages_in_session_tree(tree: TreeStore) -> None:
    session = tree.create_session("/w")
    root = tree.append_message(session.id, None, user("hello"))
    child = tree.append_message(
        session.id, root.id, assistant("hi", provider="local", model="librecode")
    )

    assert is_uuid7(root.id) and is_uuid7(child.id)
    assert (root.seq, child.seq) == (1, 2)
    assert tree.latest_session("/w").id == session.id  # type: ignore[union-attr]
    assert tree.leaf_entry(session.id) == child
    assert [(e.id, e.parent_id) for e in tree.entries(session.id)] == [
        (root.id, None),
        (child.id, root.id),
    ]
    assert [e.id for e in tree.children(session.id, None)] == [root.id]
    assert [e.id for e in tree.children(session.id, root.id)] == [child.id]
    messages = tree.messages(session.id)
    assert [(m.sender, m.role) for m in messages] == [("user", "user"), ("assistant", "assistant")]
    found = tree.message_for_entry(session.id, child.id)
    assert found is not None
    assert (found.provider, found.model, found.entry_id, found.id) == (
        "local",
        "librecode",
        child.id,
        child.id,
    )


def test_append_result_equals_a_later_read(tree: TreeStore) -> None:
    session = tree.create_session("/w")
    appended = tree.append_message(session.id, None, user("same on the way back"))

    assert tree.entry(session.id, appended.id) == appended
    assert appended.message.parts[0].text == "same on the way back"


def test_transcript_honours_display(tree: TreeStore) -> None:
    session = tree.create_session("/w")
    base = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    a = tree.append_message(session.id, None, user("visible", timestamp=base), display=True)
    b = tree.append_message(
        session.id, a.id, user("hidden", timestamp=base + timedelta(seconds=1)), display=False
    )
    tree.append_message(session.id, b.id, user("default visible", timestamp=base + timedelta(2)))

    assert len(tree.messages(session.id)) == 3
    assert [m.content for m in tree.transcript_messages(session.id)] == [
        "visible",
        "default visible",
    ]
    assert [e.display for e in tree.entries(session.id)] == [True, False, True]


def test_display_and_model_facing_default_independently(tree: TreeStore) -> None:
    session = tree.create_session("/w")
    hidden = tree.append_message(session.id, None, user("x"), display=False)
    shown = tree.append_message(session.id, hidden.id, assistant("y"), display=True)

    assert (hidden.display, hidden.model_facing) == (False, True)
    assert (shown.display, shown.model_facing) == (True, True)


def test_input_timestamps_are_kept_in_utc(tree: TreeStore) -> None:
    session = tree.create_session("/w")
    instant = datetime(2026, 5, 31, 12, 34, 56, 789000, tzinfo=UTC)
    cdt = instant.astimezone(timezone(timedelta(hours=-5)))

    for stamp in (instant, cdt):
        entry = tree.append_message(session.id, None, user("t", timestamp=stamp))
        stored = tree.entry(session.id, entry.id)
        assert stored is not None
        assert stored.created_at == instant and stored.created_at.tzinfo is UTC
        assert stored.message.timestamp == instant
        assert tree.message_for_entry(session.id, entry.id).created_at == instant  # type: ignore[union-attr]


def test_naive_timestamps_are_refused(tree: TreeStore) -> None:
    session = tree.create_session("/w")
    with pytest.raises(exceptions.ValidationError, match="message.timestamp"):
        tree.append_message(session.id, None, user("t", timestamp=datetime(2026, 1, 1)))
    assert not Entry.objects.exists()


def test_delete_entry_branch_removes_descendants(tree: TreeStore) -> None:
    session = tree.create_session("/w")
    root = tree.append_message(session.id, None, user("root"))
    branch = tree.append_message(session.id, root.id, assistant("branch"))
    child = tree.append_message(session.id, branch.id, user("child"))
    before = tree.get_session(session.id).updated_at  # type: ignore[union-attr]

    tree.delete_entry_branch(session.id, branch.id)

    assert [e.id for e in tree.entries(session.id)] == [root.id]
    assert tree.message_for_entry(session.id, child.id) is None
    assert tree.get_session(session.id).updated_at > before  # type: ignore[union-attr]
    tree.delete_entry_branch(session.id, "unknown")  # no error, nothing deleted
    assert len(tree.entries(session.id)) == 1


def test_branch_loads_only_the_active_chain(tree: TreeStore) -> None:
    session = tree.create_session("/w")
    root = tree.append_message(session.id, None, user("root"))
    child = tree.append_message(session.id, root.id, assistant("child"))
    grandchild = tree.append_message(session.id, child.id, user("grandchild"))
    sibling = tree.append_message(session.id, root.id, assistant("sibling"))

    assert [e.id for e in tree.branch(session.id, grandchild.id)] == [
        root.id,
        child.id,
        grandchild.id,
    ]
    assert [e.id for e in tree.branch(session.id, "")] == [root.id, sibling.id]


def test_branch_of_a_missing_entry_raises_not_found(tree: TreeStore) -> None:
    session = tree.create_session("/w")
    tree.append_message(session.id, None, user("root"))

    with pytest.raises(exceptions.NoEntry, match="not found"):
        tree.branch(session.id, "nonexistent")
    assert tree.branch(tree.create_session("/w").id, "") == []


def test_branch_resolves_the_leaf_not_the_latest_timestamp(tree: TreeStore) -> None:
    session = tree.create_session("/w")
    now = datetime(2026, 6, 1, tzinfo=UTC)
    root = tree.append_message(session.id, None, user("root", timestamp=now - timedelta(hours=2)))
    leaf_a = tree.append_message(session.id, root.id, assistant("leafA", timestamp=now))
    backdated_parent = tree.append_message(
        session.id, root.id, assistant("backdated parent", timestamp=now - timedelta(hours=1))
    )
    backdated_leaf = tree.append_message(
        session.id, backdated_parent.id, user("backdated leaf", timestamp=now)
    )

    path = [e.id for e in tree.branch(session.id, "")]

    assert path == [root.id, backdated_parent.id, backdated_leaf.id]
    assert leaf_a.id not in path


def test_entries_sort_by_timestamp_then_insertion(tree: TreeStore) -> None:
    session = tree.create_session("/w")
    now = datetime(2026, 6, 1, tzinfo=UTC)
    late = tree.append_message(session.id, None, user("late", timestamp=now))
    early = tree.append_message(session.id, None, user("early", timestamp=now - timedelta(1)))
    tie = tree.append_message(session.id, None, user("tie", timestamp=now))

    assert [e.id for e in tree.entries(session.id)] == [early.id, late.id, tie.id]
    assert [e.seq for e in tree.entries(session.id)] == [2, 1, 3]
    assert tree.leaf_entry(session.id).id == tie.id  # type: ignore[union-attr]


def test_branch_is_cycle_safe(tree: TreeStore) -> None:
    session = tree.create_session("/w")
    a = tree.append_message(session.id, None, user("a"))
    b = tree.append_message(session.id, a.id, user("b"))
    # Corrupt the tree behind the store's back: a → b → a.
    Entry.objects.filter(session_id=session.id, entry_id=a.id).update(parent_id=b.id)

    assert [e.id for e in tree.branch(session.id, b.id)] == [a.id, b.id]
    assert [n.entry.id for n in tree.tree(session.id)] == []


def test_librecode_style_tree_metadata(tree: TreeStore) -> None:
    session = tree.create_session("/w")
    first = tree.append_message(session.id, None, user("start"))
    model = tree.append_model_change(session.id, first.id, "anthropic", "sonnet")
    thinking = tree.append_thinking_level_change(session.id, model.id, "high")
    path_a = tree.append_message(session.id, thinking.id, assistant("path A"))
    label = tree.append_label_change(session.id, path_a.id, first.id, "checkpoint")
    custom = tree.append_custom_message(
        session.id, label.id, "test-extension", "extra", True, {"source": "test"}
    )
    compaction = tree.append_compaction(
        AppendCompactionInput(
            session_id=session.id,
            parent_id=custom.id,
            summary="summary of earlier work",
            first_kept_entry_id=path_a.id,
            tokens_before=1200,
            operation_id="op-1",
        )
    )
    branch_summary = tree.append_branch_summary(
        session.id, first.id, compaction.id, "branch", {"files": ["a.go"]}, False
    )

    assert tree.label(session.id, first.id) == "checkpoint"
    assert [e.id for e in tree.branch(session.id, branch_summary.id)] == [
        first.id,
        branch_summary.id,
    ]
    forest = tree.tree(session.id)
    assert len(forest) == 1 and forest[0].entry.id == first.id
    assert [n.entry.id for n in forest[0].children] == [model.id, branch_summary.id]
    message = tree.message_for_entry(session.id, custom.id)
    assert message is not None
    assert (message.sender, message.role, message.content) == ("test-extension", "custom", "extra")
    assert branch_summary.branch_from_entry_id == compaction.id
    assert json.loads(branch_summary.data_json)["details"] == {"files": ["a.go"]}

    context = tree.build_context(session.id, compaction.id)
    assert (context.provider, context.model, context.thinking_level) == (
        "anthropic",
        "sonnet",
        "high",
    )
    assert [(m.role, m.content) for m in context.messages] == [
        ("compactionSummary", "summary of earlier work"),
        ("assistant", "path A"),
        ("custom", "extra"),
    ]

    tree.append_session_info(session.id, branch_summary.id, "named session")
    assert tree.get_session(session.id).name == "named session"  # type: ignore[union-attr]


def test_append_custom_and_custom_entry(tree: TreeStore) -> None:
    session = tree.create_session("/w")
    note = tree.append_custom(session.id, "note", '{"key":"value"}')
    checkpoint = tree.append_custom_entry(session.id, note.id, "checkpoint", '{"step":1}')

    assert (note.type, note.custom_type, note.parent_id) == ("custom", "note", None)
    assert checkpoint.parent_id == note.id
    # Unknown keys are preserved (librecode silently dropped them).
    assert note.data["key"] == "value"
    assert checkpoint.data["step"] == 1
    assert (note.model_facing, note.display) == (False, True)


@pytest.mark.parametrize("data_json", ["{", "[1]", "NaN", '"text"'])
def test_custom_entries_refuse_bad_json(tree: TreeStore, data_json: str) -> None:
    session = tree.create_session("/w")
    with pytest.raises(exceptions.ValidationError, match="data_json") as info:
        tree.append_custom(session.id, "note", data_json)
    assert info.value.field == "data_json"
    assert not Entry.objects.exists()


def test_custom_message_needs_a_sender(tree: TreeStore) -> None:
    session = tree.create_session("/w")
    with pytest.raises(exceptions.ValidationError, match="message.sender is required"):
        tree.append_custom_message(session.id, None, " ", "content", True, None)


def test_hidden_custom_message_is_not_model_facing(tree: TreeStore) -> None:
    session = tree.create_session("/w")
    hidden = tree.append_custom_message(session.id, None, "ext", "quiet", False, None)

    assert (hidden.display, hidden.model_facing) == (False, False)


def test_label_clears_when_none(tree: TreeStore) -> None:
    session = tree.create_session("/w")
    target = tree.append_message(session.id, None, user("t"))
    set_label = tree.append_label_change(session.id, target.id, target.id, "checkpoint")
    assert tree.label(session.id, target.id) == "checkpoint"

    tree.append_label_change(session.id, set_label.id, target.id, None)

    assert tree.label(session.id, target.id) is None
    assert tree.label(session.id, "never-labelled") is None


def test_unknown_parent_is_refused(tree: TreeStore) -> None:
    session = tree.create_session("/w")
    other = tree.create_session("/w")
    foreign = tree.append_message(other.id, None, user("elsewhere"))
    before = tree.get_session(session.id)

    for parent in ("nope", foreign.id):
        with pytest.raises(exceptions.ValidationError, match="is not an entry of session") as info:
            tree.append_message(session.id, parent, user("orphan"))
        assert info.value.field == "parent_id"
    assert not Entry.objects.filter(session_id=session.id).exists()
    # The check is part of the INSERT, after the touch: the refusal undoes the touch too.
    assert tree.get_session(session.id) == before


def test_message_validation(tree: TreeStore) -> None:
    session = tree.create_session("/w")
    with pytest.raises(exceptions.ValidationError, match="message is required"):
        tree.append_message(session.id, None, None)  # type: ignore[arg-type]
    with pytest.raises(exceptions.ValidationError, match="message.role is required"):
        tree.append_message(session.id, None, MessageEntity(role=" ", content="x"))
    with pytest.raises(exceptions.ValidationError, match="session_id is required"):
        tree.append_message("", None, user("x"))
    assert not Entry.objects.exists()


def test_usage_is_recorded(tree: TreeStore) -> None:
    session = tree.create_session("/w")
    usage = EntryTokenUsageEntity(context_window=1000, input_tokens=120)
    entry = tree.append_message(session.id, None, assistant("a"), usage=usage)

    assert entry.data["usage"] == {"context_window": 1000, "input_tokens": 120}


def test_session_info_renames_atomically(tree: TreeStore) -> None:
    session = tree.create_session("/w", "before")
    info = tree.append_session_info(session.id, None, "after")

    assert (info.type, info.display, info.model_facing) == ("session_info", False, False)
    assert Session.objects.get(pk=session.id).name == "after"


def test_tree_of_a_very_deep_chain(tree: TreeStore) -> None:
    from agentstore.ids import new_id

    session = tree.create_session("/w")
    ids = [new_id() for _ in range(3000)]
    stamp = datetime(2026, 1, 1, tzinfo=UTC)
    Entry.objects.bulk_create(
        Entry(
            session_id=session.id,
            seq=n + 1,
            entry_id=entry_id,
            parent_id=ids[n - 1] if n else None,
            type="custom",
            created_at=stamp + timedelta(seconds=n),
        )
        for n, entry_id in enumerate(ids)
    )

    forest = tree.tree(session.id)
    depth, node = 1, forest[0]
    while node.children:
        (node,) = node.children
        depth += 1
    assert len(forest) == 1 and depth == 3000 and node.entry.id == ids[-1]


@pytest.mark.parametrize("bad", ["a\x00b", "a\ud800b"], ids=["NUL", "lone surrogate"])
@pytest.mark.parametrize(
    ("field", "message", "extra"),
    [
        ("message.content", lambda bad: MessageEntity(role="user", content=bad), {}),
        ("message.model", lambda bad: MessageEntity(role="assistant", content="x", model=bad), {}),
        ("message.role", lambda bad: MessageEntity(role=bad, content="x"), {}),
        (
            "message.parts[0].name",
            lambda bad: MessageEntity(
                role="user",
                parts=(
                    MessagePartEntity(
                        type="image",
                        mime_type="image/png",
                        name=bad,
                        data=b"png",
                        width=1,
                        height=1,
                    ),
                ),
            ),
            {},
        ),
    ],
)
def test_text_no_database_can_keep_is_refused_by_name(
    tree: TreeStore, bad: str, field: str, message: object, extra: dict[str, object]
) -> None:
    # The HTTP API refuses these bodies; the Python API refuses them alike, on both
    # backends (SQLite would keep a NUL, PostgreSQL raise its own DataError).
    session = tree.create_session("/repo")
    with pytest.raises(exceptions.ValidationError, match=field.replace("[", r"\[")) as refused:
        tree.append_message(session.id, None, message(bad), **extra)  # type: ignore[operator]
    assert refused.value.field == field
    assert tree.entries(session.id) == []
