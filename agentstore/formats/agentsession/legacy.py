"""The in-memory migration of pre-0.5 files (formats 0.1–0.4) to hashed entries.

Files of format 0.1–0.4 carry random short ids (``c0000001``) instead of hashes.
A reader migrates them *in memory* the way the format prescribes, entry by
entry in file order:

* the old ``id`` moves to ``legacy_id`` and ``ts`` takes its one spelling;
* ``parent`` and every in-session ``parents[].entry`` take the hash id assigned
  to that entry earlier in the file (``NoEntry`` / ``BadConvergence`` when it
  is not earlier — the file is broken, not merely old);
* the members of a *known* entry type that name an entry (``first_kept`` of a
  compaction, ``from`` of a branch summary, ``queued_from`` of an item,
  ``target`` of a label, outcome, dispatch or decision) are rewritten the same
  way;
* the entry is hashed anew.

Some references cannot be rewritten, and the entry that carries one is
*unresolved*: an extension entry (``ns:type``), whose members are opaque, so
any of them may name an entry by its old id; a ``parents`` reference into
another session, whose entries this reader cannot map; a reference member
naming no earlier entry. The session still reads (its ids are the ones the
format assigns), but it must not be written back as a current file: that
would freeze an old id where a hash belongs. ``dumps``, ``LogStore.import_jsonl``
and ``Session.fork`` (for a prefix holding such an entry) refuse it with
``UnresolvedMigration``; ``Session.unresolved`` lists the old ids.

The migrated header is raised to the current format, since every line the
session now holds is a current-format line. This module imports only the
entry, header and canonical modules, so the session module can use it without
an import cycle.
"""

from __future__ import annotations

from typing import Any

from agentstore import exceptions
from agentstore.formats.agentsession import canonical
from agentstore.formats.agentsession.entry import entry_id, format_ts
from agentstore.formats.agentsession.header import CURRENT_FORMAT

__all__ = ["CORE_TYPES", "REFERENCE_MEMBERS", "Migration", "migrate_legacy"]

#: The entry types the format defines; any other (``ns:type``) is an extension.
CORE_TYPES = frozenset(
    {
        "item",
        "response",
        "config",
        "compaction",
        "branch_summary",
        "run",
        "dispatch",
        "decision",
        "queued",
        "label",
        "info",
        "env",
        "outcome",
        "link",
        "custom",
    }
)

#: Per known type, the top-level members that name another entry of the session.
REFERENCE_MEMBERS: dict[str, tuple[str, ...]] = {
    "item": ("queued_from",),
    "compaction": ("first_kept",),
    "branch_summary": ("from",),
    "label": ("target",),
    "outcome": ("target",),
    "dispatch": ("target",),
    "decision": ("target",),
}


class Migration:
    """The result of :func:`migrate_legacy`."""

    __slots__ = ("header", "header_line", "objects", "unresolved")

    def __init__(
        self,
        header: dict[str, Any],
        header_line: str,
        objects: list[tuple[dict[str, Any], str]],
        unresolved: list[str],
    ) -> None:
        self.header = header
        self.header_line = header_line
        #: ``(object, exact line)`` per entry, in file order.
        self.objects = objects
        #: The old ids of the entries the migration could not fully rewrite.
        self.unresolved = unresolved


def _sort_key(ref: dict[str, Any]) -> tuple[int, str, str]:
    return (1 if ref.get("session") else 0, str(ref.get("session", "")), str(ref.get("entry", "")))


def migrate_legacy(
    header: dict[str, Any],
    objects: list[tuple[dict[str, Any], str, int]],
) -> Migration:
    """Migrate pre-0.5 entry objects ``(object, line, line number)`` (see the module docstring)."""
    session_id = header.get("id")
    ids: dict[str, str] = {}
    out: list[tuple[dict[str, Any], str]] = []
    unresolved: list[str] = []
    for obj, _line, number in objects:
        old = obj.get("id")
        if not isinstance(old, str) or not old:
            raise exceptions.BadID(f"line {number}: entry has no id")
        new: dict[str, Any] = {k: v for k, v in obj.items() if k != "id"}
        new["legacy_id"] = old
        lost = False
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
                    if not ref.get("session") or ref.get("session") == session_id:
                        if ref.get("entry") not in ids:
                            raise exceptions.BadConvergence(
                                f"line {number}: parents names {ref.get('entry')}, "
                                "which is not earlier in the file"
                            )
                        ref["entry"] = ids[ref["entry"]]
                        if not ref.get("session"):
                            ref.pop("session", None)
                    else:
                        # Another session's entry, named by an id this reader
                        # cannot map to that session's migrated hash.
                        lost = True
                refs.append(ref)
            refs.sort(key=_sort_key)
            if refs:
                new["parents"] = refs
            else:
                new.pop("parents")
        etype = obj.get("type")
        if etype in CORE_TYPES:
            for member in REFERENCE_MEMBERS.get(str(etype), ()):
                value = new.get(member)
                if isinstance(value, str) and value:
                    if value in ids:
                        new[member] = ids[value]
                    else:
                        lost = True
        else:
            # An extension's members are opaque: any may name an entry.
            lost = True
        if lost:
            unresolved.append(old)
        new["id"] = entry_id(new)
        ids[old] = new["id"]
        out.append((new, canonical.dumps(new).decode("utf-8")))
    header = {**header, "format": CURRENT_FORMAT}
    return Migration(header, canonical.dumps(header).decode("utf-8"), out, unresolved)
