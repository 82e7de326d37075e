"""The raw SQL of the tree store: entries as a tree, their message parts, the walks.

Sent by :class:`agentstore.stores.tree.TreeStore` (``docs/tree-store.md``).
The reads select a fixed list of entry columns whose positions the store's row
mappers use (``PK``, ``ROLE`` … below; ``tests/stores/test_sql.py`` checks
them against ``_meta``). Every walk up or down the tree is one recursive query
capped by the session's highest ``seq`` (any simple path is shorter), so a
corrupt parent cycle cannot loop; on PostgreSQL the recursive step is a
LATERAL lookup: planned as a plain join, a fresh table's stale statistics can
make it rescan the session's entries once per level (seconds for a
10,000-entry branch instead of ~50 ms).

On SQLite ``created_at`` is read as text (:func:`agentstore.sql.timestamp_column`,
the one fast path): on 10,000-entry branches Django's per-row converter is
most of the cost.
"""

from __future__ import annotations

from functools import lru_cache

from agentstore.models import Entry, MessagePart
from agentstore.sql import ENTRY, PART, columns, marks, names, placeholders, timestamp_column

# Every entry column but session_id (and the settings a compaction records,
# which only build_context reads), the primary key first: the order the row
# mapper unpacks. call_id is the log store's (agentsession function calls);
# tree rows keep "".
E_COLUMNS = "e.id, " + columns(
    Entry, exclude=("session", "call_id", "compaction_settings"), prefix="e."
)
# Positions in a selected row (``e.session_id`` first, then E_COLUMNS).
PK, SEQ, ENTRY_ID, PARENT, TYPE, LINE, CREATED, ROLE, CONTENT = range(1, 10)
PROVIDER, MODEL, CUSTOM_TYPE, SUMMARY = range(10, 14)
PART_COUNT = 24

# What build_context reads of each branch entry, and nothing more: on a
# 10,000-entry branch the width of the rows is most of the cost. ``line`` is
# only needed where the context reads data keys (usage, thinking level).
CONTEXT_COLUMNS = (
    "e.id, e.entry_id, e.type, CASE WHEN e.type = 'thinking_level_change' OR "
    "(e.role = 'assistant' AND e.line LIKE '%%\"usage\"%%') THEN e.line ELSE '{}' END, "
    "e.created_at, "
    + names(
        Entry,
        "role",
        "content",
        "provider",
        "model",
        "summary",
        "model_facing",
        "compaction_first_kept_entry_id",
        "part_count",
        "compaction_settings",
        prefix="e.",
    )
)
C_PK, C_ID, C_TYPE, C_LINE, C_CREATED, C_ROLE, C_CONTENT = range(7)
C_PROVIDER, C_MODEL, C_SUMMARY, C_MODEL_FACING, C_FIRST_KEPT, C_PARTS = range(7, 13)
C_SETTINGS = 13

# The next seq is computed in the INSERT itself: MAX over the unique
# (session_id, seq) index is one index probe, and the statement runs inside the
# write transaction that already holds the session (row lock or writer queue).
# Under a parent the same statement checks it: no parent, no row inserted and
# none returned — one statement where a SELECT and an INSERT were sent.
_INSERT_ENTRY_HEAD = (
    f"INSERT INTO {ENTRY} (seq, {columns(Entry, exclude=('seq',))}) "
    f"SELECT n.seq, {marks(Entry, exclude=('seq',))} "
    f"FROM (SELECT COALESCE(MAX(seq), 0) + 1 AS seq FROM {ENTRY} WHERE session_id = %s) n"
)
INSERT_ENTRY = f"{_INSERT_ENTRY_HEAD} RETURNING id, seq"
INSERT_CHILD_ENTRY = (
    f"{_INSERT_ENTRY_HEAD} WHERE EXISTS (SELECT 1 FROM {ENTRY}"
    " WHERE session_id = %s AND entry_id = %s) RETURNING id, seq"
)
INSERT_PART = f"INSERT INTO {PART} ({columns(MessagePart)}) VALUES ({marks(MessagePart)})"
#: Parts are hydrated and entries deleted in chunks well under SQLite's
#: bound-parameter limit.
CHUNK = 900

ENTRY_EXISTS = f"SELECT 1 FROM {ENTRY} WHERE session_id = %s AND entry_id = %s"
#: The most recent childless entry of a session (``branch(session, "")``).
LATEST_LEAF = (
    f"SELECT e.entry_id FROM {ENTRY} e WHERE e.session_id = %s AND NOT EXISTS "
    f"(SELECT 1 FROM {ENTRY} c WHERE c.session_id = e.session_id "
    "AND c.parent_id = e.entry_id) ORDER BY e.created_at DESC, e.seq DESC LIMIT 1"
)
_MAX_SEQ = f"(SELECT COALESCE(MAX(seq), 0) FROM {ENTRY} WHERE session_id = %s)"


@lru_cache(maxsize=4)
def select_list(vendor: str) -> str:
    """``e.session_id`` and :data:`E_COLUMNS` (``created_at`` as text on SQLite)."""
    columns = E_COLUMNS
    if vendor == "sqlite":
        columns = columns.replace("e.created_at", timestamp_column("e.created_at", vendor))
    return f"e.session_id, {columns}"


@lru_cache(maxsize=4)
def context_select_list(vendor: str) -> str:
    """:data:`CONTEXT_COLUMNS` (``created_at`` as text on SQLite)."""
    if vendor == "sqlite":
        return CONTEXT_COLUMNS.replace("e.created_at", timestamp_column("e.created_at", vendor))
    return CONTEXT_COLUMNS


@lru_cache(maxsize=256)
def select_entries(vendor: str, where: str, order: str) -> str:
    """Full entry rows (:func:`select_list`) matching ``where`` (over alias ``e``), ``order``ed."""
    statement = f"SELECT {select_list(vendor)} FROM {ENTRY} e WHERE {where}"
    return f"{statement} ORDER BY {order}" if order else statement


@lru_cache(maxsize=8)
def load_parts(count: int) -> str:
    """The message parts of ``count`` entries (primary keys), in entry then part order."""
    part_columns = names(
        MessagePart, "entry", "type", "text", "mime_type", "name", "width", "height", "data"
    )
    return (
        f"SELECT {part_columns} FROM {PART} WHERE entry_id IN ({placeholders(count)}) "
        "ORDER BY entry_id, sequence"
    )


@lru_cache(maxsize=8)
def child_counts(count: int) -> str:
    """How many children each of ``count`` parent ids has; params: session, *ids."""
    return (
        f"SELECT parent_id, COUNT(*) FROM {ENTRY} WHERE session_id = %s "
        f"AND parent_id IN ({placeholders(count)}) GROUP BY parent_id"
    )


@lru_cache(maxsize=8)
def delete_parts(count: int) -> str:
    return f"DELETE FROM {PART} WHERE entry_id IN ({placeholders(count)})"


@lru_cache(maxsize=8)
def delete_entries(count: int) -> str:
    return f"DELETE FROM {ENTRY} WHERE id IN ({placeholders(count)})"


@lru_cache(maxsize=4)
def sort_key(vendor: str) -> str:
    """An entry's ``(created_at, seq)`` as stored (text on SQLite); params: session, entry."""
    created = timestamp_column("created_at", vendor)
    return f"SELECT {created}, seq FROM {ENTRY} WHERE session_id = %s AND entry_id = %s"


@lru_cache(maxsize=8)
def ancestors_cte(vendor: str, *, bounded: bool = False) -> str:
    """``WITH RECURSIVE chain(pk, parent_id, depth)``: an entry and its ancestors.

    Parameters: session, entry id, session, session (the depth cap).
    ``bounded``: the last parameter is the deepest ``depth`` to reach instead
    (a page of the path: ``limit - 1``).
    """
    if vendor == "postgresql":
        step = (
            " SELECT e.id, e.parent_id, chain.depth + 1 FROM chain CROSS JOIN LATERAL"
            f" (SELECT x.id, x.parent_id FROM {ENTRY} x WHERE x.session_id = %s"
            " AND x.entry_id = chain.parent_id LIMIT 1) e"
        )
    else:
        step = (
            f" SELECT e.id, e.parent_id, chain.depth + 1 FROM chain JOIN {ENTRY} e"
            " ON e.session_id = %s AND e.entry_id = chain.parent_id"
        )
    cap = "%s" if bounded else _MAX_SEQ
    return (
        "WITH RECURSIVE chain(pk, parent_id, depth) AS ("
        f" SELECT id, parent_id, 0 FROM {ENTRY} WHERE session_id = %s AND entry_id = %s"
        " UNION ALL" + step + f" WHERE chain.depth < {cap})"
    )


@lru_cache(maxsize=64)
def branch(vendor: str, columns: str, bounded: bool) -> str:
    """The path's rows: depth, primary key, then ``columns`` (params: see :func:`ancestors_cte`)."""
    return (
        ancestors_cte(vendor, bounded=bounded)
        + f" SELECT chain.depth, chain.pk, {columns} FROM chain"
        f" JOIN {ENTRY} e ON e.id = chain.pk"
    )


@lru_cache(maxsize=4)
def has_image_part(vendor: str) -> str:
    """Whether the entry or an ancestor has an image part (params: see :func:`ancestors_cte`)."""
    return (
        ancestors_cte(vendor) + f" SELECT 1 FROM chain JOIN {PART} p"
        " ON p.entry_id = chain.pk"
        " WHERE p.type = 'image' LIMIT 1"
    )


@lru_cache(maxsize=4)
def descendants(vendor: str) -> str:
    """The primary keys of an entry and its descendants (params: see :func:`ancestors_cte`)."""
    if vendor == "postgresql":
        step = (
            " SELECT e.id, e.entry_id, doomed.depth + 1 FROM doomed CROSS JOIN LATERAL"
            f" (SELECT x.id, x.entry_id FROM {ENTRY} x WHERE x.session_id = %s"
            " AND x.parent_id = doomed.entry_id) e"
        )
    else:
        step = (
            f" SELECT e.id, e.entry_id, doomed.depth + 1 FROM doomed JOIN {ENTRY} e"
            " ON e.session_id = %s AND e.parent_id = doomed.entry_id"
        )
    return (
        "WITH RECURSIVE doomed(pk, entry_id, depth) AS ("
        f" SELECT id, entry_id, 0 FROM {ENTRY} WHERE session_id = %s AND entry_id = %s"
        " UNION ALL" + step + f" WHERE doomed.depth < {_MAX_SEQ}) SELECT DISTINCT pk FROM doomed"
    )


# -- the settings climb ---------------------------------------------------------------

_RECORDED = "({a}type = 'compaction' AND {a}compaction_settings IS NOT NULL)"


def _passed(alias: str, kind: str, flag: str) -> str:
    """``1`` once a settings climb has passed a ``kind`` change (or a recorded compaction).

    ``alias`` is ``""`` for the climb's first row and ``"e."`` for a step, which
    carries the flag ``chain.<flag>`` up from the row below.
    """
    carried = f"chain.{flag} = 1 OR " if alias else ""
    recorded = _RECORDED.format(a=alias)
    return f"CASE WHEN {carried}{alias}type = '{kind}' OR {recorded} THEN 1 ELSE 0 END"


@lru_cache(maxsize=64)
def climb(vendor: str, columns: str, stop_column: str, limited: bool) -> str:
    """Rows ``(depth, pk, parent_id, *columns)`` from an entry upwards, leaf side first.

    ``stop_column`` (``type`` or ``entry_id``): the climb includes the first
    row whose column equals the first parameter and goes no further.
    ``""``: climb until both a model change and a thinking-level change were
    passed, or a compaction that recorded the settings, and return only such
    rows. Params: [stop value], session, entry, [stop value], session, then
    ``limit - 1`` when ``limited``, else the session again (the depth cap).
    """
    if not stop_column:
        flags = f"{_passed('', 'model_change', 'm')}, {_passed('', 'thinking_level_change', 't')}"
        step_flags = (
            f"{_passed('e.', 'model_change', 'm')}, {_passed('e.', 'thinking_level_change', 't')}"
        )
        go_on = "NOT (chain.m = 1 AND chain.t = 1)"
        where = " WHERE e.type IN ('model_change', 'thinking_level_change') OR " + (
            _RECORDED.format(a="e.")
        )
    else:
        if stop_column not in ("type", "entry_id"):
            raise ValueError(f"not a climb stop column: {stop_column!r}")
        flags = f"CASE WHEN {stop_column} = %s THEN 1 ELSE 0 END, 0"
        step_flags = f"CASE WHEN e.{stop_column} = %s THEN 1 ELSE 0 END, 0"
        go_on = "chain.m = 0"
        where = ""
    if vendor == "postgresql":
        step = (
            f" SELECT e.id, e.parent_id, chain.depth + 1, {step_flags} FROM chain"
            " CROSS JOIN LATERAL (SELECT x.id, x.parent_id, x.type, x.entry_id,"
            f" x.compaction_settings FROM {ENTRY} x WHERE x.session_id = %s"
            " AND x.entry_id = chain.parent_id LIMIT 1) e"
        )
    else:
        step = (
            f" SELECT e.id, e.parent_id, chain.depth + 1, {step_flags} FROM chain"
            f" JOIN {ENTRY} e ON e.session_id = %s AND e.entry_id = chain.parent_id"
        )
    cap = "%s" if limited else _MAX_SEQ
    return (
        "WITH RECURSIVE chain(pk, parent_id, depth, m, t) AS ("
        f" SELECT id, parent_id, 0, {flags} FROM {ENTRY}"
        " WHERE session_id = %s AND entry_id = %s"
        f" UNION ALL{step} WHERE chain.depth < {cap} AND {go_on})"
        f" SELECT chain.depth, chain.pk, chain.parent_id, {columns} FROM chain"
        f" JOIN {ENTRY} e ON e.id = chain.pk{where}"
    )


# -- the pre-order walk (TreeStore.tree_rows) -------------------------------------------


@lru_cache(maxsize=8)
def walk_columns(vendor: str, alias: str = "") -> str:
    """An entry's place in the tree: entry_id, parent_id, created_at (as stored), seq."""
    created = f"{alias}created_at"
    if vendor == "sqlite":
        created = timestamp_column(created, vendor)  # compared as stored, never converted
    return f"{alias}entry_id, {alias}parent_id, {created}, {alias}seq"


@lru_cache(maxsize=32)
def walk_one(vendor: str, where: str, ordered: bool) -> str:
    """One entry of the session matching ``where``; the first in append order if ``ordered``."""
    statement = f"SELECT {walk_columns(vendor)} FROM {ENTRY} WHERE session_id = %s AND {where}"
    return statement + " ORDER BY created_at, seq LIMIT 1" if ordered else statement


#: The walk's conditions (``walk_one``'s ``where``).
WALK_KEY = "entry_id = %s"
WALK_ROOT = "parent_id IS NULL"
WALK_CHILD = "parent_id = %s"
_LATER = "created_at >= %s AND (created_at > %s OR seq > %s)"
WALK_NEXT_ROOT = f"parent_id IS NULL AND {_LATER}"
WALK_NEXT_SIBLING = f"parent_id = %s AND {_LATER}"


@lru_cache(maxsize=4)
def walk_climb(vendor: str) -> str:
    """The nearest later sibling of an entry or an ancestor (params: see :func:`ancestors_cte`)."""
    nulls_equal = "IS" if vendor == "sqlite" else "IS NOT DISTINCT FROM"
    return (
        ancestors_cte(vendor) + f" SELECT chain.depth, {walk_columns(vendor, 's.')} FROM chain"
        f" JOIN {ENTRY} a ON a.id = chain.pk JOIN {ENTRY} s"
        f" ON s.session_id = a.session_id AND s.parent_id {nulls_equal} a.parent_id"
        " AND s.created_at >= a.created_at"
        " AND (s.created_at > a.created_at OR s.seq > a.seq)"
        " ORDER BY chain.depth, s.created_at, s.seq LIMIT 1"
    )
