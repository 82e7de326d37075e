"""File subcommands: ``export`` and ``import`` (pi and agentsession JSONL).

    manage.py agentstore export SESSION > session.jsonl
    manage.py agentstore export SESSION... --out exports/
    manage.py agentstore import exports/*.jsonl --owner alice

Tree sessions export as pi files (the leaf on the last line), log sessions as
agentsession files, byte for byte. ``import`` recognises the format from the
header line: pi files become tree sessions (ids, parents, labels, name, cwd and
parent session kept), agentsession files log sessions (every id verified).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError

from agentstore.cli import Context, Subcommand, fail, usage
from agentstore.models import Session
from agentstore.routers import read_alias
from agentstore.validation import name_problem

__all__ = ["COMMANDS", "export_path", "export_session", "import_text"]

FORMATS = {"tree": "pi", "log": "agentsession"}


def export_session(session: Session, fmt: str | None = None) -> str:
    """The file text of ``session`` in ``fmt`` (default: its kind's format)."""
    expected = FORMATS.get(session.kind)
    if expected is None:
        raise fail(f"{session.id} is a {session.kind} session: only tree and log sessions export")
    if fmt and fmt != expected:
        raise usage(
            f"{session.id} is a {session.kind} session: it exports as {expected}, not {fmt}"
        )
    # An export tolerates lag: the replica when there is one (agentstore/routers.py).
    using = read_alias()
    if session.kind == "log":
        from agentstore.stores import LogStore

        return str(LogStore(read_only=True, using=using).export_jsonl(session.id))
    from agentstore.formats import pi_jsonl
    from agentstore.stores import TreeStore

    store = TreeStore(using=using)
    entity = store.get_session(session.id)
    assert entity is not None
    path = store.branch(session.id, "")
    return pi_jsonl.export(entity, store.entries_after(session.id), path[-1].id if path else None)


def export_path(directory: Path, session_id: str) -> Path | None:
    """``directory/<id>.jsonl``, or ``None`` when the id could land anywhere else.

    Two locks on one door: the id must pass the shared name rule (no ``/``,
    ``\\``, NUL, not ``..``), and the resolved path must still be a direct
    child of the resolved directory (symlinks and platform quirks included).
    """
    if name_problem(session_id):
        return None
    root = directory.resolve()
    target = (root / f"{session_id}.jsonl").resolve()
    if target.parent != root:
        return None
    return target


def _export_arguments(parser: Any) -> None:
    parser.add_argument("sessions", nargs="+", metavar="SESSION", help="session ids")
    parser.add_argument("--format", choices=["pi", "agentsession"], help="check the format")
    parser.add_argument("--out", help="write <id>.jsonl files into this directory")


def _full_id(text: str) -> str:
    """The session a (short) id names; the text itself when none does (reported below)."""
    from agentstore.cli.sessions import session_id_of

    try:
        return session_id_of(text)
    except CommandError:
        return text


def _export(name: str, ctx: Context) -> None:
    ids = [_full_id(text) for text in ctx.opt("sessions")]
    out = ctx.opt("out")
    if out is None and len(ids) != 1:
        raise usage("export writes one session to stdout; use --out DIR for several")
    sessions = {s.id: s for s in Session.objects.filter(pk__in=ids)}
    missing = [i for i in ids if i not in sessions]
    if out is None:
        if missing:
            raise fail(f"no such session: {missing[0]}")
        ctx.raw(export_session(sessions[ids[0]], ctx.opt("format")))
        return
    directory = Path(out)
    directory.mkdir(parents=True, exist_ok=True)
    failed = 0
    for number, session_id in enumerate(ids, start=1):
        if session_id in missing:
            ctx.note(f"no such session: {session_id}")
            failed += 1
            continue
        target = export_path(directory, session_id)
        if target is None:
            # Stored before ids were checked, or written around the stores:
            # such an id never names a file (docs/commands.md "export").
            ctx.note(f"refusing to export {session_id!r}: not a safe file name")
            failed += 1
            continue
        target.write_text(export_session(sessions[session_id], ctx.opt("format")), encoding="utf-8")
        ctx.note(f"[{number}/{len(ids)}] · exported {session_id} to {target}")
    if failed:
        raise fail(f"{failed} of {len(ids)} session(s) not exported")


def import_text(text: str, *, owner: Any = None) -> tuple[str, int, list[tuple[int, str]]]:
    """Import one file's text; returns (session id, entries, skipped lines)."""
    if not text.strip():
        raise fail("the file is empty: not a session file")
    # Blank lines before the header are skipped, as the agentsession reader skips them.
    lines = text.splitlines(keepends=True)
    while lines and not lines[0].strip():
        lines.pop(0)
    text = "".join(lines)
    first = text.split("\n", 1)[0]
    try:
        header = json.loads(first)
    except ValueError:
        raise fail("line 1 is not JSON: not a session file") from None
    if not isinstance(header, dict) or header.get("type") != "session":
        raise fail('line 1 is not a session header ({"type":"session",…})')
    if str(header.get("format", "")).startswith("agentsession/"):
        from agentstore.stores import LogStore

        store = LogStore()
        session = store.import_jsonl(text, owner=owner)
        store.release(session.id)
        return session.id, len(session.entries), []
    from agentstore.formats import pi_jsonl
    from agentstore.stores import TreeStore

    try:
        parsed = pi_jsonl.parse(text)
    except ValueError as exc:
        raise fail(str(exc)) from None
    created = TreeStore().import_session(pi_jsonl.to_imported(parsed), owner=owner)
    return created.id, len(parsed.entries), parsed.skipped


def _import_arguments(parser: Any) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE", help="JSONL session files")
    parser.add_argument("--owner", help="username that owns the imported sessions")


def _import(name: str, ctx: Context) -> None:
    from django.contrib.auth import get_user_model

    from agentstore import exceptions

    owner = None
    if ctx.opt("owner"):
        owner = get_user_model().objects.filter(username=ctx.opt("owner")).first()
        if owner is None:
            raise usage(f"no such user: {ctx.opt('owner')}")
    files = ctx.opt("files")
    failed = 0
    for number, path in enumerate(files, start=1):
        try:
            text = Path(path).read_text(encoding="utf-8")
            session_id, count, skipped = import_text(text, owner=owner)
        except (OSError, UnicodeDecodeError, exceptions.AgentStoreError) as exc:
            ctx.note(f"[{number}/{len(files)}] {path}: {exc}")
            failed += 1
            continue
        except Exception as exc:  # a CommandError from import_text, say
            ctx.note(f"[{number}/{len(files)}] {path}: {exc}")
            failed += 1
            continue
        for line, reason in skipped:
            ctx.note(f"  {path}:{line}: skipped ({reason})")
        ctx.note(f"[{number}/{len(files)}] · imported {path} as {session_id} ({count} entries)")
    if failed:
        raise fail(f"{failed} of {len(files)} file(s) not imported")


COMMANDS = [
    Subcommand(("export",), "Write sessions as JSONL files.", _export_arguments, _export),
    Subcommand(("import",), "Read pi or agentsession JSONL files.", _import_arguments, _import),
]
