"""agentstore's own export format, ``agentstore/1``: loop sessions and LangGraph threads as JSONL.

Tree sessions travel as pi files and log sessions as agentsession files; the
kinds no outside format describes — agent-loop sessions and LangGraph threads —
travel in this one, every stored value kept (docs/commands.md, "The agentstore
format")::

    {"type":"session","format":"agentstore/1","kind":"loop","id":"s1","created_at":"…",…}
    {"type":"step","step_index":0,"step_type":"user","content":"hi","tool_args":null,…}
    {"type":"grant","prompt":"run ls?","granted_at":"2026-05-01T10:00:00.000000Z"}
    {"type":"end","counts":{"step":1,"grant":1}}

A graph thread has ``checkpoint``, ``blob`` and ``write`` records instead. The
``end`` record counts the records, so a file cut short at a line boundary is
refused rather than imported in part. Values: timestamps in UTC with
microseconds; the loop's JSON-text bytes (``data``, ``tool_args``) as their
text; every other byte string (checkpoint values) in base64. A record longer
than the line limit (:func:`agentstore.formats.lines.line_limit`) is cut into
``{"type":"part","base64":…}`` lines, the last with ``"last":true``, which
the reader joins back (up to :data:`MAX_RECORD_BYTES`).

    lines = encode(LoopStore().export_rows(sid))         # str lines, streamed
    decoder = Decoder(reader, first)                     # a LineReader and its first line
    session = decoder.header()                           # a SessionRow
    LoopStore().import_session(session, decoder.rows())  # rows parsed as they are stored

Both directions stream: memory is one record, whatever the session's length.
Unknown fields and record types are refused (a file from a newer agentstore
says so); every field an older ``agentstore/1`` file lacks takes its default.
This module is Django-free apart from the line limit.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import functools
import json
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

from agentstore.exceptions import BadFile, ValidationError
from agentstore.formats.lines import LineReader, line_limit
from agentstore.types.checkpoints import BlobRow, CheckpointRow, WriteRow
from agentstore.types.loop import GrantInfo, RunStep
from agentstore.types.sessions import SessionRow
from agentstore.validation import UnstorableJSON, json_problem, parse_json

__all__ = ["FORMAT", "KINDS", "MAX_RECORD_BYTES", "Decoder", "encode", "sniff"]

FORMAT = "agentstore/1"
_PREFIX = "agentstore/"

#: The largest record the reader joins from parts: PostgreSQL's largest value (1 GiB).
MAX_RECORD_BYTES = 2**30

# -- how each field is written and read ------------------------------------------------


def _stamp_out(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _json_text_out(value: bytes | None) -> str | None:
    if value is None:
        return None
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise ValidationError("a JSON-text value is not UTF-8", field="bytes") from None


def _b64_out(value: bytes | None) -> str | None:
    return None if value is None else base64.b64encode(value).decode("ascii")


def _same(value: Any) -> Any:
    return value


# A codec: (write, read, what the read wants in words). Reads raise ValueError.
def _want(kind: type, what: str) -> Callable[[Any], Any]:
    def read(value: Any) -> Any:
        if isinstance(value, bool) and kind is not bool or not isinstance(value, kind):
            raise ValueError(what)
        return value

    return read


def _optional(read: Callable[[Any], Any]) -> Callable[[Any], Any]:
    return lambda value: None if value is None else read(value)


def _b64_in(value: Any) -> bytes:
    if not isinstance(value, str):
        raise ValueError("must be base64 text")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError("is not valid base64") from None


def _stamp_in(value: Any) -> datetime:
    if not isinstance(value, str):
        raise ValueError("must be an ISO 8601 timestamp")
    try:
        stamp = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"is not an ISO 8601 timestamp: {value[:40]!r}") from None
    if stamp.tzinfo is None or stamp.utcoffset() is None:
        raise ValueError("must carry its time zone (Z)")
    try:
        return stamp.astimezone(UTC)
    except OverflowError:  # 0001-01-01T00:00+01:00 is before year 1 in UTC
        raise ValueError(f"is out of range: {value[:40]!r}") from None


_TEXT = (_same, _want(str, "must be a string"))
_INT = (_same, _want(int, "must be an integer"))
_OBJECT = (_same, _want(dict, "must be a JSON object"))
_OPT_TEXT = (_same, _optional(_want(str, "must be a string or null")))
_JSON_TEXT = (_json_text_out, _optional(lambda v: _want(str, "must be text or null")(v).encode()))
_B64 = (_b64_out, _b64_in)
_OPT_B64 = (_b64_out, _optional(_b64_in))
_STAMP = (_stamp_out, _stamp_in)

Codec = tuple[Callable[[Any], Any], Callable[[Any], Any]]

# Each record: its dataclass and (key in the file, attribute, codec) per field.
_SESSION: list[tuple[str, str, Codec]] = [
    ("id", "id", _TEXT),
    ("kind", "kind", _TEXT),
    ("created_at", "created_at", _STAMP),
    ("updated_at", "updated_at", _STAMP),
    *((name, name, _TEXT) for name in ("cwd", "name", "parent_session", "model", "system_prompt")),
    ("data", "data", _JSON_TEXT),
    ("message_id", "message_id", _TEXT),
    ("status", "status", _TEXT),
    *(
        (name, name, _INT)
        for name in (
            "prompt_tokens",
            "completion_tokens",
            "step_count",
            "duration_ms",
            "data_bytes_carried",
        )
    ),
]
_RECORDS: dict[str, tuple[type, list[tuple[str, str, Codec]]]] = {
    "step": (
        RunStep,
        [
            ("step_index", "step_index", _INT),
            ("step_type", "step_type", _TEXT),
            ("content", "content", _TEXT),
            ("tool_args", "tool_args", _JSON_TEXT),
            ("duration_ms", "duration_ms", _INT),
            ("prompt_tokens", "prompt_tokens", _INT),
            ("completion_tokens", "completion_tokens", _INT),
            ("created_at", "created_at", _STAMP),
        ],
    ),
    "grant": (GrantInfo, [("prompt", "prompt", _TEXT), ("granted_at", "granted_at", _STAMP)]),
    "checkpoint": (
        CheckpointRow,
        [
            ("checkpoint_ns", "checkpoint_ns", _TEXT),
            ("checkpoint_id", "checkpoint_id", _TEXT),
            ("parent_checkpoint_id", "parent_checkpoint_id", _OPT_TEXT),
            ("value_type", "type", _TEXT),
            ("checkpoint", "checkpoint", _B64),
            ("metadata", "metadata", _OBJECT),
            ("channel_versions", "channel_versions", _OBJECT),
            ("run_id", "run_id", _TEXT),
            ("inline", "inline", _B64),
            ("created_at", "created_at", _STAMP),
        ],
    ),
    "blob": (
        BlobRow,
        [
            ("checkpoint_ns", "checkpoint_ns", _TEXT),
            ("channel", "channel", _TEXT),
            ("version", "version", _TEXT),
            ("value_type", "type", _TEXT),
            ("blob", "blob", _OPT_B64),
        ],
    ),
    "write": (
        WriteRow,
        [
            ("checkpoint_ns", "checkpoint_ns", _TEXT),
            ("checkpoint_id", "checkpoint_id", _TEXT),
            ("task_id", "task_id", _TEXT),
            ("task_path", "task_path", _TEXT),
            ("idx", "idx", _INT),
            ("channel", "channel", _TEXT),
            ("value_type", "type", _TEXT),
            ("blob", "blob", _B64),
        ],
    ),
}
#: The record types of each session kind this format carries, in the order written.
KINDS: dict[str, tuple[str, ...]] = {
    "loop": ("step", "grant"),
    "graph": ("checkpoint", "blob", "write"),
}
_NAMES = {cls: name for name, (cls, _) in _RECORDS.items()}


# -- writing ---------------------------------------------------------------------------


def _dumps(value: dict[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _lines(value: dict[str, Any], limit: int) -> Iterator[str]:
    """One record's line, or its parts when the line would pass ``limit`` bytes."""
    text = _dumps(value)
    data = text.encode("utf-8")
    if len(data) <= limit:
        yield text + "\n"
        return
    # base64 makes 4 characters of 3 bytes; the part's own keys take under 48.
    piece = max(3, (limit - 48) // 4 * 3)
    for start in range(0, len(data), piece):
        part: dict[str, Any] = {"type": "part", "base64": _b64_out(data[start : start + piece])}
        if start + piece >= len(data):
            part["last"] = True
        yield _dumps(part) + "\n"


def _encoded(name: str, spec: list[tuple[str, str, Codec]], row: Any) -> dict[str, Any]:
    value: dict[str, Any] = {"type": name}
    for key, attr, (write, _) in spec:
        try:
            value[key] = write(getattr(row, attr))
        except ValidationError:
            raise ValidationError(
                f"{name} {attr} is not UTF-8 JSON text: it cannot be exported", field=attr
            ) from None
    return value


def encode(rows: Iterable[Any], *, limit: int | None = None) -> Iterator[str]:
    """The lines (each ending in a newline) of the file of ``rows``: a ``SessionRow`` first.

    ``rows`` is what ``LoopStore.export_rows`` or ``checkpoint_rows.export_thread``
    yields; it is read as the lines are taken. ``ValidationError`` for a value
    JSON cannot carry (metadata holding ``NaN``, say), naming the record.
    """
    limit = line_limit() if limit is None else limit
    found = iter(rows)
    session = next(found, None)
    if not isinstance(session, SessionRow) or session.kind not in KINDS:
        raise ValidationError("an agentstore file starts with a loop or graph session row")
    header: dict[str, Any] = {"type": "session", "format": FORMAT}
    header.update((k, v) for k, v in _encoded("session", _SESSION, session).items() if k != "type")
    yield from _lines(header, limit)
    counts = dict.fromkeys(KINDS[session.kind], 0)
    for row in found:
        name = _NAMES.get(type(row), "")
        if name not in counts:
            raise ValidationError(f"a {session.kind} session has no {type(row).__name__} rows")
        counts[name] += 1
        try:
            yield from _lines(_encoded(name, _RECORDS[name][1], row), limit)
        except ValueError as exc:  # NaN or Infinity in a JSON value
            if isinstance(exc, ValidationError):
                raise
            raise ValidationError(
                f"{name} #{counts[name]} holds a value JSON cannot carry ({exc})", field=name
            ) from None
    yield from _lines({"type": "end", "counts": counts}, limit)


# -- reading ---------------------------------------------------------------------------


def sniff(line: bytes) -> bool:
    """Whether a file's first line starts an agentstore file (the reader tells the rest)."""
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return False
    if not isinstance(value, dict):
        return False
    if value.get("type") == "part":
        return True
    fmt = value.get("format")
    return value.get("type") == "session" and isinstance(fmt, str) and fmt.startswith(_PREFIX)


def _load(number: int, line: bytes, where: str) -> dict[str, Any]:
    """A line (or a record joined from parts) as a record: a JSON object with a ``type``."""
    text = LineReader.text(number, line)
    try:
        value = parse_json(text)
    except UnstorableJSON as exc:
        raise BadFile(f"{where}: {exc}", line=number) from None
    except ValueError as exc:
        raise BadFile(f"{where} is not JSON ({exc})", line=number) from None
    problem = json_problem(value)
    if problem:
        raise BadFile(f"{where}: the JSON {problem}", line=number)
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise BadFile(f'{where} is not a record (a JSON object with a "type")', line=number)
    return value


@functools.cache
def _shape(cls: type, keys: tuple[str, ...]) -> tuple[frozenset[str], frozenset[str]]:
    """A record's known keys (its fields and the envelope) and the attributes with defaults."""
    defaults = {f.name for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING}
    return frozenset({*keys, "type", "format"}), frozenset(defaults)


def _build(
    cls: type,
    spec: list[tuple[str, str, Codec]],
    value: dict[str, Any],
    where: str,
    number: int,
    **given: Any,
) -> Any:
    """``cls`` of a record's fields (``given``: fields the file does not carry)."""
    known, defaults = _shape(cls, tuple(key for key, _, _ in spec))
    if not known.issuperset(value):
        unknown = sorted(set(value) - known)
        raise BadFile(
            f"{where}: unknown field {unknown[0]!r} in a {value['type']} record "
            "(a file from a newer agentstore?)",
            line=number,
        )
    fields: dict[str, Any] = given
    for key, attr, (_, read) in spec:
        if key not in value:
            if attr in defaults:
                continue
            raise BadFile(f"{where}: {value['type']} record without {key!r}", line=number)
        try:
            fields[attr] = read(value[key])
        except ValueError as exc:
            raise BadFile(f"{where}: {key} {exc}", line=number) from None
    return cls(**fields)


class Decoder:
    """Reads an ``agentstore/1`` file: :meth:`header`, then :meth:`rows` (see the module).

    ``first`` is the file's first non-blank line as :meth:`LineReader.first`
    returned it; the rest comes from ``reader`` as :meth:`rows` is iterated.
    Every problem is a :class:`~agentstore.exceptions.BadFile` naming its line.
    """

    def __init__(self, reader: LineReader, first: tuple[int, bytes]) -> None:
        self.reader = reader
        self._first: tuple[int, bytes] | None = first
        self._records = self._read()
        self.session: SessionRow | None = None

    def _raw(self) -> Iterator[tuple[int, bytes]]:
        if self._first is not None:
            first, self._first = self._first, None
            yield first
        for number, line in self.reader:
            if line.strip():
                yield number, line

    def _read(self) -> Iterator[tuple[int, dict[str, Any]]]:
        """The records, parts joined; each with the number of its (first) line."""
        lines = self._raw()
        for number, line in lines:
            value = _load(number, line, f"line {number}")
            if value["type"] != "part":
                yield number, value
                continue
            start, joined = number, bytearray()
            while True:
                if set(value) - {"type", "base64", "last"}:
                    raise BadFile(f"line {number}: a part has only base64 and last", line=number)
                try:
                    joined += _b64_in(value.get("base64"))
                except ValueError as exc:
                    raise BadFile(f"line {number}: base64 {exc}", line=number) from None
                if len(joined) > MAX_RECORD_BYTES:
                    raise BadFile(
                        f"line {start}: a record in parts is larger than {MAX_RECORD_BYTES} bytes",
                        line=start,
                    )
                if value.get("last") is True:
                    break
                following = next(lines, None)
                if following is None:
                    raise BadFile(
                        f"the record in parts from line {start} has no last part: "
                        "the file was cut short",
                        line=start,
                    )
                number, line = following
                value = _load(number, line, f"line {number}")
                if value["type"] != "part":
                    raise BadFile(
                        f"line {number}: the record in parts from line {start} is unfinished",
                        line=number,
                    )
            record = _load(start, bytes(joined), f"line {start} (a record in parts)")
            if record["type"] == "part":
                raise BadFile(f"line {start}: a part holds a part", line=start)
            yield start, record

    def header(self) -> SessionRow:
        """The session record (the file's first): a ``SessionRow``."""
        found = next(self._records, None)
        if found is None:
            raise BadFile("the file is empty: not a session file", line=0)
        number, value = found
        where = f"line {number}"
        fmt = value.get("format")
        if value["type"] != "session" or not isinstance(fmt, str) or not fmt.startswith(_PREFIX):
            raise BadFile(f"{where} is not an agentstore session record", line=number)
        if fmt != FORMAT:
            version = fmt[len(_PREFIX) :]
            newer = version.isdigit() and int(version) > 1
            raise BadFile(
                f"{where}: format {fmt!r} "
                + ("is from a newer agentstore" if newer else "is not one agentstore writes")
                + f"; this version reads {FORMAT}",
                line=number,
            )
        if value.get("kind") not in KINDS:
            raise BadFile(
                f"{where}: kind must be one of {', '.join(KINDS)} (tree sessions travel "
                "as pi files, log sessions as agentsession files)",
                line=number,
            )
        session: SessionRow = _build(SessionRow, _SESSION, value, where, number)
        self.session = session
        return session

    def rows(self) -> Iterator[Any]:
        """The session's rows, as the store takes them, through the ``end`` record (checked)."""
        session = self.session
        if session is None:
            raise RuntimeError("Decoder.rows() before header()")
        counts = dict.fromkeys(KINDS[session.kind], 0)
        for number, value in self._records:
            kind = value["type"]
            where = f"line {number}"
            if kind == "end":
                self._check_end(value, counts, number)
                return
            if kind not in counts:
                raise BadFile(
                    f"{where}: a {session.kind} session has no {kind!r} records", line=number
                )
            cls, spec = _RECORDS[kind]
            if kind in ("step", "grant"):
                row = _build(cls, spec, value, where, number, session_id=session.id)
            else:
                row = _build(cls, spec, value, where, number)
            counts[kind] += 1
            yield row
        raise BadFile(
            "the file ends before its end record: it was cut short", line=self.reader.number
        )

    def _check_end(self, value: dict[str, Any], counts: dict[str, int], number: int) -> None:
        if set(value) - {"type", "counts"} or value.get("counts") != counts:
            raise BadFile(
                f"line {number}: the end record counts {value.get('counts')!r} but the file "
                f"holds {counts!r}: records are missing",
                line=number,
            )
        extra = next(self._records, None)
        if extra is not None:
            raise BadFile(f"line {extra[0]}: a record after the end record", line=extra[0])
