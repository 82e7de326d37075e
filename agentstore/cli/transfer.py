"""File subcommands: ``export`` and ``import`` (pi, agentsession and agentstore JSONL).

    manage.py agentstore export SESSION > session.jsonl
    manage.py agentstore export SESSION... --out exports/
    manage.py agentstore import exports/*.jsonl --owner alice
    manage.py agentstore export --all --database old --out moved/   # SQLite → PostgreSQL

Tree sessions export as pi files (the leaf on the last line), log sessions as
agentsession files, byte for byte; loop sessions and LangGraph threads as
``agentstore/1`` files (``agentstore/formats/agentstore_jsonl.py``), every
stored value kept. ``import`` recognises the format from the first line.

This module parses arguments, opens files and prints; the stores read and
write. Every line is read bounded (``agentstore/formats/lines.py``); every
path is checked before use and its problem is one line on stderr, never a
traceback. ``--out`` files are written to a temporary name and renamed, so a
failed export leaves no half-written file; each imported file is one
transaction, so a file that fails at line N stores nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import sys
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any, BinaryIO

from django.core.management.base import CommandError
from django.db import DEFAULT_DB_ALIAS, connections
from django.utils.connection import ConnectionDoesNotExist

from agentstore import exceptions
from agentstore.cli import Context, Subcommand, fail, usage
from agentstore.formats import agentstore_jsonl
from agentstore.formats.lines import LineReader, line_limit
from agentstore.models import Session
from agentstore.routers import read_alias
from agentstore.selectors.short_ids import resolve
from agentstore.validation import name_problem

__all__ = [
    "COMMANDS",
    "PROGRESS_EVERY",
    "export_lines",
    "export_path",
    "export_session",
    "import_file",
    "import_text",
]

FORMATS = {"tree": "pi", "log": "agentsession", "loop": "agentstore", "graph": "agentstore"}

#: Session ids looked up per query by ``export`` (under every backend's parameter limit).
ID_CHUNK = 500

#: Records between two progress notes on stderr (exports and imports of loop and graph sessions).
PROGRESS_EVERY = 10_000


def export_lines(
    session: Session, fmt: str | None = None, *, using: str | None = None
) -> Iterator[str]:
    """The lines of ``session``'s file in ``fmt`` (default: its kind's format), as read.

    Loop sessions and graph threads stream (a page of rows at a time); pi and
    agentsession files are built whole and refused when a line would pass the
    import's line limit (such a file could not be imported back).
    """
    expected = FORMATS.get(session.kind)
    if expected is None:
        raise fail(f"{session.id} is a {session.kind} session: it does not export")
    if fmt and fmt != expected:
        raise usage(
            f"{session.id} is a {session.kind} session: it exports as {expected}, not {fmt}"
        )
    # An export tolerates lag: the replica when there is one (agentstore/routers.py).
    using = using or read_alias()
    if session.kind == "loop":
        from agentstore.stores import LoopStore

        return agentstore_jsonl.encode(LoopStore(using=using).export_rows(session.id))
    if session.kind == "graph":
        from agentstore.stores.checkpoint_rows import export_thread

        return agentstore_jsonl.encode(export_thread(session.id, using=using))
    text = _whole_file(session, using)
    _check_lines(session.id, text)
    return iter([text])


def _whole_file(session: Session, using: str) -> str:
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


def _check_lines(session_id: str, text: str) -> None:
    """Refuse a pi or agentsession file with a line ``import`` would refuse (too long)."""
    limit = line_limit()
    if len(text) <= limit:  # characters ≤ bytes: nothing to measure
        return
    for number, line in enumerate(text.encode("utf-8").split(b"\n"), start=1):
        if len(line) > limit:
            raise fail(
                f"{session_id}: line {number} of its file is {len(line)} bytes, over the "
                f"{limit}-byte line limit (DATA_UPLOAD_MAX_MEMORY_SIZE) that import reads; "
                "raise that setting where you export and where you import"
            )


def export_session(session: Session, fmt: str | None = None, *, using: str | None = None) -> str:
    """The whole file text of ``session`` (:func:`export_lines`, joined)."""
    return "".join(export_lines(session, fmt, using=using))


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


def _shown(path: str) -> str:
    """A path as one printable line (NUL, newlines, undecodable bytes escaped)."""
    return path if path.isprintable() else repr(path)


def _database(ctx: Context, default: str) -> str:
    alias = ctx.opt("database") or default
    try:
        connections[alias]
    except ConnectionDoesNotExist:
        raise usage(f"no such database alias: {alias}") from None
    return str(alias)


def _database_argument(parser: Any, what: str) -> None:
    parser.add_argument("--database", metavar="ALIAS", help=what)


# -- export ------------------------------------------------------------------------


def _export_arguments(parser: Any) -> None:
    parser.add_argument("sessions", nargs="*", metavar="SESSION", help="session ids")
    parser.add_argument(
        "--all", action="store_true", help="every session of the database (with --out)"
    )
    parser.add_argument(
        "--format", choices=["pi", "agentsession", "agentstore"], help="check the format"
    )
    parser.add_argument("--out", help="write <id>.jsonl files into this directory")
    _database_argument(parser, "read from this database alias (default: the read replica if set)")


def _full_id(text: str, using: str) -> str:
    """The session a (short) id names; the text itself when none does (reported below)."""
    try:
        found = resolve(Session.objects.using(using).all(), "id", text, what="session")
    except exceptions.ValidationError as exc:
        raise fail(str(exc)) from None
    return text if found is None else found


def _out_directory(out: str) -> Path:
    """``--out`` as an existing directory (created if missing), or a one-line failure."""
    shown = _shown(out)
    directory = Path(out)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except ValueError:  # a NUL in the path
        raise fail(f"--out {shown}: not a usable path (it contains NUL)") from None
    except FileExistsError:
        raise fail(f"--out {shown}: exists and is not a directory") from None
    except OSError as exc:
        raise fail(f"--out {shown}: cannot create the directory: {exc.strerror}") from None
    if not directory.is_dir():
        raise fail(f"--out {shown}: not a directory")
    return directory


def _sessions(using: str, ids: list[str]) -> Iterator[tuple[str, Session | None]]:
    """Each id with its session row (``None``: no such session), read 500 ids a query.

    Chunked: ``--all`` may name more sessions than one ``IN (…)`` may hold
    parameters (SQLite's limit), and only the id and kind are needed.
    """
    for start in range(0, len(ids), ID_CHUNK):
        chunk = ids[start : start + ID_CHUNK]
        found = {
            s.id: s for s in Session.objects.using(using).filter(pk__in=chunk).only("id", "kind")
        }
        for session_id in chunk:
            yield session_id, found.get(session_id)


class _DirectoryUnwritable(Exception):
    """No file can be made in the ``--out`` directory: the export stops."""


def _write_file(target: Path, lines: Iterable[str]) -> None:
    """Write ``lines`` to ``target`` through a temporary file renamed at the end.

    A failure at any point (the database, a value, the disk) removes the
    temporary file: ``target`` is either the whole new file or as it was.
    The file is the owner's alone (0600): sessions hold conversations.
    """
    try:
        fd, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as exc:
        raise _DirectoryUnwritable(exc.strerror or str(exc)) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            for line in lines:
                handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def _with_progress(ctx: Context, label: str, lines: Iterator[str]) -> Iterator[str]:
    """``lines``, noting on stderr every :data:`PROGRESS_EVERY` lines (long exports)."""
    try:
        for number, line in enumerate(lines, start=1):
            if number % PROGRESS_EVERY == 0:
                ctx.note(f"  {label}: {number} lines…")
            yield line
    finally:
        # A stopped export closes the store's reader (and its read snapshot) now.
        close = getattr(lines, "close", None)
        if close is not None:
            close()


def _to_stdout(ctx: Context, lines: Iterable[str]) -> None:
    """Write ``lines`` to stdout in chunks of about 64 KB (one write per line is slow)."""
    buffer: list[str] = []
    size = 0
    try:
        for line in lines:
            buffer.append(line)
            size += len(line)
            if size >= 65536:
                ctx.raw("".join(buffer))
                buffer, size = [], 0
        if buffer:
            ctx.raw("".join(buffer))
        ctx.stdout.flush()
    except BrokenPipeError:
        raise fail("stdout was closed before the export was written") from None


def _export(name: str, ctx: Context) -> None:
    using = _database(ctx, read_alias())
    out = ctx.opt("out")
    if ctx.opt("all"):
        if ctx.opt("sessions") or out is None:
            raise usage("export --all takes no session ids and needs --out DIR")
        # Oldest first, so a parent's file comes before its children's.
        ids = list(
            Session.objects.using(using).order_by("created_at", "id").values_list("id", flat=True)
        )
    elif not ctx.opt("sessions"):
        raise usage("name the sessions to export, or --all")
    else:
        ids = [_full_id(text, using) for text in ctx.opt("sessions")]
    if not ids and ctx.opt("all"):
        ctx.note("No sessions.")
        return
    if out is None and len(ids) != 1:
        raise usage("export writes one session to stdout; use --out DIR for several")
    fmt = ctx.opt("format")
    if out is None:
        session = next(_sessions(using, ids))[1]
        if session is None:
            raise fail(f"no such session: {ids[0]}")
        lines = export_lines(session, fmt, using=using)
        try:
            _to_stdout(ctx, _with_progress(ctx, ids[0], lines))
        except exceptions.AgentStoreError as exc:
            raise fail(f"{ids[0]}: {exc}") from None
        return
    directory = _out_directory(out)
    failed = 0
    for number, (session_id, session) in enumerate(_sessions(using, ids), start=1):
        if session is None:
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
        try:
            lines = export_lines(session, fmt, using=using)
            _write_file(target, _with_progress(ctx, session_id, lines))
        except _DirectoryUnwritable as exc:
            raise fail(f"--out {_shown(out)}: cannot write files there: {exc}") from None
        except CommandError as exc:
            if exc.returncode != 1:
                raise
            ctx.note(f"[{number}/{len(ids)}] {exc}")
            failed += 1
            continue
        except (OSError, exceptions.AgentStoreError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            ctx.note(f"[{number}/{len(ids)}] {session_id}: not exported: {reason}")
            failed += 1
            continue
        ctx.note(f"[{number}/{len(ids)}] · exported {session_id} to {target}")
    if failed:
        raise fail(f"{failed} of {len(ids)} session(s) not exported")


# -- import ------------------------------------------------------------------------


def import_text(
    text: str, *, owner: Any = None, using: str = DEFAULT_DB_ALIAS
) -> tuple[str, int, list[tuple[int, str]]]:
    """Import one pi or agentsession file's text; returns (session id, entries, skipped lines)."""
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

        store = LogStore(using=using)
        session = store.import_jsonl(text, owner=owner)
        store.release(session.id)
        return session.id, len(session.entries), []
    from agentstore.formats import pi_jsonl
    from agentstore.stores import TreeStore

    try:
        parsed = pi_jsonl.parse(text)
    except ValueError as exc:
        raise fail(str(exc)) from None
    created = TreeStore(using=using).import_session(pi_jsonl.to_imported(parsed), owner=owner)
    return created.id, len(parsed.entries), parsed.skipped


@contextlib.contextmanager
def _source(path: str) -> Iterator[BinaryIO]:
    """``path`` opened for reading (``-``: stdin), or a one-line failure.

    Regular files and pipes (``-``, ``<(zcat f.gz)``) are read; a directory, a
    device (``/dev/zero``) or a socket is refused before anything is read.
    """
    if path == "-":
        yield sys.stdin.buffer
        return
    try:
        kind = os.stat(path).st_mode
        if not (stat.S_ISREG(kind) or stat.S_ISFIFO(kind)):
            raise fail(_not_readable(kind))
        handle: IO[bytes] = open(path, "rb")  # noqa: SIM115 - closed below
    except ValueError:
        raise fail("not a usable path (it contains NUL)") from None
    except FileNotFoundError:
        raise fail("no such file") from None
    except OSError as exc:
        raise fail(f"cannot read it: {exc.strerror or exc}") from None
    with handle:
        # Checked again on what was opened: the path may have changed since.
        kind = os.fstat(handle.fileno()).st_mode
        if not (stat.S_ISREG(kind) or stat.S_ISFIFO(kind)):
            raise fail(_not_readable(kind))
        yield handle  # type: ignore[misc]


def _not_readable(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "is a directory, not a session file"
    return "is not a regular file (a device or a socket): not a session file"


def import_file(
    stream: BinaryIO,
    *,
    owner: Any = None,
    using: str = DEFAULT_DB_ALIAS,
    progress: Any = None,
) -> tuple[str, str, list[tuple[int, str]]]:
    """Import one file from a binary stream; returns (session id, what was stored, skipped lines).

    Every line is read bounded (:class:`~agentstore.formats.lines.LineReader`);
    the first line tells the format. An ``agentstore/1`` file streams into its
    store; pi and agentsession files are read whole, then imported. Errors name
    the line: ``BadFile`` from the reader, a store's own error prefixed with
    the line just read.
    """
    reader = LineReader(stream)
    first = reader.first()
    if first is None:
        raise fail("the file is empty: not a session file")
    if not agentstore_jsonl.sniff(first[1]):
        return _import_whole(reader, first, owner=owner, using=using)
    decoder = agentstore_jsonl.Decoder(reader, first)
    session = decoder.header()
    rows = decoder.rows()
    if progress is not None:
        rows = progress(rows)
    try:
        if session.kind == "loop":
            from agentstore.stores import LoopStore

            counts = LoopStore(using=using).import_session(session, rows, owner=owner)
        else:
            from agentstore.stores.checkpoint_rows import import_thread

            counts = import_thread(session, rows, using=using, owner=owner)
    except exceptions.BadFile:
        raise
    except exceptions.ValidationError as exc:
        # A row the store refused: the reader has just read its line.
        raise exceptions.ValidationError(
            f"line {reader.number}: {exc}", field=getattr(exc, "field", "")
        ) from None
    stored = ", ".join(f"{n} {name}{'' if n == 1 else 's'}" for name, n in counts.items())
    return session.id, stored, []


def _import_whole(
    reader: LineReader, first: tuple[int, bytes], *, owner: Any, using: str
) -> tuple[str, str, list[tuple[int, str]]]:
    """A pi or agentsession file: every line read bounded and decoded, then imported whole."""
    lines = [LineReader.text(*first)]
    for number, line in reader:
        lines.append(LineReader.text(number, line))
    text = "\n".join(lines) + ("\n" if reader.newline_at_end else "")
    session_id, count, skipped = import_text(text, owner=owner, using=using)
    # Skipped lines are numbered within the text from its header: the file's own
    # numbers are shifted by the blank lines before it.
    shift = first[0] - 1
    return session_id, f"{count} entries", [(line + shift, why) for line, why in skipped]


def _import_arguments(parser: Any) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE", help="JSONL session files (-: stdin)")
    parser.add_argument("--owner", help="username that owns the imported sessions")
    _database_argument(parser, "write into this database alias (default: default)")


def _import(name: str, ctx: Context) -> None:
    from django.contrib.auth import get_user_model

    using = _database(ctx, DEFAULT_DB_ALIAS)
    owner = None
    if ctx.opt("owner"):
        owner = get_user_model().objects.using(using).filter(username=ctx.opt("owner")).first()
        if owner is None:
            raise usage(f"no such user: {ctx.opt('owner')}")
    files = ctx.opt("files")
    failed: list[str] = []
    for number, path in enumerate(files, start=1):
        shown = _shown(path)

        def progress(rows: Iterator[Any], shown: str = shown) -> Iterator[Any]:
            for count, row in enumerate(rows, start=1):
                if count % PROGRESS_EVERY == 0:
                    ctx.note(f"  {shown}: {count} records…")
                yield row

        try:
            with _source(path) as stream:
                session_id, stored, skipped = import_file(
                    stream, owner=owner, using=using, progress=progress
                )
        except (CommandError, exceptions.AgentStoreError) as exc:
            reason = f"{shown}: {exc}"
            ctx.note(f"[{number}/{len(files)}] {reason}")
            failed.append(reason)
            continue
        except OSError as exc:  # reading the file failed midway
            reason = f"{shown}: cannot read it: {exc.strerror or exc}"
            ctx.note(f"[{number}/{len(files)}] {reason}")
            failed.append(reason)
            continue
        except Exception as exc:  # anything else a bad file provokes: reported, never a traceback
            reason = f"{shown}: {type(exc).__name__}: {exc}"
            ctx.note(f"[{number}/{len(files)}] {reason}")
            failed.append(reason)
            continue
        for line, why in skipped:
            ctx.note(f"  {shown}:{line}: skipped ({why})")
        ctx.note(f"[{number}/{len(files)}] · imported {shown} as {session_id} ({stored})")
    if len(failed) == 1 and len(files) == 1:
        raise fail(f"not imported: {failed[0]}")
    if failed:
        raise fail(f"{len(failed)} of {len(files)} file(s) not imported")


COMMANDS = [
    Subcommand(("export",), "Write sessions as JSONL files.", _export_arguments, _export),
    Subcommand(
        ("import",),
        "Read pi, agentsession or agentstore JSONL files.",
        _import_arguments,
        _import,
    ),
]
