"""The ``Session`` value: an agentsession tree, its leaf, and the append rules.

A :class:`Session` holds a header (a dict, preserved exactly) and its entries in
file order, each with the exact line it was read or written as. It answers tree
questions (:meth:`~Session.path`, :meth:`~Session.children`,
:meth:`~Session.roots`) and enforces every rule a writer must obey when it
appends — the same rules whichever store keeps the lines.

Leaf rules (docs/agentsession-format.md, "Appending and the leaf"; they are
subtle, so here in full):

* The *leaf* is the entry the next append hangs from. An append without a
  ``parent`` member uses it; ``"parent": null`` asks for a new root.
* The *live rule* (:meth:`Session.commit`): an entry hung from the leaf becomes
  the leaf (``CONTINUED``); one hung elsewhere leaves it alone (``BRANCHED``);
  an entry already held changes nothing (``HELD``, same id); a ``label`` whose
  value is ``leaf`` moves the leaf to its *target* if the target is allowed
  (``LEAF_MOVED``), else nothing moves (``LEAF_NOT_MOVED``). The leaf never rests
  on a leaf label, and in a fork only on the base or an own entry.
* :meth:`~Session.branch` and :meth:`~Session.reset_leaf` move the leaf in
  memory only; :meth:`~Session.mark_leaf` builds the ``label`` that makes the
  move durable.
* The *resume rule* (:meth:`~Session.resume_leaf`, what reading gives): with a
  leaf label in force, the newest entry that descends from the marked entry
  and comes after the label's line (or the marked entry itself); otherwise the
  last entry of the file; then up past leaf labels, never above a base.

Appending is two steps so that a store can write first and change memory only
after its transaction committed: :meth:`~Session.prepare` validates and
computes the id and the exact line without touching the session, and
:meth:`~Session.commit` applies the result. :meth:`~Session.append` does both.
A refused append raises and leaves the session unchanged.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from agentstore import exceptions
from agentstore.formats.agentsession import canonical
from agentstore.formats.agentsession.context import Context, context_at, verify_response
from agentstore.formats.agentsession.entry import (
    ENVELOPE,
    Entry,
    check_ts,
    entry_id,
)
from agentstore.formats.agentsession.header import (
    CURRENT_FORMAT,
    fill_header,
    format_version,
    validate_header,
)
from agentstore.formats.agentsession.legacy import migrate_legacy
from agentstore.types.frozen import positional_builder, require_fields

__all__ = ["AppendResult", "Outcome", "PendingAppend", "ResumeState", "Session"]

#: Verdicts a ``decision`` entry may carry.
VERDICTS = frozenset({"proceed", "reject", "hold", "answer"})


class Outcome(StrEnum):
    """What an append did to the tree and the leaf."""

    CONTINUED = "continued"
    BRANCHED = "branched"
    HELD = "held"
    LEAF_MOVED = "leaf_moved"
    LEAF_NOT_MOVED = "leaf_not_moved"


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingAppend:
    """A validated append not yet applied: see :meth:`Session.prepare`."""

    entry: Entry
    outcome: Outcome
    #: The leaf after commit.
    leaf: str
    #: The file position (1-based, header excluded) the entry will take; for a
    #: held append, the position it already has.
    seq: int
    #: ``len(session)`` when prepared; commit refuses if the session moved.
    base_len: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ResumeState:
    """What the resume (read) rule needs to place the leaf after one more line.

    ``leaf`` is the resume rule's leaf; ``mark`` the target of the ``leaf``
    label in force (``""``: none), ``mark_at`` that label's line (1-based,
    header excluded) and ``newest`` the newest line after it descending from
    the target (the target itself when none). See :meth:`Session.advance_resume`.
    """

    leaf: str = ""
    mark: str = ""
    mark_at: int = 0
    newest: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class AppendResult:
    """The result of an append: the id, the exact line and the outcome."""

    id: str
    line: str
    outcome: Outcome
    entry: Entry
    leaf: str
    seq: int

    @property
    def written(self) -> bool:
        """False for a held (already present) entry: nothing new to store."""
        return self.outcome is not Outcome.HELD


# What every append builds (a pending append, its result, the resume state after
# it): positional builders, the same objects as the classes' own constructors make
# at a third of the cost (agentstore.types.frozen, decision 365); field orders pinned.
require_fields(PendingAppend, ("entry", "outcome", "leaf", "seq", "base_len"))
require_fields(AppendResult, ("id", "line", "outcome", "entry", "leaf", "seq"))
require_fields(ResumeState, ("leaf", "mark", "mark_at", "newest"))
_new_pending = positional_builder(PendingAppend)
_new_result = positional_builder(AppendResult)
_new_state = positional_builder(ResumeState)


def _check_reserved(obj: dict[str, Any], where: str) -> None:
    """Refuse a read line whose body carries ``content``, as an append does.

    The id hashes the *computed* content hash under that name, so a body member
    ``content`` would sit outside every hash: changing it would keep the id.
    """
    if "content" in obj:
        raise exceptions.ReservedMember(
            f"{where}: entry.content is reserved for the content hash", field=where
        )


#: (second, its ``YYYY-MM-DDTHH:MM:SS``): appends in one second share the rendering.
_SECOND: tuple[int, str] = (-1, "")


def _now_ts() -> str:
    """Now in the ``ts`` spelling (nanoseconds), as ``format_ts`` writes it."""
    global _SECOND
    secs, nanos = divmod(time.time_ns(), 1_000_000_000)
    second, prefix = _SECOND
    if secs != second:
        prefix = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs))
        _SECOND = (secs, prefix)  # one tuple: threads see a matching pair
    frac = f"{nanos:09d}".rstrip("0")
    return f"{prefix}.{frac}Z" if frac else f"{prefix}Z"


class Session:
    """An agentsession session: header, entries in file order, leaf.

    Build one with :meth:`new` (a fresh header), :meth:`from_lines` (a header
    line and entry lines, e.g. rebuilt from database rows), :func:`.jsonl.loads`
    (a whole file) or :meth:`fork`.
    """

    def __init__(self, header: dict[str, Any], *, header_line: str | None = None) -> None:
        validate_header(header)
        self.header: dict[str, Any] = header
        #: The exact header line (no newline).
        self.header_line: str = (
            header_line if header_line is not None else canonical.dumps(header).decode("utf-8")
        )
        self._entries: list[Entry] = []
        self._index: dict[str, int] = {}
        self._children: dict[str | None, list[str]] = {}
        self._call_ids: set[str] = set()
        self._leaf: str = ""
        #: Prefix entry ids of a fork (the copied path, base included).
        self._prefix: set[str] = set()
        #: The cut final line dropped on read, or "" (``Session.Truncated``).
        self.truncated: str = ""
        #: Its 1-based line number in the file (the header is line 1), or 0.
        self.truncated_at: int = 0
        #: Ids of lines that repeated an earlier line on read (held once).
        self.duplicates: list[str] = []
        #: True when the session was migrated in memory from a pre-0.5 file.
        self.migrated: bool = False
        #: Old ids of migrated entries whose references could not be rewritten
        #: (see :mod:`.legacy`); such a session reads but is never written.
        self.unresolved: list[str] = []
        #: Optional ``ts`` source for appends without ``ts`` (tests inject it).
        self.clock: Callable[[], str] | None = None

    # -- construction ---------------------------------------------------------

    @classmethod
    def new(cls, header: dict[str, Any] | None = None, **fill: Any) -> Session:
        """A new, empty session; empty header members are filled (see ``fill_header``)."""
        return cls(fill_header(header, **fill))

    @classmethod
    def from_lines(
        cls,
        header_line: str,
        lines: Iterable[str],
        *,
        tolerate_truncated: bool = True,
        first_number: int = 2,
    ) -> Session:
        """Read a session from its header line and entry lines, in file order.

        Every line is parsed strictly and its id recomputed from its own
        members (``BadID`` on mismatch or a missing id); a parent must come
        earlier (``NoEntry``); ``parents`` must obey the convergence rules
        (``BadConvergence``); a fork obeys the base rule (``BaseRule``). A final
        line that does not parse is dropped and kept in :attr:`truncated` (its
        line number in :attr:`truncated_at`) when ``tolerate_truncated``; blank
        lines are skipped, and line numbers in errors count them, as an editor
        does (``first_number`` is the number of the first of ``lines``). An
        entry body carrying the reserved ``content`` member is refused
        (``ReservedMember``): it would sit outside the id's hash. Pre-0.5 files
        are migrated in memory (see :mod:`.legacy`). The leaf is the resume
        rule's.
        """
        header_line = header_line.rstrip("\r\n")
        header = validate_header(canonical.parse(header_line))
        # (line number, text) of the non-blank lines; the header is line 1.
        # isspace() stops at the first other character: no copy per line.
        raw: list[tuple[int, str]] = []
        for number, line in enumerate(lines, start=first_number):
            text = line.rstrip("\r\n")
            if text and not text.isspace():
                raw.append((number, text))
        objects: list[tuple[dict[str, Any], str, int]] = []
        truncated, truncated_at = "", 0
        for index, (number, line) in enumerate(raw):
            try:
                obj = canonical.parse(line)
            except exceptions.ValidationError as exc:
                if tolerate_truncated and index == len(raw) - 1:
                    truncated, truncated_at = line, number
                    break
                raise exceptions.ValidationError(
                    f"line {number}: {exc.message}", field=f"line {number}"
                ) from exc
            if not isinstance(obj, dict):
                raise exceptions.ValidationError(
                    f"line {number}: an entry must be a JSON object", field=f"line {number}"
                )
            objects.append((obj, line, number))
        _major, minor = format_version(header["format"])
        if minor < 5:
            migration = migrate_legacy(header, objects)
            session = cls(migration.header, header_line=migration.header_line)
            session.migrated = True
            session.unresolved = migration.unresolved
            # Migrated lines are ours; the numbers still point into the file.
            objects = [
                (obj, line, number)
                for (obj, line), (_o, _l, number) in zip(migration.objects, objects, strict=True)
            ]
        else:
            session = cls(header, header_line=header_line)
        session.truncated, session.truncated_at = truncated, truncated_at
        session._load(objects)
        return session

    def _load(self, objects: list[tuple[dict[str, Any], str, int]]) -> None:
        base = self.base
        in_prefix = bool(base)
        for obj, line, number in objects:
            where = f"line {number}"
            etype = obj.get("type")
            if not isinstance(etype, str) or not etype:
                raise exceptions.ValidationError(f"{where}: entry.type is required", field=where)
            given = obj.get("id")
            if not isinstance(given, str) or not given:
                raise exceptions.BadID(f"{where}: entry has no id")
            _check_reserved(obj, where)
            check_ts(obj.get("ts"), f"{where}: entry.ts")
            computed = entry_id(obj)
            if computed != given:
                raise exceptions.BadID(
                    f"{where}: id {given} does not match its content ({computed})"
                )
            if given in self._index:
                # The same entry written twice: identical envelope, so the
                # same entry. Hold it once.
                self.duplicates.append(given)
                continue
            parent = obj.get("parent")
            if parent is not None and (not isinstance(parent, str) or parent not in self._index):
                if base and not in_prefix:
                    raise exceptions.BaseRule(f"{where}: parent {parent} is not in the session")
                raise exceptions.NoEntry(f"{where}: parent {parent} is not earlier in the file")
            self._check_parents(obj.get("parents"), parent, where)
            if base and not in_prefix:
                self._check_base_rule(parent, where)
            entry = Entry.from_object(obj, line)
            self._add(entry)
            if in_prefix and given == base:
                in_prefix = False
                path_ids = {e.id for e in self.path(base)}
                if set(self._index) != path_ids:
                    raise exceptions.BaseRule(
                        f"{where}: a line before the base {base} is not on the path to it"
                    )
                self._prefix = set(path_ids)
        if base and in_prefix:
            raise exceptions.BaseRule(f"base {base} is not in the session")
        self._leaf = self.resume_leaf()

    def _add(self, entry: Entry) -> None:
        self._index[entry.id] = len(self._entries)
        self._entries.append(entry)
        self._children.setdefault(entry.parent, []).append(entry.id)
        if entry.type == "item":
            item = entry.data.get("item")
            if isinstance(item, dict) and item.get("type") == "function_call":
                call_id = item.get("call_id")
                if isinstance(call_id, str) and call_id:
                    self._call_ids.add(call_id)

    # -- basic accessors ------------------------------------------------------

    @property
    def id(self) -> str:
        """The session id (``header["id"]``)."""
        return str(self.header["id"])

    @property
    def base(self) -> str:
        """The fork base (``header["base"]``) or ``""``."""
        value = self.header.get("base")
        return value if isinstance(value, str) else ""

    @property
    def leaf(self) -> str:
        """The entry the next append hangs from; ``""`` for none (new root)."""
        return self._leaf

    @property
    def entries(self) -> list[Entry]:
        """The entries in file order (a copy of the list)."""
        return list(self._entries)

    @property
    def lines(self) -> list[str]:
        """The exact entry lines in file order (no newlines)."""
        return [e.line for e in self._entries]

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[Entry]:
        return iter(list(self._entries))

    def __contains__(self, entry_id: object) -> bool:
        return isinstance(entry_id, str) and self._has(entry_id)

    def _has(self, entry_id: str) -> bool:
        # The rules ask through _has, entry, seq_of, is_prefix and
        # _call_id_used, so a store can answer them without holding every
        # entry (agentstore.stores.log_open.StoredSession).
        return entry_id in self._index

    def _call_id_used(self, call_id: str) -> bool:
        """True when a ``function_call`` item of the session already has ``call_id``."""
        return call_id in self._call_ids

    def _held(self, entry_id: str, *, fresh: bool) -> Entry | None:
        """The entry :meth:`prepare` is about to add, if the session already holds it.

        ``fresh``: its ``ts`` is the system clock's reading of this very
        ``prepare`` (nanoseconds), which no stored entry can share — a store
        that would have to look that up elsewhere may skip it
        (``agentstore.stores.log_open.StoredSession``).
        """
        return self.entry(entry_id)

    def entry(self, entry_id: str) -> Entry | None:
        """The entry with that id, or ``None``."""
        i = self._index.get(entry_id)
        return None if i is None else self._entries[i]

    def seq_of(self, entry_id: str) -> int:
        """The 1-based file position of an entry (header excluded); 0 if absent."""
        i = self._index.get(entry_id)
        return 0 if i is None else i + 1

    def children(self, entry_id: str | None) -> list[str]:
        """Ids of the entries hung from ``entry_id`` (``None``: the roots), file order."""
        return list(self._children.get(entry_id, []))

    def roots(self) -> list[str]:
        """Ids of the root entries, in file order."""
        return self.children(None)

    def path(self, entry_id: str) -> list[Entry]:
        """The root-first path ending at ``entry_id`` (``parents`` ignored); ``[]`` if unknown."""
        out: list[Entry] = []
        current: str | None = entry_id
        while current is not None:
            e = self.entry(current)
            if e is None:
                return []
            out.append(e)
            current = e.parent
        out.reverse()
        return out

    def leaves(self) -> list[str]:
        """The ids of the entries no entry hangs from (the branch tips), in file order.

        A fork's prefix entries have the next prefix entry or an own entry as a
        child, so only the base can be a leaf among them.
        """
        return [e.id for e in self._entries if not self._children.get(e.id)]

    def is_prefix(self, entry_id: str) -> bool:
        """True for a fork's copied prefix entry (base included)."""
        return entry_id in self._prefix

    def copy(self) -> Session:
        """A private copy (leaf included) sharing the immutable entries."""
        other = copy.copy(self)
        other.header = copy.deepcopy(self.header)
        other._entries = list(self._entries)
        other._index = dict(self._index)
        other._children = {k: list(v) for k, v in self._children.items()}
        other._call_ids = set(self._call_ids)
        other._prefix = set(self._prefix)
        other.duplicates = list(self.duplicates)
        other.unresolved = list(self.unresolved)
        return other

    # -- labels, name, successor ---------------------------------------------

    def labels(self) -> dict[str, str]:
        """The label in force per target: the last ``label`` for it, ``null`` clearing."""
        out: dict[str, str] = {}
        for e in self._entries:
            if e.type != "label":
                continue
            target = e.data.get("target")
            if not isinstance(target, str):
                continue
            value = e.data.get("label")
            if isinstance(value, str) and value:
                out[target] = value
            else:
                out.pop(target, None)
        return out

    def name(self) -> str:
        """The session name: the last ``info`` entry with a non-empty ``name``."""
        found = ""
        for e in self._entries:
            if e.type == "info":
                value = e.data.get("name")
                if isinstance(value, str) and value:
                    found = value
        return found

    def superseded_by(self) -> str:
        """The successor named by the last ``continued_in`` link, or ``""``."""
        found = ""
        for e in self._entries:
            if e.type == "link" and e.data.get("rel") == "continued_in":
                value = e.data.get("session")
                if isinstance(value, str) and value:
                    found = value
        return found

    # -- leaf rules -----------------------------------------------------------

    def _leaf_target_allowed(self, target: Any) -> bool:
        if not isinstance(target, str):
            return False
        e = self.entry(target)
        if e is None or e.is_leaf_label:
            return False
        return not (self.base and target != self.base and self.is_prefix(target))

    def _settle(self, leaf: str, new: Entry | None = None) -> str:
        """Walk up past leaf labels; in a fork never rest above the base.

        ``new`` is an entry about to be added, looked up by its id too.
        """
        while leaf:
            e = new if new is not None and leaf == new.id else self.entry(leaf)
            if e is None or not e.is_leaf_label:
                break
            leaf = e.parent or ""
        if self.base and (not leaf or (leaf != self.base and self.is_prefix(leaf))):
            return self.base
        return leaf

    def resume_state(self) -> ResumeState:
        """The resume rule's state for the entries as stored (``.leaf`` is :meth:`resume_leaf`).

        A store keeps it beside the rows so that opening a session for append
        needs neither every line nor a replay (:meth:`advance_resume`).
        """
        state = ResumeState(leaf=self.base)
        for seq, e in enumerate(self._entries, start=1):
            state = self.advance_resume(state, e, seq)
        return state

    def advance_resume(self, state: ResumeState, entry: Entry, seq: int) -> ResumeState:
        """The resume state once ``entry`` is line ``seq`` (the next one, or a held line).

        The incremental form of :meth:`resume_leaf` (the same rules, line by
        line): a ``leaf`` label naming an allowed target sets the mark in force
        (and the newest descendant to the target itself), a null label on the
        marked target clears it; with a mark, a later line that descends from
        the target is the newest; the leaf is the newest (no mark: this line)
        settled past leaf labels. Costs O(1) unless a line hangs off the
        branch under a mark (then a walk up to the target).
        """
        mark, mark_at, newest = state.mark, state.mark_at, state.newest
        if entry.type == "label":
            named, value = entry.data.get("target"), entry.data.get("label")
            if value == "leaf" and self._leaf_target_allowed(named):
                mark, mark_at, newest = str(named), seq, str(named)
            elif value is None and mark and named == mark:
                mark, mark_at, newest = "", 0, ""
        if mark and seq > mark_at and self._descends(entry.parent, mark, newest):
            newest = entry.id
        leaf = self._settle(newest if mark else entry.id, entry)
        return _new_state(leaf, mark, mark_at, newest)

    def _descends(self, entry_id: str | None, target: str, known: str) -> bool:
        """True when ``entry_id`` is ``target`` or hangs below it (``known`` does)."""
        if entry_id is None:
            return False
        if entry_id in (target, known):
            return True
        floor = self.seq_of(target)
        current: str | None = entry_id
        while current is not None:
            if current == target:
                return True
            if self.seq_of(current) <= floor:
                return False  # parents come earlier in the file: passed the target
            e = self.entry(current)
            current = e.parent if e is not None else None
        return False

    def resume_leaf(self) -> str:
        """The leaf the resume (read) rule gives for the entries as stored."""
        if not self._entries:
            return self.base
        # The mark in force: the last leaf label naming a target the leaf may
        # rest on; a null label on the *marked* target clears it. Another
        # label value on it (a bookmark) leaves the mark alone, as does a
        # null label on some other entry — the reference's reading.
        target, label_at = "", -1
        for i, e in enumerate(self._entries):
            if e.type != "label":
                continue
            named = e.data.get("target")
            value = e.data.get("label")
            if value == "leaf" and self._leaf_target_allowed(named):
                target, label_at = str(named), i
            elif value is None and target and named == target:
                target, label_at = "", -1
        if not target:
            return self._settle(self._entries[-1].id)
        descendants = {target}
        newest = target
        for i in range(self._index[target] + 1, len(self._entries)):
            e = self._entries[i]
            if e.parent in descendants:
                descendants.add(e.id)
                if i > label_at:
                    newest = e.id
        return self._settle(newest)

    def branch(self, entry_id: str) -> None:
        """Move the in-memory leaf to ``entry_id`` (not stored); ``NoEntry`` if unknown."""
        if not self._has(entry_id):
            raise exceptions.NoEntry(f"no such entry: {entry_id}")
        if self.base and entry_id != self.base and self.is_prefix(entry_id):
            raise exceptions.BaseRule(f"entry {entry_id} is above the base {self.base}")
        self._leaf = entry_id

    def reset_leaf(self) -> None:
        """Clear the in-memory leaf so the next append is a new root (not stored)."""
        self._leaf = ""

    def mark_leaf(self) -> dict[str, Any]:
        """The ``label`` entry that makes the current leaf durable (append it)."""
        if not self._leaf:
            raise exceptions.NoEntry("the session has no leaf to mark")
        return {"type": "label", "target": self._leaf, "label": "leaf"}

    # -- appending ------------------------------------------------------------

    def _check_parents(self, parents: Any, parent: Any, where: str) -> None:
        if parents is None:
            return
        if not isinstance(parents, list):
            raise exceptions.BadConvergence(f"{where}: parents must be a list")
        seen: set[tuple[str, str]] = set()
        for ref in parents:
            if (
                not isinstance(ref, dict)
                or not isinstance(ref.get("entry"), str)
                or not ref["entry"]
            ):
                raise exceptions.BadConvergence(f"{where}: each parents ref needs an entry")
            session = ref.get("session", "")
            if not isinstance(session, str):
                raise exceptions.BadConvergence(f"{where}: parents session must be a string")
            if session == self.id:
                # Naming this session is the same as leaving it out: one entry
                # named both ways is named twice.
                session = ""
            key = (session, ref["entry"])
            if key in seen:
                raise exceptions.BadConvergence(f"{where}: parents repeats {ref['entry']}")
            seen.add(key)
            if not session:
                if ref["entry"] == parent:
                    raise exceptions.BadConvergence(f"{where}: parents must not name the parent")
                if not self._has(ref["entry"]):
                    raise exceptions.BadConvergence(
                        f"{where}: parents names {ref['entry']}, "
                        "which is not earlier in the session"
                    )

    def _check_base_rule(self, parent: Any, where: str) -> None:
        if parent is None:
            raise exceptions.BaseRule(f"{where}: a fork cannot have a second root")
        if parent != self.base and self.is_prefix(parent):
            raise exceptions.BaseRule(
                f"{where}: parent {parent} is above the session's base {self.base}"
            )

    def _check_body(self, obj: dict[str, Any]) -> None:
        etype = obj["type"]
        if etype == "item":
            item = obj.get("item")
            if not isinstance(item, dict) or not isinstance(item.get("type"), str):
                raise exceptions.ValidationError("entry.item is required", field="entry.item")
            if item["type"] == "item_reference":
                raise exceptions.ValidationError(
                    "entry.item must not be an item_reference", field="entry.item"
                )
        elif etype in ("compaction", "branch_summary"):
            if not isinstance(obj.get("summary"), dict):
                raise exceptions.ValidationError("entry.summary is required", field="entry.summary")
            if etype == "compaction":
                kept = obj.get("first_kept")
                parent = obj.get("parent")
                on_path = {e.id for e in self.path(parent)} if isinstance(parent, str) else set()
                if not isinstance(kept, str) or kept not in on_path:
                    raise exceptions.NoEntry(
                        f"compaction first_kept {kept!r} is not on the path before it"
                    )
        elif etype == "label":
            # A label without a target labels nothing and is kept as given
            # (the reference store accepts it); only a target that names no
            # entry of the session is refused.
            target = obj.get("target")
            if target not in (None, "") and (not isinstance(target, str) or not self._has(target)):
                raise exceptions.NoEntry(f"label target {target!r} is not in the session")
            value = obj.get("label")
            if value is not None and not isinstance(value, str):
                raise exceptions.ValidationError(
                    "entry.label must be a string or null", field="entry.label"
                )
        elif etype == "decision" and obj.get("verdict") not in VERDICTS:
            raise exceptions.ValidationError(
                "entry.verdict must be one of proceed, reject, hold, answer",
                field="entry.verdict",
            )

    def _check_calls(self, obj: dict[str, Any], parent: str | None) -> None:
        etype = obj["type"]
        if etype == "item":
            item = obj["item"]
            if item.get("type") == "function_call":
                call_id = item.get("call_id")
                if not isinstance(call_id, str) or not call_id:
                    raise exceptions.CallIDEmpty("function_call call_id is empty")
                if self._call_id_used(call_id):
                    raise exceptions.CallIDRepeated(f"call_id {call_id} is already used")
            return
        if etype not in ("decision", "dispatch"):
            return
        call_id = obj.get("call_id")
        target = obj.get("target")
        path = self.path(parent) if parent else []
        on_path = {e.id: e for e in path}
        called = on_path.get(target) if isinstance(target, str) else None
        item = called.data.get("item") if called is not None else None
        if (
            called is None
            or called.type != "item"
            or not isinstance(item, dict)
            or item.get("type") != "function_call"
            or not call_id
            or item.get("call_id") != call_id
        ):
            raise exceptions.BadTarget(
                f"{etype} target {target!r} is not a function_call "
                f"with call_id {call_id!r} on the path"
            )
        dispatched = rejected = answered = completed = False
        for e in path:
            if e.data.get("call_id") == call_id and e.type == "dispatch":
                dispatched = True
            elif e.type == "decision" and e.data.get("call_id") == call_id:
                verdict = e.data.get("verdict")
                rejected = rejected or verdict == "reject"
                answered = answered or verdict == "answer"
            elif e.type == "item":
                out = e.data.get("item")
                if (
                    isinstance(out, dict)
                    and out.get("type") == "function_call_output"
                    and out.get("call_id") == call_id
                ):
                    completed = True
        verdict = obj.get("verdict") if etype == "decision" else "dispatch"
        if completed:
            raise exceptions.CallCompleted(f"call {call_id} already has its output")
        if answered:
            raise exceptions.CallAnswered(f"call {call_id} was answered")
        if rejected:
            raise exceptions.CallRejected(f"call {call_id} was rejected")
        if verdict == "reject" and dispatched:
            raise exceptions.RejectDispatched(f"call {call_id} was already dispatched")
        if verdict == "answer" and not dispatched:
            raise exceptions.AnswerNotDispatched(f"call {call_id} was never dispatched")

    def prepare(self, entry: dict[str, Any]) -> PendingAppend:
        """Validate ``entry`` and compute its id, line and outcome; change nothing.

        ``entry`` is a plain JSON object with a ``type``. Without a ``parent``
        member it hangs from the leaf; ``"parent": None`` asks for a root. A
        missing ``ts`` is now. An ``id`` member, if given, must equal the
        computed id (``BadID``); ``content`` is reserved (``ReservedMember``).
        """
        if not isinstance(entry, dict):
            raise exceptions.ValidationError("entry must be a JSON object", field="entry")
        obj = dict(entry)
        etype = obj.get("type")
        if not isinstance(etype, str) or not etype:
            raise exceptions.ValidationError("entry.type is required", field="entry.type")
        if etype == "session":
            raise exceptions.ValidationError(
                'entry.type "session" is the header', field="entry.type"
            )
        if "content" in obj:
            raise exceptions.ReservedMember(
                "entry.content is reserved for the content hash", field="entry.content"
            )
        given_id = obj.pop("id", None)
        if "parent" in obj:
            parent = obj["parent"]
            if parent is not None and (not isinstance(parent, str) or not self._has(parent)):
                raise exceptions.NoEntry(f"parent {parent!r} is not in the session")
        else:
            parent = self._leaf or None
            obj["parent"] = parent
        if self.base:
            self._check_base_rule(parent, "entry")
        parents = obj.get("parents")
        if parents is not None:
            if not isinstance(parents, list):
                raise exceptions.BadConvergence("entry.parents must be a list")
            refs = []
            for ref in parents:
                if not isinstance(ref, dict):
                    raise exceptions.BadConvergence("each parents ref must be an object")
                refs.append({k: v for k, v in ref.items() if not (k == "session" and v == "")})
            # Sorted by (session, entry), refs without a session first.
            refs.sort(
                key=lambda r: (
                    1 if r.get("session") else 0,
                    r.get("session", ""),
                    str(r.get("entry")),
                )
            )
            if refs:
                obj["parents"] = refs
            else:
                obj.pop("parents")
        self._check_parents(obj.get("parents"), parent, "entry")
        fresh = False
        if "ts" in obj and obj["ts"] not in (None, ""):
            check_ts(obj["ts"])
        elif self.clock:
            obj["ts"] = check_ts(self.clock())
        else:
            # format_ts writes the one spelling; re-checking it (a regex and a
            # strptime) cost a tenth of an append.
            obj["ts"] = _now_ts()
            fresh = True
        # One walk decides whether normalising could change anything and
        # whether the three encodings below may skip their own (the common
        # case: no floats, no big integers, no lone surrogates).
        plain = canonical.plain(obj)
        if not plain:
            body = {k: v for k, v in obj.items() if k not in ENVELOPE}
            fixed, records = canonical.normalise(body)
            if records:
                previous = body.get("normalised")
                merged = (list(previous) if isinstance(previous, list) else []) + records
                merged.sort(key=lambda r: str(r.get("at", "")) if isinstance(r, dict) else "")
                fixed["normalised"] = merged
                obj = {**{k: v for k, v in obj.items() if k in ENVELOPE}, **fixed}
        self._check_body(obj)
        new_id = entry_id(obj, plain=plain)
        if given_id is not None and given_id != new_id:
            raise exceptions.BadID(f"entry id {given_id} does not match its content ({new_id})")
        held = self._held(new_id, fresh=fresh)
        if held is not None:
            return PendingAppend(
                entry=held,
                outcome=Outcome.HELD,
                leaf=self._leaf,
                seq=self.seq_of(new_id),
                base_len=len(self),
            )
        self._check_calls(obj, parent)
        obj["id"] = new_id
        line = canonical.dumps(obj, plain=plain).decode("utf-8")
        # A private decoded copy of exactly what the line says (our own
        # canonical output, so the plain decoder is enough).
        new_entry = Entry.from_object(canonical.loads_own(line), line)
        if new_entry.is_leaf_label:
            target = obj.get("target")
            if self._leaf_target_allowed(target):
                outcome, leaf = Outcome.LEAF_MOVED, str(target)
            else:
                outcome, leaf = Outcome.LEAF_NOT_MOVED, self._leaf
        elif parent == (self._leaf or None):
            outcome, leaf = Outcome.CONTINUED, new_id
        else:
            outcome, leaf = Outcome.BRANCHED, self._leaf
        length = len(self)
        return _new_pending(new_entry, outcome, leaf, length + 1, length)

    def commit(self, pending: PendingAppend) -> AppendResult:
        """Apply a :class:`PendingAppend` made by :meth:`prepare` on this session."""
        if pending.outcome is not Outcome.HELD:
            if pending.base_len != len(self) or self._has(pending.entry.id):
                raise exceptions.ConcurrentWriter(
                    "the session changed between prepare and commit; prepare again"
                )
            self._add(pending.entry)
            self._leaf = pending.leaf
        entry = pending.entry
        return _new_result(entry.id, entry.line, pending.outcome, entry, self._leaf, pending.seq)

    def append(self, entry: dict[str, Any]) -> AppendResult:
        """Validate, hash and add ``entry``; return the id, exact line and outcome."""
        return self.commit(self.prepare(entry))

    def truncate(self, length: int, leaf: str) -> None:
        """Forget the entries after the first ``length`` and put the leaf back on ``leaf``.

        The undo of :meth:`commit` for a store that applies several appends in
        memory (each one's parent may be the previous one's id) before its one
        transaction commits: if that transaction fails, the session returns to
        exactly what it was. Only entries committed since ``length`` may go.
        """
        if isinstance(length, bool) or not 0 <= length <= len(self._entries):
            raise exceptions.ValidationError("length is out of range", field="length")
        if leaf and leaf not in self._index:
            raise exceptions.NoEntry(f"no such entry: {leaf}")
        for e in reversed(self._entries[length:]):
            del self._index[e.id]
            siblings = self._children.get(e.parent)
            if siblings is not None:
                siblings.remove(e.id)
                if not siblings:
                    del self._children[e.parent]
            item = e.data.get("item") if e.type == "item" else None
            if isinstance(item, dict) and item.get("type") == "function_call":
                # A committed call id was new (CallIDRepeated otherwise).
                self._call_ids.discard(str(item.get("call_id")))
        del self._entries[length:]
        if leaf and leaf not in self._index:
            raise exceptions.NoEntry(f"no such entry: {leaf}")
        self._leaf = leaf

    def extend_line(self, line: str, *, live: bool = False) -> Entry:
        """Add one stored line; return its entry (the held one for a repeated line).

        The line is verified like :meth:`from_lines` does. By default the leaf is
        then recomputed by the resume (read) rule, as if the session had been
        read with the line in it. With ``live=True`` the live rule of
        :meth:`commit` applies instead: a line hung from the leaf becomes the
        leaf, a leaf label moves it to an allowed target, and a line hung
        anywhere else (a side branch) leaves it where it was — what a follower
        tailing a writer wants, since the writer's own leaf did not move either.
        """
        obj = canonical.parse(line.rstrip("\r\n"))
        if not isinstance(obj, dict):
            raise exceptions.ValidationError("an entry must be a JSON object", field="line")
        before, leaf = len(self._entries), self._leaf
        self._load_more([(obj, line.rstrip("\r\n"))], resume=not live)
        if len(self._entries) == before:
            held = self.entry(str(obj.get("id")))
            assert held is not None
            if live:
                self._leaf = leaf
            return held
        added = self._entries[-1]
        if live:
            if added.is_leaf_label:
                target = added.data.get("target")
                self._leaf = str(target) if self._leaf_target_allowed(target) else leaf
            elif added.parent == (leaf or None):
                self._leaf = added.id
            else:
                self._leaf = leaf
        return added

    def _load_more(self, objects: list[tuple[dict[str, Any], str]], *, resume: bool = True) -> None:
        # _load keeps prefix bookkeeping only while the base is not yet held,
        # so continuing a load is the same loop.
        base = self.base
        if base and base not in self._index:
            raise exceptions.BaseRule(f"base {base} is not in the session")
        for obj, line in objects:
            given = obj.get("id")
            if not isinstance(given, str) or not given:
                raise exceptions.BadID("entry has no id")
            _check_reserved(obj, "line")
            check_ts(obj.get("ts"))
            if entry_id(obj) != given:
                raise exceptions.BadID(f"id {given} does not match its content")
            if given in self._index:
                continue
            parent = obj.get("parent")
            if parent is not None and parent not in self._index:
                raise exceptions.NoEntry(f"parent {parent} is not in the session")
            self._check_parents(obj.get("parents"), parent, "entry")
            if base:
                self._check_base_rule(parent, "entry")
            self._add(Entry.from_object(obj, line))
        if resume:
            # A pass over the whole session: the live rule (extend_line's
            # caller) sets the leaf from the one line instead.
            self._leaf = self.resume_leaf()

    # -- forks ----------------------------------------------------------------

    @classmethod
    def fork(cls, origin: Session, header: dict[str, Any], **fill: Any) -> Session:
        """A new session continuing ``origin`` from ``header["base"]``.

        The fork opens with the prefix (the origin's path to the base, lines
        copied exactly) and its leaf is the base. Refused: an unknown base
        (``NoEntry``), a base that is a leaf label, a prefix converging an
        origin entry off the path (``BadConvergence``), a ``media`` that differs
        from the origin's. The fork inherits ``payload`` and ``media``;
        ``parent_session`` defaults to the origin.
        """
        base = header.get("base")
        if not isinstance(base, str) or not base:
            raise exceptions.ValidationError(
                "header.base is required for a fork", field="header.base"
            )
        held = origin.entry(base)
        if held is None:
            raise exceptions.NoEntry(f"base {base} is not in session {origin.id}")
        if held.is_leaf_label:
            raise exceptions.ValidationError(
                "header.base must not be a leaf label", field="header.base"
            )
        origin_media = origin.header.get("media") or "inline"
        media = header.get("media") or origin_media
        if media != origin_media:
            raise exceptions.ValidationError(
                f"header.media {media!r} differs from the origin's {origin_media!r}",
                field="header.media",
            )
        prefix = origin.path(base)
        on_path = {e.id for e in prefix}
        lost = set(origin.unresolved) if origin.migrated else set()
        for e in prefix:
            if e.legacy_id and e.legacy_id in lost:
                raise exceptions.UnresolvedMigration(
                    f"prefix entry {e.id} (was {e.legacy_id}) could not be migrated"
                )
            for ref in e.parents:
                session = ref.get("session", "")
                if (not session or session == origin.id) and ref.get("entry") not in on_path:
                    raise exceptions.BadConvergence(
                        f"prefix entry {e.id} converges {ref.get('entry')}, which is off the path"
                    )
        out = dict(header)
        out["payload"] = origin.header["payload"]
        if "media" in origin.header:
            out["media"] = origin.header["media"]
        out.setdefault("parent_session", origin.id)
        if not out.get("parent_session"):
            out["parent_session"] = origin.id
        session = cls(fill_header(out, **fill))
        for e in prefix:
            session._add(e)
        session._prefix = set(on_path)
        session._leaf = base
        return session

    # -- context and verification ---------------------------------------------

    def context_at(self, entry_id: str) -> Context:
        """The context a model call appended after ``entry_id`` would receive."""
        return context_at(self, entry_id)

    def context(self) -> Context:
        """The context at the current leaf (empty without a leaf)."""
        return self.context_at(self._leaf)

    def verify(self) -> None:
        """Re-check every id and every recorded request hash.

        Raises ``BadID`` for an entry whose id does not match its line, and
        ``HashMismatch`` for a ``response`` whose ``request_hash`` the rebuilt
        request does not match. A response that recorded no hash is skipped,
        as the reference does (:func:`.context.verify_response` on that one
        entry raises ``NoHash``).
        """
        for e in self._entries:
            obj = canonical.parse(e.line)
            if entry_id(obj) != e.id:
                raise exceptions.BadID(f"entry {e.id} does not match its line")
        for e in self._entries:
            if e.type == "response" and e.data.get("request_hash"):
                verify_response(self, e.id)

    def check_writable(self) -> None:
        """``UnresolvedMigration`` when the session must not be written as a current file.

        That is a migrated pre-0.5 session holding an entry whose references the
        migration could not rewrite (:attr:`unresolved`, see :mod:`.legacy`).
        """
        if self.migrated and self.unresolved:
            raise exceptions.UnresolvedMigration(
                f"migrated session {self.id} holds {len(self.unresolved)} entries the "
                f"migration could not rewrite ({', '.join(self.unresolved[:5])})"
            )

    def check_records(self, entry_id: str = "") -> list[str]:
        """Report, never raise, record-keeping problems on the path to ``entry_id``.

        A reader accepts these files; tools (``verify``-style commands) show the
        problems. Checked: with ``dispatch`` in the header's ``records``, every
        ``function_call_output`` needs a ``dispatch`` of its call earlier on the
        path (or a ``reject``/``answer`` decision, whose output the harness
        writes itself); a ``run`` started with ``source: resume`` that writes items but
        takes up none of the calls the previous run left ``pending`` (no
        decision, dispatch or output for them) leaves them hanging.
        Defaults to the leaf.
        """
        problems: list[str] = []
        path = self.path(entry_id or self._leaf) if (entry_id or self._leaf) else []
        records = self.header.get("records")
        check_dispatch = isinstance(records, list) and "dispatch" in records
        dispatched: set[str] = set()
        pending: list[str] = []
        resume: dict[str, Any] | None = None
        for e in path:
            data = e.data
            call_id = data.get("call_id")
            if isinstance(call_id, str) and (
                e.type == "dispatch"
                or (e.type == "decision" and data.get("verdict") in ("reject", "answer"))
            ):
                # A rejected or answered call gets an output the harness wrote
                # itself: it never ran, so it has no dispatch to record.
                dispatched.add(call_id)
            item = data.get("item") if e.type == "item" else None
            if isinstance(item, dict) and item.get("type") == "function_call_output":
                out_call = item.get("call_id")
                if check_dispatch and out_call not in dispatched:
                    problems.append(
                        f"entry {e.id}: output for call {out_call} with no dispatch recorded"
                    )
                if resume is not None and out_call in pending:
                    resume["took"] = True
            if e.type in ("decision", "dispatch") and resume is not None and call_id in pending:
                resume["took"] = True
            if e.type == "item" and resume is not None:
                resume["items"] = True
            if e.type != "run":
                continue
            if data.get("phase") == "start":
                resume = (
                    {"entry": e.id, "took": False, "items": False}
                    if data.get("source") == "resume" and pending
                    else None
                )
            elif data.get("phase") == "end":
                if resume is not None and resume["items"] and not resume["took"]:
                    problems.append(
                        f"run {resume['entry']}: resumed, wrote items and took up none of "
                        f"the pending calls {', '.join(pending)}"
                    )
                resume = None
                left = data.get("pending")
                pending = [c for c in left if isinstance(c, str)] if isinstance(left, list) else []
        return problems

    def raise_format(self) -> bool:
        """Raise the header's format to the current one; True if it changed.

        Writers raise a 0.5+ header's minor before appending; the store does it
        inside the first append's transaction.
        """
        if self.header.get("format") == CURRENT_FORMAT:
            return False
        _major, minor = format_version(self.header["format"])
        if minor >= int(CURRENT_FORMAT.rsplit(".", 1)[1]):
            return False
        self.header = {**self.header, "format": CURRENT_FORMAT}
        self.header_line = canonical.dumps(self.header).decode("utf-8")
        return True
