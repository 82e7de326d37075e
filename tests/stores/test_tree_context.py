"""build_context (docs/tree-store.md; session_usage catalogue)."""

from __future__ import annotations

import pytest

from agentstore import exceptions
from agentstore.stores.tree import TreeStore
from agentstore.types.tree import AppendCompactionInput, EntryTokenUsageEntity
from tests.stores.conftest import assistant, user

pytestmark = pytest.mark.django_db


def compact(tree: TreeStore, sid: str, parent: str | None, first_kept: str = "", **kw: object):  # type: ignore[no-untyped-def]
    return tree.append_compaction(
        AppendCompactionInput(
            session_id=sid,
            parent_id=parent,
            summary=str(kw.pop("summary", "summary")),
            first_kept_entry_id=first_kept,
            operation_id=str(kw.pop("operation_id", f"op-{parent}")),
        )
    )


def roles(context) -> list[tuple[str, str]]:  # type: ignore[no-untyped-def]
    return [(m.role, m.content) for m in context.messages]


def test_requires_an_explicit_endpoint(tree: TreeStore) -> None:
    session = tree.create_session("/w")
    for leaf in ("", " "):
        with pytest.raises(exceptions.ValidationError, match="context entry id is required"):
            tree.build_context(session.id, leaf)
    with pytest.raises(exceptions.NoEntry):
        tree.build_context(session.id, "missing")


def test_includes_branch_summary(tree: TreeStore) -> None:
    session = tree.create_session("/w")
    root = tree.append_message(session.id, None, user("root"))
    summary = tree.append_branch_summary(
        session.id, root.id, "", "work from the other branch", None, False
    )

    assert roles(tree.build_context(session.id, summary.id)) == [
        ("user", "root"),
        ("branchSummary", "work from the other branch"),
    ]


def test_compaction_tail_includes_branch_summary(tree: TreeStore) -> None:
    session = tree.create_session("/w")
    root = tree.append_message(session.id, None, user("root"))
    summary = tree.append_branch_summary(session.id, root.id, "", "prior branch work", None, False)
    compaction = compact(tree, session.id, summary.id, root.id)

    assert roles(tree.build_context(session.id, compaction.id)) == [
        ("compactionSummary", "summary"),
        ("user", "root"),
        ("branchSummary", "prior branch work"),
    ]


def test_hidden_and_non_model_facing_messages_are_left_out(tree: TreeStore) -> None:
    session = tree.create_session("/w")
    a = tree.append_message(session.id, None, user("in"))
    b = tree.append_message(session.id, a.id, user("out"), model_facing=False)
    c = tree.append_custom_message(session.id, b.id, "ext", "hidden", False, None)
    d = tree.append_custom(session.id, "note", "{}")
    e = tree.append_message(session.id, c.id, assistant("reply"))

    assert roles(tree.build_context(session.id, e.id)) == [("user", "in"), ("assistant", "reply")]
    assert roles(tree.build_context(session.id, d.id)) == []


def test_tracks_the_latest_provider_usage_anchor(tree: TreeStore) -> None:
    session = tree.create_session("/w")
    root = tree.append_message(session.id, None, user("question"))
    usage = EntryTokenUsageEntity(
        context_window=1000, context_tokens=42, input_tokens=120, output_tokens=8
    )
    answer = tree.append_message(
        session.id, root.id, assistant("answer", provider="openai", model="gpt"), usage=usage
    )
    plain = tree.append_message(session.id, answer.id, assistant("no usage"))

    anchor = tree.build_context(session.id, plain.id).usage_anchor
    assert anchor is not None
    assert (anchor.entry_id, anchor.message_index, anchor.provider, anchor.model) == (
        answer.id,
        1,
        "openai",
        "gpt",
    )
    assert anchor.usage == usage


def test_compaction_clears_the_usage_anchor_and_tail_does_not_restore_it(tree: TreeStore) -> None:
    session = tree.create_session("/w")
    root = tree.append_message(session.id, None, user("q"))
    answer = tree.append_message(
        session.id, root.id, assistant("a"), usage=EntryTokenUsageEntity(input_tokens=40)
    )
    compaction = compact(tree, session.id, answer.id, root.id)

    context = tree.build_context(session.id, compaction.id)
    assert context.usage_anchor is None
    assert roles(context) == [("compactionSummary", "summary"), ("user", "q"), ("assistant", "a")]

    later = tree.append_message(
        session.id, compaction.id, assistant("b"), usage=EntryTokenUsageEntity(output_tokens=5)
    )
    anchor = tree.build_context(session.id, later.id).usage_anchor
    assert anchor is not None and (anchor.entry_id, anchor.message_index) == (later.id, 3)


def test_compaction_with_unknown_first_kept_has_no_tail(tree: TreeStore) -> None:
    session = tree.create_session("/w")
    root = tree.append_message(session.id, None, user("q"))
    compaction = compact(tree, session.id, root.id, "not-on-this-branch")

    assert roles(tree.build_context(session.id, compaction.id)) == [
        ("compactionSummary", "summary")
    ]


def test_only_the_last_compaction_counts_and_tail_skips_earlier_summaries(tree: TreeStore) -> None:
    session = tree.create_session("/w")
    a = tree.append_message(session.id, None, user("a"))
    first = compact(tree, session.id, a.id, a.id, summary="first")
    b = tree.append_message(session.id, first.id, assistant("b"))
    change = tree.append_model_change(session.id, b.id, "p", "m")
    second = compact(tree, session.id, change.id, a.id, summary="second")
    c = tree.append_message(session.id, second.id, user("c"))

    context = tree.build_context(session.id, c.id)
    assert roles(context) == [
        ("compactionSummary", "second"),
        ("user", "a"),
        ("assistant", "b"),
        ("user", "c"),
    ]
    assert (context.provider, context.model) == ("p", "m")


def test_thinking_level_may_be_reset_to_empty(tree: TreeStore) -> None:
    session = tree.create_session("/w")
    high = tree.append_thinking_level_change(session.id, None, "high")
    off = tree.append_thinking_level_change(session.id, high.id, "")

    assert tree.build_context(session.id, high.id).thinking_level == "high"
    assert tree.build_context(session.id, off.id).thinking_level == ""
