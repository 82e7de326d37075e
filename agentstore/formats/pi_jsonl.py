"""pi session files (JSONL, versions 1–3): parse them into tree entries, and write them back.

pi (the coding agent) keeps a session as JSON lines: a header
``{"type":"session","version":3,"id","timestamp","cwd","parentSession"?}`` then one
entry per line with ``type``, ``id`` (8 hex characters), ``parentId`` (``null`` for
a root) and an ISO ``timestamp``. The leaf is implicit: the last line.

    parsed = parse(text)                 # PiSession: header, entries, skipped lines
    parsed.entries[0].tree_fields()      # what the TreeStore stores for it
    text = dump(header, lines)           # a pi file again

Versions 1 and 2 are migrated as pi itself does: v1 had no ids (they are
assigned, parents made linear, ``firstKeptEntryIndex`` turned into
``firstKeptEntryId``); v2 → v3 renamed the ``hookMessage`` role to ``custom``.
Malformed lines are skipped and reported, never fatal. Unknown fields are kept:
every imported entry carries its pi source in the tree entry's data under
``"pi"`` — the exact line for a v3 file, the migrated object otherwise — so an
export writes v3 files back byte for byte, and migrated files in their v3 form.
This module is pure Python (no Django).
"""

from __future__ import annotations

import base64
import binascii
import json
import secrets
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from agentstore.types.tree import (
    EntryEntity,
    ImportedEntry,
    ImportedSession,
    MessageEntity,
    MessagePartEntity,
    SessionEntity,
)
from agentstore.validation import UnstorableJSON, json_problem, parse_json

__all__ = [
    "CURRENT_VERSION",
    "PiEntry",
    "PiSession",
    "dump",
    "entry_line",
    "export",
    "image_size",
    "parse",
    "parse_timestamp",
    "to_imported",
]

CURRENT_VERSION = 3
_ENVELOPE = ("type", "id", "parentId", "timestamp")


def parse_timestamp(value: Any) -> datetime | None:
    """An ISO string or Unix milliseconds as an aware UTC datetime (``None`` if unreadable)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value / 1000, tz=UTC)
    if isinstance(value, str) and value:
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
    return None


def _js_time(moment: datetime) -> str:
    """``Date.toISOString()``: milliseconds, always three digits, ``Z``."""
    moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def entry_line(obj: dict[str, Any]) -> str:
    """Serialise one entry as pi does (``JSON.stringify``: compact, keys in order)."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def image_size(data: bytes) -> tuple[int, int] | None:
    """Width and height of a PNG, GIF or JPEG image, read from its header."""
    if data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 24:
        width, height = struct.unpack(">II", data[16:24])
        return width, height
    if data[:6] in (b"GIF87a", b"GIF89a") and len(data) >= 10:
        width, height = struct.unpack("<HH", data[6:10])
        return width, height
    if data[:2] == b"\xff\xd8":
        index = 2
        while index + 9 < len(data):
            if data[index] != 0xFF:
                index += 1
                continue
            marker = data[index + 1]
            if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
                index += 2
                continue
            (length,) = struct.unpack(">H", data[index + 2 : index + 4])
            if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
                height, width = struct.unpack(">HH", data[index + 5 : index + 9])
                return width, height
            index += 2 + length
    return None


@dataclass(slots=True)
class PiEntry:
    """One pi entry: its object (migrated to v3) and, for v3 files, its exact line."""

    obj: dict[str, Any]
    line: str | None = None

    @property
    def type(self) -> str:
        return str(self.obj.get("type", ""))

    @property
    def id(self) -> str:
        return str(self.obj.get("id", ""))

    @property
    def parent_id(self) -> str | None:
        parent = self.obj.get("parentId")
        return parent if isinstance(parent, str) and parent else None

    @property
    def timestamp(self) -> datetime | None:
        return parse_timestamp(self.obj.get("timestamp"))

    def source(self) -> dict[str, Any]:
        """What the tree entry keeps of its pi origin (the ``"pi"`` data key)."""
        return {"line": self.line} if self.line is not None else {"entry": self.obj}

    def tree_fields(self) -> dict[str, Any]:
        """The TreeStore fields of this entry (type, message, summary, data …)."""
        obj = self.obj
        kind = self.type
        data: dict[str, Any] = {"pi": self.source()}
        fields: dict[str, Any] = {"type": kind, "data": data}
        if kind == "message":
            raw = obj.get("message")
            message: dict[str, Any] = raw if isinstance(raw, dict) else {}
            fields["message"] = _message_fields(message)
            # In pi every message (tool results included) is part of the context.
            data["model_facing"] = True
            if message.get("role") == "toolResult":
                if isinstance(message.get("toolName"), str):
                    data["tool_name"] = message["toolName"]
                data["tool_status"] = "error" if message.get("isError") else "success"
            usage = message.get("usage")
            if message.get("role") == "assistant" and isinstance(usage, dict):
                counts = {
                    "input_tokens": usage.get("input"),
                    "output_tokens": usage.get("output"),
                }
                clean = {k: v for k, v in counts.items() if isinstance(v, int) and v > 0}
                if clean:
                    data["usage"] = clean
        elif kind == "model_change":
            fields["message"] = {
                "role": "",
                "provider": str(obj.get("provider") or ""),
                "model": str(obj.get("modelId") or ""),
            }
        elif kind == "thinking_level_change":
            data["thinking_level"] = str(obj.get("thinkingLevel") or "")
        elif kind == "compaction":
            fields["summary"] = str(obj.get("summary") or "")
            if obj.get("firstKeptEntryId"):
                data["first_kept_entry_id"] = str(obj["firstKeptEntryId"])
            if isinstance(obj.get("tokensBefore"), int) and obj["tokensBefore"] > 0:
                data["tokens_before"] = obj["tokensBefore"]
            _copy_details(obj, data)
        elif kind == "branch_summary":
            fields["summary"] = str(obj.get("summary") or "")
            if obj.get("fromId"):
                data["from_id"] = str(obj["fromId"])
            _copy_details(obj, data)
        elif kind == "custom":
            fields["custom_type"] = str(obj.get("customType") or "")
            if "data" in obj:
                data["data"] = obj["data"]
        elif kind == "custom_message":
            fields["custom_type"] = str(obj.get("customType") or "")
            text, _ = _content(obj.get("content"))
            fields["message"] = {"role": "custom", "content": text}
            display = bool(obj.get("display", True))
            data["display"] = display
            data["model_facing"] = display
            if isinstance(obj.get("details"), dict):
                data["details"] = obj["details"]
        elif kind == "label":
            data["target_id"] = str(obj.get("targetId") or "")
            if isinstance(obj.get("label"), str):
                data["label"] = obj["label"]
        elif kind == "session_info" and isinstance(obj.get("name"), str):
            data["name"] = obj["name"]
        return fields


def _copy_details(obj: dict[str, Any], data: dict[str, Any]) -> None:
    if isinstance(obj.get("details"), dict):
        data["details"] = obj["details"]
    if obj.get("fromHook") is True:
        data["from_hook"] = True


def _content(content: Any) -> tuple[str, list[dict[str, Any]]]:
    """The text projection of pi content (a string or blocks) and its text/image parts."""
    if isinstance(content, str):
        return content, []
    text = ""
    parts: list[dict[str, Any]] = []
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text" and isinstance(block.get("text"), str):
            text += block["text"]
            if block["text"].strip():
                parts.append({"type": "text", "text": block["text"]})
        elif block.get("type") == "image" and isinstance(block.get("data"), str):
            try:
                raw = base64.b64decode(block["data"], validate=True)
            except (binascii.Error, ValueError):
                continue
            size = image_size(raw)
            mime = str(block.get("mimeType") or "")
            if size is not None and mime.startswith("image/"):
                parts.append(
                    {
                        "type": "image",
                        "mime_type": mime,
                        "data": raw,
                        "width": size[0],
                        "height": size[1],
                    }
                )
    return text, parts


def _message_fields(message: dict[str, Any]) -> dict[str, Any]:
    text, parts = _content(message.get("content"))
    fields: dict[str, Any] = {
        "role": str(message.get("role") or ""),
        "content": text,
        "provider": str(message.get("provider") or ""),
        "model": str(message.get("model") or ""),
    }
    if any(part["type"] == "image" for part in parts):
        # Only worth the parts when there is an image; the content carries the text.
        if any(part["type"] == "text" for part in parts):
            fields["content"] = "".join(p["text"] for p in parts if p["type"] == "text")
        fields["parts"] = parts
    return fields


@dataclass(slots=True)
class PiSession:
    header: dict[str, Any]
    header_line: str | None
    entries: list[PiEntry] = field(default_factory=list)
    #: (line number, reason) of every line that was skipped.
    skipped: list[tuple[int, str]] = field(default_factory=list)
    version: int = CURRENT_VERSION

    @property
    def id(self) -> str:
        return str(self.header.get("id") or "")

    @property
    def cwd(self) -> str:
        return str(self.header.get("cwd") or "")

    @property
    def parent_session(self) -> str:
        return str(self.header.get("parentSession") or "")

    @property
    def created_at(self) -> datetime | None:
        return parse_timestamp(self.header.get("timestamp"))

    @property
    def name(self) -> str:
        """The last ``session_info`` name, as pi shows it."""
        names = [
            e.obj["name"]
            for e in self.entries
            if e.type == "session_info" and isinstance(e.obj.get("name"), str) and e.obj["name"]
        ]
        return str(names[-1]) if names else ""

    def header_out(self) -> str:
        """The header line to write back (the original for v3 files)."""
        if self.header_line is not None and self.version == CURRENT_VERSION:
            return self.header_line
        return entry_line({**self.header, "version": CURRENT_VERSION})


def _new_id(taken: set[str]) -> str:
    while True:
        candidate = secrets.token_hex(4)
        if candidate not in taken:
            taken.add(candidate)
            return candidate


class _Damaged(ValueError):
    """A line that is not JSON at all (a torn write): skipped, as pi skips it."""


def _load_line(line: str, number: int) -> Any:
    """Parse one line; a damaged line raises ``_Damaged``, an unstorable one ``ValueError``.

    JSON that parses but that agentstore will not store — ``1e999`` (read as
    infinity, which breaks every later JSON answer), NUL characters, lone
    surrogates, nesting past ``JSON_MAX_DEPTH`` — refuses the whole file with
    its line number, as the API refuses such bodies (docs/commands.md "import").
    """
    try:
        value = parse_json(line)
    except UnstorableJSON as exc:
        raise ValueError(f"line {number}: {exc}") from None
    except ValueError:
        raise _Damaged(line) from None
    problem = json_problem(value)
    if problem:
        raise ValueError(f"line {number}: the JSON value {problem}")
    return value


def parse(text: str) -> PiSession:
    """Parse a pi session file; malformed lines are skipped and listed in ``skipped``.

    Raises ``ValueError`` when the first line is not a session header, and
    when a line holds JSON that cannot be stored (see :func:`_load_line`).
    """
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines:
        raise ValueError("empty file: a pi session starts with a session header line")
    try:
        header = _load_line(lines[0], 1)
    except _Damaged:
        raise ValueError("line 1 is not JSON: a pi session starts with a session header") from None
    if not isinstance(header, dict) or header.get("type") != "session":
        raise ValueError('line 1 is not a pi session header ({"type":"session",…})')
    version = header.get("version", 1)
    if not isinstance(version, int) or version < 1 or version > CURRENT_VERSION:
        raise ValueError(f"unsupported pi session version {version!r}")
    session = PiSession(header=header, header_line=lines[0], version=version)

    objects: list[tuple[dict[str, Any], str, int]] = []
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        try:
            obj = _load_line(line, number)
        except _Damaged:
            session.skipped.append((number, "not JSON"))
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("type"), str):
            session.skipped.append((number, "not an entry object with a type"))
            continue
        objects.append((obj, line, number))

    if version == 1:
        objects = _migrate_v1(objects)
    seen: set[str] = set()
    for obj, line, number in objects:
        if version <= 2 and obj.get("type") == "message":
            message = obj.get("message")
            if isinstance(message, dict) and message.get("role") == "hookMessage":
                obj = {**obj, "message": {**message, "role": "custom"}}
        entry_id = obj.get("id")
        if not isinstance(entry_id, str) or not entry_id:
            session.skipped.append((number, "entry without an id"))
            continue
        if entry_id in seen:
            session.skipped.append((number, f"duplicate id {entry_id}"))
            continue
        parent = obj.get("parentId")
        if parent is not None and (not isinstance(parent, str) or parent not in seen):
            session.skipped.append((number, f"parent {parent!r} is not an earlier entry"))
            continue
        if parse_timestamp(obj.get("timestamp")) is None:
            session.skipped.append((number, "entry without a readable timestamp"))
            continue
        seen.add(entry_id)
        migrated = version < CURRENT_VERSION
        session.entries.append(PiEntry(obj=obj, line=None if migrated else line))
    return session


def _migrate_v1(
    objects: list[tuple[dict[str, Any], str, int]],
) -> list[tuple[dict[str, Any], str, int]]:
    """v1 was linear and had no ids: assign ids and parents as pi's migration does."""
    taken = {str(o["id"]) for o, _, _ in objects if isinstance(o.get("id"), str)}
    ids = [o["id"] if isinstance(o.get("id"), str) else _new_id(taken) for o, _, _ in objects]
    migrated = []
    for index, (obj, line, number) in enumerate(objects):
        copy = dict(obj)
        copy["id"] = ids[index]
        copy.setdefault("parentId", ids[index - 1] if index else None)
        if "firstKeptEntryIndex" in copy:
            kept = copy.pop("firstKeptEntryIndex")
            if isinstance(kept, int) and not isinstance(kept, bool) and 0 <= kept < len(ids):
                copy["firstKeptEntryId"] = ids[kept]
        migrated.append((copy, line, number))
    return migrated


def dump(header_line: str, lines: list[str]) -> str:
    """A pi file from its header line and entry lines (leaf last)."""
    return "\n".join([header_line, *lines]) + "\n"


def tree_entry_object(
    *,
    entry_type: str,
    entry_id: str,
    parent_id: str | None,
    created_at: datetime,
    role: str,
    content: str,
    provider: str,
    model: str,
    custom_type: str,
    summary: str,
    data: dict[str, Any],
    parts: list[dict[str, Any]],
) -> dict[str, Any]:
    """A pi entry object for a tree entry that did not come from a pi file."""
    obj: dict[str, Any] = {
        "type": entry_type,
        "id": entry_id,
        "parentId": parent_id,
        "timestamp": _js_time(created_at),
    }
    millis = int(created_at.timestamp() * 1000)
    if entry_type == "message":
        blocks: list[dict[str, Any]] = []
        for part in parts:
            if part["type"] == "text":
                blocks.append({"type": "text", "text": part["text"]})
            elif part["type"] == "image":
                encoded = base64.b64encode(part["data"]).decode()
                blocks.append({"type": "image", "data": encoded, "mimeType": part["mime_type"]})
        message: dict[str, Any] = {"role": role, "content": blocks or content}
        if role == "assistant":
            message["provider"] = provider
            message["model"] = model
        if role == "toolResult":
            message["toolName"] = data.get("tool_name", "")
            message["isError"] = data.get("tool_status") == "error"
        message["timestamp"] = millis
        obj["message"] = message
    elif entry_type == "model_change":
        obj["provider"] = provider
        obj["modelId"] = model
    elif entry_type == "thinking_level_change":
        obj["thinkingLevel"] = data.get("thinking_level", "")
    elif entry_type == "compaction":
        obj["summary"] = summary
        obj["firstKeptEntryId"] = data.get("first_kept_entry_id") or data.get(
            "compaction_first_kept_entry_id", ""
        )
        obj["tokensBefore"] = data.get("tokens_before") or data.get("compaction_tokens_before", 0)
        if "details" in data:
            obj["details"] = data["details"]
        if data.get("from_hook"):
            obj["fromHook"] = True
    elif entry_type == "branch_summary":
        obj["fromId"] = data.get("from_id") or data.get("branch_from_entry_id", "")
        obj["summary"] = summary
        if "details" in data:
            obj["details"] = data["details"]
        if data.get("from_hook"):
            obj["fromHook"] = True
    elif entry_type == "custom":
        obj["customType"] = custom_type
        extra = {k: v for k, v in data.items() if k not in _DERIVED_KEYS}
        if "data" in extra and len(extra) == 1:
            obj["data"] = extra["data"]
        elif extra:
            obj["data"] = extra
    elif entry_type == "custom_message":
        obj["customType"] = custom_type
        obj["content"] = content
        obj["display"] = bool(data.get("display", True))
        if "details" in data:
            obj["details"] = data["details"]
    elif entry_type == "label":
        obj["targetId"] = data.get("target_id", "")
        if "label" in data:
            obj["label"] = data["label"]
    elif entry_type == "session_info" and "name" in data:
        obj["name"] = data["name"]
    return obj


#: Keys the tree store writes into every entry's data (not caller data).
_DERIVED_KEYS = frozenset(
    {
        "model_facing",
        "display",
        "token_estimate",
        "tool_name",
        "tool_status",
        "tool_args_json",
        "compaction_first_kept_entry_id",
        "compaction_tokens_before",
        "branch_from_entry_id",
        "pi",
    }
)


# -- tree sessions <-> pi files ------------------------------------------------------


def to_imported(parsed: PiSession) -> ImportedSession:
    """The TreeStore import of a parsed pi file (ids, parents and timestamps kept)."""
    entries = []
    for entry in parsed.entries:
        fields = entry.tree_fields()
        message = None
        if "message" in fields:
            raw = fields["message"]
            message = MessageEntity(
                role=raw["role"],
                content=raw.get("content", ""),
                provider=raw.get("provider", ""),
                model=raw.get("model", ""),
                parts=tuple(MessagePartEntity(**part) for part in raw.get("parts", ())),
            )
        stamp = entry.timestamp
        assert stamp is not None  # parse() skipped entries without one
        entries.append(
            ImportedEntry(
                id=entry.id,
                type=entry.type,
                created_at=stamp,
                parent_id=entry.parent_id,
                message=message,
                custom_type=fields.get("custom_type", ""),
                summary=fields.get("summary", ""),
                data=fields["data"],
            )
        )
    return ImportedSession(
        id=parsed.id,
        cwd=parsed.cwd,
        name=parsed.name,
        parent_session=parsed.parent_session,
        created_at=parsed.created_at,
        header=parsed.header_out(),
        entries=tuple(entries),
    )


def export(session: SessionEntity, entries: Sequence[EntryEntity], leaf_id: str | None) -> str:
    """A pi file of a tree session: entries in insertion order, the leaf on the last line.

    Entries imported from pi are written from their stored source (the exact line
    of a v3 file); entries made in agentstore are written in pi's shape.
    """
    if session.header:
        header = session.header
    else:
        obj: dict[str, Any] = {
            "type": "session",
            "version": CURRENT_VERSION,
            "id": session.id,
            "timestamp": _js_time(session.created_at),
            "cwd": session.cwd,
        }
        if session.parent_session:
            obj["parentSession"] = session.parent_session
        header = entry_line(obj)
    ordered = list(entries)
    if leaf_id is not None:
        # pi's leaf is implicit: the last line. A leaf is childless, so moving it
        # to the end never puts a child before its parent.
        leaves = [e for e in ordered if e.id == leaf_id]
        ordered = [e for e in ordered if e.id != leaf_id] + leaves
    return dump(header, [_entry_to_line(e) for e in ordered])


def _entry_to_line(entry: EntryEntity) -> str:
    data = entry.data
    source = data.get("pi")
    if isinstance(source, dict):
        if isinstance(source.get("line"), str):
            return str(source["line"])
        if isinstance(source.get("entry"), dict):
            return entry_line(source["entry"])
    message = entry.message
    return entry_line(
        tree_entry_object(
            entry_type=entry.type,
            entry_id=entry.id,
            parent_id=entry.parent_id,
            created_at=entry.created_at,
            role=message.role,
            content=message.content,
            provider=message.provider,
            model=message.model,
            custom_type=entry.custom_type,
            summary=entry.summary,
            data=data,
            parts=[
                {"type": p.type, "text": p.text, "mime_type": p.mime_type, "data": p.data}
                for p in message.parts
            ],
        )
    )
