"""Appending: the rules every writer obeys, checked before anything changes.

Appending is two steps so that a store can write first and change memory only
after its transaction committed: :meth:`~Session.prepare` validates and
computes the id and the exact line without touching the session, and
:meth:`~Session.commit` applies the result. :meth:`~Session.append` does both.
A refused append raises and leaves the session unchanged.

:class:`SessionAppends` adds them to the leaf rules (:class:`.leaf.SessionLeaf`).
What :meth:`~SessionAppends.prepare` checks, in order: the entry is an object
with a ``type`` (not ``session``, not carrying the reserved ``content``); its
``parent`` is in the session (default: the leaf); in a fork, nothing hangs above
the base and there is no second root; ``parents`` (convergence) name earlier
entries, sorted, never the parent; ``ts`` is valid (default: now); the body
obeys its type's rules (``_check_body``: an item, a summary, a compaction's
``first_kept`` on the path, a label's target, a decision's verdict); a given
``id`` matches the computed one; and, for a new entry, the call rules
(``_check_calls``: a ``call_id`` never repeats; a ``dispatch``/``decision``
names a ``function_call`` on the path whose call is still open).

An entry the session already holds is not refused: it is ``HELD``, the same id,
and nothing is written.
"""

from __future__ import annotations

import time
from typing import Any

from agentstore import exceptions
from agentstore.formats.agentsession import canonical
from agentstore.formats.agentsession.entry import (
    ENVELOPE,
    Entry,
    check_ts,
    entry_id,
)
from agentstore.formats.agentsession.leaf import SessionLeaf
from agentstore.formats.agentsession.results import (
    AppendResult,
    Outcome,
    PendingAppend,
    new_pending,
    new_result,
)

__all__ = ["VERDICTS", "SessionAppends"]

#: Verdicts a ``decision`` entry may carry.
VERDICTS = frozenset({"proceed", "reject", "hold", "answer"})

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


class SessionAppends(SessionLeaf):
    """The append rules and the two-step append of a session (see the module docstring)."""

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
                if not self.has_entry(ref["entry"]):
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
            if target not in (None, "") and (
                not isinstance(target, str) or not self.has_entry(target)
            ):
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
                if self.call_id_used(call_id):
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
            if parent is not None and (not isinstance(parent, str) or not self.has_entry(parent)):
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
        held = self.held_entry(new_id, fresh=fresh)
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
        return new_pending(new_entry, outcome, leaf, length + 1, length)

    def commit(self, pending: PendingAppend) -> AppendResult:
        """Apply a :class:`PendingAppend` made by :meth:`prepare` on this session."""
        if pending.outcome is not Outcome.HELD:
            if pending.base_len != len(self) or self.has_entry(pending.entry.id):
                raise exceptions.ConcurrentWriter(
                    "the session changed between prepare and commit; prepare again"
                )
            self.add_entry(pending.entry)
            self._leaf = pending.leaf
        entry = pending.entry
        return new_result(entry.id, entry.line, pending.outcome, entry, self._leaf, pending.seq)

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
