"""Reading a tree session: entries, branches, the forest, transcripts and the model's context.

:class:`TreeReads` is the read half of :class:`agentstore.stores.tree.TreeStore`
(a base class of it; nothing else should build one)::

    store.branch(session_id, leaf_id, limit=50)   # the last 50 entries up to the leaf
    store.tree_page(session_id, after_id, 100)    # the forest, flat and depth first
    store.build_context(session_id, leaf_id)      # what the model would be sent

Every read runs in one snapshot (:meth:`StoreBase.read`, on
:func:`agentstore.db.read_snapshot`) and never takes the write lock; a read that
is one statement needs no transaction at all (``branch`` with an explicit
entry). "Append order" is ``(created_at, seq)``. The walks along parent links
are :mod:`agentstore.stores.tree_walks`' recursive queries, rows become value
objects in :mod:`agentstore.stores.tree_rows`, and the context itself is the
pure :func:`agentstore.stores.tree_context.build_context` over a lean row view.
Every page is bounded: a read costs about what it returns, not what the
session holds (docs/tree-store.md, "Reading" and "Reading a big tree").
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

from agentstore import db, exceptions
from agentstore.db import SqlCursor
from agentstore.sql import tree as tree_sql
from agentstore.stores.base import Missing, StoreBase, false, lookup, none, nothing
from agentstore.stores.tree_context import build_context, entries_needing_parts
from agentstore.stores.tree_rows import (
    build_entries,
    load_parts,
    message_from_entry,
    message_parts,
    select_entries,
)
from agentstore.stores.tree_walks import (
    ContextRow,
    Key,
    TreeWalk,
    branch_rows,
    context_rows,
    no_entry,
)
from agentstore.types.tree import (
    EntryEntity,
    SessionContextEntity,
    SessionMessageEntity,
    TreeNodeEntity,
    TreeRowEntity,
)

__all__ = ["TreeReads"]

# Positions in the selected rows (agentstore/sql/tree.py).
_PART_COUNT = tree_sql.PART_COUNT
_C_PK = tree_sql.C_PK
_C_ROLE = tree_sql.C_ROLE
_C_CONTENT = tree_sql.C_CONTENT
_C_PARTS = tree_sql.C_PARTS


def _entry_or(name: str, empty: object) -> Missing:
    """The ``missing`` of a read that starts at entry ``name`` (``""``: at the default one).

    An explicit entry the session cannot hold is ``NoEntry``; without one, an
    unknown session simply has nothing (``empty``) — what the query would answer.
    """

    def missing(arguments: dict[str, Any]) -> object:
        entry_id = arguments[name]
        return no_entry(arguments["session_id"], entry_id) if entry_id else empty

    return missing


def _leaf(leaf_id: str) -> str:
    if not leaf_id or not leaf_id.strip():
        raise exceptions.ValidationError("context entry id is required", field="leaf_id")
    return leaf_id


def _require_count(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise exceptions.ValidationError(f"{field} must be an integer", field=field)
    return value


class TreeReads(StoreBase):
    """The tree store's reads (see the module docstring)."""

    def _cursor_read(self, fn: Callable[[SqlCursor], Any]) -> Any:
        def run() -> Any:
            with db.cursor(self.using) as cursor:
                return fn(cursor)

        return self.read(run)

    @lookup("session_id", "entry_id", missing=none)
    def entry(self, session_id: str, entry_id: str) -> EntryEntity | None:
        """Return one entry of the session, or ``None``."""
        found = self._cursor_read(
            lambda c: select_entries(
                c, "e.session_id = %s AND e.entry_id = %s", [session_id, entry_id], order=""
            )
        )
        return found[0] if found else None

    @lookup("session_id", missing=nothing)
    def entries(self, session_id: str) -> list[EntryEntity]:
        """All entries of the session in append order (timestamp, then insertion)."""
        return list(
            self._cursor_read(lambda c: select_entries(c, "e.session_id = %s", [session_id]))
        )

    @lookup("session_id", missing=nothing)
    def entries_after(
        self, session_id: str, after_seq: int = 0, limit: int = 0
    ) -> list[EntryEntity]:
        """Entries with ``seq > after_seq`` in ``seq`` order, at most ``limit`` (≤ 0: all).

        The cursor read behind paging and tailing (the REST API's entry list and
        live follow): ``seq`` only grows, so a reader that remembers the last
        ``seq`` it saw never misses or repeats an entry.
        """
        if isinstance(after_seq, bool) or not isinstance(after_seq, int):
            raise exceptions.ValidationError("after_seq must be an integer", field="after_seq")
        if isinstance(limit, bool) or not isinstance(limit, int):
            raise exceptions.ValidationError("limit must be an integer", field="limit")
        order = "e.seq" + (f" LIMIT {int(limit)}" if limit > 0 else "")
        return list(
            self._cursor_read(
                lambda c: select_entries(
                    c, "e.session_id = %s AND e.seq > %s", [session_id, after_seq], order=order
                )
            )
        )

    @lookup("session_id", missing=none)
    def leaf_entry(self, session_id: str) -> EntryEntity | None:
        """The most recent entry by timestamp (not necessarily childless)."""
        found = self._cursor_read(
            lambda c: select_entries(
                c,
                "e.session_id = %s",
                [session_id],
                order="e.created_at DESC, e.seq DESC LIMIT 1",
            )
        )
        return found[0] if found else None

    @lookup("session_id", "parent_id", missing=nothing)
    def children(self, session_id: str, parent_id: str | None) -> list[EntryEntity]:
        """Direct children of ``parent_id`` (``None``: the roots), in append order."""
        if parent_id is None:
            where, params = "e.session_id = %s AND e.parent_id IS NULL", [session_id]
        else:
            where, params = "e.session_id = %s AND e.parent_id = %s", [session_id, parent_id]
        return list(self._cursor_read(lambda c: select_entries(c, where, params)))

    @lookup("session_id", "entry_id", missing=_entry_or("entry_id", []))
    def branch(self, session_id: str, entry_id: str = "", limit: int = 0) -> list[EntryEntity]:
        """The path from the root to ``entry_id`` (``""``: the most recent childless entry).

        ``limit > 0`` returns only the last ``limit`` entries of that path (still
        root-first), reading no more than that: the page of a long branch that
        ends at ``entry_id``; the page above it ends at the first one's parent.
        Raises ``NoEntry`` when an explicit ``entry_id`` is not in the session.

        With an explicit ``entry_id`` this is the "last N entries on the branch"
        read an agent loop makes every turn: one recursive SELECT, which is its
        own snapshot, so no read transaction is opened around it unless some of
        the entries have message parts to load by a second statement (then the
        whole read runs again in one snapshot; decision record 0005).
        """
        limit = _require_count(limit, "limit")

        def query(cursor: SqlCursor) -> list[EntryEntity]:
            rows = branch_rows(
                cursor, session_id, entry_id, tree_sql.select_list(cursor.db.vendor), limit
            )
            return build_entries(cursor, rows, True)

        if entry_id:
            # One statement: its own snapshot, no read transaction around it.
            with db.cursor(self.using) as cursor:
                rows = branch_rows(
                    cursor, session_id, entry_id, tree_sql.select_list(cursor.db.vendor), limit
                )
                if not any(row[_PART_COUNT] for row in rows):
                    return build_entries(cursor, rows, True)  # no statement: no parts
        return list(self._cursor_read(query))

    @lookup("session_id", "entry_id", missing=_entry_or("entry_id", 0))
    def branch_length(self, session_id: str, entry_id: str = "", at_most: int = 0) -> int:
        """How many entries the path root → ``entry_id`` has, counting no further than ``at_most``.

        A bounded question for callers that refuse to build huge results (the
        API's ``/context``): ``at_most + 1`` means "longer than ``at_most``".
        ``at_most <= 0`` counts the whole path. Raises ``NoEntry`` like :meth:`branch`.
        """
        at_most = _require_count(at_most, "at_most")

        def query(cursor: SqlCursor) -> int:
            limit = at_most + 1 if at_most > 0 else 0
            return len(branch_rows(cursor, session_id, entry_id, "e.id", limit))

        return int(self._cursor_read(query))

    @lookup("session_id", "after_entry_id", missing=_entry_or("after_entry_id", []))
    def tree_page(
        self,
        session_id: str,
        after_entry_id: str = "",
        limit: int = 100,
        *,
        after_depth: int | None = None,
    ) -> list[TreeRowEntity]:
        """A page of the forest listed flat, depth first (the order :meth:`tree` nests).

        Rows come after ``after_entry_id`` (``""``: from the first root), at most
        ``limit``. The walk goes from that entry to the next one in pre-order
        with indexed lookups (first child; else the next sibling of the entry or
        of its nearest ancestor that has one), so a page costs about ``limit``
        index probes and the memory of ``limit`` entries however big the
        session is. ``after_depth`` is the depth of ``after_entry_id`` when the
        caller knows it (the API's cursor carries it); otherwise it is counted.
        Raises ``NoEntry`` when ``after_entry_id`` is not in the session.
        """
        limit = _require_count(limit, "limit")
        if limit < 1:
            raise exceptions.ValidationError("limit must be positive", field="limit")

        def query(cursor: SqlCursor) -> list[TreeRowEntity]:
            walk = TreeWalk(cursor, session_id)
            if after_entry_id:
                current = walk.key(after_entry_id)
                if current is None:
                    raise no_entry(session_id, after_entry_id)
                if after_depth is None:
                    depth = len(branch_rows(cursor, session_id, after_entry_id, "e.id")) - 1
                else:
                    depth = after_depth
                found = walk.after(current, depth)
            else:
                found = walk.first_root()
            keys: list[tuple[Key, int]] = []
            while found is not None and len(keys) < limit:
                keys.append(found)
                found = walk.after(*found)
            if not keys:
                return []
            ids = [key[0] for key, _ in keys]
            marks = ", ".join(["%s"] * len(ids))
            entries = {
                entry.id: entry
                for entry in select_entries(
                    cursor,
                    f"e.session_id = %s AND e.entry_id IN ({marks})",
                    [session_id, *ids],
                    order="",
                )
            }
            cursor.execute(tree_sql.child_counts(len(ids)), [session_id, *ids])
            children = dict(cursor.fetchall())
            return [
                TreeRowEntity(
                    entry=entries[key[0]], depth=depth, child_count=int(children.get(key[0], 0))
                )
                for key, depth in keys
                if key[0] in entries
            ]

        return list(self._cursor_read(query))

    def tree(self, session_id: str) -> list[TreeNodeEntity]:
        """The session as a forest: roots in append order, each with its descendants."""
        entries = self.entries(session_id)
        by_parent: dict[str, list[EntryEntity]] = defaultdict(list)
        for entry in entries:
            by_parent[entry.parent_id or ""].append(entry)
        roots = by_parent.get("", [])
        # Depth-first without recursion (a chain can be 100,000 entries deep):
        # list every reachable entry after its descendants, then build the
        # immutable nodes bottom-up. The visited set keeps a corrupt cycle out.
        visited: set[str] = set()
        order: list[EntryEntity] = []
        stack: list[tuple[EntryEntity, bool]] = [(root, False) for root in reversed(roots)]
        while stack:
            entry, children_done = stack.pop()
            if children_done:
                order.append(entry)
                continue
            if entry.id in visited:
                continue
            visited.add(entry.id)
            stack.append((entry, True))
            stack.extend(
                (child, False)
                for child in reversed(by_parent.get(entry.id, []))
                if child.id not in visited
            )
        built: dict[str, TreeNodeEntity] = {}
        for entry in order:
            built[entry.id] = TreeNodeEntity(
                entry=entry,
                children=tuple(
                    built[child.id] for child in by_parent.get(entry.id, []) if child.id in built
                ),
            )
        return [built[root.id] for root in roots if root.id in built]

    @lookup("session_id", missing=none)
    def label(self, session_id: str, target_id: str) -> str | None:
        """The label of ``target_id`` (the last label entry for it wins; ``None`` if cleared)."""
        labels = self._cursor_read(
            lambda c: select_entries(
                c, "e.session_id = %s AND e.type = 'label'", [session_id], hydrate=False
            )
        )
        current: str | None = None
        for entry in labels:
            data = entry.data
            if data.get("target_id") == target_id:
                value = data.get("label")
                current = value if isinstance(value, str) else None
        return current

    @lookup("session_id", missing=nothing)
    def messages(self, session_id: str) -> list[SessionMessageEntity]:
        """Every message of the session (all branches, hidden ones too), in append order."""
        return self._messages("e.session_id = %s AND e.role <> ''", [session_id])

    @lookup("session_id", missing=nothing)
    def transcript_messages(self, session_id: str) -> list[SessionMessageEntity]:
        """The session's displayed messages, in append order."""
        return self._messages(
            "e.session_id = %s AND e.role <> '' AND e.display = %s", [session_id, True]
        )

    @lookup("session_id", "after_entry_id", missing=_entry_or("after_entry_id", []))
    def messages_page(
        self,
        session_id: str,
        after_entry_id: str = "",
        limit: int = 100,
        *,
        displayed_only: bool = False,
    ) -> list[SessionMessageEntity]:
        """A page of :meth:`messages` (``displayed_only``: of :meth:`transcript_messages`).

        The messages after the one of entry ``after_entry_id`` (``""``: from the
        first) in the same append order, at most ``limit``: one range scan of the
        ``(session, created_at, seq)`` index whatever the session's size. Raises
        ``NoEntry`` when ``after_entry_id`` is not in the session (deleted since).
        """
        limit = _require_count(limit, "limit")
        if limit < 1:
            raise exceptions.ValidationError("limit must be positive", field="limit")
        where = "e.session_id = %s AND e.role <> ''"
        params: list[Any] = [session_id]
        if displayed_only:
            where += " AND e.display = %s"
            params.append(True)

        def query(cursor: SqlCursor) -> list[EntryEntity]:
            sql_where, sql_params = where, list(params)
            if after_entry_id:
                cursor.execute(tree_sql.sort_key(cursor.db.vendor), [session_id, after_entry_id])
                key = cursor.fetchone()
                if key is None:
                    raise no_entry(session_id, after_entry_id)
                # (created_at, seq) > key, spelled with a plain lower bound
                # first so both backends' planners start the index range there.
                sql_where += " AND e.created_at >= %s AND (e.created_at > %s OR e.seq > %s)"
                sql_params += [key[0], key[0], key[1]]
            return select_entries(
                cursor, sql_where, sql_params, order=f"e.created_at, e.seq LIMIT {int(limit)}"
            )

        return [message_from_entry(entry) for entry in self._cursor_read(query)]

    @lookup("session_id", "entry_id", missing=none)
    def message_for_entry(self, session_id: str, entry_id: str) -> SessionMessageEntity | None:
        """The message an entry carries, or ``None`` (unknown entry or no message)."""
        found = self._messages(
            "e.session_id = %s AND e.entry_id = %s AND e.role <> ''", [session_id, entry_id]
        )
        return found[0] if found else None

    def _messages(self, where: str, params: list[Any]) -> list[SessionMessageEntity]:
        entries = self._cursor_read(lambda c: select_entries(c, where, params))
        return [message_from_entry(entry) for entry in entries]

    @lookup("session_id", "entry_id", missing=false)
    def context_has_image_parts(self, session_id: str, entry_id: str) -> bool:
        """Whether the entry or any ancestor carries an image part (unknown id: ``False``)."""

        def query(cursor: SqlCursor) -> bool:
            cursor.execute(
                tree_sql.has_image_part(cursor.db.vendor),
                [session_id, entry_id, session_id, session_id],
            )
            return cursor.fetchone() is not None

        return bool(self._cursor_read(query))

    @lookup(
        "session_id", "leaf_id", missing=lambda a: no_entry(a["session_id"], _leaf(a["leaf_id"]))
    )
    def build_context(self, session_id: str, leaf_id: str) -> SessionContextEntity:
        """What the model would see at ``leaf_id`` (required: there is no default leaf).

        Reads only what the context uses (docs/tree-store.md, "Context
        building"): the entries from the latest compaction's first-kept entry to
        the leaf, plus the nearest model and thinking-level changes above them,
        so a compacted long session costs what its tail costs.
        """
        _leaf(leaf_id)

        def query(cursor: SqlCursor) -> SessionContextEntity:
            # Lean on purpose: the rows are read as light row views, and only
            # the entries the context will actually include get their parts
            # loaded and their messages built.
            rows, settings = context_rows(cursor, session_id, leaf_id, 0)
            branch = [ContextRow(row) for row in rows]
            wanted = entries_needing_parts(branch)
            rows_by_id = {entry.id: entry for entry in branch if entry.id in wanted}
            parts = load_parts(
                cursor,
                [entry.row[_C_PK] for entry in rows_by_id.values() if entry.row[_C_PARTS]],
            )
            for entry in rows_by_id.values():
                row = entry.row
                entry.parts = message_parts(row[_C_ROLE], row[_C_CONTENT], parts.get(row[_C_PK]))
            return build_context(branch, settings)

        result: SessionContextEntity = self._cursor_read(query)
        return result

    @lookup("session_id", "leaf_id", missing=lambda a: no_entry(a["session_id"], a["leaf_id"]))
    def context_length(self, session_id: str, leaf_id: str, at_most: int = 0) -> int:
        """How many entries :meth:`build_context` reads at ``leaf_id`` (up to ``at_most + 1``).

        The entries from the latest compaction's first-kept entry (or the root,
        without a compaction) to the leaf: what the API's ``MAX_CONTEXT_BRANCH``
        bounds. ``at_most + 1`` means "longer than ``at_most``"; ``at_most <= 0``
        counts them all. Raises ``NoEntry`` like :meth:`build_context`.
        """
        at_most = _require_count(at_most, "at_most")

        def query(cursor: SqlCursor) -> int:
            limit = at_most + 1 if at_most > 0 else 0
            rows, _ = context_rows(cursor, session_id, leaf_id, limit, settings=False)
            return len(rows)

        return int(self._cursor_read(query))
