"""Open a log session for append in O(1): trust what the database verified at write time.

Private to the log store (:mod:`agentstore.stores.log` and its parts). Reading a session with
``Session.from_lines`` parses and re-hashes every line (seconds at 100k lines);
an append needs almost none of that. What it needs:

* the line count (the next ``seq``) and the *resume state* — the leaf a reader
  would find, the ``leaf`` label in force (:class:`~agentstore.formats.
  agentsession.ResumeState`). Every append's transaction stores them on the
  session row (``Session.log_head``, JSON), beside the lines they describe, so
  open reads one row, and the newest line (one index probe) whose ``seq`` must
  be that count — a head that disagrees is not trusted and the session is
  read whole — and whose id is recomputed (the head of the hash chain:
  ``BadID`` if that line was altered);
* the answers the append rules ask of the tree — is this parent here, is this
  a fork's prefix line, is this ``call_id`` taken — which
  :class:`StoredSession` answers with one indexed lookup each (``UNIQUE(session,
  entry_id)``, ``(session, call_id)``), or from the entries it already knows.

The lines were verified (every id recomputed) when they were written; a
lookup trusts them. :meth:`~agentstore.formats.agentsession.Session.verify` on
a session read whole (``LogStore.read``) still checks the whole chain.

Anything else — ``entries``, ``path``, ``context``, a ``compaction`` or a
``decision`` whose rules walk the branch — *materialises* the session: it is
read whole (ids verified) up to the lines it knew at open, its own appends
added, and from then on it is an ordinary in-memory ``Session``. Same answers,
the old cost, only when asked.

What it keeps of its own appends is bounded (decision record 0030): once the store
has committed them, :meth:`StoredSession.written` folds them into the lines
"at open" — they are the database's now, found by the same lookups — and only
the newest :data:`KEEP` entries stay in memory (a ``get_items(50)`` is served
from them). Keeping every append's decoded entry made a long-running writer's
garbage collector scan a heap that grew by half a dozen objects per append:
a full collection every few thousand appends, tens of µs per append averaged.

Lines appended by another writer after open are invisible to the lookups
(``seq`` beyond the count), exactly as they were to a session read whole: the
next insert collides on ``UNIQUE(session, seq)`` and the store refuses with
``ConcurrentWriter``.
"""

from __future__ import annotations

import itertools
import json
import json.encoder
from collections.abc import Collection
from typing import Any

from agentstore import db, exceptions
from agentstore.db import SqlCursor, read_only
from agentstore.formats.agentsession import (
    Entry,
    ResumeState,
    Session,
    canonical_json,
    entry_id,
    format_version,
)
from agentstore.formats.agentsession.canonical import parse as parse_canonical
from agentstore.sql import log as log_sql
from agentstore.stores.base import lookup
from agentstore.stores.log_rows import call_id_key, read_rows
from agentstore.types.log import LogPage

__all__ = [
    "KEEP",
    "StoredSession",
    "encode_head",
    "open_current",
    "open_stored",
    "read_head",
    "read_page",
    "walk_path",
]

#: How the canonical encoder writes a string (``json``'s C function).
_encode_string = json.encoder.encode_basestring

#: Entries a session opened from its head keeps in memory once written: its
#: newest appends and look-ups (a tail read walks them before the rows).
KEEP = 256


def _entry(line: str) -> Entry:
    # A stored line is the format's own canonical output, verified when it
    # was written: the plain decoder is enough.
    return Entry.from_object(json.loads(line), line)


#: Line counts below this are plain integers (canonical JSON writes them as ``str``).
_PLAIN_COUNT = 2**53


def encode_head(lines: int, state: ResumeState) -> str:
    """The ``Session.log_head`` text for a log of ``lines`` lines in ``state``."""
    leaf = state.leaf
    if (
        not state.mark
        and type(leaf) is str
        and leaf.isascii()
        and type(lines) is int
        and 0 <= lines < _PLAIN_COUNT
    ):
        # Every append writes the head: the canonical text of the usual
        # two-member head, spelt out (an ASCII leaf needs no escaping check
        # beyond the encoder's; members in key order), without the dict and
        # canonical_json's walk and encoder call. Equal by test.
        return '{"leaf":' + _encode_string(leaf) + ',"lines":' + str(lines) + "}"
    head: dict[str, Any] = {"lines": lines, "leaf": leaf}
    if state.mark:
        head.update(mark=state.mark, mark_at=state.mark_at, newest=state.newest)
    return canonical_json(head).decode("utf-8")


def _decode_head(text: str) -> tuple[int, ResumeState] | None:
    try:
        head = json.loads(text) if text else None
        if not isinstance(head, dict):
            return None
        state = ResumeState(
            leaf=str(head.get("leaf", "")),
            mark=str(head.get("mark", "")),
            mark_at=int(head.get("mark_at", 0)),
            newest=str(head.get("newest", "")),
        )
        return int(head["lines"]), state
    except (ValueError, TypeError, KeyError):
        return None


def _filled(name: str) -> Any:
    """A property for one of ``Session``'s in-memory structures: materialise on first read."""
    backing = "_m" + name

    def get(self: StoredSession) -> Any:
        if not self._full:
            self._materialize()
        return getattr(self, backing)

    def put(self: StoredSession, value: Any) -> None:
        setattr(self, backing, value)

    return property(get, put)


class StoredSession(Session):
    """A log session opened from its head; lines looked up on demand (module docstring).

    Behaves as :class:`Session` in every respect. It answers the format's
    extension points (``has_entry``, ``call_id_used``, ``held_entry``, and
    ``add_entry`` to take an entry in) and the tree's answers (``entry``,
    ``seq_of``, ``is_prefix``, ``len``) from the rows until something needs the
    whole tree. :attr:`state` is the resume state after its lines, kept as
    entries are added, for the store to write.
    """

    _full: bool

    def __init__(
        self,
        header: dict[str, Any],
        *,
        header_line: str,
        using: str,
        lines: int,
        state: ResumeState,
    ) -> None:
        self._full = False
        super().__init__(header, header_line=header_line)
        self._using = using
        #: Lines at open (those after are this object's own appends).
        self._opened = lines
        self._count = lines
        self._opened_state = state
        self._state = state
        self._leaf = state.leaf
        #: Entries looked up or appended: id -> (seq, entry).
        self._known: dict[str, tuple[int, Entry]] = {}
        #: Ids looked up and not found (an append asks twice: prepare, commit).
        self._absent: set[str] = set()
        #: This object's appends in order, with the resume state after each.
        self._appended: list[tuple[Entry, ResumeState]] = []
        self._new_calls: set[str] = set()
        #: Call ids an append asked about in one look-up (:meth:`expect_calls`):
        #: call_id -> used. Only for the append that asked.
        self._looked_up_calls: dict[str, bool] = {}
        self._base_seq = -1

    @classmethod
    def from_session(cls, session: Session, *, using: str) -> StoredSession:
        """A stored session holding all of ``session`` (a new or imported one) in memory."""
        stored = cls.from_head(session, using=using)
        stored._become(session)
        return stored

    @classmethod
    def from_head(cls, session: Session, *, using: str) -> StoredSession:
        """``session``, whose lines are all stored, as if opened from its head row.

        Nothing of the tree is held: lookups ask the rows. For a session just
        created (no lines) this is exactly what ``open`` would give.
        """
        stored = cls(
            session.header,
            header_line=session.header_line,
            using=using,
            lines=len(session),
            state=session.resume_state(),
        )
        stored.clock = session.clock
        return stored

    # -- the in-memory structures of Session, filled on first use --------------

    def _become(self, full: Session) -> None:
        for name in ("_entries", "_index", "_children", "_call_ids", "_prefix"):
            setattr(self, "_m" + name, getattr(full, name))
        self.duplicates, self.truncated, self.truncated_at = full.duplicates, "", 0
        self._full = True

    def _materialize(self) -> None:
        """Read the session whole (ids verified) up to its lines at open, then add its own."""
        _header, _incarnation, rows = read_only(
            lambda: read_rows(self._using, self.id, up_to=self._opened), using=self._using
        )
        full = Session.from_lines(
            self.header_line, [line for _seq, line in rows], tolerate_truncated=False
        )
        if len(full) != self._opened:
            raise exceptions.ConcurrentWriter(
                f"session {self.id} has {len(full)} lines, not the {self._opened} it had at open"
            )
        for entry, _state in self._appended:
            full.add_entry(entry)
        self._become(full)

    _entries = _filled("_entries")
    _index = _filled("_index")
    _children = _filled("_children")
    _call_ids = _filled("_call_ids")
    _prefix = _filled("_prefix")

    # -- lookups ---------------------------------------------------------------

    def _lookup(self, entry_id: str) -> tuple[int, Entry] | None:
        known = self._known.get(entry_id)
        if known is not None or not isinstance(entry_id, str) or entry_id in self._absent:
            return known
        with db.cursor(self._using) as cursor:
            cursor.execute(log_sql.LOOKUP, [self.id, entry_id])
            row = cursor.fetchone()
        # A line beyond the count is another writer's: not in this session.
        if row is None or int(row[0]) > self._opened:
            if len(self._absent) > 64:
                self._absent.clear()
            self._absent.add(entry_id)
            return None
        found = self._known[entry_id] = (int(row[0]), _entry(str(row[1])))
        return found

    def held_entry(self, entry_id: str, *, fresh: bool) -> Entry | None:
        if fresh and not self._full and entry_id not in self._known:
            # A ts read from the system clock just now cannot be a stored
            # line's: skip the probe (decision record 0040), and tell commit's check
            # the same. UNIQUE(session, entry_id) still refuses a duplicate row.
            if len(self._absent) > 64:
                self._absent.clear()
            self._absent.add(entry_id)
            return None
        return super().held_entry(entry_id, fresh=fresh)

    def __len__(self) -> int:
        return len(self._entries) if self._full else self._count

    def has_entry(self, entry_id: str) -> bool:
        return super().has_entry(entry_id) if self._full else self._lookup(entry_id) is not None

    def entry(self, entry_id: str) -> Entry | None:
        if self._full:
            return super().entry(entry_id)
        found = self._lookup(entry_id)
        return None if found is None else found[1]

    def seq_of(self, entry_id: str) -> int:
        if self._full:
            return super().seq_of(entry_id)
        found = self._lookup(entry_id)
        return 0 if found is None else found[0]

    def is_prefix(self, entry_id: str) -> bool:
        if self._full:
            return super().is_prefix(entry_id)
        if not self.base:
            return False
        if self._base_seq < 0:
            self._base_seq = self.seq_of(self.base)
        # A fork's prefix is its first lines, the base the last of them.
        seq = self.seq_of(entry_id)
        return 0 < seq <= self._base_seq

    def expect_calls(self, call_ids: Collection[str]) -> None:
        """Look up, in one query, the call ids the next appends will ask about.

        An append of a turn carries several ``function_call`` items; the format
        asks :meth:`call_id_used` for each. One ``IN`` look-up answers them all
        (three statements become one; on PostgreSQL three round trips). The
        answers serve until :meth:`expect_calls` is called again (``()``
        forgets them): the store asks before an append's prepares and forgets
        after.
        """
        self._looked_up_calls = {}
        if self._full or not call_ids:
            return
        keys = {call_id_key(c): c for c in call_ids}
        found: set[str] = set()
        with db.cursor(self._using) as cursor:
            cursor.execute(log_sql.calls(len(keys)), [self.id, *keys])
            for key, seq in cursor.fetchall():
                # A line beyond the count is another writer's: not in this session.
                if int(seq) <= self._opened:
                    found.add(keys[str(key)])
        self._looked_up_calls = {c: c in found for c in call_ids}

    def call_id_used(self, call_id: str) -> bool:
        if self._full:
            return super().call_id_used(call_id)
        if call_id in self._new_calls:
            return True
        known = self._looked_up_calls.get(call_id)
        if known is not None:
            return known
        with db.cursor(self._using) as cursor:
            cursor.execute(log_sql.CALL, [self.id, call_id_key(call_id)])
            # A line beyond the count is another writer's: not in this session.
            return any(int(seq) <= self._opened for (seq,) in cursor.fetchall())

    def path(self, entry_id: str) -> list[Entry]:
        if not self._full:
            self._materialize()
        return super().path(entry_id)

    # -- keeping the resume state ------------------------------------------------

    @property
    def state(self) -> ResumeState:
        """The resume state after the session's lines (what the store writes)."""
        return self._state

    def add_entry(self, entry: Entry) -> None:
        seq = len(self) + 1
        self._state = self.advance_resume(self._state, entry, seq)
        self._appended.append((entry, self._state))
        if self._full:
            super().add_entry(entry)
            return
        self._known[entry.id] = (seq, entry)
        self._absent.discard(entry.id)
        self._count = seq
        item = entry.data.get("item") if entry.type == "item" else None
        if isinstance(item, dict) and item.get("type") == "function_call":
            call_id = item.get("call_id")
            if isinstance(call_id, str) and call_id:
                self._new_calls.add(call_id)

    def truncate(self, length: int, leaf: str) -> None:
        kept = length - self._opened
        if isinstance(length, bool) or not 0 <= kept <= len(self._appended):
            if not self._full:
                self._materialize()
            super().truncate(length, leaf)
            self._state = self.resume_state()
            return
        if self._full:
            super().truncate(length, leaf)
        else:
            if leaf and not self.has_entry(leaf):
                raise exceptions.NoEntry(f"no such entry: {leaf}")
            for entry, _state in self._appended[kept:]:
                self._known.pop(entry.id, None)
                item = entry.data.get("item") if entry.type == "item" else None
                if isinstance(item, dict) and item.get("type") == "function_call":
                    self._new_calls.discard(str(item.get("call_id")))
            self._count = length
            self._leaf = leaf
        del self._appended[kept:]
        self._state = self._appended[-1][1] if self._appended else self._opened_state

    def written(self) -> None:
        """Every append so far is committed: count them among the stored lines.

        Called by the store after a successful write transaction. The lines
        "at open" become all of them (lookups and ``_materialize`` read them
        from the rows, where they were verified when written), the record
        kept for undoing uncommitted appends (:meth:`truncate`) is dropped, and
        only the newest :data:`KEEP` looked-up or appended entries stay in
        memory — bounded whatever the number of appends (decision record 0030). A
        session held whole in memory (created or imported by this store, or
        materialised) keeps its tree, as any in-memory ``Session`` does; it
        only drops the undo record.
        """
        self._opened_state = self._state
        self._appended.clear()
        if self._full:
            self._opened = len(self)
            return
        self._opened = self._count
        # Their call ids are rows below the count now: ``call_id_used`` finds them.
        self._new_calls.clear()
        known = self._known
        excess = len(known) - KEEP
        if excess > 0:
            # Oldest first (insertion order): a tail read wants the newest.
            for key in list(itertools.islice(known, excess)):
                del known[key]

    # -- reading the branch --------------------------------------------------------

    def tail(self, limit: int | None, wanted: Collection[str] | None) -> list[Entry]:
        """The last ``limit`` entries (``wanted`` types) on the path to the leaf, newest first.

        From the entries in memory when they reach that far, else from the rows
        (this session's lines are all committed when the store asks). The
        entries may be shared: treat them as read-only.
        """
        # The entries this object holds (all of them once read whole; else its
        # own appends and lookups) usually cover a conversation's newest turns.
        out: list[Entry] = []
        current = self._leaf or None
        while current is not None and (limit is None or len(out) < limit):
            if self._full:
                entry = self.entry(current)
            else:
                known = self._known.get(current)
                entry = known[1] if known is not None else None
            if entry is None:
                break
            if wanted is None or entry.type in wanted:
                out.append(entry)
            current = entry.parent
        else:
            return out
        if self._full:
            return out
        with db.cursor(self._using) as cursor:
            return walk_path(cursor, self.id, self._leaf, len(self), limit, wanted)


def walk_path(
    cursor: SqlCursor,
    session_id: str,
    leaf: str,
    lines: int,
    limit: int | None,
    wanted: Collection[str] | None,
) -> list[Entry]:
    """The last ``limit`` entries of ``wanted`` types on the path to ``leaf``, newest first.

    Reads lines newest first from the ``seq`` index in batches and follows
    ``parent`` links through them (a parent always comes earlier); when the
    path leaves a batch (an abandoned branch in between), it jumps straight to
    the parent's line. O(limit) for a linear conversation, whatever its length.
    The entries are decoded from the rows: fresh objects the caller owns.
    """
    out: list[Entry] = []
    want: str | None = leaf or None
    high = lines
    while want is not None and (limit is None or len(out) < limit) and high > 0:
        # The path of a conversation is mostly its newest lines: ask for a few
        # more than still wanted (labels and infos in between), no more.
        size = 1000 if limit is None else limit - len(out) + 8
        cursor.execute(log_sql.PATH, [session_id, high, size])
        rows = cursor.fetchall()
        if not rows:
            break
        for _seq, row_id, parent_id, kind, line in rows:
            if row_id != want:
                continue
            if wanted is None or kind in wanted:
                out.append(_entry(str(line)))
                if limit is not None and len(out) >= limit:
                    return out
            want = parent_id
            if want is None:
                return out
        high = int(rows[-1][0]) - 1
        if want is not None and len(rows) == size:
            # Jump over lines that are not on the path (one index probe).
            cursor.execute(log_sql.LOOKUP, [session_id, want])
            row = cursor.fetchone()
            if row is None:
                break
            high = min(high, int(row[0]))
    return out


def _check_line(session_id: str, seq: int, given: str, line: str) -> None:
    """Re-hash one stored line (the newest: the head of the chain); ``BadID`` if it was altered."""
    try:
        obj = parse_canonical(line)
    except exceptions.ValidationError as exc:
        raise exceptions.BadID(f"session {session_id}: line {seq} does not parse") from exc
    if not isinstance(obj, dict) or obj.get("id") != given or entry_id(obj) != given:
        raise exceptions.BadID(f"session {session_id}: line {seq} does not match its id {given}")


@lookup("session_id", missing=lambda arguments: (None, ""))  # no row under an unstorable id
def read_head(cursor: SqlCursor, session_id: str) -> tuple[str | None, str]:
    """The kind of the row under ``session_id`` (``None``: no row) and its persisted head text.

    Every append rewrites the head, so a view opened at this text is current
    while the text is unchanged: one indexed read instead of an open.
    """
    cursor.execute(log_sql.HEAD_TEXT, [session_id])
    row = cursor.fetchone()
    if row is None:
        return None, ""
    return str(row[0]), str(row[1] or "")


@lookup("session_id", missing=lambda arguments: (None, None))  # no row under an unstorable id
def open_stored(
    cursor: SqlCursor, session_id: str, *, using: str
) -> tuple[str | None, StoredSession | None]:
    """The kind of the row under ``session_id`` and, for a log with a trusted head, its session.

    ``(None, None)``: no row. A log whose head is unknown or disagrees with its
    lines (or a pre-0.5 header, which reading migrates) gives ``(kind, None)``:
    read it whole.
    """
    kind, _head, stored = open_current(cursor, session_id, using=using)
    return kind, stored


@lookup("session_id", missing=lambda arguments: (None, "", None))
def open_current(
    cursor: SqlCursor, session_id: str, *, using: str
) -> tuple[str | None, str, StoredSession | None]:
    """:func:`open_stored`, with the head text the session was opened at (:func:`read_head`'s).

    One statement reads the session row and its newest line: its own
    snapshot, so no transaction is needed around it.
    """
    cursor.execute(log_sql.HEAD, [session_id])
    row = cursor.fetchone()
    if row is None:
        return None, "", None
    kind, header_line, head_text = str(row[0]), str(row[1]), str(row[2] or "")
    decoded = _decode_head(head_text)
    if kind != "log" or decoded is None:
        return kind, head_text, None
    lines, state = decoded
    newest_seq = int(row[3]) if row[3] is not None else 0
    if newest_seq != lines:
        return kind, head_text, None
    if row[3] is not None:
        _check_line(session_id, newest_seq, str(row[4]), str(row[5]))
    header = parse_canonical(header_line)
    if not isinstance(header, dict) or format_version(header.get("format"))[1] < 5:
        return kind, head_text, None
    return (
        kind,
        head_text,
        StoredSession(header, header_line=header_line, using=using, lines=lines, state=state),
    )


def read_page(cursor: SqlCursor, session_id: str, *, using: str, after: int, limit: int) -> LogPage:
    """Header, leaf and at most ``limit`` lines after seq ``after`` (inside a read snapshot).

    Bounded: a session whose persisted head is trusted (:func:`open_stored`)
    gives its header and leaf from its session row, so only the page's lines
    are read. One whose head is unknown or disagrees with its lines (rows
    written around the store) is read whole for its leaf, as ``read`` would.
    ``NoSession`` when missing or not a log session.
    """
    kind, stored = open_stored(cursor, session_id, using=using)
    if stored is None:
        header_line, _incarnation, rows = read_rows(using, session_id)
        session = Session.from_lines(header_line, [line for _seq, line in rows])
        header, leaf = session.header, session.leaf
    else:
        header, leaf = stored.header, stored.leaf
    cursor.execute(log_sql.LINES_PAGE, [session_id, after, limit + 1])
    page = [(int(seq), str(line)) for seq, line in cursor.fetchall()]
    shown = page[:limit]
    return LogPage(
        id=session_id,
        header=header,
        leaf=leaf,
        entries=tuple(_entry(line) for _seq, line in shown),
        seqs=tuple(seq for seq, _line in shown),
        more=len(page) > limit,
    )
