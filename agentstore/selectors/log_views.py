"""Read helpers behind the admin's and the command line's views of log (agentsession) sessions.

    from agentstore.selectors.log_views import entry_views, log_context_view, response_checks

    views = entry_views(session_id, pks)        # {entry pk: Described}, one query per 500
    checks = response_checks(session, ids)      # {response id: "verified" | "mismatch" | …}
    view = log_context_view(session_id, "")     # what the model is sent at the leaf, and why

A log session's entries keep their exact JSON line (docs/log-store.md); what a
person reads is :func:`agentstore.formats.agentsession.describe.describe` of
that line. The *context* is the format's own (``Session.context_at``: the
normative algorithm of docs/agentsession-format.md "Context and the request
hash"), never a re-implementation, so the page shows exactly what a harness
would send — and each recorded ``request_hash`` is checked against it
(:func:`response_checks`). A framework that keeps its own message history in
extension entries (``describe.HISTORY_TYPES``: Pydantic AI's messages) sends the
history its memory object loads — those entries on the path, oldest first — so
the context lists their items too, part by part. Every entry is put into words
by the format's describer; an entry that carries several items (a Pydantic AI
message of several parts) is one line per item in the transcript and the
context, as the OpenAI Agents SDK's items are.

Everything here reads. The tree drawing itself (which rows, folding, paging) is
``selectors.admin_views``'s; these helpers only fill in the words of the rows
it chose, so their cost follows the number of rows drawn, not the session size
— except the context and the hash checks, which need the path and so read the
session once through ``LogStore.read``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.core.paginator import Page, Paginator
from django.db import DEFAULT_DB_ALIAS

from agentstore import exceptions
from agentstore.conf import agentstore_settings
from agentstore.formats.agentsession import Session as LogSession
from agentstore.formats.agentsession.context import request_context
from agentstore.formats.agentsession.describe import (
    HISTORY_TYPES,
    PYDANTIC_AI_MESSAGE,
    Described,
    describe,
    items_of,
)
from agentstore.models import Entry

__all__ = [
    "CHECKS_SHOWN",
    "LogContextLine",
    "LogContextView",
    "Verdict",
    "entry_views",
    "fork_base",
    "log_context_view",
    "log_labels",
    "log_transcript",
    "read_log",
    "response_checks",
]

#: Responses whose request hash one page checks (each check rebuilds a context).
CHECKS_SHOWN = 100
_CHUNK = 500


class Verdict:
    """What a response's recorded request hash says against the rebuilt request."""

    VERIFIED = "verified"
    MISMATCH = "mismatch"
    NOT_RECORDED = "not recorded"
    UNCHECKED = "not checked"
    BROKEN = "cannot rebuild"


def _decode(line: str) -> dict[str, Any]:
    try:
        value = json.loads(line or "{}")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def entry_views(
    session_id: str, pks: Iterable[int], *, using: str = DEFAULT_DB_ALIAS
) -> dict[int, Described]:
    """``describe`` of the given entry rows of one session, keyed by row pk."""
    wanted = sorted(set(pks))
    out: dict[int, Described] = {}
    for start in range(0, len(wanted), _CHUNK):
        rows = (
            Entry.objects.using(using)
            .filter(session_id=session_id, pk__in=wanted[start : start + _CHUNK])
            .values_list("pk", "line")
        )
        out.update((pk, describe(_decode(line))) for pk, line in rows)
    return out


def log_labels(session_id: str, *, using: str = DEFAULT_DB_ALIAS) -> dict[str, str]:
    """``{target entry id: label}`` of a log session: the last label per target wins.

    The format's ``Session.labels`` rule (a ``null`` label clears), read from
    the label rows alone (one query on the session's ``label`` entries).
    """
    out: dict[str, str] = {}
    rows = (
        Entry.objects.using(using)
        .filter(session_id=session_id, type="label")
        .order_by("seq")
        .values_list("line", flat=True)
    )
    for line in rows:
        data = _decode(line)
        target = data.get("target")
        if not isinstance(target, str):
            continue
        if data.get("label") is None:
            out.pop(target, None)
        else:
            out[target] = str(data["label"])
    return out


def fork_base(session_id: str, header: str, *, using: str = DEFAULT_DB_ALIAS) -> tuple[str, int]:
    """``(base entry id, its seq)`` of a fork (``("", 0)`` for a session that is not one).

    A fork's file starts with the origin's path copied up to its ``base``
    (docs/agentsession-format.md "Forks"), so the rows up to the base's
    ``seq`` came from the origin.
    """
    base = _decode(header).get("base")
    if not isinstance(base, str) or not base:
        return "", 0
    seq = (
        Entry.objects.using(using)
        .filter(session_id=session_id, entry_id=base)
        .values_list("seq", flat=True)
        .first()
    )
    return base, int(seq or 0)


def read_log(session_id: str, *, using: str = DEFAULT_DB_ALIAS) -> LogSession:
    """The session as the format reads it (``LogStore.read``: one snapshot, ids verified)."""
    from agentstore.stores.log import LogStore

    store = LogStore(using=using, read_only=True)
    try:
        return store.read(session_id)
    finally:
        store.close()


def response_checks(session: LogSession, response_ids: Iterable[str]) -> dict[str, str]:
    """Check the recorded ``request_hash`` of each response (at most :data:`CHECKS_SHOWN`).

    Each check rebuilds the request the response answered with the format's
    own ``request_context`` and compares hashes.
    """
    out: dict[str, str] = {}
    for index, entry_id in enumerate(response_ids):
        if index >= CHECKS_SHOWN:
            out[entry_id] = Verdict.UNCHECKED
            continue
        entry = session.entry(entry_id)
        if entry is None or entry.type != "response":
            continue
        recorded = entry.data.get("request_hash")
        if not recorded:
            out[entry_id] = Verdict.NOT_RECORDED
            continue
        try:
            rebuilt = request_context(session, entry_id).request_hash()
        except exceptions.AgentStoreError:
            out[entry_id] = Verdict.BROKEN
            continue
        out[entry_id] = Verdict.VERIFIED if rebuilt == recorded else Verdict.MISMATCH
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class LogContextLine:
    """One input item of the request and the entry it came from, with the reason."""

    index: int
    view: Described
    item: Any
    entry_id: str
    entry_seq: int
    reason: str


#: Why a history entry's items are in the context, by entry type.
_HISTORY_REASON = {
    PYDANTIC_AI_MESSAGE: "Pydantic AI message history (what MessageHistory.load() returns)",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class LogContextView:
    """The format's context at one entry, explained against its path."""

    entry_id: str
    entry_seq: int
    model: str
    instructions: str
    tools: tuple[str, ...]
    settings_json: str  # the other settings in force (reasoning, text, extra, omit)
    request_hash: str
    lines: tuple[LogContextLine, ...]
    left_out: tuple[tuple[int, str, Described, str], ...]  # (seq, entry id, words, why)
    path_length: int
    checks: dict[str, str]  # response id on the path → verdict


def log_context_view(
    session_id: str,
    entry_id: str = "",
    *,
    session: LogSession | None = None,
    using: str = DEFAULT_DB_ALIAS,
) -> LogContextView | None:
    """What a model call after ``entry_id`` (``""``: the leaf) is sent, and why.

    ``None`` for a session without entries; ``NoEntry`` for an unknown entry;
    ``TooLarge`` for a path longer than ``MAX_CONTEXT_BRANCH``.
    """
    session = session or read_log(session_id, using=using)
    entry_id = entry_id or session.leaf or (session.entries[-1].id if len(session) else "")
    if not entry_id:
        return None
    path = session.path(entry_id)
    bound = int(agentstore_settings.MAX_CONTEXT_BRANCH)
    if bound > 0 and len(path) > bound:
        # The same bound as the tree sessions' context view (docs/api.md "Bounded answers").
        raise exceptions.TooLarge(
            f"the path to entry {entry_id} is longer than MAX_CONTEXT_BRANCH={bound} "
            "entries: too long to explain here",
            limit=bound,
        )
    context = session.context_at(entry_id)
    positions = {e.id: i for i, e in enumerate(path)}
    compaction = max((i for i, e in enumerate(path) if e.type == "compaction"), default=-1)
    kept_from = -1
    if compaction >= 0:
        kept_from = positions.get(str(path[compaction].data.get("first_kept", "")), -1)
    lines: list[LogContextLine] = []
    for index, (item, source) in enumerate(zip(context.items, context.item_entries, strict=True)):
        position = positions.get(source, -1)
        entry = path[position] if position >= 0 else None
        if entry is not None and entry.type == "compaction":
            reason = (
                "summary of the compaction (replaces everything before it)"
                if index == 0 or lines[-1].entry_id != source
                else "pinned by the compaction"
            )
        elif compaction >= 0 and kept_from <= position < compaction:
            reason = "kept by the compaction (from its first kept entry)"
        elif entry is not None and entry.type == "branch_summary":
            reason = "branch summary"
        else:
            reason = "item on the path"
        lines.append(
            LogContextLine(
                index=index,
                view=describe({"type": "item", "item": item}),
                item=item,
                entry_id=source,
                entry_seq=session.seq_of(source),
                reason=reason,
            )
        )
    sent = set(context.item_entries)
    # A framework's own history (Pydantic AI's messages): what its memory
    # object's load() returns at this entry — its entries on the path, in order.
    for entry in path:
        if entry.type not in HISTORY_TYPES:
            continue
        sent.add(entry.id)
        message = entry.data.get("message")
        parts = message.get("parts") if isinstance(message, dict) else None
        raw = parts if isinstance(parts, list) else []
        for number, view in enumerate(items_of(describe(entry.data))):
            lines.append(
                LogContextLine(
                    index=len(lines),
                    view=view,
                    item=raw[number] if number < len(raw) else None,
                    entry_id=entry.id,
                    entry_seq=session.seq_of(entry.id),
                    reason=_HISTORY_REASON.get(entry.type, "message history"),
                )
            )
    omitted = {o["entry"]: o["reason"] for o in context.omitted}
    left_out: list[tuple[int, str, Described, str]] = []
    for position, entry in enumerate(path):
        if entry.id in sent:
            continue
        if entry.id in omitted:
            why = f"dropped by the config's omit rule ({omitted[entry.id]})"
        elif compaction >= 0 and position < compaction and not kept_from <= position:
            why = (
                "config folded into the compaction's checkpoint"
                if entry.type == "config"
                else "replaced by the compaction summary"
            )
        elif entry.type == "config":
            why = "settings (applied, not an input item)"
        elif entry.type == "response":
            why = "record of a model response (not sent)"
        else:
            why = f"{entry.type} entries send nothing to the model"
        left_out.append((session.seq_of(entry.id), entry.id, describe(entry.data), why))
    settings = context.settings
    others = {
        k: v
        for k, v in settings.items()
        if k not in ("model", "instructions", "instructions_parts", "tools")
    }
    responses = [e.id for e in path if e.type == "response"]
    return LogContextView(
        entry_id=entry_id,
        entry_seq=session.seq_of(entry_id),
        model=str(settings.get("model", "")),
        instructions=str(settings.get("instructions", "")),
        tools=tuple(
            str(t.get("name", "")) if isinstance(t, dict) else str(t)
            for t in settings.get("tools", [])
        ),
        settings_json=json.dumps(others, ensure_ascii=False, sort_keys=True, indent=1)
        if others
        else "",
        request_hash=context.request_hash(),
        lines=tuple(lines),
        left_out=tuple(left_out),
        path_length=len(path),
        checks=response_checks(session, responses[-CHECKS_SHOWN:]),
    )


#: The entry types the transcript shows.
_TRANSCRIBED = ("item", "compaction", "branch_summary", *sorted(HISTORY_TYPES))


@dataclass(frozen=True, slots=True, kw_only=True)
class TranscriptLine:
    """One item entry of a log session, in append order."""

    seq: int
    entry_id: str
    created_at: Any
    view: Described


def log_transcript(
    session_id: str, page: Any, per_page: int, *, using: str = DEFAULT_DB_ALIAS
) -> Page:  # type: ignore[type-arg]
    """One page of a log session's items (messages, calls, outputs, reasoning), by ``seq``.

    Items of every branch, in append order, like the tree store's transcript —
    the format's ``item`` entries, summaries, and a framework's history entries
    (Pydantic AI's messages, a line per part); the page's object list holds
    :class:`TranscriptLine` s (the page counts entries).
    """
    rows = (
        Entry.objects.using(using)
        .filter(session_id=session_id, type__in=_TRANSCRIBED)
        .order_by("seq")
        .values_list("seq", "entry_id", "created_at", "line")
    )
    result = Paginator(rows, per_page).get_page(page)
    # One line per item: an entry of several (a Pydantic AI message) is several lines.
    lines: list[Any] = [
        TranscriptLine(seq=seq, entry_id=eid, created_at=at, view=view)
        for seq, eid, at, line in result.object_list
        for view in items_of(describe(_decode(line)))
    ]
    result.object_list = lines
    return result
