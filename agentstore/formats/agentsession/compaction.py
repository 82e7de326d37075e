"""Building ``compaction`` and ``branch_summary`` entries from a session.

A compaction replaces everything before its ``first_kept`` entry with a
summary item, and carries the settings in force as its ``config`` checkpoint
(a reader starts from it; see :mod:`.context`). Getting both right by hand is
fiddly — the checkpoint must be the settings *at the point compacted*, and a
caller usually knows where it cut the request input as an item index, not as
an entry id — so these helpers build the entry from the session:

* :func:`compact` — keep from the entry ``first_kept``;
* :func:`compact_from` — keep from the item at index ``first`` of the context's
  ``items`` (entries that contribute no item do not shift the index);
* :func:`compact_keeping` — keep the last ``kept`` items;
* :func:`summarise_branch` — the ``branch_summary`` that carries context from an
  abandoned leaf to where the new branch continues.

Each returns a plain entry dict to append (``session.append(entry)`` or a
store's ``append``); nothing is written. The compaction hangs from the leaf, or
from ``at`` when given (the dict then carries ``"parent": at``). Set
``pinned``, ``tokens_before`` or ``usage`` on the dict before appending if they
apply.

:func:`checkpoint` is the settings a compaction carries: the context's settings,
except that instruction parts the path could not resolve (a part still named by
``hash`` alone) are left out, so the ``instructions`` string — the one the
request was built from — stands alone and a later hash resolves against what the
checkpoint holds. Tools, ``reasoning`` and ``text`` are written in their typed
shapes (:func:`.context.canonical_settings`).
"""

from __future__ import annotations

import copy
from typing import Any

from agentstore import exceptions
from agentstore.formats.agentsession.context import Context, canonical_settings
from agentstore.formats.agentsession.session import Session

__all__ = ["checkpoint", "compact", "compact_from", "compact_keeping", "summarise_branch"]


def checkpoint(settings: dict[str, Any]) -> dict[str, Any]:
    """The ``config`` checkpoint for ``settings`` (a copy; see the module docstring).

    Tools, ``reasoning`` and ``text`` take their typed shapes
    (:func:`.context.canonical_settings`), as the reference writes its typed
    settings, so the checkpoint replays to the request that was hashed.
    """
    out = canonical_settings(settings)
    parts = out.get("instructions_parts")
    if isinstance(parts, list) and any(isinstance(p, dict) and "hash" in p for p in parts):
        del out["instructions_parts"]
    return out


def _summary(summary: Any, what: str) -> dict[str, Any]:
    if not isinstance(summary, dict) or not isinstance(summary.get("type"), str):
        raise exceptions.ValidationError(
            f"{what} needs a summary item (a JSON object with a type)", field="summary"
        )
    return copy.deepcopy(summary)


def _at(session: Session, at: str | None) -> str:
    point = session.leaf if at is None else at
    if not point:
        raise exceptions.NoEntry("no leaf to compact")
    if point not in session:
        raise exceptions.NoEntry(f"no such entry: {point}")
    return point


def _entry(
    first_kept: str, summary: dict[str, Any], ctx: Context, at: str | None
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "type": "compaction",
        "first_kept": first_kept,
        "summary": summary,
        "config": checkpoint(ctx.settings),
    }
    if at is not None:
        entry["parent"] = at
    return entry


def compact(
    session: Session, first_kept: str, summary: Any, *, at: str | None = None
) -> dict[str, Any]:
    """The compaction at the leaf (or ``at``) keeping from the entry ``first_kept``.

    ``first_kept`` must be on the path to that point (``NoEntry``), the point
    included.
    """
    item = _summary(summary, "a compaction")
    point = _at(session, at)
    if first_kept not in {e.id for e in session.path(point)}:
        raise exceptions.NoEntry(f"first_kept {first_kept} is not on the path to {point}")
    return _entry(first_kept, item, session.context_at(point), at)


def compact_from(
    session: Session, first: int, summary: Any, *, at: str | None = None
) -> dict[str, Any]:
    """The compaction keeping ``context.items[first:]`` of the context at the leaf (or ``at``).

    ``first_kept`` is the entry that contributed item ``first``. That item must
    not be the summary or a pinned item of an earlier compaction
    (``ValidationError``): the format keeps *entries*, and what a compaction
    contributes is replaced, not kept, by the next one.
    """
    item = _summary(summary, "a compaction")
    point = _at(session, at)
    ctx = session.context_at(point)
    if isinstance(first, bool) or not 0 <= first < len(ctx.items):
        raise exceptions.ValidationError(
            f"first kept item {first} is outside a context of {len(ctx.items)} items",
            field="first",
        )
    return _from_index(session, ctx, first, item, at)


def compact_keeping(
    session: Session, kept: int, summary: Any, *, at: str | None = None
) -> dict[str, Any]:
    """The compaction keeping the last ``kept`` items (1 … ``len(items)``) of the context."""
    item = _summary(summary, "a compaction")
    point = _at(session, at)
    ctx = session.context_at(point)
    if isinstance(kept, bool) or not 1 <= kept <= len(ctx.items):
        raise exceptions.ValidationError(
            f"cannot keep {kept} items of a context of {len(ctx.items)}", field="kept"
        )
    return _from_index(session, ctx, len(ctx.items) - kept, item, at)


def _from_index(
    session: Session, ctx: Context, first: int, summary: dict[str, Any], at: str | None
) -> dict[str, Any]:
    owner = ctx.item_entries[first]
    held = session.entry(owner)
    if held is not None and held.type == "compaction":
        # The leading items of a compacted context are the last compaction's
        # summary and pinned items, all contributed by that compaction entry.
        what = "the summary" if first == 0 else "a pinned item"
        raise exceptions.ValidationError(
            f"item {first} is {what} of compaction {owner}, which a later compaction "
            "replaces rather than keeps",
            field="first",
        )
    return _entry(owner, summary, ctx, at)


def summarise_branch(session: Session, from_: str, summary: Any) -> dict[str, Any]:
    """The ``branch_summary`` carrying context from the abandoned leaf ``from_``.

    Move the leaf first (``session.branch(id)``), then append the result: it
    hangs from the new leaf. ``from_`` must be an entry of the session
    (``NoEntry``), and there must be a leaf to continue from.
    """
    item = _summary(summary, "a branch summary")
    if from_ not in session:
        raise exceptions.NoEntry(f"no such entry: {from_}")
    if not session.leaf:
        raise exceptions.NoEntry("no leaf to continue from")
    return {"type": "branch_summary", "from": from_, "summary": item}
