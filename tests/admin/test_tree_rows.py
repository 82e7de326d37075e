"""tree_rows: nesting at branch points, folding long plain runs, deep chains, orphans."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta

from agentstore.selectors import admin_views
from agentstore.selectors.admin_views import TreeNode, _nest, tree_rows

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def chain(spec: list[tuple[str, str | None, str]]) -> admin_views.SessionTree:
    """Build a tree from (id, parent, type) triples in append order."""
    nodes: dict[str, TreeNode] = {}
    ordered = []
    for seq, (entry_id, parent, kind) in enumerate(spec, start=1):
        node = TreeNode(
            pk=seq,
            seq=seq,
            id=entry_id,
            parent_id=parent,
            type=kind,
            created_at=T0 + timedelta(seconds=seq),
            line='{"target_id": "a", "label": "x"}' if kind == "label" else "",
        )
        nodes[entry_id] = node
        ordered.append(node)
    return _nest("s", nodes, ordered)


def kinds(rows: list[admin_views.TreeRow]) -> list[str]:
    return [r.node.id if r.kind == "node" and r.node else r.kind for r in rows]


def test_branch_point_nests_each_branch() -> None:
    tree = chain([("r", None, "message"), ("a", "r", "message"), ("b", "r", "message")])
    assert kinds(tree_rows(tree)) == ["r", "open", "a", "close", "open", "b", "close"]
    assert tree.branch_points == 1 and tree.leaf_id == "b"


def test_short_plain_runs_are_drawn_in_full() -> None:
    ids = [f"m{i}" for i in range(admin_views.RUN_COLLAPSE_AT)]
    spec = [(ids[0], None, "message")] + [
        (ids[i], ids[i - 1], "message") for i in range(1, len(ids))
    ]
    assert kinds(tree_rows(chain(spec))) == ids


def test_long_plain_runs_fold_their_middle_and_keep_notable_entries() -> None:
    ids = [f"m{i}" for i in range(40)]
    spec = [(ids[0], None, "message")]
    for i in range(1, 40):
        spec.append((ids[i], ids[i - 1], "compaction" if i == 20 else "message"))
    rows = tree_rows(chain(spec))
    flat = kinds(rows)
    # m0..m19 (20 plain) fold to 3 + run + 3; the compaction stays; m21..m38 fold; m39 is the leaf.
    assert flat[:4] == ["m0", "m1", "m2", "run_open"]
    assert "m20" in flat and flat[-1] == "m39"
    run = rows[3]
    assert (run.count, run.first_seq, run.last_seq) == (14, 4, 17)
    assert flat.count("run_open") == 2 and flat.count("run_close") == 2


def test_very_long_runs_become_links_and_deep_chains_need_no_recursion() -> None:
    depth = sys.getrecursionlimit() * 3
    spec = [("m0", None, "message")] + [(f"m{i}", f"m{i - 1}", "message") for i in range(1, depth)]
    rows = tree_rows(chain(spec))
    assert [r.kind for r in rows].count("run_link") == 1
    assert len(rows) == 3 + 1 + 3 + 1


def test_labels_fold_like_the_store_and_orphans_draw_as_roots() -> None:
    tree = chain(
        [
            ("a", None, "message"),
            ("l1", "a", "label"),
            ("o", "ghost", "message"),
        ]
    )
    by_id = {r.node.id: r.node for r in tree_rows(tree) if r.node is not None and r.kind == "node"}
    assert by_id["a"].label == "x"
    assert by_id["o"].orphan and by_id["o"] in tree.roots


def test_cycles_do_not_loop() -> None:
    tree = chain([("r", None, "message"), ("a", "b", "message"), ("b", "a", "message")])
    assert kinds(tree_rows(tree)) == ["r"]
