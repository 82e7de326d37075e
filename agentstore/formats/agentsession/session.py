"""The ``Session`` value: an agentsession tree, its leaf, and the append rules.

A :class:`Session` holds a header (a dict, preserved exactly) and its entries in
file order, each with the exact line it was read or written as. It answers tree
questions (:meth:`~Session.path`, :meth:`~Session.children`,
:meth:`~Session.roots`) and enforces every rule a writer must obey when it
appends — the same rules whichever store keeps the lines.

The class is assembled from modules named for what they hold, each building on
the one before (``Session``'s MRO: session → appending → leaf → tree):

* :mod:`.tree` — ``SessionTree``: the header, the entries and their indexes,
  the tree's answers (``entry``, ``path``, ``children``, ``labels``, ``name``…);
* :mod:`.leaf` — ``SessionLeaf``: the live and the resume rule of the leaf,
  ``branch``/``reset_leaf``/``mark_leaf``;
* :mod:`.appending` — ``SessionAppends``: the append rules and the two-step
  append (``prepare``/``commit``, ``truncate`` to undo);
* this module — ``Session``: building one (``new``, ``from_lines``,
  ``extend_line``, ``fork``), the context at an entry, verification
  (``verify``, ``check_records``) and raising the header's format.

:mod:`.results` holds the values they return (``Outcome``, ``PendingAppend``,
``AppendResult``, ``ResumeState``), importable from here as before.

Reading is as strict as appending: every line's id is recomputed from its own
members, a parent must come earlier, and a fork obeys the base rule; only a
cut final line is tolerated (kept in :attr:`Session.truncated`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agentstore import exceptions
from agentstore.formats.agentsession import canonical
from agentstore.formats.agentsession.appending import SessionAppends
from agentstore.formats.agentsession.context import Context, context_at, verify_response
from agentstore.formats.agentsession.entry import Entry, check_ts, entry_id
from agentstore.formats.agentsession.header import (
    CURRENT_FORMAT,
    fill_header,
    format_version,
    validate_header,
)
from agentstore.formats.agentsession.legacy import migrate_legacy
from agentstore.formats.agentsession.results import (
    AppendResult,
    Outcome,
    PendingAppend,
    ResumeState,
)

__all__ = ["AppendResult", "Outcome", "PendingAppend", "ResumeState", "Session"]


def _check_reserved(obj: dict[str, Any], where: str) -> None:
    """Refuse a read line whose body carries ``content``, as an append does.

    The id hashes the *computed* content hash under that name, so a body member
    ``content`` would sit outside every hash: changing it would keep the id.
    """
    if "content" in obj:
        raise exceptions.ReservedMember(
            f"{where}: entry.content is reserved for the content hash", field=where
        )


class Session(SessionAppends):
    """An agentsession session: header, entries in file order, leaf.

    Build one with :meth:`new` (a fresh header), :meth:`from_lines` (a header
    line and entry lines, e.g. rebuilt from database rows), :func:`.jsonl.loads`
    (a whole file) or :meth:`fork`.
    """

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
            self.add_entry(entry)
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
            self.add_entry(Entry.from_object(obj, line))
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
            session.add_entry(e)
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
