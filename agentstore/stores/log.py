"""LogStore: agentsession sessions in the database, with holds, follow and refs.

    from agentstore.stores import LogStore
    from agentstore.types import ListFilter, RefTarget

    store = LogStore()                                   # using="default"
    session = store.create({"cwd": "/repo", "harness": {"name": "demo"}})
    store.append(session.id, {"type": "config", "model": "gpt-5"})
    eid = store.append(session.id, {"type": "item", "item": {"type": "message",
                       "role": "user", "content": [{"type": "input_text", "text": "hi"}]}})
    store.update_ref("team/main", None, RefTarget(session=session.id))
    for change in store.follow(session.id):              # snapshot, then appends
        ...

The port of agentsession's ``sqlite`` store over agentstore's one schema: a log
session is a ``Session`` row of ``kind="log"`` (``header`` = the exact header
line) and one ``Entry`` row per line (``seq`` 1-based, a fork's prefix
included, ``line`` the exact line). Dumping the rows in ``seq`` order is the
JSONL file byte for byte (:meth:`LogStore.export_jsonl`), and a file imports
back with every id verified (:meth:`LogStore.import_jsonl`).

Concurrency, in three layers:

* **Holds** (``Holder`` rows, :mod:`.log_holds`): ``create``/``open`` claim the
  session for this *store instance* (a token; several stores in one process
  are as separate as processes) inside their write transaction; every append
  refreshes the heartbeat in its transaction and a zero-row update means the
  hold was lost → ``SessionLocked``, refused until :meth:`LogStore.release`.
* **ConcurrentWriter**: the backstop for writers that bypassed the hold. The
  entry's ``seq`` comes from the in-memory session; UNIQUE(session, seq) refuses
  the insert if anyone else appended since this store loaded the session, and
  the session stays refused until ``release`` — never re-parented.
* **One mutex per store** guards the cache (``open`` → the shared ``Session``),
  the refusals and the held ids, because a store is used from several threads
  (each with its own Django connection) while a ``Session`` is not thread-safe.

Every write is one short transaction (:meth:`StoreBase.write`); reads take a
snapshot that never holds the write lock. Read-only stores hold nothing and
refuse every write with ``ReadOnly``; they read, list and follow.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import copy
import logging
import os
import socket
import threading
from collections.abc import AsyncIterator, Callable, Collection, Iterator, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar

from django.db import IntegrityError
from django.db.models import OuterRef, QuerySet, Subquery, Sum, Value
from django.db.models.functions import Coalesce

from agentstore import db, exceptions, notify
from agentstore.db import SqlCursor, is_unique_violation, read_only
from agentstore.formats.agentsession import (
    CURRENT_FORMAT,
    Outcome,
    PendingAppend,
    Session,
    canonical_json,
    dumps,
    format_ts,
    format_version,
    loads,
    parse_json,
)
from agentstore.formats.agentsession import Entry as LogEntry
from agentstore.ids import new_token
from agentstore.models import Entry, Holder
from agentstore.models import Session as SessionRow
from agentstore.sql import log as log_sql
from agentstore.stores import log_follow, log_holds, log_refs
from agentstore.stores.base import Clock, StoreBase
from agentstore.stores.log_open import StoredSession, encode_head, open_stored, read_page
from agentstore.stores.log_rows import (
    LOG,
    OctetLength,
    insert_entries,
    parse_time,
    read_rows,
    require_log,
    time_ns,
)
from agentstore.stores.refs import RefStore
from agentstore.stores.sessions import SessionStore
from agentstore.types.log import (
    Change,
    ListFilter,
    LockInfo,
    LogPage,
    NamedRef,
    RefLogEntry,
    RefTarget,
    Summary,
    Tail,
)
from agentstore.validation import json_problem, require_aware, require_name
from agentstore.validation import parse_json as parse_strict_json

__all__ = ["LogStore"]

T = TypeVar("T")
S = TypeVar("S", bound=Session)

logger = logging.getLogger("agentstore.stores.log")

_MAX_ID = 255
_MAX_NAME = 500
_CURRENT_MINOR = format_version(CURRENT_FORMAT)[1]
#: How stale the heartbeat of a held session — and the session's ``updated_at`` —
#: may get before an append writes it (decisions 290 and 355).
HEARTBEAT_EVERY = timedelta(seconds=1)


def _stale_format(header: dict[str, Any]) -> bool:
    # Only 0.5+ headers are raised in place (older ones are migrated on read).
    _major, minor = format_version(header.get("format"))
    return 5 <= minor < _CURRENT_MINOR


class LogStore(StoreBase):
    """agentsession sessions over the agentstore schema (see the module docstring)."""

    def __init__(
        self,
        *,
        using: str = "default",
        clock: Clock | None = None,
        read_only: bool = False,
        follow_interval: float = 0.1,
        stale_lock_report: Callable[[LockInfo], None] | None = None,
    ) -> None:
        super().__init__(using=using, clock=clock)
        if follow_interval <= 0:
            raise exceptions.ValidationError(
                "follow_interval must be positive", field="follow_interval"
            )
        self.read_only = read_only
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
        #: When this store last wrote each held session's heartbeat (decision 290).
        self._beats: dict[str, datetime] = {}
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
        self._stale.discard(session_id)

    def _beat_due(self, session_id: str, now: datetime) -> bool:
        """Whether an append at ``now`` writes the heartbeat and ``updated_at``: none this second.

        The fence and the head run in every append regardless
        (``SessionStore.update_held``); the heartbeat and the session's
        ``updated_at`` only say when the holder last appended, to within
        :data:`HEARTBEAT_EVERY` (decisions 290 and 355). A clock that went back
        writes them too.
        """
        last = self._beats.get(session_id)
        return last is None or not last <= now < last + HEARTBEAT_EVERY

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

    def _creation(self, session: Session, owner: Any = None) -> Callable[[Any], LockInfo | None]:
        """Check a new session's header; return the statements that insert and hold it.

        The statements (run on a cursor inside a write transaction) return the
        hold of a dead process they took over, if any.
        """
        sid = session.id
        require_name(sid, "header.id", _MAX_ID)
        parent = str(session.header.get("parent_session") or "")
        if len(parent) > _MAX_ID:
            raise exceptions.ValidationError(
                f"header.parent_session is longer than {_MAX_ID} characters",
                field="header.parent_session",
            )
        if sid in self._open:
            raise exceptions.SessionExists(f"session exists: {sid}")
        created_at = parse_time(str(session.header["created_at"]), "header.created_at")
        now = self.now()
        cwd = session.header.get("cwd")

        def statements(cursor: Any) -> LockInfo | None:
            self._insert_session(cursor, session, created_at, now, cwd, parent, owner)
            return log_holds.claim(
                cursor, sid, pid=self.pid, host=self.host, token=self.token, now=now
            )

        return statements

    def _created(self, session: Session, dead: builtins.list[LockInfo]) -> StoredSession:
        """Record a session this store created (and holds) once its transaction committed."""
        sid = session.id
        self._report(dead)
        self._held.add(sid)
        self._refused.pop(sid, None)
        if len(session):
            stored = self._open[sid] = self._stored(session)  # a fork: its prefix in memory
        else:
            # A new, empty session is what opening it from its head gives: its
            # appends are then kept bounded like any opened session's (decision 356).
            stored = self._open[sid] = self._adopt(
                StoredSession.from_head(session, using=self.using)
            )
        if _stale_format(session.header):
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
            if _stale_format(session.header):
                self._stale.add(session_id)
            return session

    def _open_stored(self, session_id: str) -> StoredSession | None:
        """The session from its head row (``NoSession`` if absent); ``None``: read it whole."""
        with db.cursor(self.using) as cursor:
            kind, stored = open_stored(cursor, session_id, using=self.using)
        require_log(session_id, kind)
        return stored

    # The Go ``Read(id)`` takes the name StoreBase gives its snapshot helper
    # ``read(fn)``; the store uses :meth:`_snapshot` for that instead.
    def read(self, session_id: str) -> Session:  # type: ignore[override]
        """A private copy of the session read afresh: no hold, nothing cached.

        Works on sessions held by this or another store and on ones this store
        refused. Sees an append once that append returned; an unrecorded
        ``branch`` of a writer is not there (the resume rule applies).
        """
        return self._load(session_id)

    def read_page(self, session_id: str, *, after: int = 0, limit: int = 100) -> LogPage:
        """Header, leaf and at most ``limit`` entries after position ``after`` (a ``LogPage``).

        The bounded :meth:`read`: one read snapshot, and only the page's lines
        are read (the leaf comes from the session's persisted head). Positions
        are the lines' ``seq`` (1-based, append order); page on with
        ``after=page.seqs[-1]`` while ``page.more``.
        """
        if limit < 1:
            raise exceptions.ValidationError("limit must be at least 1", field="limit")

        def read() -> LogPage:
            with db.cursor(self.using) as cursor:
                return read_page(cursor, session_id, using=self.using, after=after, limit=limit)

        return self._snapshot(read)

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
            session = self._held_session(session_id)
            try:
                return self._append_many_open(session_id, session, [entry])[0]
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
            session = self._held_session(session_id)
            if expected_leaf is not None and session.leaf != expected_leaf:
                raise exceptions.ConcurrentWriter(
                    f"the leaf of {session_id} moved since it was read: "
                    f"{session.leaf or 'none'}, not {expected_leaf or 'none'}"
                )
            try:
                return self._append_many_open(session_id, session, entries)
            finally:
                # Same-store followers look now, whatever the outcome.
                self._hub.ring()

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
        if not written:
            return ids
        raise_header = session_id in self._stale
        now = self.now()
        beat = self._beat_due(session_id, now)
        statements = self._append_statements(
            session_id, session, written, now, raise_header, beat=beat
        )

        try:
            self._write_append(session_id, written[0], statements)
        except BaseException:
            session.truncate(base_len, base_leaf)
            raise
        # Committed: the session need not keep its appends to undo them (decision 356).
        session.written()
        if beat:
            self._beats[session_id] = now
        if raise_header:
            session.raise_format()
            self._stale.discard(session_id)
        return ids

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
        :data:`HEARTBEAT_EVERY` behind the session's last append (decision 355).
        """
        columns: dict[str, Any] = {"log_head": encode_head(len(session), session.state)}
        if beat:
            columns["updated_at"] = now
        for new in (p.entry for p in written):
            if new.type == "info":
                name = new.data.get("name")
                if isinstance(name, str) and name:
                    columns["name"] = name[:_MAX_NAME]
            elif new.type == "link" and new.data.get("rel") == "continued_in":
                successor = new.data.get("session")
                if isinstance(successor, str) and successor:
                    columns["superseded_by"] = successor[:_MAX_ID]
        first_seq = written[0].seq
        rows = [p.entry for p in written]

        def statements(cursor: Any) -> None:
            # The fence first: zero rows means another store broke or took our
            # hold (SessionLocked), before any row could clash with its appends.
            if not self.sessions.update_held(cursor, session_id, self.token, **columns):
                log_holds.lost(cursor, session_id)
            if beat:
                log_holds.heartbeat(cursor, session_id, self.token, now)
            if raise_header:
                self._raise_header(cursor, session_id)
            insert_entries(cursor, session_id, first_seq, rows, now)

        return statements

    def _write_append(
        self,
        session_id: str,
        pending: PendingAppend,
        tx: Callable[[SqlCursor], None],
        *,
        orm: bool = False,
    ) -> None:
        """Run a transaction that appends ``pending`` to ``session_id``; map its failures.

        A lost hold refuses the session (``SessionLocked``) and a UNIQUE clash on
        the sequence means another writer appended (``ConcurrentWriter``), both
        until :meth:`release`; any failure drops the cached session. ``orm``:
        ``tx`` uses the ORM too (:meth:`StoreBase.write`).
        """
        new = pending.entry
        try:
            self.write(tx, orm=orm)
        except exceptions.SessionLocked as exc:
            self._drop(session_id)
            self._held.discard(session_id)
            self._beats.pop(session_id, None)
            self._refused[session_id] = exc
            raise
        except IntegrityError as exc:
            self._drop(session_id)
            if not is_unique_violation(exc):
                raise
            # Someone appended since we loaded the session: refuse (until
            # release) rather than re-parent under a leaf the agent never saw.
            refusal = exceptions.ConcurrentWriter(
                f"another writer appended to {session_id}: entry {new.id} at seq {pending.seq}"
            )
            self._refused[session_id] = refusal
            raise refusal from exc
        except BaseException:
            self._drop(session_id)
            raise

    def tail(
        self,
        session_id: str,
        limit: int | None = None,
        *,
        types: Collection[str] | None = None,
    ) -> Tail:
        """The last ``limit`` entries on the path to the leaf (oldest first), and the leaf.

        On a session this store has open (:meth:`open`, :meth:`append`) it is
        the store's own view — the leaf the next append hangs from — and the
        walk goes up ``parent`` links from the leaf, stopping after ``limit``
        kept entries: O(limit) plus the skipped entries, not O(session length).
        Otherwise the walk starts from the leaf the session's head row names
        (no hold; the same cost), in one read snapshot; a session without a
        trusted head is read whole first (as :meth:`read`). ``types`` keeps only entries of those
        types (``{"item"}``: the conversation); ``limit=None`` walks the whole
        path. The entries may be the store's own (read-only). Raises ``NoSession``.
        """
        if limit is not None and (isinstance(limit, bool) or limit < 0):
            raise exceptions.ValidationError("limit must not be negative", field="limit")
        wanted = frozenset(types) if types is not None else None
        with self._lock:
            session = self._open.get(session_id)
            if session is not None:
                out, leaf = session.tail(limit, wanted), session.leaf
            else:
                out, leaf = self._snapshot(lambda: self._tail_stored(session_id, limit, wanted))
        out.reverse()
        return Tail(entries=out, leaf=leaf)

    def _tail_stored(
        self, session_id: str, limit: int | None, wanted: frozenset[str] | None
    ) -> tuple[builtins.list[LogEntry], str]:
        """:meth:`tail` of a session this store does not have open (inside one snapshot)."""
        stored = self._open_stored(session_id)
        if stored is None:
            # No trusted head: read it whole, as :meth:`read` does.
            stored = self._stored(self._load(session_id))
        return stored.tail(limit, wanted), stored.leaf

    def _raise_header(self, cursor: Any, session_id: str) -> None:
        cursor.execute(log_sql.HEADER, [session_id])
        row = cursor.fetchone()
        header = parse_json(str(row[0]))
        if isinstance(header, dict) and _stale_format(header):
            raised = {**header, "format": CURRENT_FORMAT}
            self.sessions.update(cursor, session_id, header=canonical_json(raised).decode("utf-8"))

    def _release_hold(self, session_id: str) -> None:
        self._held.discard(session_id)
        self._beats.pop(session_id, None)
        if self.read_only:
            return

        self.write(lambda cursor: cursor.execute(log_sql.DELETE_HOLDER, [session_id, self.token]))

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

    # -- holds ------------------------------------------------------------------

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

    # -- listing ----------------------------------------------------------------

    def list(self, filter: ListFilter | None = None) -> Iterator[Summary]:  # noqa: A002
        """Log sessions matching ``filter``, newest ``created_at`` first, names and sizes filled.

        ``size`` is the byte length of the session's JSONL file (what
        :meth:`export_jsonl` returns, UTF-8 encoded).
        """
        f = filter or ListFilter()
        if f.after is not None:
            require_aware(f.after, "filter.after")
        if f.before is not None:
            require_aware(f.before, "filter.before")
        if f.limit < 0:
            raise exceptions.ValidationError(
                "filter.limit must not be negative", field="filter.limit"
            )
        rows = SessionRow.objects.using(self.using).filter(kind=LOG)
        if f.cwd:
            rows = rows.filter(cwd=f.cwd)
        if f.parent_session:
            rows = rows.filter(parent_session=f.parent_session)
        # Columns hold microseconds, headers up to nanoseconds: the SQL bounds
        # are inclusive and coarse, the header's own time decides below.
        if f.after is not None:
            rows = rows.filter(created_at__gte=f.after)
        if f.before is not None:
            rows = rows.filter(created_at__lt=f.before)
        if f.current:
            rows = rows.filter(superseded_by="")
        lines = (
            Entry.objects.filter(session_id=OuterRef("pk"))
            .values("session_id")
            .annotate(total=Sum(OctetLength("line") + 1))
            .values("total")
        )
        rows = rows.annotate(
            lines_size=Coalesce(Subquery(lines), Value(0)), header_size=OctetLength("header")
        ).order_by("-created_at", "-id")
        header_level = bool(f.harness or f.top_level or f.extra or f.after or f.before)
        if f.limit > 0 and not header_level:
            rows = rows[: f.limit]
        values = self._snapshot(
            lambda: list(
                rows.values_list(  # type: ignore[misc]  # annotated names
                    "header", "name", "superseded_by", "updated_at", "lines_size", "header_size"
                )
            )
        )
        return self._summaries(values, f)

    def _summaries(
        self, values: builtins.list[tuple[Any, ...]], f: ListFilter
    ) -> Iterator[Summary]:
        after = time_ns(f.after) if f.after else None
        before = time_ns(f.before) if f.before else None
        extra = {k: canonical_json(v) for k, v in (f.extra or {}).items()}
        count = 0
        for header_line, name, successor, updated, lines_size, header_size in values:
            try:
                header = parse_json(header_line)
            except exceptions.ValidationError:
                logger.warning("skipping a log session whose header does not parse")
                continue
            if not isinstance(header, dict):
                continue
            try:
                created = time_ns(str(header.get("created_at", "")))
            except exceptions.ValidationError:
                created = 0
            if after is not None and not created > after:
                continue
            if before is not None and not created < before:
                continue
            if f.harness:
                harness = header.get("harness")
                if not isinstance(harness, dict) or harness.get("name") != f.harness:
                    continue
            if f.top_level and header.get("spawned_by"):
                continue
            if any(k not in header or canonical_json(header[k]) != v for k, v in extra.items()):
                continue
            yield Summary(
                header=header,
                name=name,
                superseded_by=successor,
                size=int(header_size) + int(lines_size) + 1,
                modified=updated,
            )
            count += 1
            if f.limit > 0 and count >= f.limit:
                return

    # -- follow -----------------------------------------------------------------

    def follow(
        self, session_id: str, cursor: str = "", *, stop: threading.Event | None = None
    ) -> Iterator[Change]:
        """A snapshot of the session, then a change for every append as it commits.

        Runs until the consumer stops iterating or ``stop`` is set (then it ends
        quietly); raises ``NoSession`` from the iterator when the session is
        missing, deleted, or replaced by another under its id. Resume with a
        change's ``cursor`` to get exactly what came after it. Takes no hold.
        """
        wake = threading.Event()
        key = self._hub.register(wake.set)
        # Other processes' appends (PostgreSQL NOTIFY; agentstore/notify.py).
        sub = notify.subscribe(self.using, notify.session_key(session_id), wake=wake.set)
        try:
            for step in log_follow.steps(self.using, session_id, cursor, self.follow_interval):
                if stop is not None and stop.is_set():
                    return
                if isinstance(step, Change):
                    yield step
                    continue
                # Wait for a same-store append, the poll timer, or ``stop``
                # (looked at in short slices: an Event cannot wait on two).
                remaining = step
                while remaining > 0 and not wake.is_set():
                    if stop is not None and stop.is_set():
                        return
                    chunk = min(remaining, 0.05) if stop is not None else remaining
                    wake.wait(chunk)
                    remaining -= chunk
                wake.clear()
        finally:
            self._hub.unregister(key)
            sub.close()

    async def afollow(self, session_id: str, cursor: str = "") -> AsyncIterator[Change]:
        """The async twin of :meth:`follow` for ASGI code.

        Database work runs in worker threads; waiting is on the event loop.
        Cancelling the consuming task ends the follow (cleanly: nothing is
        left registered).
        """
        loop = asyncio.get_running_loop()
        woken = asyncio.Event()

        def wake() -> None:
            loop.call_soon_threadsafe(woken.set)

        key = self._hub.register(wake)
        sub = notify.subscribe(self.using, notify.session_key(session_id), wake=wake)
        gen = log_follow.steps(self.using, session_id, cursor, self.follow_interval)
        done = object()
        # A cancelled consumer can leave a step running in its worker thread
        # (threads cannot be interrupted); closing the generator then would
        # fail with "generator already executing". Steps hold this lock, and
        # the close below waits for it off the event loop.
        stepping = threading.Lock()

        def step_once() -> object:
            with stepping:
                return next(gen, done)

        def close_when_idle() -> None:
            with stepping:
                gen.close()

        try:
            while True:
                step = await asyncio.to_thread(step_once)
                if step is done:
                    return
                if isinstance(step, Change):
                    yield step
                    continue
                assert isinstance(step, float)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(woken.wait(), timeout=step)
                woken.clear()
        finally:
            self._hub.unregister(key)
            sub.close()
            if stepping.acquire(blocking=False):
                try:
                    gen.close()
                finally:
                    stepping.release()
            else:
                threading.Thread(target=close_when_idle, daemon=True).start()

    # -- export / import ----------------------------------------------------------

    def export_jsonl(self, session_id: str) -> str:
        """The session as its JSONL file, byte for byte (``dumps`` of :meth:`read`)."""
        return dumps(self._load(session_id))

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
        require_name(sid, "header.id", _MAX_ID)
        created_at = parse_time(str(session.header["created_at"]), "header.created_at")
        now = self.now()
        cwd = session.header.get("cwd")

        def tx(cursor: SqlCursor) -> None:
            parent = str(session.header.get("parent_session") or "")[:_MAX_ID]
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
            name=session.name()[:_MAX_NAME],
            superseded_by=session.superseded_by()[:_MAX_ID],
            owner_id=owner,  # a user or its key: SessionStore.insert resolves it
            log_head=encode_head(len(session), session.resume_state()),
        )
        insert_entries(cursor, sid, 1, session.entries, now)

    # -- refs (owned by RefStore: agentstore/stores/refs.py) ----------------------

    def update_ref(
        self,
        name: str,
        expected: RefTarget | None,
        next: RefTarget | None,  # noqa: A002
        reason: str = "",
    ) -> None:
        """Compare-and-swap the ref ``name``: :meth:`RefStore.update_ref`."""
        self.refs.update_ref(name, expected, next, reason)

    def resolve_ref(self, name: str) -> RefTarget:
        """The ref's target: :meth:`RefStore.resolve_ref`."""
        return self.refs.resolve_ref(name)

    def list_refs(
        self,
        prefix: str = "",
        *,
        after: str = "",
        limit: int | None = None,
        sessions: QuerySet[Any] | None = None,
    ) -> builtins.list[NamedRef]:
        """Refs named ``prefix…``, a page after ``after``: :meth:`RefStore.list_refs`."""
        return self.refs.list_refs(prefix, after=after, limit=limit, sessions=sessions)

    def count_refs(self, prefix: str = "", *, sessions: QuerySet[Any] | None = None) -> int:
        """How many refs :meth:`list_refs` lists: :meth:`RefStore.count_refs`."""
        return self.refs.count_refs(prefix, sessions=sessions)

    def ref_log(
        self,
        name: str,
        *,
        after: int | None = None,
        limit: int | None = None,
        sessions: QuerySet[Any] | None = None,
    ) -> builtins.list[RefLogEntry]:
        """Updates of ``name``, newest first, a page after ``after``: :meth:`RefStore.ref_log`."""
        return self.refs.ref_log(name, after=after, limit=limit, sessions=sessions)

    def count_ref_log(self, name: str, *, sessions: QuerySet[Any] | None = None) -> int:
        """How many rows :meth:`ref_log` lists: :meth:`RefStore.count_ref_log`."""
        return self.refs.count_ref_log(name, sessions=sessions)

    # -- helpers built on the API (agentsession's Continue / SessionFor / …) -----

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
        if raise_header:
            old.raise_format()
            self._stale.discard(session_id)
        return stored

    def session_for(self, name: str, header: dict[str, Any] | None = None) -> Session:
        """The session ref ``name`` names, opened; created (with ``header``) and named if none.

        A dangling ref is replaced by a new session. Racing callers agree on one
        session: a loser deletes the session it created and opens the winner's
        (which may raise ``SessionLocked`` when the winner holds it elsewhere).
        """
        log_refs.check_name(name)
        self._writable()
        while True:
            expected: RefTarget | None = None
            try:
                target = self.resolve_ref(name)
            except exceptions.NoRef:
                pass
            except exceptions.NoSession as exc:
                expected = exc.target
            else:
                try:
                    return self.open(target.session)
                except exceptions.NoSession:
                    continue  # deleted meanwhile: look again
            created = self.create(copy.deepcopy(header or {}))
            try:
                self.update_ref(name, expected, RefTarget(session=created.id), reason="session_for")
            except exceptions.RefMoved:
                self.delete(created.id)
                continue
            except BaseException:
                self.delete(created.id)
                raise
            return created

    def continue_ref(self, name: str, summary_item: dict[str, Any] | None = None) -> Session:
        """Continue the session ref ``name`` names and move the ref to the successor.

        The pin, if any, is not carried. If the ref moved meanwhile, raises
        ``RefMoved`` whose ``session`` attribute is the successor (created anyway).
        """
        target = self.resolve_ref(name)
        successor = self.continue_session(target.session, summary_item)
        try:
            self.update_ref(name, target, RefTarget(session=successor.id), reason="continued")
        except exceptions.RefMoved as exc:
            exc.session = successor  # type: ignore[attr-defined]
            raise
        return successor

    def resolve_current(self, name: str) -> tuple[str, bool]:
        """The end of the ``continued_in`` chain from the ref's session, and whether it moved."""
        target = self.resolve_ref(name)
        current = target.session
        seen = {current}
        while True:
            successor = (
                SessionRow.objects.using(self.using)
                .filter(id=current, kind=LOG)
                .values_list("superseded_by", flat=True)
                .first()
            )
            if successor is None:
                raise exceptions.NoSession(f"no such session: {current}")
            if not successor:
                return current, current != target.session
            if successor in seen:
                raise exceptions.AgentStoreError(
                    f"continued_in links from {target.session} form a cycle at {successor}"
                )
            seen.add(successor)
            current = successor


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
