"""Following a log session: a snapshot, then every appended line as it commits.

The user-facing rules are in docs/log-store.md, "Following a session".

Private to the log store; ``LogStore.follow`` and ``LogStore.afollow``
(:mod:`.log_reads`) drive :func:`steps`. It knows the database alias and the
poll interval, not the store (which imports this module): it reads through
:func:`agentstore.stores.log_rows.read_rows`, as the store does.

How it works. The follower reads the session once (a *snapshot*) and then
*tails* it by ``seq``: each poll is one cheap statement — the session's
incarnation and ``MAX(seq)`` — and, only when rows arrived, one read snapshot
fetching the rows above the follower's position. Each new line extends the
follower's *own* session object with the writer's live leaf rule (a line hung
from the leaf becomes the leaf, one hung off a side branch leaves it alone; the
read rule applies only to a snapshot or a reset, which read stored lines), and
yields an ``appended`` change, then a ``head`` change when a recorded leaf label
moved the leaf. Nothing is held and nothing is written, so read-only stores follow.

* The **cursor** is ``"<last seq>:<incarnation>"``. The incarnation is a fresh
  token of every inserted session row, so a session deleted and created again
  under its id — even with an identical header — is another session, and the
  follow ends with ``NoSession`` instead of carrying on into it. Raising the
  header's format changes nothing a follower holds and keeps the incarnation.
* ``MAX(seq)`` below the cursor means the rows were rebuilt: a ``reset``
  change with the session read afresh. A cursor that does not parse, or names
  another incarnation on resume, is a ``reset`` too — never an error.
* **Waiting**: the poll interval starts at the store's ``follow_interval`` and
  doubles while nothing arrives, up to ``max(interval, 1 s)``; any change
  resets it. Appends and deletes through the *same* store ring a
  :class:`Hub`, waking its followers at once; on PostgreSQL those of any
  other store or process arrive as a ``NOTIFY`` (:mod:`agentstore.notify`)
  and wake them too. Polling stays the fallback (and is all SQLite has
  across stores and processes).

:func:`steps` yields either a :class:`~agentstore.types.Change` or a float —
"wait this long unless woken" — so the blocking (thread) and the async driver
share every rule and differ only in how they wait.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Generator

from django.db import connections

from agentstore import db, exceptions
from agentstore.db import read_only
from agentstore.formats.agentsession import Session
from agentstore.sql import log as log_sql
from agentstore.stores.log_rows import LOG, read_rows
from agentstore.types.log import Change

__all__ = ["MAX_INTERVAL", "Hub", "steps"]

#: The longest idle wait between polls (unless the configured interval is longer).
MAX_INTERVAL = 1.0


class Hub:
    """Same-store wake-ups: appends and deletes ring, followers wake at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiters: dict[int, Callable[[], None]] = {}
        self._next = 0

    def register(self, wake: Callable[[], None]) -> int:
        with self._lock:
            self._next += 1
            self._waiters[self._next] = wake
            return self._next

    def unregister(self, key: int) -> None:
        with self._lock:
            self._waiters.pop(key, None)

    def ring(self) -> None:
        with self._lock:
            waiters = list(self._waiters.values())
        for wake in waiters:
            wake()


def make_cursor(seq: int, ident: str) -> str:
    return f"{seq}:{ident}"


def parse_cursor(cursor: str) -> tuple[int, str] | None:
    seq, sep, ident = cursor.partition(":")
    if not sep or not ident or not seq.isdigit():
        return None
    return int(seq), ident


def load(using: str, session_id: str, up_to: int | None = None) -> tuple[Session, int, str]:
    """Read the session (rows with ``seq <= up_to`` when given): session, last seq, ident."""

    def run() -> tuple[Session, int, str]:
        header, incarnation, lines = read_rows(using, session_id, up_to=up_to)
        session = Session.from_lines(header, [line for _seq, line in lines])
        return session, (lines[-1][0] if lines else 0), incarnation

    return read_only(run, using=using)


_STALE = object()


def _tail(using: str, session_id: str, seq: int, ident: str) -> object:
    """New ``(seq, line)`` rows after ``seq``, ``[]``, or ``_STALE``; ``NoSession`` if gone."""
    connection = connections[using]
    with db.cursor_on(connection) as cursor:
        # One statement (autocommit): the cheap probe of every idle poll.
        cursor.execute(log_sql.FOLLOW_PROBE, [session_id, LOG])
        row = cursor.fetchone()
    if row is None or row[0] != ident:
        raise exceptions.NoSession(f"no such session: {session_id}")
    newest = int(row[1] or 0)
    if newest < seq:
        return _STALE
    if newest == seq:
        return []

    def fetch() -> object:
        with db.cursor_on(connection) as cursor:
            cursor.execute(log_sql.INCARNATION, [session_id])
            again = cursor.fetchone()
            if again is None or again[0] != ident:
                raise exceptions.NoSession(f"no such session: {session_id}")
            cursor.execute(log_sql.LINES_AFTER, [session_id, seq])
            return [(int(s), str(line)) for s, line in cursor.fetchall()]

    return read_only(fetch, using=using)


def steps(
    using: str, session_id: str, cursor: str, interval: float
) -> Generator[Change | float, None, None]:
    """The follow protocol as changes and waits (see the module docstring).

    ``using`` is the database alias, ``interval`` the store's ``follow_interval``.
    """
    longest = max(interval, MAX_INTERVAL)
    if not cursor:
        session, seq, ident = load(using, session_id)
        yield Change(
            kind="snapshot",
            cursor=make_cursor(seq, ident),
            session=session,
            leaf=session.leaf,
        )
    else:
        parsed = parse_cursor(cursor)
        stale = parsed is None
        if parsed is not None:
            try:
                session, seq, ident = load(using, session_id, up_to=parsed[0])
                stale = ident != parsed[1] or seq != parsed[0]
            except exceptions.NoSession:
                raise
            except exceptions.AgentStoreError:
                stale = True
        if stale:
            session, seq, ident = load(using, session_id)
            yield Change(
                kind="reset", cursor=make_cursor(seq, ident), session=session, leaf=session.leaf
            )
    wait = interval
    while True:
        rows = _tail(using, session_id, seq, ident)
        if rows is _STALE:
            session, seq, ident = load(using, session_id)
            yield Change(
                kind="reset", cursor=make_cursor(seq, ident), session=session, leaf=session.leaf
            )
            wait = interval
            continue
        assert isinstance(rows, list)
        if not rows:
            yield wait
            wait = min(wait * 2, longest)
            continue
        for row_seq, line in rows:
            before_leaf, before_len = session.leaf, len(session)
            try:
                # The live rule, as the writer's own session applied it: a
                # line hung off a side branch leaves the leaf where it was
                # (the read rule is for snapshots and resets only).
                entry = session.extend_line(line, live=True)
            except exceptions.AgentStoreError:
                entry = None
            if entry is None or len(session) != before_len + 1:
                # A line that does not extend what we hold: the log changed
                # under us. Start over from the rows as they are now.
                session, seq, ident = load(using, session_id)
                yield Change(
                    kind="reset",
                    cursor=make_cursor(seq, ident),
                    session=session,
                    leaf=session.leaf,
                )
                break
            seq = row_seq
            yield Change(
                kind="appended",
                cursor=make_cursor(seq, ident),
                session=session,
                entry_id=entry.id,
                entry=entry,
                leaf=session.leaf,
            )
            if session.leaf not in (entry.id, before_leaf):
                yield Change(
                    kind="head", cursor=make_cursor(seq, ident), session=session, leaf=session.leaf
                )
        wait = interval
