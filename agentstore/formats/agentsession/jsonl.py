"""Whole-file JSONL reading and writing, and the pre-0.5 migration.

``loads(text)`` reads a session file: line 1 is the header, every later line an
entry. The lines are kept exactly as read, so ``dumps(loads(text)) == text`` for
any well-formed file of format 0.5 or later (a final newline is added when it
was missing; a truncated final line is dropped and kept in
``Session.truncated``, never written back).

Files of format 0.1–0.4 carry random short ids (``c0000001``) instead of hashes.
They are migrated *in memory* the way the format prescribes: each entry loses
its old ``id``, keeps it in ``legacy_id``, gets its ``ts`` re-spelt, has every
reference to an older entry (``parent``, ``parents[].entry``, ``first_kept``,
``target``, …) rewritten to that entry's new hash id, and is hashed anew. The
migrated session's header is raised to the current format, since every line it
now holds is a current-format line.
"""

from __future__ import annotations

from typing import Any

from agentstore import exceptions
from agentstore.formats.agentsession import canonical
from agentstore.formats.agentsession.entry import entry_id, format_ts
from agentstore.formats.agentsession.header import CURRENT_FORMAT
from agentstore.formats.agentsession.session import REFERENCE_MEMBERS, Session

__all__ = ["dumps", "loads", "migrate_legacy"]


def loads(text: str | bytes, *, tolerate_truncated: bool = True) -> Session:
    """Read a whole agentsession JSONL file into a :class:`Session`."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise exceptions.ValidationError("file is not valid UTF-8", field="file") from exc
    lines = text.split("\n")
    if not lines or not lines[0].strip():
        raise exceptions.ValidationError("file has no header line", field="header")
    return Session.from_lines(lines[0], lines[1:], tolerate_truncated=tolerate_truncated)


def dumps(session: Session) -> str:
    """The session as JSONL: the header line, then each entry's exact line."""
    return "".join(line + "\n" for line in [session.header_line, *session.lines])


def _rewrite(value: Any, ids: dict[str, str]) -> Any:
    return ids.get(value, value) if isinstance(value, str) else value


def migrate_legacy(
    header: dict[str, Any], objects: list[tuple[dict[str, Any], str]]
) -> tuple[dict[str, Any], str, list[tuple[dict[str, Any], str]]]:
    """Migrate pre-0.5 entry objects to hashed entries (see module docstring)."""
    ids: dict[str, str] = {}
    out: list[tuple[dict[str, Any], str]] = []
    for number, (obj, _line) in enumerate(objects, start=2):
        old = obj.get("id")
        if not isinstance(old, str) or not old:
            raise exceptions.BadID(f"line {number}: entry has no id")
        new: dict[str, Any] = {k: v for k, v in obj.items() if k != "id"}
        new["legacy_id"] = old
        parent = obj.get("parent")
        if parent is not None:
            if parent not in ids:
                raise exceptions.NoEntry(
                    f"line {number}: parent {parent} is not earlier in the file"
                )
            new["parent"] = ids[parent]
        else:
            new["parent"] = None
        if isinstance(obj.get("ts"), str):
            new["ts"] = format_ts(obj["ts"])
        parents = obj.get("parents")
        if isinstance(parents, list):
            refs = []
            for ref in parents:
                if isinstance(ref, dict):
                    ref = dict(ref)
                    if not ref.get("session"):
                        if ref.get("entry") not in ids:
                            raise exceptions.BadConvergence(
                                f"line {number}: parents names {ref.get('entry')}, "
                                "which is not earlier in the file"
                            )
                        ref["entry"] = ids[ref["entry"]]
                        ref.pop("session", None)
                refs.append(ref)
            refs.sort(
                key=lambda r: (
                    1 if r.get("session") else 0,
                    str(r.get("session", "")),
                    str(r.get("entry", "")),
                )
            )
            if refs:
                new["parents"] = refs
            else:
                new.pop("parents")
        for member in REFERENCE_MEMBERS:
            if member in new:
                new[member] = _rewrite(new[member], ids)
        new["id"] = entry_id(new)
        ids[old] = new["id"]
        out.append((new, canonical.dumps(new).decode("utf-8")))
    header = {**header, "format": CURRENT_FORMAT}
    return header, canonical.dumps(header).decode("utf-8"), out
