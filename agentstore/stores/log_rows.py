"""Rows of the log store: how agentsession lines become ``Session``/``Entry`` rows and back.

Private to :mod:`agentstore.stores.log`. A log session is one ``Session`` row
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

import re
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from django.db.backends.utils import CursorWrapper
from django.db.models import Func, IntegerField

from agentstore import exceptions
from agentstore.formats.agentsession import Entry as LogEntry
from agentstore.models import Entry, Holder, Ref, RefLog, Session

__all__ = [
    "ENTRY_TABLE",
    "HOLDER_TABLE",
    "LOG",
    "REF_LOG_TABLE",
    "REF_TABLE",
    "SESSION_TABLE",
    "OctetLength",
    "insert_entries",
    "parse_time",
    "time_ns",
]

LOG = "log"
SESSION_TABLE = Session._meta.db_table
ENTRY_TABLE = Entry._meta.db_table
HOLDER_TABLE = Holder._meta.db_table
REF_TABLE = Ref._meta.db_table
REF_LOG_TABLE = RefLog._meta.db_table

_COLUMNS = (
    "session_id, seq, entry_id, parent_id, type, line, created_at, role, content, provider, "
    "model, custom_type, summary, tool_name, tool_status, tool_args_json, token_estimate, "
    "model_facing, display, compaction_first_kept_entry_id, compaction_tokens_before, "
    "branch_from_entry_id, operation_id, part_count"
)
# The projection columns belong to the TreeStore's entries; a log entry keeps
# them at their model defaults so every NOT NULL column gets a value.
INSERT_ENTRY = (
    f"INSERT INTO {ENTRY_TABLE} ({_COLUMNS}) VALUES "
    "(%s, %s, %s, %s, %s, %s, %s, '', '', '', '', '', '', '', '', '', 0, %s, %s, '', 0, '', '', 0)"
)

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


def entry_created_at(entry: LogEntry, fallback: datetime) -> datetime:
    """The entry's ``ts`` as a datetime (microseconds), or ``fallback`` without one."""
    try:
        return parse_time(entry.ts, "entry.ts") if entry.ts else fallback
    except exceptions.ValidationError:
        return fallback


def entry_params(
    cursor: CursorWrapper, session_id: str, seq: int, entry: LogEntry, fallback: Any
) -> list[Any]:
    """The bound parameters of :data:`INSERT_ENTRY` for one line at ``seq``."""
    stamp = cursor.db.ops.adapt_datetimefield_value(entry_created_at(entry, fallback))
    return [
        session_id,
        seq,
        entry.id,
        entry.parent,
        entry.type[:64],
        entry.line,
        stamp,
        False,
        True,
    ]


def insert_entries(
    cursor: CursorWrapper,
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
        cursor.execute(INSERT_ENTRY, rows[0])
    elif rows:
        cursor.executemany(INSERT_ENTRY, rows)


class OctetLength(Func):
    """The length of a text in UTF-8 bytes (``length()`` counts characters)."""

    function = "OCTET_LENGTH"
    output_field = IntegerField()

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> Any:
        return self.as_sql(
            compiler, connection, template="LENGTH(CAST(%(expressions)s AS BLOB))", **extra
        )
