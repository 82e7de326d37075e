"""build_context reads only the kept context (docs/tree-store.md, "Context building").

The store stops its walk at the latest compaction's first-kept entry and
fetches only the nearest model and thinking-level changes above it; these
tests compare that with the pure ``build_context`` over the *whole* branch
(the old full walk) on random trees, and check a 100,000-entry session.
"""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime

import pytest
from django.db import connection, transaction

from agentstore import exceptions
from agentstore.stores.tree import TreeStore
from agentstore.stores.tree_context import build_context
from agentstore.types.tree import (
    AppendCompactionInput,
    EntryTokenUsageEntity,
    ImportedEntry,
    ImportedSession,
    MessageEntity,
)
from tests.security.chains import compact_every, insert_chain
from tests.stores.conftest import assistant, user

pytestmark = pytest.mark.django_db


def full_walk(tree: TreeStore, sid: str, leaf: str):  # type: ignore[no-untyped-def]
    """The context as the old code built it: every entry root → leaf."""
    return build_context(tree.branch(sid, leaf))


def grow(tree: TreeStore, sid: str, rng: random.Random, size: int) -> list[str]:
    ids: list[str] = []
    for n in range(size):
        parent = rng.choice(ids[-6:]) if ids and rng.random() < 0.95 else None
        kind = rng.random()
        if kind < 0.45:
            usage = EntryTokenUsageEntity(context_tokens=n + 1) if rng.random() < 0.3 else None
            message = (user if rng.random() < 0.5 else assistant)(f"m{n}")
            entry = tree.append_message(sid, parent, message, usage=usage)
        elif kind < 0.55:
            entry = tree.append_model_change(sid, parent, f"p{n}", f"model{n}")
        elif kind < 0.62:
            entry = tree.append_thinking_level_change(sid, parent, rng.choice(["", "low", "high"]))
        elif kind < 0.70:
            entry = tree.append_branch_summary(sid, parent, "", f"b{n}", None, False)
        else:
            # first kept: an ancestor usually, any entry sometimes, or none.
            choice = rng.random()
            if parent is not None and choice < 0.7:
                branch = [e.id for e in tree.branch(sid, parent)]
                first_kept = rng.choice(branch)
            elif ids and choice < 0.85:
                first_kept = rng.choice(ids)
            else:
                first_kept = ""
            try:
                entry = tree.append_compaction(
                    AppendCompactionInput(
                        session_id=sid,
                        parent_id=parent,
                        summary=f"c{n}",
                        first_kept_entry_id=first_kept,
                        operation_id=f"op-{n}",
                    )
                )
            except exceptions.StaleCompactionParent:
                entry = tree.append_message(sid, parent, user(f"m{n}"))
        ids.append(entry.id)
    return ids


@pytest.mark.parametrize("seed", range(6))
def test_matches_the_full_walk_on_random_trees(tree: TreeStore, seed: int) -> None:
    rng = random.Random(seed)
    sid = tree.create_session("/w").id
    ids = grow(tree, sid, rng, 60)
    for leaf in ids:
        assert tree.build_context(sid, leaf) == full_walk(tree, sid, leaf), leaf


def forget_settings(sid: str, rng: random.Random | None = None) -> None:
    """Clear the settings compactions recorded (all, or a random half): rows written before."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "SELECT entry_id FROM agentstore_entry WHERE session_id = %s AND type = 'compaction'",
            [sid],
        )
        ids = [row[0] for row in cursor.fetchall()]
        for entry_id in ids:
            if rng is None or rng.random() < 0.5:
                cursor.execute(
                    "UPDATE agentstore_entry SET compaction_settings = NULL"
                    " WHERE session_id = %s AND entry_id = %s",
                    [sid, entry_id],
                )


def recorded_settings(sid: str, entry_id: str) -> list[str] | None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT compaction_settings FROM agentstore_entry"
            " WHERE session_id = %s AND entry_id = %s",
            [sid, entry_id],
        )
        value = cursor.fetchone()[0]
    return None if value is None else json.loads(value)


@pytest.mark.parametrize("seed", range(4))
def test_matches_the_full_walk_when_some_compactions_recorded_no_settings(
    tree: TreeStore, seed: int
) -> None:
    rng = random.Random(200 + seed)
    sid = tree.create_session("/w").id
    ids = grow(tree, sid, rng, 60)
    forget_settings(sid, rng)
    for leaf in ids:
        assert tree.build_context(sid, leaf) == full_walk(tree, sid, leaf), leaf


def compact(tree: TreeStore, sid: str, parent: str, first_kept: str, op: str) -> str:
    return tree.append_compaction(
        AppendCompactionInput(
            session_id=sid,
            parent_id=parent,
            summary=f"summary {op}",
            first_kept_entry_id=first_kept,
            operation_id=op,
        )
    ).id


def test_a_compaction_records_the_settings_in_force_at_its_parent(tree: TreeStore) -> None:
    sid = tree.create_session("/w").id
    root = tree.append_message(sid, None, user("hi")).id
    model = tree.append_model_change(sid, root, "anthropic", "claude").id
    level = tree.append_thinking_level_change(sid, model, "high").id
    kept = tree.append_message(sid, level, assistant("hello")).id
    first = compact(tree, sid, kept, kept, "op-1")
    assert recorded_settings(sid, first) == ["anthropic", "claude", "high"]
    # The next compaction finds the first one's record and the change below it.
    switched = tree.append_model_change(sid, first, "openai", "gpt").id
    more = tree.append_message(sid, switched, user("again")).id
    second = compact(tree, sid, more, more, "op-2")
    assert recorded_settings(sid, second) == ["openai", "gpt", "high"]
    # A compaction at the root records nothing in force; other entries record nothing.
    other = tree.create_session("/w").id
    assert recorded_settings(other, compact(tree, other, None, "", "op-3")) == ["", "", ""]  # type: ignore[arg-type]
    assert recorded_settings(sid, more) is None
    context = tree.build_context(sid, second)
    assert (context.provider, context.model, context.thinking_level) == ("openai", "gpt", "high")


def test_build_context_takes_the_settings_from_the_compaction(tree: TreeStore) -> None:
    sid = tree.create_session("/w").id
    root = tree.append_message(sid, None, user("hi")).id
    model = tree.append_model_change(sid, root, "anthropic", "claude").id
    kept = tree.append_message(sid, model, assistant("hello")).id
    compaction = compact(tree, sid, kept, kept, "op-1")
    leaf = tree.append_message(sid, compaction, user("next")).id
    # Rewrite the record: the context reports it, so nothing above the kept
    # context was read.
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "UPDATE agentstore_entry SET compaction_settings = %s WHERE entry_id = %s",
            ['["p", "m", "low"]', compaction],
        )
    context = tree.build_context(sid, leaf)
    assert (context.provider, context.model, context.thinking_level) == ("p", "m", "low")
    # Without a record (a row written before), the climb finds the real ones.
    forget_settings(sid)
    context = tree.build_context(sid, leaf)
    assert (context.provider, context.model, context.thinking_level) == ("anthropic", "claude", "")
    assert context == full_walk(tree, sid, leaf)


def test_an_imported_compaction_records_the_settings(tree: TreeStore) -> None:
    stamp = datetime(2026, 1, 1, tzinfo=UTC)
    entries = (
        ImportedEntry(id="a", type="message", created_at=stamp, message=user("hi")),
        ImportedEntry(
            id="b",
            type="model_change",
            created_at=stamp,
            parent_id="a",
            message=MessageEntity(role="", provider="prov", model="mod"),
        ),
        ImportedEntry(
            id="c",
            type="thinking_level_change",
            created_at=stamp,
            parent_id="b",
            data={"thinking_level": "low"},
        ),
        ImportedEntry(
            id="d",
            type="compaction",
            created_at=stamp,
            parent_id="c",
            summary="s",
            data={"first_kept_entry_id": "c"},
        ),
        ImportedEntry(id="e", type="message", created_at=stamp, parent_id="d", message=user("x")),
    )
    tree.import_session(ImportedSession(id="imported", cwd="/w", entries=entries))
    assert recorded_settings("imported", "d") == ["prov", "mod", "low"]
    assert tree.build_context("imported", "e") == full_walk(tree, "imported", "e")


@pytest.mark.parametrize("seed", range(3))
def test_context_length_counts_the_kept_context(tree: TreeStore, seed: int) -> None:
    rng = random.Random(100 + seed)
    sid = tree.create_session("/w").id
    ids = grow(tree, sid, rng, 40)
    for leaf in ids:
        branch = tree.branch(sid, leaf)
        last = max((i for i, e in enumerate(branch) if e.type == "compaction"), default=-1)
        expected = len(branch)
        if last >= 0:
            kept = branch[last].compaction_first_kept_entry_id
            start = next((i for i in range(last) if kept and branch[i].id == kept), last)
            expected = len(branch) - start
        assert tree.context_length(sid, leaf) == expected, leaf
        assert tree.context_length(sid, leaf, at_most=2) == min(expected, 3)


def model_change_at(sid: str, entry_id: str) -> None:
    """Turn one inserted message into a model change (it must outlive the compactions)."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "UPDATE agentstore_entry SET type = 'model_change', role = '', content = '',"
            " provider = 'prov', model = 'mod', model_facing = %s"
            " WHERE session_id = %s AND entry_id = %s",
            [False, sid, entry_id],
        )


@pytest.mark.slow
def test_a_compacted_100k_session(tree: TreeStore) -> None:
    sid = tree.create_session("/w").id
    insert_chain(sid, 100_000)
    compact_every(sid, 1000, 500, 20)
    model_change_at(sid, "e2")
    context = tree.build_context(sid, "e100000")
    assert context == full_walk(tree, sid, "e100000")
    # The summary, the 20 kept entries and the 500 after the compaction.
    assert len(context.messages) == 1 + 20 + 500
    assert (context.provider, context.model) == ("prov", "mod")
    assert tree.context_length(sid, "e100000") == 521
    assert tree.context_length(sid, "e100000", at_most=100) == 101
