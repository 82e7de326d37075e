"""What an append and the resume rule produce: outcomes, pending appends, results, states.

Small frozen values, built on every append, so they are made by positional
builders (:mod:`agentstore.types.frozen`, decision record 0035) — the same objects the
classes' own constructors make, at a third of the cost; each builder's field
order is pinned by ``require_fields`` and fails at import if a field is added:

* :class:`Outcome` — what an append did to the tree and the leaf;
* :class:`PendingAppend` — a validated append not yet applied
  (``Session.prepare``), built by :data:`new_pending`;
* :class:`AppendResult` — an applied append (``Session.commit``), built by
  :data:`new_result`;
* :class:`ResumeState` — what the resume rule needs to place the leaf after one
  more line (``Session.advance_resume``), built by :data:`new_state`. A store
  keeps it beside the rows, so opening a session needs no replay.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from agentstore.formats.agentsession.entry import Entry
from agentstore.types.frozen import positional_builder, require_fields

__all__ = [
    "AppendResult",
    "Outcome",
    "PendingAppend",
    "ResumeState",
    "new_pending",
    "new_result",
    "new_state",
]


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
# at a third of the cost (agentstore.types.frozen, decision record 0035); field orders pinned.
require_fields(PendingAppend, ("entry", "outcome", "leaf", "seq", "base_len"))
require_fields(AppendResult, ("id", "line", "outcome", "entry", "leaf", "seq"))
require_fields(ResumeState, ("leaf", "mark", "mark_at", "newest"))
new_pending = positional_builder(PendingAppend)
new_result = positional_builder(AppendResult)
new_state = positional_builder(ResumeState)
