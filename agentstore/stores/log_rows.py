"""Rows of the log store: how agentsession lines become ``Session``/``Entry`` rows and back.

Private to the log store's modules (``log*.py``). A log session is one ``Session`` row
(``kind="log"``, ``header`` = the exact header line) and one ``Entry`` row per
line, in file order by ``seq`` (1-based, a fork's copied prefix included). The
``line`` column holds the exact line the format module wrote or read — never
re-encoded, since the entry id commits to its bytes' members — so dumping the
rows in ``seq`` order *is* the JSONL file.

Entry rows are inserted with hand-written SQL through Django's connection (the
append hot path; the ORM costs several times more per row). Such an INSERT must
name every NOT NULL column: Django's defaults live in Python, not in the table.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from django.db.models import Func, IntegerField

from agentstore import db, exceptions, notify, sql
from agentstore.db import SqlCursor
from agentstore.formats.agentsession import Entry as LogEntry
from agentstore.formats.agentsession.describe import searchable
from agentstore.models import Entry
from agentstore.sql import log as log_sql
from agentstore.stores.base import lookup

__all__ = [
    "LOG",
    "OctetLength",
    "insert_entries",
    "projection",
    "parse_time",
    "read_rows",
    "require_log",
    "time_ns",
]

LOG = "log"
# A log entry fills the text projection (role, content, model, summary, tool
# name: ``describe.searchable``) so the opening message, text search and the
# entries list read every kind alike; the TreeStore-only metadata columns keep
# their model defaults (the INSERT is agentstore/sql/log.py's).
#: Characters of a line's text kept in the ``content`` projection (the line
#: keeps everything; the column is for previews and search).
PROJECTED_CHARS = 4000
#: An *item* line keeps only this much there: a preview for lists and the
#: opening message. The search index reads an item's words from the line
#: itself, so its text is stored once (decision record 0090).
ITEM_PREVIEW_CHARS = 120

_RFC3339 = re.compile(
    r"^(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})$"
)


def _split(text: str, field: str) -> tuple[datetime, int]:
    m = _RFC3339.match(text) if isinstance(text, str) else None
    if not m:
        raise exceptions.ValidationError(f"{field} {text!r} is not RFC 3339", field=field)
    date, clock, frac, zone = m.groups()
    frac = (frac or "")[:9].ljust(9, "0")
    zone = "+00:00" if zone in ("Z", "z") else zone
    try:
        base = datetime.fromisoformat(f"{date}T{clock}{zone}").astimezone(UTC)
    except ValueError as exc:
        raise exceptions.ValidationError(f"{field} {text!r} is not a time", field=field) from exc
    return base, int(frac)


def parse_time(text: str, field: str = "created_at") -> datetime:
    """An RFC 3339 string as an aware UTC datetime (fraction truncated to microseconds)."""
    base, nanos = _split(text, field)
    return base.replace(microsecond=nanos // 1000)


def time_ns(value: datetime | str, field: str = "created_at") -> int:
    """Nanoseconds since the epoch, exactly (a header's 9-digit fraction included)."""
    if isinstance(value, str):
        base, nanos = _split(value, field)
    else:
        base, nanos = value.astimezone(UTC).replace(microsecond=0), value.microsecond * 1000
    return int(base.timestamp()) * 1_000_000_000 + nanos


#: ``(ts[:19], that second as an aware UTC datetime)`` of the last ``ts`` parsed
#: (one tuple: threads see a matching pair).
_SECOND: tuple[str, datetime | None] = ("", None)


def entry_created_at(entry: LogEntry, fallback: datetime) -> datetime:
    """The entry's ``ts`` as a datetime (microseconds), or ``fallback`` without one."""
    global _SECOND
    ts = entry.ts
    if not ts:
        return fallback
    # Appends in one second share ts[:19] (the format's spelling is UTC,
    # ``YYYY-MM-DDTHH:MM:SS[.digits]Z``): parse_time's answer for that second
    # is kept, and only the fraction is read — the same digits parse_time
    # reads (a ``\d`` is a decimal character: isdecimal), the same value.
    prefix, second = _SECOND
    rest = ts[19:]
    if (
        second is not None
        and ts[:19] == prefix
        and (rest == "Z" or (rest[-1:] == "Z" and rest[:1] == "." and rest[1:-1].isdecimal()))
    ):
        return second.replace(microsecond=int(rest[1:-1][:9].ljust(9, "0")) // 1000)
    try:
        found = parse_time(ts, "entry.ts")
    except exceptions.ValidationError:
        return fallback
    if rest[-1:] == "Z" and ts[10:11] == "T":
        _SECOND = (ts[:19], found.replace(microsecond=0))
    return found


def projection(entry: LogEntry) -> tuple[str, str, str, str, str]:
    """``(role, content, tool_name, summary, model)`` of a line, for lists and search.

    The words come from the format's own ``describe.searchable``; here they are
    made storable: the line escapes a NUL but a PostgreSQL text column cannot
    hold a raw one, and ``content`` keeps :data:`PROJECTED_CHARS` — an item's
    :data:`ITEM_PREVIEW_CHARS` — (the line keeps everything).
    """
    role, content, tool_name, summary, model = searchable(entry.data)
    keep = ITEM_PREVIEW_CHARS if entry.type == "item" else PROJECTED_CHARS
    return (
        role.replace("\x00", ""),
        content.replace("\x00", "")[:keep],
        tool_name.replace("\x00", ""),
        summary.replace("\x00", ""),
        model.replace("\x00", ""),
    )


#: ``sql.row(Entry, …)`` for the columns a log line fills, positionally (once per line).
_entry_row = sql.row_builder(
    Entry,
    (
        "session_id",
        "seq",
        "entry_id",
        "parent_id",
        "type",
        "line",
        "created_at",
        "role",
        "content",
        "model",
        "summary",
        "tool_name",
        "model_facing",
        "call_id",
    ),
)


def entry_params(
    cursor: SqlCursor, session_id: str, seq: int, entry: LogEntry, fallback: Any
) -> list[Any]:
    """The bound parameters of ``sql.log.INSERT_ENTRY`` for one line at ``seq``."""
    stamp = sql.adapt_datetime(cursor.db, entry_created_at(entry, fallback))
    role, content, tool_name, summary, model = projection(entry)
    return _entry_row(
        session_id,
        seq,
        entry.id,
        entry.parent,
        entry.type[:64],
        entry.line,
        stamp,
        role,
        content,
        model,
        summary,
        tool_name,
        False,
        call_id_of(entry),
    )


def call_id_of(entry: LogEntry) -> str:
    """The ``call_id`` column of a line: its ``function_call``'s :func:`call_id_key`, or ``""``."""
    item = entry.data.get("item") if entry.type == "item" else None
    if isinstance(item, dict) and item.get("type") == "function_call":
        call_id = item.get("call_id")
        if isinstance(call_id, str) and call_id:
            return call_id_key(call_id)
    return ""


def call_id_key(call_id: str) -> str:
    """How a ``call_id`` is stored and looked up: itself, or a hash when a column cannot hold it."""
    if len(call_id) <= 128 and "\x00" not in call_id:
        return call_id
    return "sha256:" + hashlib.sha256(call_id.encode("utf-8", "surrogatepass")).hexdigest()


def insert_entries(
    cursor: SqlCursor,
    session_id: str,
    first_seq: int,
    entries: Iterable[LogEntry],
    fallback: datetime,
) -> None:
    """Insert ``entries`` as rows ``first_seq, first_seq + 1, …`` of ``session_id``."""
    rows: Sequence[list[Any]] = [
        entry_params(cursor, session_id, first_seq + i, e, fallback) for i, e in enumerate(entries)
    ]
    if len(rows) == 1:
        cursor.execute(log_sql.INSERT_ENTRY, rows[0])
    elif rows:
        cursor.executemany(log_sql.INSERT_ENTRY, rows)


def insert_fenced(
    cursor: SqlCursor,
    session_id: str,
    first_seq: int,
    entries: Sequence[LogEntry],
    fallback: datetime,
    *,
    fence: tuple[tuple[str, ...], list[Any]],
    payload: str | None,
) -> bool:
    """PostgreSQL: the session's fence, its notification and ``entries`` in one statement.

    ``fence`` is ``SessionStore.unheld_fence``'s names and parameters; ``payload``
    what to ``pg_notify`` (``None``: nothing). ``False`` when the fence refused
    (nothing was written). At most ``sql.log.FENCED_ROWS`` entries.
    """
    names, fence_params = fence
    params: list[Any] = [*fence_params]
    if payload is not None:
        params += [notify.CHANNEL, payload]
    at = _SESSION_AT
    for i, entry in enumerate(entries):
        row = entry_params(cursor, session_id, first_seq + i, entry, fallback)
        del row[at]
        params += row
    types = _ENTRY_TYPES.get(cursor.db.vendor)
    if types is None:
        types = _ENTRY_TYPES[cursor.db.vendor] = log_sql.entry_types(cursor.db)
    statement = log_sql.fenced_insert(names, len(entries), payload is not None, types)
    cursor.execute(statement, params)
    return cursor.rowcount > 0


#: Where ``session_id`` sits in an entry row's parameters.
_SESSION_AT = sql.column_names(Entry).index("session_id")
#: ``sql.log.entry_types`` per vendor (the casts of a fenced insert).
_ENTRY_TYPES: dict[str, str] = {}


def require_log(session_id: str, kind: str | None) -> None:
    """``NoSession`` when there is no row, ``WrongSessionKind`` when ``kind`` is not ``log``."""
    if kind is None:
        raise exceptions.NoSession(f"no such session: {session_id}")
    if kind != LOG:
        raise exceptions.WrongSessionKind(
            f"session {session_id} is a {kind} session, not an agentsession log",
            session_id=session_id,
            kind=kind,
            expected=LOG,
        )


@lookup("session_id", missing=lambda arguments: require_log(arguments["session_id"], None))
def read_rows(
    using: str, session_id: str, *, up_to: int | None = None
) -> tuple[str, str, list[tuple[int, str]]]:
    """Header line, incarnation and ``(seq, line)`` rows of a log session.

    Call inside a read snapshot (``agentstore.db.read_only``) so the session
    row and its lines agree. ``NoSession`` when missing or not a log session.
    Shared by ``LogStore`` and the follower (:mod:`.log_follow`), which must
    read exactly alike.
    """
    with db.cursor(using) as cursor:
        cursor.execute(log_sql.SESSION_HEADER, [session_id])
        row = cursor.fetchone()
        require_log(session_id, row[0] if row else None)
        if up_to is None:
            cursor.execute(log_sql.LINES, [session_id])
        else:
            cursor.execute(log_sql.LINES_UP_TO, [session_id, up_to])
        lines = [(int(s), str(line)) for s, line in cursor.fetchall()]
    return str(row[1]), str(row[2]), lines


class OctetLength(Func):
    """The length of a text in UTF-8 bytes (``length()`` counts characters)."""

    function = "OCTET_LENGTH"
    output_field = IntegerField()

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        return self.as_sql(
            compiler, connection, template="LENGTH(CAST(%(expressions)s AS BLOB))", **extra
        )
