"""The raw SQL of the log store: its lines (entry rows), holders and session look-ups.

Sent by ``stores/log*.py`` (``docs/log-store.md``). A log session's entries
are its canonical JSONL lines, one row each at ``seq``; the reads here go by
``(session_id, seq)`` or ``(session_id, entry_id)`` — one index probe each —
and a hold is one :class:`~agentstore.models.Holder` row per session.

Names come from ``_meta`` (:mod:`agentstore.sql`); ``tests/stores/test_sql.py``
checks them against the models.
"""

from __future__ import annotations

from functools import lru_cache

from agentstore.models import Entry, Holder, Session
from agentstore.sql import (
    ENTRY,
    HOLDER,
    SESSION,
    column_names,
    column_types,
    columns,
    marks,
    names,
)
from agentstore.sql import sessions as session_sql

#: Every entry column: a log line fills the text projection its readers use; the
#: tree-only metadata columns keep their model defaults (``sql.row``).
INSERT_ENTRY = f"INSERT INTO {ENTRY} ({columns(Entry)}) VALUES ({marks(Entry)})"

#: The line at an entry id; params: session, entry_id.
LOOKUP = f"SELECT seq, line FROM {ENTRY} WHERE session_id = %s AND entry_id = %s"
# The partial index's own condition, written out: a planner uses the index
# only when the query implies it (a bound parameter could be "").
# (No seq bound or MIN() here: with either, SQLite's planner prefers the seq index.)
CALL = f"SELECT seq FROM {ENTRY} WHERE session_id = %s AND call_id = %s AND NOT (call_id = '')"


@lru_cache(maxsize=32)
def calls(count: int) -> str:
    """:data:`CALL` for ``count`` call ids at once; params: session, the ids. Gives call_id, seq."""
    marks_ = ", ".join(["%s"] * count)
    return (
        f"SELECT call_id, seq FROM {ENTRY} WHERE session_id = %s AND call_id IN ({marks_}) "
        "AND NOT (call_id = '')"
    )


#: The session's kind, header and persisted head, and its newest line's seq, id and
#: line (NULLs without lines) — one statement, so one snapshot (``log_open``).
HEAD = (
    f"SELECT {names(Session, 'kind', 'header', 'log_head', prefix='s.')}, "
    f"{names(Entry, 'seq', 'entry_id', 'line', prefix='e.')} FROM {SESSION} s "
    f"LEFT JOIN {ENTRY} e ON e.id = (SELECT n.id FROM {ENTRY} n WHERE n.session_id = s.id "
    "ORDER BY n.seq DESC LIMIT 1) WHERE s.id = %s"
)
#: The session's kind and persisted head alone: a cached view is current while it is unchanged.
HEAD_TEXT = f"SELECT {names(Session, 'kind', 'log_head')} FROM {SESSION} WHERE id = %s"
NEWEST = f"SELECT seq, entry_id, line FROM {ENTRY} WHERE session_id = %s ORDER BY seq DESC LIMIT 1"
#: A page of lines walking down from ``seq``; params: session, highest seq, limit.
PATH = (
    f"SELECT {names(Entry, 'seq', 'entry_id', 'parent_id', 'type', 'line')} FROM {ENTRY} "
    "WHERE session_id = %s AND seq <= %s ORDER BY seq DESC LIMIT %s"
)
#: What ``read_rows`` needs of the session row.
SESSION_HEADER = (
    f"SELECT {names(Session, 'kind', 'header', 'incarnation')} FROM {SESSION} WHERE id = %s"
)
HEADER = f"SELECT header FROM {SESSION} WHERE id = %s"
INCARNATION = f"SELECT incarnation FROM {SESSION} WHERE id = %s"
#: Every line of a session in order (``read_rows``); :data:`LINES_UP_TO` stops at a seq.
LINES = f"SELECT seq, line FROM {ENTRY} WHERE session_id = %s ORDER BY seq"
LINES_UP_TO = f"SELECT seq, line FROM {ENTRY} WHERE session_id = %s AND seq <= %s ORDER BY seq"
#: A page of lines after a seq (``LogStore.read_page``); params: session, seq, limit.
LINES_PAGE = (
    f"SELECT seq, line FROM {ENTRY} WHERE session_id = %s AND seq > %s ORDER BY seq LIMIT %s"
)
#: Lines after a seq (a follower's catch-up); params: session, seq.
LINES_AFTER = f"SELECT seq, line FROM {ENTRY} WHERE session_id = %s AND seq > %s ORDER BY seq"
# One statement (autocommit): the cheap probe of every idle follow poll.
# Params: session, kind.
FOLLOW_PROBE = (
    f"SELECT s.incarnation, (SELECT MAX(e.seq) FROM {ENTRY} e "
    f"WHERE e.session_id = s.id) FROM {SESSION} s WHERE s.id = %s AND s.kind = %s"
)

#: Holders (``log_holds``): one row per held session.
INSERT_HOLDER = f"INSERT INTO {HOLDER} ({columns(Holder)}) VALUES ({marks(Holder)})"
DELETE_HOLDER = f"DELETE FROM {HOLDER} WHERE session_id = %s AND token = %s"
#: The hold of a free session, or one already held under the same token (whose pid
#: and host become the claimer's), in one statement: a row comes back then. No row:
#: no such session, or another token holds it — the full claim decides which.
#: Params: :func:`agentstore.sql.row` of the Holder, then the session id.
CLAIM_FREE_HOLDER = (
    f"INSERT INTO {HOLDER} ({columns(Holder)}) SELECT {marks(Holder)} "
    f"WHERE EXISTS (SELECT 1 FROM {SESSION} WHERE id = %s) "
    "ON CONFLICT (session_id) DO UPDATE SET pid = excluded.pid, host = excluded.host, "
    f"heartbeat = excluded.heartbeat WHERE {HOLDER}.token = excluded.token "
    "RETURNING session_id"
)
HEARTBEAT = f"UPDATE {HOLDER} SET heartbeat = %s WHERE session_id = %s AND token = %s"


#: Lines a fenced insert (:func:`fenced_insert`) carries at most; more go in plain inserts after.
FENCED_ROWS = 500


@lru_cache(maxsize=256)
def fenced_insert(update_names: tuple[str, ...], rows: int, notify: bool, types: str) -> str:
    """PostgreSQL: an append by a store without holds as **one** statement.

    The session row's compare-and-set (``sessions.update_unheld``; params:
    its values, id, head, id, token), then ``pg_notify(channel, payload)`` if
    ``notify``, then ``rows`` entry rows, each every column but ``session_id``
    in :func:`column_names` order. The rows are joined to what the UPDATE
    returned, so when the fence refuses (no row updated) nothing is inserted
    and no error is raised: the row count says it. Autocommit makes the one
    statement its own transaction — one round trip for a turn's append.
    ``types`` is the ``column_types`` of the entry columns, joined by ``|``
    (the casts a ``VALUES`` list needs: its parameters have no column to take
    a type from).
    """
    cols = column_names(Entry)
    casts = types.split("|")
    at = cols.index("session_id")
    value_cols = [c for i, c in enumerate(cols) if i != at]
    returning = " RETURNING id" + (", pg_notify(%s, %s)" if notify else "")
    row = "(" + ", ".join(["%s"] * len(value_cols)) + ")"
    selected = ", ".join(
        "fence.id" if i == at else f"v.{c}::{casts[i]}" for i, c in enumerate(cols)
    )
    return (
        f"WITH fence AS MATERIALIZED ({session_sql.update_unheld(update_names)}{returning}) "
        f"INSERT INTO {ENTRY} ({columns(Entry)}) SELECT {selected} "
        f"FROM fence, (VALUES {', '.join([row] * rows)}) AS v ({', '.join(value_cols)})"
    )


def entry_types(connection: object) -> str:
    """:func:`fenced_insert`'s ``types`` on ``connection``."""
    return "|".join(column_types(Entry, connection))
