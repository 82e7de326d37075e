"""Hold subcommands: ``locks`` (who holds which session) and ``break-lock``.

    manage.py agentstore locks --json
    manage.py agentstore break-lock SESSION

Holds work for sessions of every kind; breaking one goes through
``SessionStore.break_hold``, so the holder's next append fails loudly.
"""

from __future__ import annotations

import os
import socket
from typing import Any

from agentstore.cli import Context, Subcommand, fail, stamp, table

__all__ = ["COMMANDS"]


def _alive(pid: int, host: str) -> bool | None:
    """Whether a holder on this host is alive; ``None`` (unknown) for other hosts."""
    if host != socket.gethostname():
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        # The process exists but belongs to another user: alive.
        return True
    return True


def _alive_text(alive: bool | None) -> str:
    return "?" if alive is None else ("yes" if alive else "no")


def _locks_arguments(parser: Any) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON lines on stdout")


def _locks(name: str, ctx: Context) -> None:
    from agentstore.models import Holder

    holders = list(Holder.objects.select_related("session").order_by("since"))
    rows: list[dict[str, Any]] = [
        {
            "session": h.session_id,
            "kind": h.session.kind,
            "pid": h.pid,
            "host": h.host,
            "since": h.since,
            "heartbeat": h.heartbeat,
            "alive": _alive(h.pid, h.host),
        }
        for h in holders
    ]
    if ctx.opt("json"):
        for row in rows:
            ctx.json(row)
        return
    if not rows:
        ctx.note("No session is held.")
        return
    table(
        ctx,
        ["SESSION", "KIND", "PID", "HOST", "SINCE (UTC)", "LAST APPEND (UTC)", "ALIVE"],
        [
            [
                r["session"],
                r["kind"],
                str(r["pid"]),
                r["host"],
                stamp(r["since"]),
                stamp(r["heartbeat"]),
                _alive_text(r["alive"]),
            ]
            for r in rows
        ],
    )


def _break_arguments(parser: Any) -> None:
    parser.add_argument("session", help="session id")


def _break(name: str, ctx: Context) -> None:
    from agentstore.cli.sessions import session_id_of
    from agentstore.stores import SessionStore

    sessions = SessionStore()
    session_id = session_id_of(ctx.opt("session"))
    holder = sessions.hold(session_id)
    if holder is None or not sessions.break_hold(session_id):
        raise fail(f"{session_id} is not held")
    ctx.note(f"· broke the hold of pid {holder.pid} on {holder.host} on {session_id}")


COMMANDS = [
    Subcommand(("locks",), "List session holds.", _locks_arguments, _locks),
    Subcommand(
        ("break-lock",), "Remove a session's hold, whoever has it.", _break_arguments, _break
    ),
]
