"""The leaf: where the next append hangs, and where reading puts it.

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

:class:`SessionLeaf` adds these rules to the tree (:class:`.tree.SessionTree`).
The resume rule has two forms with one meaning: :meth:`~SessionLeaf.resume_leaf`
reads the whole tree; :meth:`~SessionLeaf.advance_resume` moves a
:class:`~.results.ResumeState` on by one line, which is how a store keeps the
leaf beside its rows without ever replaying them.
"""

from __future__ import annotations

from typing import Any

from agentstore import exceptions
from agentstore.formats.agentsession.entry import Entry
from agentstore.formats.agentsession.results import ResumeState, new_state
from agentstore.formats.agentsession.tree import SessionTree

__all__ = ["SessionLeaf"]


class SessionLeaf(SessionTree):
    """The leaf rules of a session (see the module docstring)."""

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
        return new_state(leaf, mark, mark_at, newest)

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
        if not self.has_entry(entry_id):
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
