"""The log store's state and the life of its sessions: create, open, hold, release, delete.

:class:`LogSessions` is the base of :class:`agentstore.stores.log.LogStore`
(the composition is described there); every other part of the store builds on
what it keeps:

* **the cache**: ``open`` gives the store's one shared session object per id
  (a :class:`~agentstore.stores.log_open.StoredSession`, opened from the
  session's head row in O(1)), kept in ``_open`` until ``release``;
* **the refusals**: a session whose hold was lost or that another writer
  appended to is refused (``_refused``) until ``release`` — never re-opened
  behind the agent's back;
* **the holds** this store has (``_held``, apart from the cache: a failed
  append drops the cached session but the hold stays ours until release) and
  when each one's heartbeat was last written (``_beats``, paced by
  :mod:`.log_appends`);
* **one re-entrant mutex** (``_lock``) over all of the above, because a store
  is shared by threads (each with its own Django connection) while a
  ``Session`` is not thread-safe.

A store made with ``holds=False`` (what the framework integrations use: any
number of processes and objects serve one conversation) claims no hold. Its
cache is a *view*, trusted only while the session's head row is the one it
was opened at (``_heads``; :meth:`LogSessions._current` checks it with one
indexed read before every use and opens the session again when it moved),
and each append is fenced by a compare-and-set on that head
(:mod:`.log_appends`). At most :data:`MAX_VIEWS` views are kept.

Creating, forking and importing insert the session row and its entry rows in
one write transaction (:meth:`LogSessions._insert_session`); creating and
opening also claim the hold in that transaction (:mod:`.log_holds`), so a
session is never visible unheld to the store that made it. A fork's origin is
found among the log sessions holding its base (``_find_origin``).

Headers of format 0.5 and later but older than the current minor are *stale*
(:func:`stale_format`): the first append raises them in place
(:mod:`.log_appends`); older ones are migrated on read instead.
"""

from __future__ import annotations

import builtins
import copy
import logging
import os
import socket
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from agentstore import db, exceptions
from agentstore.db import SqlCursor, read_only
from agentstore.formats.agentsession import (
    CURRENT_FORMAT,
    Session,
    format_ts,
    format_version,
    loads,
)
from agentstore.ids import new_token
from agentstore.models import Entry, Holder
from agentstore.sql import log as log_sql
from agentstore.stores import log_follow, log_holds
from agentstore.stores.base import Clock, StoreBase
from agentstore.stores.log_open import (
    StoredSession,
    encode_head,
    open_current,
    open_stored,
    read_head,
)
from agentstore.stores.log_rows import LOG, insert_entries, parse_time, read_rows, require_log
from agentstore.stores.refs import RefStore
from agentstore.stores.sessions import SessionStore
from agentstore.types.log import LockInfo
from agentstore.validation import json_problem, require_name
from agentstore.validation import parse_json as parse_strict_json

__all__ = ["CURRENT_MINOR", "MAX_ID", "MAX_NAME", "MAX_VIEWS", "LogSessions", "stale_format"]

T = TypeVar("T")
S = TypeVar("S", bound=Session)

logger = logging.getLogger("agentstore.stores.log")

#: The longest session id (and ``parent_session``, ``superseded_by``) a log session may have.
MAX_ID = 255
#: The longest session name kept on the session row (longer ``info`` names are cut).
MAX_NAME = 500
#: How many sessions a store without holds keeps a view of (the least recently used go).
MAX_VIEWS = 64
#: The minor version of the format this store writes.
CURRENT_MINOR = format_version(CURRENT_FORMAT)[1]


def stale_format(header: dict[str, Any]) -> bool:
    # Only 0.5+ headers are raised in place (older ones are migrated on read).
    _major, minor = format_version(header.get("format"))
    return 5 <= minor < CURRENT_MINOR


class LogSessions(StoreBase):
    """The log store's state and the life of its sessions (see the module docstring)."""

    def __init__(
        self,
        *,
        using: str = "default",
        clock: Clock | None = None,
        read_only: bool = False,
        holds: bool = True,
        follow_interval: float = 0.1,
        stale_lock_report: Callable[[LockInfo], None] | None = None,
    ) -> None:
        super().__init__(using=using, clock=clock)
        if follow_interval <= 0:
            raise exceptions.ValidationError(
                "follow_interval must be positive", field="follow_interval"
            )
        self.read_only = read_only
        #: Whether opening a session claims its hold until release (see the
        #: module docstring for a store without).
        self.holds = holds
        self.follow_interval = float(follow_interval)
        self.stale_lock_report = stale_lock_report
        self._explicit_clock = clock is not None
        #: This store's identity in ``Holder`` rows: the token tells two stores
        #: of one process apart, pid and host tell whether a holder is alive.
        self.token = new_token()
        self.pid = os.getpid()
        self.host = socket.gethostname()
        self._lock = threading.RLock()
        self._open: dict[str, StoredSession] = {}
        self._refused: dict[str, exceptions.AgentStoreError] = {}
        self._stale: set[str] = set()
        #: Ids whose hold this store has, tracked apart from the cache: a failed
        #: append drops the cached session but the hold stays ours until release.
        self._held: set[str] = set()
        #: When this store last wrote each held session's heartbeat (decision record 0031).
        self._beats: dict[str, datetime] = {}
        #: The head text each view of a store without holds was opened at or wrote.
        self._heads: dict[str, str] = {}
        self._hub = log_follow.Hub()
        #: The owner of the session rows and holds (this store keeps the lines).
        self.sessions = SessionStore(using=using, clock=clock)
        #: The owner of the refs and their log (docs/log-store.md, "Refs").
        self.refs = RefStore(using=using, clock=clock, read_only=read_only)

    # -- helpers ----------------------------------------------------------------

    def _snapshot(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` in one read snapshot (``StoreBase.read``, renamed here)."""
        return read_only(fn, using=self.using)

    def _writable(self) -> None:
        if self.read_only:
            raise exceptions.ReadOnly("the log store is read-only")

    def _report(self, dead: builtins.list[LockInfo]) -> None:
        for info in dead:
            logger.warning("took over the hold of dead pid %s on %s", info.pid, info.host)
            if self.stale_lock_report is not None:
                self.stale_lock_report(info)

    def _adopt(self, session: S) -> S:
        if self._explicit_clock:
            session.clock = lambda: format_ts(self.now())
        return session

    def _load(self, session_id: str) -> Session:
        """Read a session afresh from its rows (one read snapshot; every id verified)."""
        header, _incarnation, rows = self._snapshot(lambda: read_rows(self.using, session_id))
        session = Session.from_lines(header, [line for _seq, line in rows])
        if session.id != session_id:
            raise exceptions.BadID(f"session {session_id}: stored header names id {session.id}")
        return session

    def _drop(self, session_id: str) -> None:
        self._open.pop(session_id, None)
        self._heads.pop(session_id, None)
        self._stale.discard(session_id)

    # -- sessions ---------------------------------------------------------------

    def create(self, header: dict[str, Any], *, owner: Any = None) -> Session:
        """Create a session from ``header`` (empty members filled), owned by ``owner``, and hold it.

        A header with ``base`` creates a fork: the origin is the session named by
        ``parent_session`` if it holds the base, else any log session holding it
        (one where the base is its own entry preferred). Raises ``ReadOnly``,
        ``SessionExists``, ``NoEntry`` (base not held), ``ValidationError``.
        """
        self._writable()
        if not isinstance(header, dict):
            raise exceptions.ValidationError("header must be a JSON object", field="header")
        header = copy.deepcopy(header)
        with self._lock:
            base = header.get("base")
            if base:
                origin = self._find_origin(str(base), str(header.get("parent_session") or ""))
                session = Session.fork(origin, header)
            else:
                session = Session.new(header)
            insert = self._creation(session, owner)
            dead: builtins.list[LockInfo] = []

            def tx(cursor: SqlCursor) -> None:
                dead.clear()
                taken = insert(cursor)
                if taken is not None:
                    dead.append(taken)

            # The hold's claim takes a savepoint: Django opens the transaction.
            self.write(tx, orm=True)
            return self._created(session, dead)

    def creation(
        self, header: dict[str, Any], *, owner: Any = None
    ) -> Callable[[SqlCursor], LockInfo | None]:
        """What :meth:`create` writes for a new (not forked) session, as statements to run
        inside the caller's write transaction, so the session and the caller's rows
        appear together or not at all (a run and the session it creates).

        Checked now (``ValidationError``, ``ReadOnly``); ``SessionExists`` when the
        statements run on a taken id. This store's view of the session is not
        kept: open it to use it.
        """
        self._writable()
        if not isinstance(header, dict):
            raise exceptions.ValidationError("header must be a JSON object", field="header")
        if header.get("base"):
            raise exceptions.ValidationError(
                "a fork (header.base) is created with create()", field="header.base"
            )
        return self._creation(Session.new(copy.deepcopy(header)), owner)

    def _creation(self, session: Session, owner: Any = None) -> Callable[[Any], LockInfo | None]:
        """Check a new session's header; return the statements that insert and hold it.

        The statements (run on a cursor inside a write transaction) return the
        hold of a dead process they took over, if any.
        """
        sid = session.id
        require_name(sid, "header.id", MAX_ID)
        parent = str(session.header.get("parent_session") or "")
        if len(parent) > MAX_ID:
            raise exceptions.ValidationError(
                f"header.parent_session is longer than {MAX_ID} characters",
                field="header.parent_session",
            )
        if sid in self._open:
            raise exceptions.SessionExists(f"session exists: {sid}")
        created_at = parse_time(str(session.header["created_at"]), "header.created_at")
        now = self.now()
        cwd = session.header.get("cwd")

        def statements(cursor: Any) -> LockInfo | None:
            self._insert_session(cursor, session, created_at, now, cwd, parent, owner)
            if not self.holds:
                return None
            return log_holds.claim(
                cursor, sid, pid=self.pid, host=self.host, token=self.token, now=now
            )

        return statements

    def _created(self, session: Session, dead: builtins.list[LockInfo]) -> StoredSession:
        """Record a session this store created (and holds) once its transaction committed."""
        sid = session.id
        self._report(dead)
        if self.holds:
            self._held.add(sid)
        else:
            # What _insert_session wrote: the view is current until it changes.
            self._heads[sid] = encode_head(len(session), session.resume_state())
        self._refused.pop(sid, None)
        if len(session):
            stored = self._open[sid] = self._stored(session)  # a fork: its prefix in memory
        else:
            # A new, empty session is what opening it from its head gives: its
            # appends are then kept bounded like any opened session's (decision record 0030).
            stored = self._open[sid] = self._adopt(
                StoredSession.from_head(session, using=self.using)
            )
        if stale_format(session.header):
            self._stale.add(sid)
        return stored

    def _stored(self, session: Session) -> StoredSession:
        """``session`` (held whole in memory) as the store's shared session object."""
        return self._adopt(StoredSession.from_session(session, using=self.using))

    def _find_origin(self, base: str, parent_session: str) -> Session:
        def candidates() -> builtins.list[str]:
            return list(
                Entry.objects.using(self.using)
                .filter(entry_id=base, session__kind=LOG)
                .order_by("session_id")
                .values_list("session_id", flat=True)
            )

        def get(session_id: str) -> Session | None:
            cached = self._open.get(session_id)
            if cached is not None:
                return cached
            try:
                return self._load(session_id)
            except exceptions.NoSession:
                return None

        if parent_session:
            origin = get(parent_session)
            if origin is not None and base in origin:
                return origin
        fallback: Session | None = None
        for session_id in self._snapshot(candidates):
            origin = get(session_id)
            if origin is None or base not in origin:
                continue
            if not origin.is_prefix(base):
                return origin
            fallback = fallback or origin
        if fallback is None:
            raise exceptions.NoEntry(f"base {base} is not held by this store")
        return fallback

    def open(self, session_id: str) -> Session:
        """The store's shared session (cached), holding it unless the store is read-only.

        Leaf moves on the returned object (``branch``, ``reset_leaf``) steer later
        appends through the store. Raises ``NoSession``, ``SessionLocked``, or the
        refusal recorded for it (``ConcurrentWriter``, ``SessionLocked``) until
        :meth:`release`.
        """
        return self._held_session(session_id)

    def _held_session(self, session_id: str) -> StoredSession:
        """:meth:`open`, typed as the store's own session class."""
        if not self.holds and not self.read_only:
            return self._current(session_id)
        with self._lock:
            refused = self._refused.get(session_id)
            if refused is not None:
                raise refused
            cached = self._open.get(session_id)
            if cached is not None:
                return cached
            claimed = False
            found: builtins.list[StoredSession | None] = [None]
            if not self.read_only:
                now = self.now()
                dead: builtins.list[LockInfo] = []

                def tx(cursor: SqlCursor) -> None:
                    dead.clear()
                    # The head row, read under the write lock: O(1) in the
                    # session's length (stores/log_open.py).
                    kind, found[0] = open_stored(cursor, session_id, using=self.using)
                    require_log(session_id, kind)
                    taken = log_holds.claim(
                        cursor,
                        session_id,
                        pid=self.pid,
                        host=self.host,
                        token=self.token,
                        now=now,
                    )
                    if taken is not None:
                        dead.append(taken)

                self.write(tx, orm=True)
                self._report(dead)
                claimed = True
                self._held.add(session_id)
            else:
                found[0] = self._snapshot(lambda: self._open_stored(session_id))
            try:
                # No trusted head (or a read-only store's unknown one): read it whole.
                session = found[0] or self._stored(self._load(session_id))
            except BaseException:
                if claimed:
                    self._release_hold(session_id)
                raise
            self._open[session_id] = self._adopt(session)
            if stale_format(session.header):
                self._stale.add(session_id)
            return session

    def _current(self, session_id: str) -> StoredSession:
        """A store without holds: its view of the session as the database has it now.

        The cached view is kept while the session's head row is the text it
        was opened at or last wrote (one indexed read);
        otherwise the session is opened again from its head — or read whole
        when the head is not trusted. Raises ``NoSession``.
        """
        with self._lock:
            cached = self._open.get(session_id)
            # Each statement is its own snapshot: no transaction around them.
            # Both answer a missing session (NoSession) without opening one.
            with db.cursor(self.using) as cursor:
                if cached is not None:
                    kind, head = read_head(cursor, session_id)
                    require_log(session_id, kind)
                    if head == self._heads.get(session_id):
                        # Most recently used last: the eviction below takes the oldest.
                        self._open[session_id] = self._open.pop(session_id)
                        return cached
                # The head row and the newest line, in one statement.
                kind, head, found = open_current(cursor, session_id, using=self.using)
            require_log(session_id, kind)
            self._drop(session_id)
            # Read whole outside the head's snapshot: if the session moved in
            # between, the next append's fence finds the head changed.
            session = found or self._stored(self._load(session_id))
            self._open[session_id] = self._adopt(session)
            self._heads[session_id] = head
            if stale_format(session.header):
                self._stale.add(session_id)
            while len(self._open) > MAX_VIEWS:
                self._drop(next(iter(self._open)))
            return session

    def _open_stored(self, session_id: str) -> StoredSession | None:
        """The session from its head row (``NoSession`` if absent); ``None``: read it whole."""
        with db.cursor(self.using) as cursor:
            kind, stored = open_stored(cursor, session_id, using=self.using)
        require_log(session_id, kind)
        return stored

    def _release_hold(self, session_id: str) -> None:
        self._held.discard(session_id)
        self._beats.pop(session_id, None)
        if self.read_only:
            return

        self.write(
            lambda cursor: cursor.execute(log_sql.DELETE_HOLDER, [session_id, self.token]),
            single=True,
        )

    def release(self, session_id: str) -> None:
        """Forget the session (the next ``open`` reloads it) and drop this store's hold.

        Clears a refusal too. On a read-only store it is how a reader refreshes
        its cached view. Never raises for an unknown id.
        """
        with self._lock:
            held = session_id in self._held or session_id in self._refused
            self._drop(session_id)
            self._refused.pop(session_id, None)
            if held:
                self._release_hold(session_id)

    def delete(self, session_id: str) -> None:
        """Delete the session, its entries and its hold (refs stay: they dangle).

        Hold-blind, like the sqlite store: a holder elsewhere learns it at its
        next append (``SessionLocked`` "lost to no holder"). The id can be
        created again. Raises ``ReadOnly``, ``NoSession``.
        """
        self._writable()
        with self._lock:

            def tx(cursor: SqlCursor) -> None:
                require_log(session_id, self.sessions.lock_kind(cursor, session_id))
                self.sessions.delete_rows(cursor, session_id, LOG)

            try:
                self.write(tx, orm=True)
            finally:
                self._drop(session_id)
                self._refused.pop(session_id, None)
                self._held.discard(session_id)
                self._beats.pop(session_id, None)
                self._hub.ring()

    def close(self) -> None:
        """Release every hold this store has and forget every cached session."""
        with self._lock:
            held = sorted(self._held | set(self._refused))
            self._open.clear()
            self._heads.clear()
            self._refused.clear()
            self._stale.clear()
            self._held.clear()
            self._beats.clear()
            if held and not self.read_only:

                def tx(cursor: SqlCursor) -> None:
                    Holder.objects.using(self.using).filter(
                        session_id__in=held, token=self.token
                    ).delete()

                self.write(tx, orm=True)

    # -- holds (owned by SessionStore) --------------------------------------------

    def lock_holder(self, session_id: str) -> LockInfo | None:
        """Who holds a session of any kind (this store included), or ``None``.

        The Go name of ``SessionStore.hold``.
        """
        return self.sessions.hold(session_id)

    def break_lock(self, session_id: str) -> bool:
        """Remove a session's hold whoever has it; ``False`` when it had none.

        For holders an operator knows are gone (a crashed process on another
        host). A live holder's next append fails with ``SessionLocked``.
        """
        self._writable()
        return self.sessions.break_hold(session_id)

    # -- importing a file ---------------------------------------------------------

    def import_jsonl(self, text: str | bytes, *, owner: Any = None) -> Session:
        """Store a JSONL file as a new session (ids verified; no hold taken).

        Raises ``ReadOnly``, ``SessionExists``, and the format's errors for a bad
        file (``BadID``, ``NoEntry``, ``ValidationError``, …). Pre-0.5 files are
        stored as migrated, unless the migration could not rewrite an entry's
        references (``UnresolvedMigration``, as ``dumps`` refuses them).
        """
        self._writable()
        _refuse_unstorable(text)
        session = loads(text, tolerate_truncated=False)
        session.check_writable()
        sid = session.id
        require_name(sid, "header.id", MAX_ID)
        created_at = parse_time(str(session.header["created_at"]), "header.created_at")
        now = self.now()
        cwd = session.header.get("cwd")

        def tx(cursor: SqlCursor) -> None:
            parent = str(session.header.get("parent_session") or "")[:MAX_ID]
            self._insert_session(cursor, session, created_at, now, cwd, parent, owner)

        self.write(tx, orm=True)
        return session

    def _insert_session(
        self,
        cursor: Any,
        session: Session,
        created_at: datetime,
        now: datetime,
        cwd: Any,
        parent: str,
        owner: Any,
    ) -> None:
        """Insert a log session's row and its entry rows (seq 1..n); inside a write.

        A taken id is ``SessionExists`` (another store created it first); the
        entries of a fork's prefix are inserted too.
        """
        sid = session.id
        self.sessions.insert(
            cursor,
            LOG,
            sid,
            created_at=created_at,
            updated_at=now,
            header=session.header_line,
            cwd=cwd if isinstance(cwd, str) else "",
            parent_session=parent,
            name=session.name()[:MAX_NAME],
            superseded_by=session.superseded_by()[:MAX_ID],
            owner_id=owner,  # a user or its key: SessionStore.insert resolves it
            log_head=encode_head(len(session), session.resume_state()),
        )
        insert_entries(cursor, sid, 1, session.entries, now)


def _refuse_unstorable(text: str | bytes) -> None:
    """Refuse a file whose JSON holds what a database cannot store, naming the line.

    The format itself refuses non-finite numbers and lone surrogates; a NUL
    character is valid JSON but PostgreSQL text cannot hold it (the entry type,
    a session name) and SQLite would keep what PostgreSQL refuses, so imports
    refuse it on both, as the API does. Lines that do not parse are left to the
    format's reader, which reports them.
    """
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError:
            return  # the reader says "file is not valid UTF-8"
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            value = parse_strict_json(line)
        except ValueError:
            continue
        problem = json_problem(value)
        if problem:
            raise exceptions.ValidationError(
                f"line {number}: the JSON value {problem}", field=f"line {number}"
            )
