"""Value objects of the log store (agentsession sessions): refs, holds, follow changes, listings.

    from agentstore.types import ListFilter, RefTarget

    for summary in store.list(ListFilter(cwd="/repo", current=True, limit=20)):
        print(summary.id, summary.name, summary.size)
    store.update_ref("team/main", None, RefTarget(session=sid), reason="create")

They mirror the Go structs of ``agentsession`` field for field (snake_case) and
every field defaults to the Go zero value. ``None`` is the zero
:class:`RefTarget` wherever a target is passed or returned ("no ref"); a
``RefTarget`` whose ``session`` is empty means the same thing. Go's zero
``time.Time`` is ``None``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from agentstore.formats.agentsession import Entry, Session

__all__ = [
    "Change",
    "ListFilter",
    "LockInfo",
    "LogPage",
    "NamedRef",
    "RefLogEntry",
    "RefTarget",
    "Summary",
    "Tail",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class RefTarget:
    """What a ref names: a session, optionally pinned to one of its entries."""

    session: str = ""
    entry: str = ""

    @property
    def is_zero(self) -> bool:
        """True for the zero target (no session): "the ref does not exist"."""
        return not self.session


@dataclass(frozen=True, slots=True, kw_only=True)
class NamedRef:
    """One row of ``LogStore.list_refs``: a ref's name, its target and when it last moved."""

    name: str = ""
    target: RefTarget = RefTarget()
    updated_at: datetime | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class RefLogEntry:
    """One successful ref update (``old``/``new`` are ``None`` for "absent")."""

    name: str = ""
    old: RefTarget | None = None
    new: RefTarget | None = None
    time: datetime | None = None
    reason: str = ""
    #: Where the row stands in the log (its id): the next older page is ``after=position``.
    position: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class LockInfo:
    """Who holds a session: the process (``pid`` on ``host``), since when, last append."""

    pid: int = 0
    host: str = ""
    since: datetime | None = None
    #: When the holder last appended (equal to ``since`` until it does).
    heartbeat: datetime | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LogPage:
    """One page of a log session (``LogStore.read_page``): its header, leaf and some entries.

    ``entries`` are the lines stored at positions ``seqs`` (ascending, the
    same length), after the ``after`` the page was asked for; ``more`` says
    whether later lines exist. ``header`` and ``leaf`` are the whole session's,
    read in the same snapshot as the entries.
    """

    id: str
    header: dict[str, Any]
    leaf: str
    entries: tuple[Entry, ...] = ()
    seqs: tuple[int, ...] = ()
    more: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Change:
    """One step of ``LogStore.follow``.

    ``kind`` is ``"snapshot"`` (the session as read), ``"appended"`` (``entry_id``
    and ``entry`` were added to ``session``), ``"head"`` (a recorded leaf label
    moved the leaf to ``leaf``) or ``"reset"`` (the log was replaced; ``session``
    is read afresh and may lack entries yielded before). ``session`` is the
    follower's own copy, extended in place: read it, never append to it.
    ``cursor`` resumes the follow after this change.
    """

    kind: str = ""
    cursor: str = ""
    session: Session | None = None
    entry_id: str = ""
    entry: Entry | None = None
    leaf: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ListFilter:
    """Which sessions ``LogStore.list`` yields (every zero field: no filter).

    ``after``/``before`` are exclusive bounds on the header's ``created_at``;
    ``limit`` applies after every other filter; ``current`` hides sessions
    continued elsewhere; ``harness`` matches ``header.harness.name``;
    ``top_level`` hides spawned subsessions (headers with ``spawned_by``);
    ``extra`` needs each named header member present and equal by canonical
    JSON value. ``with_names`` is accepted for the Go API: the database always
    fills names.
    """

    cwd: str = ""
    parent_session: str = ""
    after: datetime | None = None
    before: datetime | None = None
    limit: int = 0
    with_names: bool = False
    current: bool = False
    harness: str = ""
    top_level: bool = False
    extra: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Summary:
    """One listed session: its header, name, successor, JSONL size in bytes, last write."""

    header: dict[str, Any]
    name: str = ""
    superseded_by: str = ""
    path: str = ""
    size: int = 0
    modified: datetime | None = None

    @property
    def id(self) -> str:
        """The session id (``header["id"]``)."""
        return str(self.header.get("id", ""))


@dataclass(frozen=True, slots=True, kw_only=True)
class Tail:
    """The newest entries on a session's current branch (``LogStore.tail``).

    ``entries`` oldest first; ``leaf`` is the entry the next append hangs from
    ("" for none) — pass it as ``append_many(..., expected_leaf=leaf)`` to
    append only if nobody moved the session on since this read.
    """

    entries: list[Entry]
    leaf: str = ""
