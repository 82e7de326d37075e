"""Session subcommands: ``ls``, ``show``, ``rm``, ``grants``, ``revoke``, ``follow``.

    manage.py agentstore ls --cwd /repo --json
    manage.py agentstore show SESSION --leaf ENTRY
    manage.py agentstore rm SESSION...
    manage.py agentstore follow SESSION

Sessions of every kind are listed together; what ``show``, ``rm`` and
``follow`` do depends on the kind (tree, loop or log), and is always done by
that kind's store.
"""

from __future__ import annotations

import json
import time
from typing import Any

from django.core.management.base import CommandError

from agentstore import exceptions
from agentstore.cli import Context, Subcommand, fail, short_id, stamp, table, truncate, usage
from agentstore.formats.agentsession.describe import Described, describe
from agentstore.models import Entry, Holder, Session
from agentstore.selectors.sessions import with_opening_message
from agentstore.selectors.short_ids import resolve

__all__ = ["COMMANDS", "delete_session", "entry_summary"]


def _limit(parser: Any, default: int = 20) -> None:
    parser.add_argument(
        "--limit", type=int, default=default, help="at most N rows, 0 = all (default: %(default)r)"
    )


def _json_flag(parser: Any) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON on stdout")


def session_id_of(text: str) -> str:
    """The full id of the session ``text`` names: the id, or a unique short id of it.

    Short ids are what every listing prints (``agentstore.ids.short_id``);
    an ambiguous one fails naming the candidates.
    """
    try:
        found = resolve(Session.objects.all(), "id", text, what="session")
    except exceptions.ValidationError as exc:
        raise fail(str(exc)) from None
    if found is None:
        raise fail(f"no such session: {text}")
    return found


def session_id_or_text(text: str) -> str:
    """Like :func:`session_id_of`, but ``text`` itself when it names no session.

    Grants outlive their session row (the loop store keys them by id), so
    ``grants`` and ``revoke`` still work on an id with no session.
    """
    try:
        return session_id_of(text)
    except CommandError:
        return text


def get_session(session_id: str) -> Session:
    full = session_id_of(session_id)
    session = Session.objects.select_related("owner").filter(pk=full).first()
    if session is None:
        raise fail(f"no such session: {session_id}")
    return session


def session_facts(session: Session) -> dict[str, Any]:
    return {
        "id": session.id,
        "kind": session.kind,
        "name": session.name,
        "cwd": session.cwd,
        "owner": session.owner.get_username() if session.owner else None,
        "parent_session": session.parent_session,
        "created_at": session.created_at,
        "updated_at": session.updated_at,
        "superseded_by": session.superseded_by,
        # A loop session's model and finalize totals (zero values for other kinds).
        **(
            {
                "model": session.model,
                "status": session.status,
                "prompt_tokens": session.prompt_tokens,
                "completion_tokens": session.completion_tokens,
                "step_count": session.step_count,
                "duration_ms": session.duration_ms,
            }
            if session.kind == "loop"
            else {}
        ),
    }


def hold_facts(session_id: str) -> dict[str, Any] | None:
    holder = Holder.objects.filter(session_id=session_id).first()
    if holder is None:
        return None
    return {
        "pid": holder.pid,
        "host": holder.host,
        "since": holder.since,
        "heartbeat": holder.heartbeat,
    }


def entry_summary(entry: Any) -> str:
    """A one-line description of a tree entry for tables."""
    message = entry.message
    if message.role:
        text = message.content or ("[" + ", ".join(p.type for p in message.parts) + "]")
        return f"{message.role}: {truncate(text)}"
    if entry.type == "model_change":
        return f"{message.provider}/{message.model}"
    if entry.type in ("compaction", "branch_summary"):
        return truncate(entry.summary)
    data = entry.data
    if entry.type == "label":
        return f"{short_id(str(data.get('target_id') or ''))} = {data.get('label')!r}"
    if entry.type == "thinking_level_change":
        return str(data.get("thinking_level", ""))
    if entry.type == "session_info":
        return str(data.get("name", ""))
    return str(entry.custom_type)


# -- ls ------------------------------------------------------------------------------


def _ls_arguments(parser: Any) -> None:
    parser.add_argument("--cwd", help="only sessions in this working directory")
    parser.add_argument("--owner", help="only sessions of this user (username)")
    parser.add_argument("--kind", choices=["tree", "loop", "log", "graph"], help="only this kind")
    parser.add_argument(
        "--current", action="store_true", help="hide sessions continued in a successor"
    )
    _limit(parser)
    _json_flag(parser)


def _ls(name: str, ctx: Context) -> None:
    sessions = Session.objects.select_related("owner").newest_first()
    if ctx.opt("cwd"):
        sessions = sessions.filter(cwd=ctx.opt("cwd"))
    if ctx.opt("owner"):
        sessions = sessions.filter(owner__username=ctx.opt("owner"))
    if ctx.opt("kind"):
        sessions = sessions.of_kind(ctx.opt("kind"))
    if ctx.opt("current"):
        sessions = sessions.current()
    limit = ctx.opt("limit", 20)
    if limit < 0:
        raise usage("--limit must be 0 or more")
    rows = list(with_opening_message(sessions)[: limit or None])
    if ctx.opt("json"):
        for row in rows:
            ctx.json({**session_facts(row), "opening": getattr(row, "opening", None) or ""})
        return
    if not rows:
        ctx.note("No sessions.")
        return
    table(
        ctx,
        ["ID", "KIND", "UPDATED (UTC)", "OWNER", "NAME / OPENING"],
        [
            [
                row.id,
                row.kind,
                stamp(row.updated_at),
                row.owner.get_username() if row.owner else "-",
                truncate(row.name or getattr(row, "opening", None) or "-"),
            ]
            for row in rows
        ],
    )


# -- show ----------------------------------------------------------------------------


def _show_arguments(parser: Any) -> None:
    parser.add_argument("session", help="session id")
    parser.add_argument("--leaf", default="", help="also show the context at this entry")
    _json_flag(parser)


def _show(name: str, ctx: Context) -> None:
    session = get_session(ctx.opt("session"))
    facts = session_facts(session)
    hold = hold_facts(session.id)
    children = list(Session.objects.children_of(session.id).values_list("id", flat=True))
    document: dict[str, Any] = {"session": facts, "children": children, "hold": hold}
    if session.kind == "loop":
        document.update(_loop_details(session.id))
    elif session.kind == "graph":
        document.update(_graph_details(session.id))
    else:
        document.update(_tree_details(session, ctx.opt("leaf")))
    if ctx.opt("json"):
        ctx.json(document)
        return
    for key, value in facts.items():
        if value not in ("", None):
            ctx.out(f"{key:<15} {stamp(value) if key.endswith('_at') else value}")
    if children:
        ctx.out(f"{'children':<15} {', '.join(children)}")
    if hold:
        ctx.out(
            f"{'held by':<15} pid {hold['pid']} on {hold['host']} since {stamp(hold['since'])}, "
            f"last append {stamp(hold['heartbeat'])}"
        )
    if session.kind == "loop":
        for step in document["steps"]:
            ctx.out("")
            ctx.out(
                f"--- {step['type']} (step {step['step_index']}, {stamp(step['created_at'])}) ---"
            )
            ctx.out(step["content"].rstrip("\n"))
        if document["grants"]:
            ctx.out("")
            ctx.out(f"--- approved ({len(document['grants'])}) ---")
            for prompt in document["grants"]:
                ctx.out(f"  {prompt}")
            ctx.note(f"Run `manage.py agentstore revoke {session.id}` to forget these.")
        return
    if session.kind == "graph":
        ctx.out("")
        table(
            ctx,
            ["NAMESPACE", "CHECKPOINT", "PARENT", "STEP", "SOURCE", "WRITES"],
            [
                [
                    c["checkpoint_ns"] or "(root)",
                    c["checkpoint_id"],
                    c["parent_checkpoint_id"] or "-",
                    str(c["step"]),
                    c["source"],
                    str(c["writes"]),
                ]
                for c in document["checkpoints"]
            ],
        )
        return
    ctx.out("")
    if session.kind == "log":
        _print_log(ctx, document)
        return
    table(
        ctx,
        ["SEQ", "ID", "PARENT", "TYPE", "SUMMARY"],
        [
            [str(e["seq"]), short_id(e["id"]), short_id(e["parent_id"]), e["type"], e["summary"]]
            for e in document["entries"]
        ],
    )
    context = document.get("context")
    if context is not None:
        ctx.out("")
        ctx.out(
            f"context at {ctx.opt('leaf')}: {len(context['messages'])} message(s); "
            f"provider {context['provider'] or '-'}, model {context['model'] or '-'}, "
            f"thinking {context['thinking_level'] or '-'}"
        )
        for number, message in enumerate(context["messages"], start=1):
            ctx.out(f"  {number:>3}. {message['role']}: {truncate(message['content'], 80)}")


def log_entry_summary(view: Described) -> str:
    """A one-line description of an agentsession entry (``describe``) for tables.

    An entry of several items (a Pydantic AI message of several parts) is its
    items' descriptions, one after the other.
    """
    if view.parts:
        return " | ".join(log_entry_summary(part) for part in view.parts)
    if view.kind == "message":
        return f"{view.role}: {truncate(view.text, 60)}"
    if view.kind == "tool call":
        return f"{view.tool}({truncate(view.arguments, 50)}) [{view.call_id}]"
    if view.kind == "tool output":
        return f"[{view.call_id}] → {truncate(view.text, 50)}"
    if view.kind == "reasoning":
        return f"(thinking) {truncate(view.text, 56)}"
    if view.kind == "retry prompt":
        return (
            f"(retry{' [' + view.call_id + ']' if view.call_id else ''}) {truncate(view.text, 50)}"
        )
    if view.text:
        return truncate(f"{view.detail} {view.text}".strip(), 64)
    return truncate(view.detail, 64)


def _log_details(session: Session, leaf: str) -> dict[str, Any]:
    from agentstore.selectors.log_views import log_context_view, read_log, response_checks

    log = read_log(session.id)
    checks = response_checks(log, [e.id for e in log.entries if e.type == "response"])
    entries = []
    for seq, e in enumerate(log.entries, start=1):
        view = describe(e.data)
        entries.append(
            {
                "seq": seq,
                "id": e.id,
                "parent_id": e.parent,
                "type": e.type,
                "kind": view.kind,
                "summary": log_entry_summary(view),
                "request_hash": checks.get(e.id),
                "converges": view.converges,
            }
        )
    details: dict[str, Any] = {
        "entries": entries,
        "leaf": log.leaf,
        "labels": log.labels(),
    }
    if leaf:
        try:
            entry_id = resolve(Entry.objects.filter(session_id=session.id), "entry_id", leaf)
        except exceptions.ValidationError as exc:
            raise fail(str(exc)) from None
        if entry_id is None:
            raise fail(f"no entry {leaf} in session {session.id}")
        context = log_context_view(session.id, entry_id, session=log)
        assert context is not None
        details["context"] = {
            "entry_id": context.entry_id,
            "model": context.model,
            "instructions": context.instructions,
            "tools": list(context.tools),
            "request_hash": context.request_hash,
            "items": [
                {
                    "kind": line.view.kind,
                    "role": line.view.role,
                    "summary": log_entry_summary(line.view),
                    "entry_id": line.entry_id,
                    "why": line.reason,
                }
                for line in context.lines
            ],
        }
    return details


def _print_log(ctx: Context, document: dict[str, Any]) -> None:
    labels = document["labels"]
    rows = []
    for e in document["entries"]:
        marks = []
        if e["id"] == document["leaf"]:
            marks.append("LEAF")
        if e["id"] in labels:
            marks.append(f"label={labels[e['id']]}")
        if e["request_hash"]:
            marks.append(f"hash {e['request_hash']}")
        if e["converges"]:
            marks.append(f"converges {e['converges']}")
        rows.append(
            [
                str(e["seq"]),
                short_id(e["id"]),
                short_id(e["parent_id"]),
                e["kind"],
                e["summary"],
                " ".join(marks),
            ]
        )
    table(ctx, ["SEQ", "ID", "PARENT", "KIND", "WHAT", "NOTES"], rows)
    context = document.get("context")
    if context is None:
        return
    ctx.out("")
    ctx.out(
        f"context at {short_id(context['entry_id'])}: {len(context['items'])} item(s); "
        f"model {context['model'] or '-'}; tools {', '.join(context['tools']) or '-'}; "
        f"request hash {context['request_hash']}"
    )
    if context["instructions"]:
        ctx.out(f"  instructions: {truncate(context['instructions'], 100)}")
    for number, item in enumerate(context["items"], start=1):
        ctx.out(f"  {number:>3}. {item['summary']}  ({item['why']}, {short_id(item['entry_id'])})")


def _tree_details(session: Session, leaf: str) -> dict[str, Any]:
    if session.kind == "log":
        return _log_details(session, leaf)
    from agentstore.stores import TreeStore

    store = TreeStore()
    details: dict[str, Any] = {
        "entries": [
            {
                "seq": e.seq,
                "id": e.id,
                "parent_id": e.parent_id,
                "type": e.type,
                "summary": entry_summary(e),
            }
            for e in store.entries_after(session.id)
        ]
    }
    if leaf:
        try:
            entry_id = resolve(Entry.objects.filter(session_id=session.id), "entry_id", leaf)
            context = store.build_context(session.id, entry_id or leaf)
        except (exceptions.NoEntry, exceptions.ValidationError) as exc:
            raise fail(str(exc)) from None
        details["context"] = {
            "provider": context.provider,
            "model": context.model,
            "thinking_level": context.thinking_level,
            "usage_anchor": None
            if context.usage_anchor is None
            else {
                "entry_id": context.usage_anchor.entry_id,
                "message_index": context.usage_anchor.message_index,
            },
            "messages": [
                {"role": m.role, "content": m.content, "parts": [p.type for p in m.parts]}
                for m in context.messages
            ],
        }
    return details


def _graph_details(session_id: str) -> dict[str, Any]:
    """The newest checkpoints of each namespace of a LangGraph thread (bounded)."""
    from agentstore.selectors.checkpoints import thread_view

    root = thread_view(session_id, "", limit=GRAPH_SHOWN)
    checkpoints: list[dict[str, Any]] = []
    for ns, _count in root.namespaces:
        view = root if ns == "" else thread_view(session_id, ns, limit=GRAPH_SHOWN)
        checkpoints.extend(
            {
                "checkpoint_ns": ns,
                "checkpoint_id": n.checkpoint_id,
                "parent_checkpoint_id": n.parent_checkpoint_id,
                "step": n.step,
                "source": n.source,
                "writes": n.writes,
                "interrupts": n.interrupts,
                "created_at": n.created_at,
            }
            for n in view.rows
        )
    return {"namespaces": dict(root.namespaces), "checkpoints": checkpoints}


#: Checkpoints per namespace ``show`` lists for a LangGraph thread.
GRAPH_SHOWN = 50


def _loop_details(session_id: str) -> dict[str, Any]:
    from agentstore.stores import LoopStore

    store = LoopStore()
    return {
        "steps": [
            {
                "type": step.step_type,
                "step_index": step.step_index,
                "content": step.content,
                "created_at": step.created_at,
            }
            for step in store.steps(session_id)
        ],
        "grants": list(store.grants(session_id)),
    }


# -- rm, grants, revoke ----------------------------------------------------------------


def delete_session(session: Session) -> None:
    """Delete ``session`` with its kind's cascade (``SessionStore.delete``)."""
    from agentstore.stores import SessionStore

    SessionStore().delete(session.id, session.kind)


def _ids_arguments(parser: Any) -> None:
    parser.add_argument("sessions", nargs="+", metavar="SESSION", help="session ids")


def _rm(name: str, ctx: Context) -> None:
    failed = 0
    for session_id in ctx.opt("sessions"):
        try:
            session = get_session(session_id)
        except CommandError as exc:
            ctx.note(str(exc))
            failed += 1
            continue
        try:
            delete_session(session)
        except Exception as exc:  # every id is tried; the failure is reported
            ctx.note(f"{session_id}: {exc}")
            failed += 1
            continue
        ctx.note(f"· removed {session_id}")
    if failed:
        raise fail(f"{failed} of {len(ctx.opt('sessions'))} session(s) not removed")


def _grants_arguments(parser: Any) -> None:
    parser.add_argument("session", help="session id")
    _json_flag(parser)


def _grants(name: str, ctx: Context) -> None:
    from agentstore.stores import LoopStore

    grants = list(LoopStore().grants(session_id_or_text(ctx.opt("session"))))
    if ctx.opt("json"):
        ctx.json(grants)
        return
    if not grants:
        ctx.note(f"No approvals for {ctx.opt('session')}.")
    for prompt in grants:
        ctx.out(prompt)


def _revoke(name: str, ctx: Context) -> None:
    from agentstore.stores import LoopStore

    store = LoopStore()
    for text in ctx.opt("sessions"):
        session_id = session_id_or_text(text)
        count = len(store.grants(session_id))
        store.revoke(session_id)
        ctx.note(f"· {session_id}: forgot {count} approval(s)")


# -- follow --------------------------------------------------------------------------


def _follow_arguments(parser: Any) -> None:
    parser.add_argument("session", help="session id")
    parser.add_argument(
        "--interval",
        type=float,
        default=0.2,
        help="poll interval in seconds (default: %(default)r)",
    )
    parser.add_argument(
        "--max-seconds", type=float, default=0, help="stop after this long, 0 = until Ctrl-C"
    )
    _json_flag(parser)


def _follow(name: str, ctx: Context) -> None:
    from agentstore.selectors.follow import read_after, session_exists, subscribe, wait_for_change

    session = get_session(ctx.opt("session"))
    interval = ctx.opt("interval")
    if interval <= 0:
        raise usage("--interval must be positive")
    deadline = time.monotonic() + ctx.opt("max_seconds") if ctx.opt("max_seconds") > 0 else None
    last = 0
    # PostgreSQL: a write anywhere ends the wait below at once (agentstore/notify.py).
    wakeup = subscribe(session.id)
    try:
        while True:
            # The same bounded reads as the SSE endpoint (docs/api.md, "Follow").
            items = read_after(session.id, session.kind, last, FOLLOW_BATCH)
            for item in items:
                last = item.position
                row = followed_row(item)
                if ctx.opt("json"):
                    ctx.json(row)
                else:
                    ctx.out(
                        f"{row['position']:>5}  {short_id(row['id'])}  {row['type']:<22} "
                        f"{row['summary']}"
                    )
            if hasattr(ctx.stdout, "flush"):
                ctx.stdout.flush()
            if not items and not session_exists(session.id):
                raise fail(f"session {session.id} was deleted")
            if deadline is not None and time.monotonic() >= deadline:
                return
            if len(items) < FOLLOW_BATCH:
                wait_for_change(session.id, interval, wakeup)
    except KeyboardInterrupt:
        return
    finally:
        wakeup.close()


#: Rows read per poll of ``follow`` (a long session catches up in bounded reads).
FOLLOW_BATCH = 500


def followed_row(item: Any) -> dict[str, Any]:
    """One followed item as a row: position, id, type, a one-line summary, time.

    ``seq`` is kept for tree and log rows (their position *is* the seq); a loop
    step's ``id`` is its position, a checkpoint's its checkpoint id.
    """
    value = item.item
    if item.event == "entry":
        row = {"seq": value.seq, "id": value.id, "parent_id": value.parent_id, "type": value.type}
        summary = entry_summary(value)
    elif item.event == "line":
        row = {"seq": value.seq, "id": value.id, "parent_id": value.parent_id, "type": value.type}
        summary = log_entry_summary(describe(json.loads(value.line)))
    elif item.event == "step":
        row = {"id": str(item.position), "step_index": value.step_index, "type": value.step_type}
        summary = truncate(value.content)
    else:
        row = {
            "id": value.checkpoint_id,
            "parent_id": value.parent_checkpoint_id,
            "checkpoint_ns": value.checkpoint_ns,
            "type": "checkpoint",
        }
        metadata = value.metadata if isinstance(value.metadata, dict) else {}
        summary = f"step {metadata.get('step', '?')} ({metadata.get('source', '')})"
    return {
        "position": item.position,
        "event": item.event,
        **row,
        "summary": summary,
        "created_at": value.created_at,
    }


COMMANDS = [
    Subcommand(("ls", "list"), "List sessions, newest first.", _ls_arguments, _ls),
    Subcommand(
        ("show",), "Show a session: facts, entries or steps, grants, hold.", _show_arguments, _show
    ),
    Subcommand(("rm", "remove", "delete"), "Delete sessions.", _ids_arguments, _rm),
    Subcommand(("grants",), "List a loop session's approvals.", _grants_arguments, _grants),
    Subcommand(("revoke",), "Forget the approvals of sessions.", _ids_arguments, _revoke),
    Subcommand(
        ("follow",),
        "Print what is appended to a session of any kind, by any process.",
        _follow_arguments,
        _follow,
    ),
]
