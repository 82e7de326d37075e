"""Walks over a tree session's parent links, in SQL: paths up to the root, the pre-order page.

Private to the tree store (:mod:`agentstore.stores.tree` and its ``tree_*``
modules). An entry's place in its session is its ``parent_id``; every question
about paths is a walk along those links, and each walk here is *iterative*:

* :func:`branch_rows` — the path root → entry (``TreeStore.branch``), one
  recursive query;
* :func:`climb` — from an entry upwards until a stop (a column's value, or the
  nearest settings changes), one recursive query; on PostgreSQL each step is a
  LATERAL lookup (``agentstore/sql/tree.py``);
* :func:`context_rows` — the part of a branch ``build_context`` needs: two
  bounded climbs (leaf → nearest compaction → its first-kept entry) instead of
  one walk to the root, plus the settings in force above them
  (:func:`settings_at`, a third climb, when the compaction did not record them);
* :class:`TreeWalk` — pre-order steps through the forest for ``tree_page``: a
  few indexed queries a step, and one recursive query to climb out of a deep
  finished subtree.

Nothing recurses in Python (a chain can be 100,000 entries deep), and every
recursive query is capped by the session's highest ``seq``, which bounds any
simple path, so a corrupt parent cycle ends the walk instead of looping; the
rows' visited checks below cut the path where the cycle closes.

Rows come back as the selected columns (:func:`agentstore.sql.tree.select_list`
or ``context_select_list``); :class:`ContextRow` lets the pure context builder
(:mod:`agentstore.stores.tree_context`) read a context row as it reads an entry.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from agentstore import exceptions, sql
from agentstore.db import SqlCursor
from agentstore.sql import tree as tree_sql
from agentstore.stores.tree_context import NO_SETTINGS, Settings, apply_settings
from agentstore.stores.tree_rows import decode_settings, new_message
from agentstore.types.tree import MessageEntity, MessagePartEntity

__all__ = [
    "ContextRow",
    "Key",
    "TreeWalk",
    "branch_rows",
    "climb",
    "context_rows",
    "settings_at",
]

# Positions in the context rows (agentstore/sql/tree.py).
_C_ID = tree_sql.C_ID
_C_TYPE = tree_sql.C_TYPE
_C_LINE = tree_sql.C_LINE
_C_CREATED = tree_sql.C_CREATED
_C_ROLE = tree_sql.C_ROLE
_C_CONTENT = tree_sql.C_CONTENT
_C_PROVIDER = tree_sql.C_PROVIDER
_C_MODEL = tree_sql.C_MODEL
_C_SUMMARY = tree_sql.C_SUMMARY
_C_MODEL_FACING = tree_sql.C_MODEL_FACING
_C_FIRST_KEPT = tree_sql.C_FIRST_KEPT
_C_SETTINGS = tree_sql.C_SETTINGS

_to_datetime = sql.utc


# -- paths to the root ---------------------------------------------------------------


def no_entry(session_id: str, entry_id: str) -> exceptions.NoEntry:
    """The one error for an entry id the session does not hold."""
    return exceptions.NoEntry(f'entry "{entry_id}" not found in session "{session_id}"')


def branch_rows(
    cursor: SqlCursor, session_id: str, entry_id: str, columns: str, limit: int = 0
) -> list[Sequence[Any]]:
    """The selected rows of the path root → ``entry_id`` (``""``: the latest leaf).

    ``limit > 0``: only the ``limit`` rows nearest ``entry_id``. Raises
    ``NoEntry`` when ``entry_id`` is not in the session.
    """
    if not entry_id:
        cursor.execute(tree_sql.LATEST_LEAF, [session_id])
        row = cursor.fetchone()
        if row is None:
            return []
        entry_id = row[0]
    # Walk parent links upwards inside the session. The depth cap (the
    # session's highest seq bounds any simple path) and the visited set
    # below keep a corrupt parent cycle from looping.
    bounded = limit > 0
    cursor.execute(
        tree_sql.branch(cursor.db.vendor, columns, bounded),
        [session_id, entry_id, session_id, limit - 1 if bounded else session_id],
    )
    rows = cursor.fetchall()
    if not rows:
        raise no_entry(session_id, entry_id)
    # Both backends emit a recursive CTE's rows level by level, but SQL does
    # not promise it; sorting in Python only when needed is cheaper than an
    # ORDER BY over 10,000 wide rows.
    depths = [row[0] for row in rows]
    if depths != sorted(depths):
        rows.sort(key=lambda row: row[0])
    if len({row[1] for row in rows}) == len(rows):  # no entry twice: no cycle
        path = [row[2:] for row in rows]
    else:  # a corrupt parent cycle: the path ends before its first repeat
        seen: set[int] = set()
        path = []
        for row in rows:
            if row[1] in seen:
                break
            seen.add(row[1])
            path.append(row[2:])
    path.reverse()
    return path


def climb(
    cursor: SqlCursor,
    session_id: str,
    entry_id: str,
    columns: str,
    stop: tuple[str, str] | None,
    limit: int,
) -> list[tuple[Sequence[Any], str | None]]:
    """``(row, parent_id)`` from ``entry_id`` upwards, leaf side first.

    ``stop = (column, value)``: the climb includes the first row whose
    column has the value and goes no further. ``stop = None``: climb until
    both a model change and a thinking-level change were passed, or a
    compaction that recorded the settings, and return only such rows.
    ``limit > 0`` caps the rows. Like every walk here it is
    iterative (one recursive query) and capped by the session's highest seq
    against a corrupt parent cycle; on PostgreSQL the step is a LATERAL
    lookup (see ``agentstore/sql/tree.py``).
    """
    params: list[Any] = []
    stop_column = ""
    if stop is not None:
        stop_column, value = stop
        params = [value]
    cursor.execute(
        tree_sql.climb(cursor.db.vendor, columns, stop_column, bool(limit)),
        [
            *params,
            session_id,
            entry_id,
            *params,
            session_id,
            limit - 1 if limit else session_id,
        ],
    )
    rows = cursor.fetchall()
    # Level order is what both backends emit, not what SQL promises.
    if any(rows[i][0] > rows[i + 1][0] for i in range(len(rows) - 1)):
        rows.sort(key=lambda row: row[0])
    seen: set[int] = set()
    path: list[tuple[Sequence[Any], str | None]] = []
    for row in rows:
        if row[1] in seen:
            break  # a parent cycle: stop where it closes
        seen.add(row[1])
        path.append((row[3:], row[2]))
    return path


# -- the context's part of a branch --------------------------------------------------


def context_rows(
    cursor: SqlCursor,
    session_id: str,
    leaf_id: str,
    limit: int,
    *,
    settings: bool = True,
) -> tuple[list[Sequence[Any]], Settings]:
    """The context rows (``context_select_list``) build_context needs, root side first,
    and the settings in force above the first of them.

    Two bounded climbs instead of one walk to the root: from the leaf up to
    the nearest compaction, and from there up to its first-kept entry.
    Returned as a *sub-branch* the pure ``build_context`` reads exactly as
    it reads the whole branch, with the settings the compaction recorded
    when it was appended (decision record 0027); a compaction without them (written before they
    were recorded) costs a third climb to the nearest settings changes.
    ``settings=False`` skips that, and ``limit > 0`` stops counting past
    ``limit`` rows (both for ``TreeStore.context_length``). Raises ``NoEntry``
    when ``leaf_id`` is not in the session.
    """
    columns = tree_sql.context_select_list(cursor.db.vendor)
    tail = climb(cursor, session_id, leaf_id, columns, ("type", "compaction"), limit)
    if not tail:
        raise no_entry(session_id, leaf_id)
    top, above_id = tail[-1]
    if top[_C_TYPE] != "compaction" or above_id is None or (limit and len(tail) >= limit):
        # No compaction on the branch (the walk reached the root), a
        # compaction at the root, or the count is already past the bound.
        return [row for row, _ in reversed(tail)], NO_SETTINGS
    first_kept = str(top[_C_FIRST_KEPT])
    kept: list[tuple[Sequence[Any], str | None]] = []
    if first_kept:
        kept = climb(
            cursor,
            session_id,
            above_id,
            columns,
            ("entry_id", first_kept),
            limit - len(tail) if limit else 0,
        )
        if limit and len(tail) + len(kept) >= limit:
            # Past the bound: stop counting.
            return [row for row, _ in reversed(tail + kept)], NO_SETTINGS
        if not kept or kept[-1][0][_C_ID] != first_kept:
            # Not an ancestor: the compaction keeps no tail, and this climb
            # read the whole rest of the branch, which holds every setting.
            if not settings:
                return [row for row, _ in reversed(tail)], NO_SETTINGS
            return [row for row, _ in reversed(tail + kept)], NO_SETTINGS
        above_id = kept[-1][1]
    rows = [row for row, _ in reversed(tail + kept)]
    if not settings:
        return rows, NO_SETTINGS
    recorded = top[_C_SETTINGS]
    if recorded is not None:
        # In force at the compaction's parent: replaying the kept part's
        # own changes over them changes nothing (tree_context.build_context).
        return rows, decode_settings(recorded)
    if above_id is None:
        return rows, NO_SETTINGS
    return rows, settings_at(cursor, session_id, above_id)


def settings_at(cursor: SqlCursor, session_id: str, entry_id: str) -> Settings:
    """The provider, model and thinking level in force after ``entry_id`` (it included).

    One climb that stops at the nearest model change *and* thinking-level
    change, or at a compaction that recorded the settings above it —
    never further than the previous compaction. A compaction's append asks
    this of its parent, inside its write transaction.
    """
    columns = tree_sql.context_select_list(cursor.db.vendor)
    found = [row for row, _ in climb(cursor, session_id, entry_id, columns, None, 0)]
    settings = NO_SETTINGS
    if found and found[-1][_C_TYPE] == "compaction":
        settings = decode_settings(found.pop()[_C_SETTINGS])
    for row in reversed(found):  # root side first: the nearest change wins
        settings = apply_settings(ContextRow(row), settings)
    return settings


class ContextRow:
    """A context row seen through the attributes ``build_context`` reads.

    Building a full ``EntryEntity`` for each of 10,000 entries dominated the
    cost of a context build; this view builds the message only when asked,
    with the ``parts`` the reader set (only on the entries the context includes).
    """

    __slots__ = ("parts", "row")

    def __init__(self, row: Sequence[Any]) -> None:
        self.row = row
        self.parts: tuple[MessagePartEntity, ...] = ()

    @property
    def id(self) -> str:
        return str(self.row[_C_ID])

    @property
    def type(self) -> str:
        return str(self.row[_C_TYPE])

    @property
    def model_facing(self) -> bool:
        return bool(self.row[_C_MODEL_FACING])

    @property
    def summary(self) -> str:
        return str(self.row[_C_SUMMARY])

    @property
    def compaction_first_kept_entry_id(self) -> str:
        return str(self.row[_C_FIRST_KEPT])

    @property
    def created_at(self) -> datetime:
        return _to_datetime(self.row[_C_CREATED])

    @property
    def data_json(self) -> str:
        return str(self.row[_C_LINE])

    @property
    def data(self) -> dict[str, Any]:
        value = json.loads(self.row[_C_LINE])
        return value if isinstance(value, dict) else {}

    @property
    def message(self) -> MessageEntity:
        row = self.row
        # Positional, in require_fields' order (role, content, provider, model,
        # parts, timestamp).
        return new_message(
            row[_C_ROLE],
            row[_C_CONTENT],
            row[_C_PROVIDER],
            row[_C_MODEL],
            self.parts,
            _to_datetime(row[_C_CREATED]),
        )


# -- the pre-order walk --------------------------------------------------------------

#: ``(entry_id, parent_id, created_at, seq)``: where an entry sits in the tree.
Key = tuple[str, str | None, Any, int]
#: Levels climbed one indexed query at a time before one recursive query takes over.
_CLIMB_STEPS = 16


class TreeWalk:
    """Pre-order steps through a session's forest, each a few indexed queries.

    Siblings are in append order ``(created_at, seq)``, roots are the entries
    without a parent — the forest ``TreeStore.tree`` nests, so an entry
    whose parent is not in the session is never reached (as there). Nothing
    recurses in Python: climbing out of a finished subtree is a loop, and past
    ``_CLIMB_STEPS`` levels one recursive SQL query finds the nearest ancestor
    with a later sibling.
    """

    def __init__(self, cursor: SqlCursor, session_id: str) -> None:
        self.cursor = cursor
        self.session_id = session_id
        self.vendor = str(cursor.db.vendor)

    def _one(self, where: str, params: list[Any], order: bool = True) -> Key | None:
        statement = tree_sql.walk_one(self.vendor, where, order)
        self.cursor.execute(statement, [self.session_id, *params])
        row = self.cursor.fetchone()
        return None if row is None else (row[0], row[1], row[2], row[3])

    def key(self, entry_id: str) -> Key | None:
        return self._one(tree_sql.WALK_KEY, [entry_id], order=False)

    def first_root(self) -> tuple[Key, int] | None:
        root = self._one(tree_sql.WALK_ROOT, [])
        return None if root is None else (root, 0)

    def _next_sibling(self, key: Key) -> Key | None:
        _, parent, created, seq = key
        if parent is None:
            return self._one(tree_sql.WALK_NEXT_ROOT, [created, created, seq])
        return self._one(tree_sql.WALK_NEXT_SIBLING, [parent, created, created, seq])

    def after(self, key: Key, depth: int) -> tuple[Key, int] | None:
        """The entry after ``key`` (at ``depth``) in pre-order, with its depth."""
        child = self._one(tree_sql.WALK_CHILD, [key[0]])
        if child is not None:
            return child, depth + 1
        node: Key | None = key
        for _ in range(_CLIMB_STEPS):
            if node is None:
                return None
            sibling = self._next_sibling(node)
            if sibling is not None:
                return sibling, depth
            if node[1] is None:
                return None  # a root without a later root: the forest is done
            node = self.key(node[1])
            depth -= 1
        return None if node is None else self._climb(node, depth)

    def _climb(self, node: Key, depth: int) -> tuple[Key, int] | None:
        """The nearest later sibling of ``node`` or an ancestor, in one recursive query."""
        self.cursor.execute(
            tree_sql.walk_climb(self.vendor),
            [self.session_id, node[0], self.session_id, self.session_id],
        )
        row = self.cursor.fetchone()
        if row is None:
            return None
        return (row[1], row[2], row[3], row[4]), depth - int(row[0])
