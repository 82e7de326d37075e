"""Holds: which store (process) has a session open for writing, for every kind of session.

Private to the log store (:mod:`.log_sessions` claims, :mod:`.log_appends` fences and
beats); the functions run *inside* the caller's
write transaction. The protocol (docs/log-store.md, "Holds: one writer per session"):

* **claim** (in the transaction that creates or opens the session): no row →
  insert ours; a row with our token → already ours; a row on this host whose
  pid is dead → take it over and report it; otherwise ``SessionLocked``.
* **fence** (in every append's transaction): the session row's UPDATE runs
  only while a holder row has our token (``SessionStore.update_held``). Zero
  rows means the hold was broken or taken — the writer must stop rather than
  interleave its entries with the new holder's (:func:`lost`). That row count
  is the fence; nothing else (no time-based expiry).
* **heartbeat**: ``UPDATE … WHERE token = ours`` of the holder's ``heartbeat``
  (also a fence), written by an append when the last one this store wrote is
  a second old or more — "last append" to within a second, informational
  (decision record 0031).
* **release**: delete our row (``token = ours`` so we never drop another's).
* **no hold** (a store made with ``holds=False``, what the framework
  integrations use): nothing is claimed; every append's session UPDATE is
  a compare-and-set on the head the store read, and runs only while no
  other store holds the session (``SessionStore.update_unheld``). When it
  changes no row, :func:`unheld_refusal` says why — a live holder
  (``SessionLocked``), or an append since the head was read
  (``ConcurrentWriter``) — and clears a dead process's hold on this host, as
  a claim would, so the append can go on.

The token identifies one *store instance*, not a connection or a thread:
Django connections are per thread and come and go, a hold must not.
"""

from __future__ import annotations

import errno
import os
from datetime import UTC, datetime
from typing import NoReturn

from django.db import IntegrityError, transaction

from agentstore import exceptions, sql
from agentstore.db import SqlCursor, is_unique_violation
from agentstore.models import Holder
from agentstore.sql import log as log_sql
from agentstore.types.log import LockInfo

__all__ = [
    "claim",
    "claim_free",
    "describe",
    "heartbeat",
    "lock_info",
    "lost",
    "pid_alive",
    "unheld_refusal",
]


def pid_alive(pid: int) -> bool:
    """Tell whether a process exists on this host ("signal 0"; EPERM means it does)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError as exc:
        return exc.errno != errno.ESRCH
    except OverflowError:
        return False
    return True


def _aware(value: datetime | None) -> datetime | None:
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


def lock_info(cursor: SqlCursor, session_id: str) -> tuple[LockInfo, str] | None:
    """The holder row of ``session_id`` as (LockInfo, token), or ``None`` when free."""
    # The ORM on the same connection (so inside the caller's transaction): it
    # converts the stored stamps to aware datetimes on every backend.
    row = (
        Holder.objects.using(cursor.db.alias)
        .filter(session_id=session_id)
        .values_list("pid", "host", "token", "since", "heartbeat")
        .first()
    )
    if row is None:
        return None
    info = LockInfo(pid=row[0], host=row[1], since=_aware(row[3]), heartbeat=_aware(row[4]))
    return info, row[2]


def _stamp(value: datetime | None) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if value else ""


def describe(session_id: str, info: LockInfo) -> str:
    """``<id> held by pid P on host since T[, last append T2]`` — never a zero time."""
    text = f"{session_id} held by pid {info.pid} on {info.host}"
    if info.since:
        text += f" since {_stamp(info.since)}"
    if info.heartbeat and info.heartbeat != info.since:
        text += f", last append {_stamp(info.heartbeat)}"
    return text


def claim_free(
    cursor: SqlCursor, session_id: str, *, pid: int, host: str, token: str, now: datetime
) -> bool:
    """Hold a free session, or one already held under ``token``, in one statement.

    ``True`` when the hold is ours now (an earlier holder under the same token —
    a run's rerun on another worker — becomes this process). ``False``: no such
    session, or another token holds it; :func:`claim` then says which, or takes
    a dead holder's hold over. Never raises for a conflict, so it needs no
    savepoint inside a transaction.
    """
    stamp = cursor.db.ops.adapt_datetimefield_value(now)
    holder = sql.row(
        Holder, session_id=session_id, pid=pid, host=host, token=token,
        since=stamp, heartbeat=stamp,
    )  # fmt: skip
    cursor.execute(log_sql.CLAIM_FREE_HOLDER, [*holder, session_id])
    return cursor.fetchone() is not None


def claim(
    cursor: SqlCursor,
    session_id: str,
    *,
    pid: int,
    host: str,
    token: str,
    now: datetime,
) -> LockInfo | None:
    """Claim the hold on ``session_id`` for this store; return a dead holder taken over.

    Raises ``SessionLocked`` when a live process (or one on another host, whose
    liveness we cannot know) holds it.
    """
    if claim_free(cursor, session_id, pid=pid, host=host, token=token, now=now):
        return None
    taken_over: LockInfo | None = None
    current = lock_info(cursor, session_id)
    if current is not None:
        info, holder_token = current
        if holder_token == token:
            return None
        if info.host != host or pid_alive(info.pid):
            raise exceptions.SessionLocked(describe(session_id, info))
        # A dead process on this host: its hold protects nothing. Delete exactly
        # that row (another store may be taking it over at the same moment; the
        # insert below then loses on the primary key).
        cursor.execute(log_sql.DELETE_HOLDER, [session_id, holder_token])
        taken_over = info
    stamp = cursor.db.ops.adapt_datetimefield_value(now)
    try:
        # A savepoint, so that losing the race on PostgreSQL leaves the
        # transaction usable for the error path.
        with transaction.atomic(using=cursor.db.alias):
            cursor.execute(
                log_sql.INSERT_HOLDER,
                sql.row(
                    Holder,
                    session_id=session_id,
                    pid=pid,
                    host=host,
                    token=token,
                    since=stamp,
                    heartbeat=stamp,
                ),
            )
    except IntegrityError as exc:
        if not is_unique_violation(exc):
            raise
        winner = lock_info(cursor, session_id)
        text = describe(session_id, winner[0]) if winner else f"{session_id} held elsewhere"
        raise exceptions.SessionLocked(text) from exc
    return taken_over


def heartbeat(cursor: SqlCursor, session_id: str, token: str, now: datetime) -> None:
    """Refresh our hold's heartbeat; ``SessionLocked`` when the hold was lost."""
    cursor.execute(
        log_sql.HEARTBEAT, [cursor.db.ops.adapt_datetimefield_value(now), session_id, token]
    )
    if cursor.rowcount == 1:
        return
    lost(cursor, session_id)


def lost(cursor: SqlCursor, session_id: str) -> NoReturn:
    """Raise ``SessionLocked`` for a fence that found the hold gone, naming who has it now."""
    current = lock_info(cursor, session_id)
    holder = describe(session_id, current[0]) if current else "no holder"
    raise exceptions.SessionLocked(f"hold on {session_id} lost to {holder}")


def unheld_refusal(cursor: SqlCursor, session_id: str, *, token: str, host: str) -> LockInfo:
    """Why an unheld append's fence changed no row; returns only for a dead holder it cleared.

    Raises ``SessionLocked`` when a live process (or one on another host)
    holds ``session_id``, and ``ConcurrentWriter`` when nobody does — so the
    head moved: another writer appended since it was read. A holder that is
    a dead process on this host is deleted and returned (the caller reports
    it and runs its fence again), as :func:`claim` takes such a hold over.
    """
    current = lock_info(cursor, session_id)
    if current is None or current[1] == token:
        raise exceptions.ConcurrentWriter(f"another writer appended to {session_id}")
    info, holder_token = current
    if info.host != host or pid_alive(info.pid):
        raise exceptions.SessionLocked(describe(session_id, info))
    cursor.execute(log_sql.DELETE_HOLDER, [session_id, holder_token])
    return info
