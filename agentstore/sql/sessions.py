"""The raw SQL of the session rows and their set-based cascades.

Sent by :class:`agentstore.stores.sessions.SessionStore`, the one owner of a
Session row (``docs/development.md``), and two reads of
``agentstore.selectors.sessions``. The statements whose SET list depends on
the columns a caller sets are built here, cached per shape; the caller checks
the column names against ``_meta`` before they reach :func:`update` or
:func:`upsert` (they are interpolated).

Names come from ``_meta`` (:mod:`agentstore.sql`); ``tests/stores/test_sql.py``
checks them against the models.
"""

from __future__ import annotations

from functools import lru_cache

from agentstore.models import Session
from agentstore.sql import (
    ENTRY,
    HOLDER,
    PART,
    SESSION,
    STEP,
    columns,
    for_update,
    marks,
    names,
)

INSERT = f"INSERT INTO {SESSION} ({columns(Session)}) VALUES ({marks(Session)})"
KIND_OF = f"SELECT kind FROM {SESSION} WHERE id = %s"
# Never move updated_at backwards (a back-dated message must not make an active
# session look stale); on PostgreSQL this UPDATE also takes the session's row lock.
TOUCH_FORWARD = (
    f"UPDATE {SESSION} SET updated_at = CASE WHEN updated_at < %s THEN %s ELSE updated_at END "
    "WHERE id = %s AND kind = %s"
)
#: The common case of a per-step upsert (the session exists): only ``updated_at``,
#: only on a session of the kind. Params: stamp, id, kind (decision record 0028).
TOUCH = f"UPDATE {SESSION} SET updated_at = %s WHERE id = %s AND kind = %s"
#: PostgreSQL: either touch with its change notification in the same statement, sent
#: only when the row changed (one round trip, not two); params: the touch's, channel,
#: payload.
NOTIFYING = " RETURNING pg_notify(%s, %s)"
LOCK_ROW = f"UPDATE {SESSION} SET updated_at = updated_at WHERE id = %s AND kind = %s"
# A session's entries, parts and steps go with set-based statements: the ORM's
# cascade would load every row into memory first.
DELETE_PARTS = (
    f"DELETE FROM {PART} WHERE entry_id IN (SELECT id FROM {ENTRY} WHERE session_id = %s)"
)
DELETE_ENTRIES = f"DELETE FROM {ENTRY} WHERE session_id = %s"
DELETE_STEPS = f"DELETE FROM {STEP} WHERE session_id = %s"


@lru_cache(maxsize=8)
def lock_kind(vendor: str) -> str:
    """The session's kind, its row locked on PostgreSQL; param: session id."""
    return KIND_OF + for_update(vendor)


@lru_cache(maxsize=128)
def update(names: tuple[str, ...]) -> str:
    """``UPDATE … SET name = %s, … WHERE id = %s`` (``names``: checked column names)."""
    sets = ", ".join(f"{name} = %s" for name in names)
    return f"UPDATE {SESSION} SET {sets} WHERE id = %s"


@lru_cache(maxsize=128)
def update_held(names: tuple[str, ...], vendor: str) -> str:
    """:func:`update`, applied only while the hold is this store's; params: …, id, id, token.

    The fence of an append (docs/log-store.md, "Holds"): no row changed means
    the hold was broken or taken. On PostgreSQL the holder row is share-locked
    until commit, so a ``break_lock`` waits for the append instead of slipping
    in between; SQLite's writer lock already excludes it.
    """
    lock = "" if vendor == "sqlite" else " FOR SHARE"
    return (
        f"{update(names)} AND EXISTS (SELECT 1 FROM {HOLDER} "
        f"WHERE session_id = %s AND token = %s{lock})"
    )


@lru_cache(maxsize=128)
def update_unheld(names: tuple[str, ...]) -> str:
    """:func:`update`, only while the head is unchanged and no other store holds the session.

    Params: …, id, the head read, id, token. The fence of an append by a store
    that takes no lasting holds (docs/log-store.md, "Writing without a hold"):
    a compare-and-set on ``log_head`` — every append rewrites it, so no row
    changed means someone appended since the head was read, or another store
    holds the session. On PostgreSQL the UPDATE's row lock makes two such
    appends wait for each other and re-check the head; SQLite's writer lock
    already orders them.
    """
    return (
        f"{update(names)} AND log_head = %s AND NOT EXISTS (SELECT 1 FROM {HOLDER} "
        "WHERE session_id = %s AND token <> %s)"
    )


@lru_cache(maxsize=128)
def upsert(kind: str, names: tuple[str, ...]) -> str:
    """Insert a session of ``kind``, or set ``updated_at`` and ``names`` on one of that kind.

    ``INSERT … ON CONFLICT (id) DO UPDATE … WHERE kind = …`` (the same on
    SQLite ≥ 3.24 and PostgreSQL) is race-free on both; no row changed means
    the id belongs to another kind. ``kind`` is checked by the caller.
    """
    sets = ", ".join(f"{c} = excluded.{c}" for c in ("updated_at", *names))
    return f"{INSERT} ON CONFLICT (id) DO UPDATE SET {sets} WHERE {SESSION}.kind = '{kind}'"


# -- reads (agentstore.selectors.sessions) ---------------------------------------------

#: What visibility needs of a session row, for staff; :data:`VISIBLE_TO_OWNER` adds the owner.
VISIBLE = (
    f"SELECT {names(Session, 'id', 'kind', 'owner', 'superseded_by')} FROM {SESSION} WHERE id = %s"
)
VISIBLE_TO_OWNER = VISIBLE + " AND owner_id = %s"


def sessions_of_entries(entry_ids: str) -> str:
    """The sessions of the entries ``entry_ids`` (a subquery, e.g. the search index's match)."""
    return f"SELECT session_id FROM {ENTRY} WHERE id IN ({entry_ids})"
