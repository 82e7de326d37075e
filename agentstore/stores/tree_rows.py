"""Rows of the tree store: how ``Entry``/``MessagePart`` rows become value objects and back.

Private to the tree store (:mod:`agentstore.stores.tree` and its ``tree_*``
modules). A tree entry is one ``Entry`` row (``kind="tree"`` on its session);
its message's parts are ``MessagePart`` rows, except a plain-text message,
which stores none and is read back as one text part ("legacy text" in
librecode). Reads select the columns :func:`agentstore.sql.tree.select_list`
names, in its order, and turn them into frozen value objects here::

    entries = select_entries(cursor, "e.session_id = %s", [session_id])
    entries[0].message.parts                     # stored parts, or the content as one

Hot reads and the append build their objects with the positional builders of
:mod:`agentstore.types.frozen` (:data:`new_entry`, :data:`new_message`,
:data:`new_part`); ``require_fields`` below pins the field order every
positional call here is written for, so a field added to a value object fails
at import instead of filling the wrong slot.

Two columns hold JSON this module encodes: an entry's ``line`` (its data object,
:func:`encode_data`, once per append) and a compaction's
``compaction_settings`` (the provider, model and thinking level in force at
its parent, :func:`encode_settings`/:func:`decode_settings`).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from agentstore import sql
from agentstore.db import SqlCursor
from agentstore.formats.json_encoder import make_encoder
from agentstore.models import MessagePart
from agentstore.models.sessions import SessionKind
from agentstore.sql import tree as tree_sql
from agentstore.stores.tree_context import Settings
from agentstore.stores.tree_parts import message_sender
from agentstore.types.frozen import positional_builder, require_fields
from agentstore.types.tree import (
    EntryEntity,
    MessageEntity,
    MessagePartEntity,
    SessionMessageEntity,
)

__all__ = [
    "TREE",
    "build_entries",
    "decode_settings",
    "encode_data",
    "encode_settings",
    "entries_from_rows",
    "load_parts",
    "message_from_entry",
    "message_parts",
    "new_entry",
    "new_message",
    "new_part",
    "part_rows",
    "select_entries",
]

#: The session kind this store reads and writes.
TREE = SessionKind.TREE.value

# Positions in the selected rows, and the chunk size (agentstore/sql/tree.py).
_PK = tree_sql.PK
_PART_COUNT = tree_sql.PART_COUNT
_CHUNK = tree_sql.CHUNK


# -- the builders --------------------------------------------------------------------

# The fields of the value objects a branch read builds, in the order their
# positional builders take them (agentstore.types.frozen: a read of 50 entries
# builds 150 objects, and a keyword call would cost more than their slots).
require_fields(
    EntryEntity,
    (
        "id", "session_id", "type", "created_at", "parent_id", "message", "custom_type",
        "data_json", "summary", "tool_name", "tool_status", "tool_args_json",
        "token_estimate", "model_facing", "display", "compaction_first_kept_entry_id",
        "compaction_tokens_before", "branch_from_entry_id", "operation_id", "seq",
    ),
)  # fmt: skip
require_fields(MessageEntity, ("role", "content", "provider", "model", "parts", "timestamp"))
require_fields(MessagePartEntity, ("type", "text", "mime_type", "name", "data", "width", "height"))

#: ``EntryEntity(...)`` from every field, positionally (``require_fields``' order above).
new_entry: Callable[..., EntryEntity] = positional_builder(EntryEntity)
#: ``MessageEntity(role, content, provider, model, parts, timestamp)``.
new_message: Callable[..., MessageEntity] = positional_builder(MessageEntity)
#: ``MessagePartEntity(type, text, mime_type, name, data, width, height)``.
new_part: Callable[..., MessagePartEntity] = positional_builder(MessagePartEntity)


# -- rows to value objects -----------------------------------------------------------


def select_entries(
    cursor: SqlCursor,
    where: str,
    params: Sequence[Any],
    *,
    order: str = "e.created_at, e.seq",
    hydrate: bool = True,
) -> list[EntryEntity]:
    """The entries ``where`` selects (``e.`` is the entry table), in ``order``.

    ``hydrate=False`` skips the parts (a message then has none).
    """
    cursor.execute(tree_sql.select_entries(cursor.db.vendor, where, order), list(params))
    return build_entries(cursor, cursor.fetchall(), hydrate)


def build_entries(
    cursor: SqlCursor, rows: Sequence[Sequence[Any]], hydrate: bool
) -> list[EntryEntity]:
    """``EntryEntity`` values of rows already selected, their parts loaded when ``hydrate``."""
    text_stamps = cursor.db.vendor == "sqlite"
    if not hydrate:
        return entries_from_rows(rows, None, text_stamps=text_stamps)
    parts = load_parts(cursor, [row[_PK] for row in rows if row[_PART_COUNT]])
    return entries_from_rows(rows, parts, text_stamps=text_stamps)


def load_parts(cursor: SqlCursor, pks: list[int]) -> dict[int, list[MessagePartEntity]]:
    """The stored message parts of the entries with primary keys ``pks``, in order."""
    found: dict[int, list[MessagePartEntity]] = defaultdict(list)
    for start in range(0, len(pks), _CHUNK):
        chunk = pks[start : start + _CHUNK]
        cursor.execute(tree_sql.load_parts(len(chunk)), chunk)
        for pk, kind, text, mime, name, width, height, data in cursor.fetchall():
            # Positional, in require_fields' order (type, text, mime_type, name,
            # data, width, height).
            found[pk].append(new_part(kind, text, mime, name, _as_bytes(data), width, height))
    return found


def _as_bytes(value: Any) -> bytes:
    return b"" if value is None else bytes(value)


def entries_from_rows(
    rows: Iterable[Sequence[Any]],
    parts: Mapping[int, list[MessagePartEntity]] | None,
    *,
    text_stamps: bool,
) -> list[EntryEntity]:
    """``EntryEntity`` values of selected entry rows (:func:`tree_sql.select_list`).

    ``parts``: the stored message parts by entry primary key (an entry with a
    message and none gets its content as one text part, :func:`message_parts`);
    ``None``: no parts at all (an unhydrated read). ``text_stamps``: ``created_at``
    is SQLite's text (naive UTC), parsed here directly; else :func:`sql.utc`.
    One loop with the builders called positionally (in ``require_fields``' order
    above): per-row helper calls were a fifth of a 50-entry branch read.
    """
    build_entry, build_message, build_part = new_entry, new_message, new_part
    parse, utc = datetime.fromisoformat, sql.utc
    out: list[EntryEntity] = []
    append = out.append
    for (
        session_id,
        pk,
        seq,
        entry_id,
        parent_id,
        entry_type,
        line,
        created_at,
        role,
        content,
        provider,
        model,
        custom_type,
        summary,
        tool_name,
        tool_status,
        tool_args_json,
        token_estimate,
        model_facing,
        display,
        first_kept,
        tokens_before,
        branch_from,
        operation_id,
        _part_count,
    ) in rows:
        if text_stamps:
            try:
                stamp = parse(created_at + "+00:00")
            except (TypeError, ValueError):
                stamp = utc(created_at)
        else:
            stamp = utc(created_at)
        found: tuple[MessagePartEntity, ...] = ()
        if role and parts is not None:  # as message_parts, inlined
            stored = parts.get(pk)
            if stored:
                found = tuple(stored)
            elif content.strip():
                found = (build_part("text", content, "", "", b"", 0, 0),)
        append(
            build_entry(
                entry_id,
                session_id,
                entry_type,
                stamp,
                parent_id,
                build_message(role, content, provider, model, found, stamp),
                custom_type,
                line,
                summary,
                tool_name,
                tool_status,
                tool_args_json,
                token_estimate,
                bool(model_facing),
                bool(display),
                first_kept,
                tokens_before,
                branch_from,
                operation_id,
                seq,
            )
        )
    return out


def message_parts(
    role: str, content: str, stored: Iterable[MessagePartEntity] | None
) -> tuple[MessagePartEntity, ...]:
    """The parts a reader sees: the stored ones, else the content as one text part."""
    if not role:
        return ()
    found = tuple(stored or ())
    if not found and content.strip():
        # A plain-text message stores no part rows ("legacy text" in librecode).
        return (new_part("text", content, "", "", b"", 0, 0),)
    return found


def message_from_entry(entry: EntryEntity) -> SessionMessageEntity:
    """The message an entry carries, as the transcript reads list it."""
    message = entry.message
    return SessionMessageEntity(
        id=entry.id,
        session_id=entry.session_id,
        entry_id=entry.id,
        sender=message_sender(message.role, entry.custom_type),
        role=message.role,
        created_at=entry.created_at,
        content=message.content,
        provider=message.provider,
        model=message.model,
        parts=message.parts,
    )


# -- value objects to rows -----------------------------------------------------------


def part_rows(pk: int, parts: Sequence[MessagePartEntity]) -> list[list[Any]]:
    """The parts' INSERT parameters (``tree_sql.INSERT_PART``) under entry ``pk``."""
    return [
        sql.row(
            MessagePart,
            entry_id=pk,
            sequence=index,
            type=part.type,
            text=part.text,
            mime_type=part.mime_type,
            name=part.name,
            width=part.width,
            height=part.height,
            data=part.data if part.data else None,
        )
        for index, part in enumerate(parts)
    ]


#: The data JSON of an entry (the ``line`` column; once per append):
#: ``json.dumps(data, separators=(",", ":"), ensure_ascii=False)`` without
#: ``json.dumps``'s layers around the C encoder; a fresh cycle check per call
#: (:mod:`agentstore.formats.json_encoder`).
encode_data: Callable[[dict[str, Any]], str] = make_encoder(
    separators=(",", ":"), ensure_ascii=False
)


# A compaction records the settings in force above it: a settings climb stops there.
def encode_settings(settings: Settings) -> str:
    """A compaction's ``compaction_settings``: ``[provider, model, thinking_level]``."""
    return json.dumps(list(settings), ensure_ascii=False)


def decode_settings(value: str) -> Settings:
    """The settings :func:`encode_settings` stored."""
    provider, model, thinking_level = json.loads(value)
    return str(provider), str(model), str(thinking_level)
