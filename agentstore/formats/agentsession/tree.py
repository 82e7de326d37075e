"""The tree of a session's entries: what it holds and the questions asked of it.

:class:`SessionTree` is the base of :class:`~agentstore.formats.agentsession.Session`
(which adds the leaf rules, the append rules and reading, in
:mod:`.leaf`, :mod:`.appending` and :mod:`.session`). It keeps, in memory:

* the header (a dict, preserved exactly) and its exact line;
* the entries in file order (``_entries``), each with the exact line it was
  read or written as, and an index from id to position (``_index``);
* the children of each entry (``_children``; ``None`` keys the roots), the
  ``call_id`` of every ``function_call`` item (``_call_ids``, which must not
  repeat) and, in a fork, the ids of the copied prefix (``_prefix``);
* the leaf (``_leaf``): the entry the next append hangs from.

Every entry goes in through one method, :meth:`~SessionTree.add_entry`,
whatever brought it (reading, an append's commit, a fork's prefix); the rules
decide *whether* it may, never here.

The rules ask the tree only through its answers — :meth:`~SessionTree.entry`,
:meth:`~SessionTree.seq_of`, :meth:`~SessionTree.path`,
:meth:`~SessionTree.is_prefix`, ``len`` — and three questions that are
extension points and nothing else: :meth:`~SessionTree.has_entry`,
:meth:`~SessionTree.call_id_used` and :meth:`~SessionTree.held_entry`. A
subclass that answers them without holding every entry obeys the same rules:
:class:`agentstore.stores.log_open.StoredSession`, a store's session opened from
its head row, looks each one up in the database. Each hook's docstring says when
it is called and what an override must keep true.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any, Self

from agentstore.formats.agentsession import canonical
from agentstore.formats.agentsession.entry import Entry
from agentstore.formats.agentsession.header import validate_header

__all__ = ["SessionTree"]


class SessionTree:
    """A session's header and entry tree (see the module docstring); built by ``Session``."""

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
        return isinstance(entry_id, str) and self.has_entry(entry_id)

    # -- extension points: how the rules ask the tree ---------------------------
    #
    # The rules ask through these hooks and entry, seq_of, is_prefix, path and
    # len — never through the structures — so a subclass can answer them
    # without holding every entry (agentstore.stores.log_open.StoredSession
    # looks its lines up in the database). add_entry is the one way in.

    def has_entry(self, entry_id: str) -> bool:
        """Whether the session holds an entry with id ``entry_id``.

        The rules' one membership test: ``entry_id in session``, an append's
        ``parent``, its ``parents`` refs, a label's target, :meth:`branch
        <agentstore.formats.agentsession.Session.branch>` and ``commit``'s
        check that the entry was not added since ``prepare`` all call it. An
        override must answer ``True`` for every entry the session holds — those
        it was built with and every one added since through :meth:`add_entry`
        — and ``False`` for any other id, without changing the session.
        """
        return entry_id in self._index

    def call_id_used(self, call_id: str) -> bool:
        """Whether a ``function_call`` item of the session already has ``call_id``.

        Called by ``prepare`` for each new ``function_call`` item, in every
        branch (a call id never repeats in a session: ``CallIDRepeated``). An
        override must count every entry the session holds, those added
        through :meth:`add_entry` included, without changing the session.
        """
        return call_id in self._call_ids

    def held_entry(self, entry_id: str, *, fresh: bool) -> Entry | None:
        """The entry ``prepare`` is about to add, if the session already holds it; else ``None``.

        Called once by each ``prepare``, once the new entry's id is computed;
        a held entry makes the append a no-op (``HELD``, the same id).
        ``fresh``: the entry's ``ts`` is the system clock's reading of this
        very ``prepare`` (nanoseconds), which no held entry can share. An
        override must return the held entry, and may return ``None`` without
        looking when ``fresh`` and looking is costly — provided
        :meth:`has_entry` then answers ``False`` for that id too until it is
        added (``commit`` asks it), and whatever stores the lines refuses a
        duplicate.
        """
        return self.entry(entry_id)

    def add_entry(self, entry: Entry) -> None:
        """Put ``entry`` in the tree after the last entry; no rule is checked here.

        Called once for every entry the session takes in: by reading
        (``from_lines``, ``extend_line``), by ``commit`` (after ``prepare``
        checked the rules) and by ``fork`` (the copied prefix). An extension
        point, not a way to append: call ``append`` or ``prepare``/``commit``,
        which check the rules first. An override must keep the tree's answers
        (:meth:`has_entry`, :meth:`entry`, :meth:`seq_of`, :meth:`call_id_used`,
        ``len``) in step with the entry added; this method, called on
        ``super()``, does it for the in-memory structures.
        """
        self._index[entry.id] = len(self._entries)
        self._entries.append(entry)
        self._children.setdefault(entry.parent, []).append(entry.id)
        if entry.type == "item":
            item = entry.data.get("item")
            if isinstance(item, dict) and item.get("type") == "function_call":
                call_id = item.get("call_id")
                if isinstance(call_id, str) and call_id:
                    self._call_ids.add(call_id)

    # -- the tree's answers ---------------------------------------------------

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

    def copy(self) -> Self:
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
