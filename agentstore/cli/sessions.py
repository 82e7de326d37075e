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

import time
from typing import Any

from agentstore.cli import Context, Subcommand, fail, short_id, stamp, table, truncate, usage
from agentstore.models import Entry, Holder, Session
from agentstore.selectors.sessions import with_opening_message

__all__ = ["COMMANDS", "delete_session", "entry_summary"]


def _limit(parser: Any, default: int = 20) -> None:
    parser.add_argument(
        "--limit", type=int, default=default, help="at most N rows, 0 = all (default: %(default)r)"
    )


def _json_flag(parser: Any) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON on stdout")


def get_session(session_id: str) -> Session:
    session = Session.objects.select_related("owner").filter(pk=session_id).first()
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
        return f"{data.get('target_id', '')[:8]} = {data.get('label')!r}"
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


def _tree_details(session: Session, leaf: str) -> dict[str, Any]:
    if session.kind == "log":
        rows = Entry.objects.filter(session=session).order_by("seq")
        return {
            "entries": [
                {
                    "seq": row.seq,
                    "id": row.entry_id,
                    "parent_id": row.parent_id,
                    "type": row.type,
                    "summary": truncate(row.line, 60),
                }
                for row in rows
            ]
        }
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
        from agentstore import exceptions

        try:
            context = store.build_context(session.id, leaf)
        except exceptions.NoEntry as exc:
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
        session = Session.objects.filter(pk=session_id).first()
        if session is None:
            ctx.note(f"no such session: {session_id}")
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

    grants = list(LoopStore().grants(ctx.opt("session")))
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
    for session_id in ctx.opt("sessions"):
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
    session = get_session(ctx.opt("session"))
    interval = ctx.opt("interval")
    if interval <= 0:
        raise usage("--interval must be positive")
    deadline = time.monotonic() + ctx.opt("max_seconds") if ctx.opt("max_seconds") > 0 else None
    if session.kind == "loop":
        raise fail(f"{session.id} is a loop session: follow works on tree and log sessions")
    from agentstore.stores import TreeStore

    store = TreeStore()
    last = 0
    try:
        while True:
            new: list[dict[str, Any]]
            if session.kind == "tree":
                new = [
                    {
                        "seq": e.seq,
                        "id": e.id,
                        "parent_id": e.parent_id,
                        "type": e.type,
                        "summary": entry_summary(e),
                        "created_at": e.created_at,
                    }
                    for e in store.entries_after(session.id, last)
                ]
            else:
                new = [
                    {
                        "seq": row.seq,
                        "id": row.entry_id,
                        "parent_id": row.parent_id,
                        "type": row.type,
                        "summary": truncate(row.line, 60),
                        "created_at": row.created_at,
                    }
                    for row in Entry.objects.filter(session_id=session.id, seq__gt=last).order_by(
                        "seq"
                    )
                ]
            for item in new:
                last = item["seq"]
                if ctx.opt("json"):
                    ctx.json(item)
                else:
                    ctx.out(
                        f"{item['seq']:>5}  {short_id(item['id'])}  {item['type']:<22} "
                        f"{item['summary']}"
                    )
            if hasattr(ctx.stdout, "flush"):
                ctx.stdout.flush()
            if not Session.objects.filter(pk=session.id).exists():
                raise fail(f"session {session.id} was deleted")
            if deadline is not None and time.monotonic() >= deadline:
                return
            time.sleep(interval)
    except KeyboardInterrupt:
        return


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
        "Print entries as they are appended, by any process.",
        _follow_arguments,
        _follow,
    ),
]
