"""Appending to log sessions: one short write transaction per batch, fenced by the hold.

:class:`LogAppends` adds the writes that extend a session to the store's base
(:class:`~agentstore.stores.log_sessions.LogSessions`). An append runs in two
halves so that memory changes only for what the database committed:

1. **in memory**: each entry is ``prepare``d and ``commit``ted on the store's
   shared session (the format's rules: ids, parents, leaf, call ids), so a
   batch's entries can hang from one another. Anything that fails before the
   transaction commits is undone with ``Session.truncate``: the caller's
   session object is as it was.
2. **in the database** (:meth:`LogAppends._append_statements`, one
   transaction): the session row's UPDATE is the *fence* — zero rows means
   this store's hold was broken or taken, and the store refuses the session
   with ``SessionLocked`` before any line could interleave with the new
   holder's —, then the heartbeat, the header raised if stale, and every
   line in one INSERT. A UNIQUE clash on ``(session, seq)`` means a writer that
   bypassed the hold appended: ``ConcurrentWriter``, the session refused until
   ``release`` (:meth:`LogAppends._write_append`).

A store without holds (``holds=False``) fences each append by the head its
view was opened at instead (``SessionStore.update_unheld``: a compare-and-set
that also requires no other store to hold the session), writes no heartbeat,
and refuses nothing for later: a failed append drops the view, and the next
operation reads the session as it is now.

The session row carries the *head* (line count and resume state,
:func:`~agentstore.stores.log_open.encode_head`) that the next ``open``
trusts, plus the name or successor the newest ``info``/``link`` line sets.
``updated_at`` and the holder's heartbeat are written at most once per
:data:`HEARTBEAT_EVERY` per held session (decision records 0031 and 0021): they sit in
indexes, and "when did the holder last append" needs no finer grain.

``continue_session`` lives here too: the successor's creation and the old
session's ``link`` line commit in one transaction, the append path's fence
included.
"""

from __future__ import annotations

import builtins
import copy
import itertools
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from django.db import IntegrityError, connections

from agentstore import exceptions, notify
from agentstore.db import SqlCursor, is_unique_violation
from agentstore.formats.agentsession import (
    CURRENT_FORMAT,
    Outcome,
    PendingAppend,
    Session,
    canonical_json,
    parse_json,
)
from agentstore.formats.agentsession import (
    Entry as LogEntry,
)
from agentstore.sql import log as log_sql
from agentstore.sql.log import FENCED_ROWS
from agentstore.stores import log_holds
from agentstore.stores.hold_context import token_for
from agentstore.stores.log_open import StoredSession, encode_head
from agentstore.stores.log_rows import insert_entries, insert_fenced
from agentstore.stores.log_sessions import MAX_ID, MAX_NAME, LogSessions, stale_format
from agentstore.types.log import LockInfo

__all__ = ["HEARTBEAT_EVERY", "LogAppends"]

#: How stale the heartbeat of a held session — and the session's ``updated_at`` —
#: may get before an append writes it (decision records 0031 and 0021).
HEARTBEAT_EVERY = timedelta(seconds=1)


#: How many more times an append without holds and without an expected leaf runs
#: after losing its compare-and-set to another writer (each loss means another
#: append committed: the session moved on, nobody waits on a lock).
FENCE_RETRIES = 16

#: Refusals a stale view cannot cause (the input, a holder, the database): not retried.
_NOT_STALENESS = (
    exceptions.ValidationError,
    exceptions.SessionLocked,
    exceptions.DatabaseBusy,
    exceptions.DatabaseUnavailable,
)


class LogAppends(LogSessions):
    """The appends and continuations of a ``LogStore`` (see the module docstring)."""

    def append(self, session_id: str, entry: dict[str, Any]) -> str:
        """Append ``entry`` to the session (opening and holding it); return the entry id.

        The entry is validated and hashed by the format's rules (parent defaults
        to the leaf, ``ts`` to now). An entry the session already holds is a
        no-op returning its id. Raises ``ReadOnly``, ``NoSession``,
        ``SessionLocked`` (held elsewhere, or the hold was lost), ``ConcurrentWriter``,
        and the format's errors (``BadID``, ``NoEntry``, ``BaseRule``, …).
        """
        self._writable()
        with self._lock:
            try:
                return self._append_to(session_id, [entry], None)[0]
            finally:
                # Same-store followers look now, whatever the outcome.
                self._hub.ring()

    def append_many(
        self,
        session_id: str,
        entries: Sequence[dict[str, Any]],
        *,
        expected_leaf: str | None = None,
    ) -> builtins.list[str]:
        """Append ``entries`` in order in **one** write transaction; return their ids.

        Each entry obeys the rules of :meth:`append`, applied as if appended one
        after the other (an entry without ``parent`` hangs from the leaf the
        previous one left). All or nothing: if any entry is refused, or the
        transaction fails, nothing is stored and the session is as it was.
        Entries the session already holds are no-ops (their ids are returned).

        ``expected_leaf`` (a leaf read earlier, e.g. :attr:`Tail.leaf`; ``""``:
        an empty session) makes the append conditional: if the session's leaf
        is another one — someone wrote since that read — it raises
        ``ConcurrentWriter`` and writes nothing (the session is not refused:
        read again and retry).
        """
        self._writable()
        if not isinstance(entries, Sequence) or isinstance(entries, str | bytes | dict):
            raise exceptions.ValidationError("entries must be a list", field="entries")
        if not entries:
            return []
        with self._lock:
            try:
                return self._append_to(session_id, entries, expected_leaf)
            finally:
                # Same-store followers look now, whatever the outcome.
                self._hub.ring()

    def _append_to(
        self, session_id: str, entries: Sequence[dict[str, Any]], expected_leaf: str | None
    ) -> builtins.list[str]:
        """Append to the held session — or, without holds, to the store's view of it.

        A store without holds writes from the view it has without reading the
        head first: the append's fence is a compare-and-set on the head the
        view was opened at, so a stale view cannot write. When the append is
        refused (by the fence, or by a rule the stale view answered wrongly),
        the view is dropped and the append runs once more on the session as
        the database has it now — whose answer stands. The common turn (a read,
        then a write) so reads the head once, not twice.
        """
        view = None if self.holds else self._open.get(session_id)
        if view is not None:
            try:
                return self._append_on(session_id, view, entries, expected_leaf)
            except _NOT_STALENESS:
                raise
            except exceptions.AgentStoreError:
                self._drop(session_id)
        # Without holds and without an expected leaf the caller asked for "after
        # whatever is there": another writer winning the compare-and-set is no
        # answer for it, so the append runs again on the session as it is then
        # (concurrent API requests on one session are ordered, not refused). A
        # caller that named its expectation gets ConcurrentWriter at once
        # (decision record 0091).
        retries = 0 if self.holds or expected_leaf is not None else FENCE_RETRIES
        for attempt in itertools.count():
            try:
                return self._append_on(
                    session_id, self._held_session(session_id), entries, expected_leaf
                )
            except exceptions.ConcurrentWriter:
                if attempt >= retries:
                    raise
                self._drop(session_id)
        raise AssertionError("unreachable")  # pragma: no cover - count() never ends

    def _append_on(
        self,
        session_id: str,
        session: StoredSession,
        entries: Sequence[dict[str, Any]],
        expected_leaf: str | None,
    ) -> builtins.list[str]:
        if expected_leaf is not None and session.leaf != expected_leaf:
            raise exceptions.ConcurrentWriter(
                f"the leaf of {session_id} moved since it was read: "
                f"{session.leaf or 'none'}, not {expected_leaf or 'none'}"
            )
        return self._append_many_open(session_id, session, entries)

    def _append_many_open(
        self, session_id: str, session: StoredSession, entries: Sequence[dict[str, Any]]
    ) -> builtins.list[str]:
        # Entries are applied to the session as they are prepared (each one's
        # parent may be the previous one's id); if anything fails before the
        # transaction commits, ``truncate`` undoes them, so the caller's object
        # is as it was, and the rows are untouched (the transaction rolled back).
        base_len, base_leaf = len(session), session.leaf
        ids: builtins.list[str] = []
        written: builtins.list[PendingAppend] = []
        # The batch's function calls, asked about in one look-up (a turn has several).
        session.expect_calls(_function_call_ids(entries))
        try:
            for entry in entries:
                pending = session.prepare(entry)
                ids.append(pending.entry.id)
                if pending.outcome is not Outcome.HELD:
                    written.append(pending)
                session.commit(pending)
        except BaseException:
            session.truncate(base_len, base_leaf)
            raise
        finally:
            session.expect_calls(())
        if not written:
            return ids
        raise_header = session_id in self._stale
        now = self.now()
        beat = self._beat_due(session_id, now)
        statements = self._append_statements(
            session_id, session, written, now, raise_header, beat=beat
        )

        try:
            single = self._single_statement(written, raise_header)
            self._write_append(session_id, written[0], statements, single=single)
        except BaseException:
            session.truncate(base_len, base_leaf)
            raise
        # Committed: the session need not keep its appends to undo them (decision record 0030).
        session.written()
        if not self.holds:
            self._heads[session_id] = encode_head(len(session), session.state)
        if beat:
            self._beats[session_id] = now
        if raise_header:
            session.raise_format()
            self._stale.discard(session_id)
        return ids

    def _beat_due(self, session_id: str, now: datetime) -> bool:
        """Whether an append at ``now`` writes the heartbeat and ``updated_at``: none this second.

        The fence and the head run in every append regardless
        (``SessionStore.update_held``); the heartbeat and the session's
        ``updated_at`` only say when the holder last appended, to within
        :data:`HEARTBEAT_EVERY` (decision records 0031 and 0021). A clock that went back
        writes them too.
        """
        last = self._beats.get(session_id)
        return last is None or not last <= now < last + HEARTBEAT_EVERY

    def _append_statements(
        self,
        session_id: str,
        session: StoredSession,
        written: Sequence[PendingAppend],
        now: datetime,
        raise_header: bool,
        *,
        beat: bool = True,
    ) -> Callable[[Any], None]:
        """The statements (on a cursor, in a write transaction) of appends already in ``session``.

        One session update that is also the fence (only while this store holds
        the session: the head that the next open trusts — stores/log_open.py —,
        the name or successor the last ``info``/``link`` among them sets, and
        ``updated_at`` if ``beat``), the holder's heartbeat if ``beat``, the
        header raised if stale, and every row in one statement.

        ``updated_at`` sits in two session indexes (the session lists' order),
        two WAL pages of a one-item append; like the heartbeat it is written
        at most once a second per held session, so it is never more than
        :data:`HEARTBEAT_EVERY` behind the session's last append (decision record 0021).
        """
        head = encode_head(len(session), session.state)
        columns: dict[str, Any] = {"log_head": head}
        if beat:
            columns["updated_at"] = now
        for new in (p.entry for p in written):
            if new.type == "info":
                name = new.data.get("name")
                if isinstance(name, str) and name:
                    columns["name"] = name[:MAX_NAME]
            elif new.type == "link" and new.data.get("rel") == "continued_in":
                successor = new.data.get("session")
                if isinstance(successor, str) and successor:
                    columns["superseded_by"] = successor[:MAX_ID]
        first_seq = written[0].seq
        rows = [p.entry for p in written]

        read_at = self._heads.get(session_id, "")
        # A run's code writes under the run's hold (stores/hold_context.py).
        token = token_for(session_id) or self.token

        def statements(cursor: Any) -> None:
            # The fence first: zero rows means another store broke or took our
            # hold (SessionLocked), before any row could clash with its appends.
            if self.holds:
                if not self.sessions.update_held(cursor, session_id, self.token, **columns):
                    log_holds.lost(cursor, session_id)
                if beat:
                    log_holds.heartbeat(cursor, session_id, self.token, now)
                done = 0
            else:
                done = self._unheld_fence(
                    cursor, session_id, read_at, token, columns, first_seq, rows, now
                )
            if raise_header:
                self._raise_header(cursor, session_id)
            if done < len(rows):
                insert_entries(cursor, session_id, first_seq + done, rows[done:], now)

        return statements

    def _unheld_fence(
        self,
        cursor: SqlCursor,
        session_id: str,
        read_at: str,
        token: str,
        columns: dict[str, Any],
        first_seq: int,
        rows: Sequence[LogEntry],
        now: datetime,
    ) -> int:
        """A store without holds: the session UPDATE, only on the head its view read.

        Returns how many of ``rows`` went in with it: on PostgreSQL the fence,
        the notification and the first ``FENCED_ROWS`` rows are one statement
        (``log_rows.insert_fenced``: with autocommit, one round trip and its own
        transaction); on SQLite, where an UPDATE cannot sit in a ``WITH``, the
        fence is its own statement and the caller inserts every row.

        Zero rows: another store holds the session (``SessionLocked``) or
        someone appended since (``ConcurrentWriter``); a dead process's hold on
        this host is cleared and the fence runs again (log_holds.unheld_refusal).
        ``token`` is the hold this append may pass: its store's own, or the run's
        it is written for (stores/hold_context.py).
        """
        while True:
            if cursor.db.vendor == "postgresql":
                first = rows[:FENCED_ROWS]
                fence = self.sessions.unheld_fence(cursor, session_id, read_at, token, **columns)
                payload = notify.payload_of(self.using, notify.session_key(session_id))
                if insert_fenced(
                    cursor, session_id, first_seq, first, now, fence=fence, payload=payload
                ):
                    return len(first)
            elif self.sessions.update_unheld(cursor, session_id, read_at, token, **columns):
                return 0
            dead = log_holds.unheld_refusal(cursor, session_id, token=token, host=self.host)
            self._report([dead])

    def _single_statement(self, written: Sequence[PendingAppend], raise_header: bool) -> bool:
        """Whether an append's transaction is one statement (see :meth:`_unheld_fence`)."""
        return (
            not self.holds
            and not raise_header
            and len(written) <= FENCED_ROWS
            and connections[self.using].vendor == "postgresql"
        )

    def _write_append(
        self,
        session_id: str,
        pending: PendingAppend,
        tx: Callable[[SqlCursor], None],
        *,
        orm: bool = False,
        single: bool = False,
    ) -> None:
        """Run a transaction that appends ``pending`` to ``session_id``; map its failures.

        A lost hold refuses the session (``SessionLocked``) and a UNIQUE clash on
        the sequence means another writer appended (``ConcurrentWriter``), both
        until :meth:`release`; any failure drops the cached session. ``orm``:
        ``tx`` uses the ORM too (:meth:`StoreBase.write`).
        """
        new = pending.entry
        try:
            self.write(tx, orm=orm, single=single)
        except exceptions.SessionLocked as exc:
            self._drop(session_id)
            if self.holds:
                self._held.discard(session_id)
                self._beats.pop(session_id, None)
                self._refused[session_id] = exc
            raise
        except IntegrityError as exc:
            self._drop(session_id)
            if not is_unique_violation(exc):
                raise
            refusal = exceptions.ConcurrentWriter(
                f"another writer appended to {session_id}: entry {new.id} at seq {pending.seq}"
            )
            if self.holds:
                # Someone appended since we loaded the session: refuse (until
                # release) rather than re-parent under a leaf the agent never
                # saw. A store without holds refuses nothing for later: its
                # next operation reads the session as it is now.
                self._refused[session_id] = refusal
            raise refusal from exc
        except BaseException:
            self._drop(session_id)
            raise

    def _raise_header(self, cursor: Any, session_id: str) -> None:
        cursor.execute(log_sql.HEADER, [session_id])
        row = cursor.fetchone()
        header = parse_json(str(row[0]))
        if isinstance(header, dict) and stale_format(header):
            raised = {**header, "format": CURRENT_FORMAT}
            self.sessions.update(cursor, session_id, header=canonical_json(raised).decode("utf-8"))

    # -- continuing: a successor and the old session's link, in one transaction ----

    def continue_session(
        self, session_id: str, summary_item: dict[str, Any] | None = None
    ) -> Session:
        """Start a successor of ``session_id`` and link the old session to it.

        The successor (``parent_session`` = the old id; harness, records, cwd and
        media copied) opens with a full ``config`` of the settings at the old
        leaf, then ``summary_item`` as an item if given, then the old name as an
        ``info``; the old session gets ``link{rel: continued_in}``, which sets its
        ``superseded_by`` (``ListFilter(current=True)`` then hides it).

        All of it is one write transaction: the successor with its entries and
        the old session's link commit together or not at all, so a process
        killed midway never leaves a successor its parent does not point to
        (docs/log-store.md "Continuing a session").
        """
        self._writable()
        with self._lock:
            try:
                return self._continue(session_id, summary_item)
            finally:
                self._hub.ring()

    def _continue(self, session_id: str, summary_item: dict[str, Any] | None) -> Session:
        old = self._held_session(session_id)
        settings = old.context().settings if old.leaf else {}
        header: dict[str, Any] = {"parent_session": session_id}
        for member in ("harness", "records", "cwd", "media"):
            if member in old.header:
                header[member] = copy.deepcopy(old.header[member])
        # Build the successor in memory first (every entry validated and hashed
        # by the format), so a bad summary item refuses before anything is written.
        successor = self._adopt(Session.new(header))
        successor.append(_full_config(settings))
        if summary_item is not None:
            successor.append({"type": "item", "item": summary_item})
        if old.name():
            successor.append({"type": "info", "name": old.name()})
        insert = self._creation(successor)
        base_len, base_leaf = len(old), old.leaf
        link = old.prepare({"type": "link", "rel": "continued_in", "session": successor.id})
        old.commit(link)
        raise_header = session_id in self._stale
        append = self._append_statements(session_id, old, [link], self.now(), raise_header)
        dead: builtins.list[LockInfo] = []

        def tx(cursor: SqlCursor) -> None:
            dead.clear()
            taken = insert(cursor)
            if taken is not None:
                dead.append(taken)
            append(cursor)

        try:
            # The successor's hold is claimed with a savepoint: Django opens it.
            self._write_append(session_id, link, tx, orm=True)
        except BaseException:
            old.truncate(base_len, base_leaf)
            raise
        stored = self._created(successor, dead)
        if not self.holds:
            self._heads[session_id] = encode_head(len(old), old.state)
        if raise_header:
            old.raise_format()
            self._stale.discard(session_id)
        return stored


def _function_call_ids(entries: Sequence[Any]) -> set[str]:
    """The call ids of the ``function_call`` items among ``entries`` (as given, unchecked).

    Only a hint of what the format will ask (``StoredSession.expect_calls``);
    the format's own rules still decide every entry.
    """
    found: set[str] = set()
    for entry in entries:
        if isinstance(entry, dict) and entry.get("type") == "item":
            item = entry.get("item")
            if isinstance(item, dict) and item.get("type") == "function_call":
                call_id = item.get("call_id")
                if isinstance(call_id, str) and call_id:
                    found.add(call_id)
    return found


def _full_config(settings: dict[str, Any]) -> dict[str, Any]:
    """A ``config`` entry that sets every setting (``replace``) to ``settings``."""
    config: dict[str, Any] = {"type": "config", "replace": True}
    for member in ("model", "reasoning", "text", "omit"):
        if settings.get(member):
            config[member] = copy.deepcopy(settings[member])
    parts = settings.get("instructions_parts")
    if parts and all(isinstance(p, dict) and "text" in p for p in parts):
        config["instructions_parts"] = copy.deepcopy(parts)
    elif settings.get("instructions"):
        config["instructions"] = settings["instructions"]
    if settings.get("instructions_omitted"):
        config["instructions_omitted"] = copy.deepcopy(settings["instructions_omitted"])
    if settings.get("tools"):
        config["tools_added"] = copy.deepcopy(settings["tools"])
    if settings.get("extra"):
        config["extra"] = copy.deepcopy(settings["extra"])
    return config
