"""The context hash: the prefix-cache key of RFC 0002 ("Prefix caching").

An entry id is the wrong key for a provider's cached prefix: it covers ``ts``
(two sessions that sent the same prompt a second apart differ) and record
entries (a ``dispatch`` on the path changes the id, not the request). The
*context hash* is defined over the path ending at an entry, by type:

* ``item``, ``config``, ``compaction`` and ``branch_summary`` *contribute*;
  a ``response``, a record entry and an extension entry do not.
* Before any contributing entry the hash is ``sha256:`` of the canonical bytes
  of JSON ``null`` (:data:`EMPTY`); a non-contributing entry has its parent's.
* A contributing entry's hash is ``sha256:`` of the canonical bytes of
  ``[parent's context hash, type, content hash]``, where the content hash is
  taken over the entry's content (every member outside the envelope) *minus*
  provenance no model sees: ``legacy_id`` and ``normalised`` always; on an
  ``item`` also ``response``, ``source`` and ``queued_from``; on a
  ``branch_summary`` ``from``. A ``compaction``'s ``first_kept`` is replaced by
  ``[context hash at that entry, its type]`` when the entry is on the path
  before it, else ``null`` — the type because a record entry shares its
  parent's hash while keeping from it keeps different items.

So the key excludes ``ts`` and ``parents``, is incremental, and two paths whose
context entries say the same thing share it. The **fork rule** follows: a fork
copies its origin's path to the base, so every prefix entry — the base included
— has the same context hash in the fork as in the origin, and sibling forks
share it up to the base; after it they agree exactly as long as they append the
same context (whatever their ``ts``). ``request_hash`` is the hash of what was
sent; after a compaction the two part (the context hash still covers what the
fold replaced).
"""

from __future__ import annotations

from typing import Any

from agentstore import exceptions
from agentstore.formats.agentsession import canonical
from agentstore.formats.agentsession.context import PathSource
from agentstore.formats.agentsession.entry import Entry, content_of

__all__ = ["CONTRIBUTING", "EMPTY", "context_hash", "context_hashes"]

#: The entry types that contribute to a context.
CONTRIBUTING = frozenset({"item", "config", "compaction", "branch_summary"})
#: The context hash before any contributing entry: ``sha256:`` of ``null``.
EMPTY = canonical.hash_value(None)

# Provenance a provider or harness minted per run; none reaches the model.
_ALWAYS = ("legacy_id", "normalised")
_BY_TYPE: dict[str, tuple[str, ...]] = {
    "item": ("response", "source", "queued_from"),
    "branch_summary": ("from",),
}


def _keyed_content(e: Entry, seen: dict[str, tuple[str, str]]) -> dict[str, Any]:
    content = content_of(e.data)
    for member in _ALWAYS + _BY_TYPE.get(e.type, ()):
        content.pop(member, None)
    if e.type == "compaction":
        named = e.data.get("first_kept")
        kept = seen.get(named) if isinstance(named, str) else None
        content["first_kept"] = list(kept) if kept is not None else None
    return content


def context_hashes(path: list[Entry]) -> list[str]:
    """The context hash at each entry of a root-first ``path``, in path order."""
    out: list[str] = []
    current = EMPTY
    # id -> (context hash, type) of the entries walked so far: what a
    # compaction's first_kept may name.
    seen: dict[str, tuple[str, str]] = {}
    for e in path:
        if e.type in CONTRIBUTING:
            body = canonical.hash_value(_keyed_content(e, seen))
            current = canonical.hash_value([current, e.type, body])
        seen[e.id] = (current, e.type)
        out.append(current)
    return out


def context_hash(session: PathSource, entry_id: str) -> str:
    """The context hash at ``entry_id`` (:data:`EMPTY` for ``""``); ``NoEntry`` if unknown."""
    if not entry_id:
        return EMPTY
    path = session.path(entry_id)
    if not path:
        raise exceptions.NoEntry(f"no such entry: {entry_id}")
    return context_hashes(path)[-1]
