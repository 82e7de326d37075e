"""LangGraph's stored channel values, read without LangGraph: decoded, never constructed.

    from agentstore.formats.langgraph_values import decode, show, message_items

    value = decode("msgpack", blob)       # plain data; objects as Constructed(module, name, ...)
    text = show(value)                    # indented JSON-like text for a person
    items = message_items(value)          # LangChain messages as Responses items, or None

The LangGraph saver stores every value exactly as LangGraph's ``JsonPlusSerializer``
wrote it: a ``(type, bytes)`` pair, almost always ``"msgpack"`` — MessagePack whose
extension types name a Python class and its arguments (a LangChain message is
``(module, class, model_dump(), method)``) — or, from older savers, ``"json"``
with LangChain's ``{"lc": 1, "type": "constructor", "id": [...], "kwargs": {...}}``
objects. The admin reads those values to show a thread's state, in processes that
need not have LangGraph installed (the demo's venv does not), and must never run
what a stored value names: ``JsonPlusSerializer.loads_typed`` imports the module a
value names and calls its class. So this module decodes the bytes itself — a
small MessagePack reader — and keeps each object as a :class:`Constructed` (its
module, class name and arguments, as data), which :func:`show` writes as
``HumanMessage {"content": "hi", …}``. Pickle (``"pickle"``) is never read, and a
type this module does not know (an encrypting serializer's) is reported, not
guessed at.

:func:`message_items` turns LangChain messages (a ``MessagesState``'s
``messages`` channel) into the Responses items they correspond to — a human
message is a user ``message``, an AI message its text and one ``function_call``
per tool call, a tool message a ``function_call_output`` — so the format's
describer (``formats.agentsession.describe``) puts them into the same words as
every other conversation the admin shows.
"""

from __future__ import annotations

import itertools
import json
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

__all__ = ["Constructed", "NotDecoded", "decode", "message_items", "show"]

#: Blobs larger than this are described, not decoded (the page shows a preview).
MAX_DECODED_BYTES = 4 * 1024 * 1024
#: How deeply a decoded value may nest (deeper raises ``NotDecoded``).
MAX_DEPTH = 200


@dataclass(frozen=True, slots=True)
class Constructed:
    """An object a value names, kept as data: ``module.name`` with its arguments.

    ``style`` says how the serializer passes them: ``"kwargs"`` (a dict of fields:
    pydantic models, dataclasses, named tuples), ``"args"`` (positional),
    ``"value"`` (one argument: a UUID's hex, a datetime's ISO text).
    """

    module: str
    name: str
    fields: Any
    style: str


class NotDecoded(ValueError):  # noqa: N818 (a verdict, shown on the page)
    """The value is not one this module reads (pickle, an unknown serializer, damage)."""


# JsonPlusSerializer's MessagePack extension codes (langgraph.checkpoint.serde.jsonplus).
_EXT_VALUE, _EXT_ARGS, _EXT_KWARGS, _EXT_METHOD = 0, 1, 2, 3
_EXT_PYDANTIC_V1, _EXT_PYDANTIC_V2, _EXT_NUMPY, _EXT_DELTA = 4, 5, 6, 7


def decode(type_: str, blob: bytes | None) -> Any:
    """The value a ``(type, bytes)`` pair holds, as plain data and :class:`Constructed`.

    Raises :class:`NotDecoded` for pickle, an unknown type, a value too large or
    too deep, and bytes that do not parse.
    """
    if type_ == "null" or blob is None:
        return None
    if type_ in ("bytes", "bytearray"):
        return bytes(blob)
    if len(blob) > MAX_DECODED_BYTES:
        raise NotDecoded(f"larger than {MAX_DECODED_BYTES} bytes")
    if type_ == "msgpack":
        try:
            value, end = _Reader(bytes(blob)).read(0, 0)
        except (IndexError, struct.error, UnicodeDecodeError, RecursionError) as exc:
            raise NotDecoded(f"not MessagePack ({type(exc).__name__})") from None
        if end != len(blob):
            raise NotDecoded("trailing bytes after the value")
        return value
    if type_ == "json":
        try:
            return json.loads(bytes(blob), object_hook=_lc_object)
        except (ValueError, RecursionError) as exc:
            raise NotDecoded(f"not JSON ({type(exc).__name__})") from None
    if type_ == "pickle":
        raise NotDecoded("pickle is never unpickled here")
    raise NotDecoded(f"unknown serializer type {type_!r}")


class _Reader:
    """A MessagePack reader over one buffer (the spec's formats; recursion is bounded)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def read(self, at: int, depth: int) -> tuple[Any, int]:
        if depth > MAX_DEPTH:
            raise NotDecoded(f"nested deeper than {MAX_DEPTH} levels")
        data = self.data
        byte = data[at]
        at += 1
        if byte <= 0x7F:
            return byte, at
        if byte >= 0xE0:
            return byte - 0x100, at
        if 0x80 <= byte <= 0x8F:
            return self._map(at, byte & 0x0F, depth)
        if 0x90 <= byte <= 0x9F:
            return self._array(at, byte & 0x0F, depth)
        if 0xA0 <= byte <= 0xBF:
            return self._str(at, byte & 0x1F)
        if byte == 0xC0:
            return None, at
        if byte in (0xC2, 0xC3):
            return byte == 0xC3, at
        if byte in _SIZED:
            fmt, kind = _SIZED[byte]
            (size,) = struct.unpack_from(fmt, data, at)
            at += struct.calcsize(fmt)
            if kind == "bin":
                return data[at : at + size], at + size
            if kind == "str":
                return self._str(at, size)
            if kind == "array":
                return self._array(at, size, depth)
            if kind == "map":
                return self._map(at, size, depth)
            code = struct.unpack_from(">b", data, at)[0]
            return self._ext(code, data[at + 1 : at + 1 + size], depth), at + 1 + size
        if byte in _NUMBERS:
            fmt = _NUMBERS[byte]
            return struct.unpack_from(fmt, data, at)[0], at + struct.calcsize(fmt)
        if 0xD4 <= byte <= 0xD8:
            size = 1 << (byte - 0xD4)
            code = struct.unpack_from(">b", data, at)[0]
            return self._ext(code, data[at + 1 : at + 1 + size], depth), at + 1 + size
        raise NotDecoded(f"byte 0x{byte:02x} starts no MessagePack value")

    def _str(self, at: int, size: int) -> tuple[str, int]:
        end = at + size
        if end > len(self.data):
            raise IndexError("string past the end")
        return self.data[at:end].decode("utf-8"), end

    def _array(self, at: int, size: int, depth: int) -> tuple[list[Any], int]:
        out = []
        for _ in range(size):
            item, at = self.read(at, depth + 1)
            out.append(item)
        return out, at

    def _map(self, at: int, size: int, depth: int) -> tuple[dict[Any, Any], int]:
        out: dict[Any, Any] = {}
        for _ in range(size):
            key, at = self.read(at, depth + 1)
            value, at = self.read(at, depth + 1)
            # Keys JSON cannot have (OPT_NON_STR_KEYS: ints, tuples) are kept as text.
            out[key if isinstance(key, str | int | float | bool) or key is None else show(key)] = (
                value
            )
        return out, at

    def _ext(self, code: int, payload: bytes, depth: int) -> Any:
        if code == -1:
            return _timestamp(payload)
        if code not in range(_EXT_VALUE, _EXT_DELTA + 1):
            return Constructed("msgpack", f"ext{code}", f"<{len(payload)} bytes>", "value")
        inner = _Reader(payload)
        value, _ = inner.read(0, depth + 1)
        if code == _EXT_DELTA:
            return Constructed("langgraph", "DeltaSnapshot", value, "value")
        if code == _EXT_NUMPY:
            dtype, shape = (value[0], value[1]) if isinstance(value, list) else ("?", "?")
            return Constructed("numpy", "ndarray", {"dtype": dtype, "shape": shape}, "kwargs")
        if not isinstance(value, list) or len(value) < 3:
            return Constructed("msgpack", f"ext{code}", value, "value")
        module, name, fields = str(value[0]), str(value[1]), value[2]
        style = {
            _EXT_ARGS: "args",
            _EXT_KWARGS: "kwargs",
            _EXT_PYDANTIC_V1: "kwargs",
            _EXT_PYDANTIC_V2: "kwargs",
        }.get(code, "value")
        return Constructed(module, name, fields, style)


_SIZED = {
    0xC4: (">B", "bin"),
    0xC5: (">H", "bin"),
    0xC6: (">I", "bin"),
    0xC7: (">B", "ext"),
    0xC8: (">H", "ext"),
    0xC9: (">I", "ext"),
    0xD9: (">B", "str"),
    0xDA: (">H", "str"),
    0xDB: (">I", "str"),
    0xDC: (">H", "array"),
    0xDD: (">I", "array"),
    0xDE: (">H", "map"),
    0xDF: (">I", "map"),
}
_NUMBERS = {
    0xCA: ">f",
    0xCB: ">d",
    0xCC: ">B",
    0xCD: ">H",
    0xCE: ">I",
    0xCF: ">Q",
    0xD0: ">b",
    0xD1: ">h",
    0xD2: ">i",
    0xD3: ">q",
}


def _timestamp(payload: bytes) -> str:
    """MessagePack's timestamp extension (-1) as ISO text."""
    if len(payload) == 4:
        seconds, nanos = struct.unpack(">I", payload)[0], 0
    elif len(payload) == 8:
        whole = struct.unpack(">Q", payload)[0]
        seconds, nanos = whole & 0x3FFFFFFFF, whole >> 34
    elif len(payload) == 12:
        nanos, seconds = struct.unpack(">Iq", payload)
    else:
        return f"<timestamp, {len(payload)} bytes>"
    return datetime.fromtimestamp(seconds + nanos / 1e9, UTC).isoformat()


def _lc_object(value: dict[str, Any]) -> Any:
    """LangChain's JSON object notation (older savers' ``"json"`` values), as data."""
    if value.get("lc") in (1, 2) and isinstance(value.get("id"), list) and value["id"]:
        path = [str(p) for p in value["id"]]
        if value.get("type") == "constructor":
            return Constructed(".".join(path[:-1]), path[-1], value.get("kwargs") or {}, "kwargs")
        if value.get("type") == "secret":
            return Constructed(".".join(path[:-1]), path[-1], "<secret>", "value")
    return value


# -- a person's view ------------------------------------------------------------------

#: A value whose one-line form fits this many characters is written on one line.
_INLINE = 72


def show(value: Any, limit: int = 4000) -> str:
    """``value`` as indented JSON-like text, cut to about ``limit`` characters.

    Strings, numbers, ``true``/``false``/``null`` as JSON writes them; objects as
    ``Name {fields}`` or ``Name(args)``; bytes as their size; short containers on
    one line, longer ones one member a line. The walk stops once ``limit`` is
    spent, so a large value costs what is shown, not its size.
    """
    room = [limit]
    text = _show(value, 0, room)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _show(value: Any, indent: int, room: list[int]) -> str:
    if room[0] <= 0:
        return "…"
    one = _inline(value)
    if one is not None and len(one) <= _INLINE:
        room[0] -= len(one)
        return one
    pad, inner = "  " * indent, "  " * (indent + 1)
    if isinstance(value, Constructed):
        if value.style == "args" and isinstance(value.fields, list):
            shown = [f"{inner}{_show(v, indent + 1, room)}" for v in _upto(value.fields, room)]
            body = _members(shown, pad)
            return f"{value.name}({body[1:-1]})"
        body = _show(value.fields, indent, room)
        return f"{value.name} {body}" if value.style == "kwargs" else f"{value.name}({body})"
    if isinstance(value, dict):
        members = []
        for pair in _upto(value.items(), room):
            if pair is _MORE:
                members.append(f"{inner}…")
                break
            key, member = pair
            members.append(f"{inner}{_key(key)}: {_show(member, indent + 1, room)}")
            room[0] -= len(inner) + len(_key(key))
        return "{" + _members(members, pad)[1:-1] + "}"
    if isinstance(value, list | tuple):
        # (Judged on the members that can be shown: a long list costs its preview.)
        if all(
            v is None or isinstance(v, bool | int | float) for v in itertools.islice(value, 2000)
        ):
            # Numbers fill lines rather than taking one each.
            lines, line = [], ""
            for v in _upto(value, room):
                piece = _inline(v) or ""
                room[0] -= len(piece) + 2
                if line and len(line) + len(piece) + 2 > _INLINE:
                    lines.append(inner + line)
                    line = ""
                line = f"{line}, {piece}" if line else piece
            lines.append(inner + line)
            return "[" + _members(lines, pad)[1:-1] + "]"
        members = [f"{inner}{_show(v, indent + 1, room)}" for v in _upto(value, room)]
        return "[" + _members(members, pad)[1:-1] + "]"
    # A scalar: a long string keeps its line of its own.
    text = one if one is not None else json.dumps(value, ensure_ascii=False)
    room[0] -= len(text)
    return text


def _upto(members: Any, room: list[int]) -> Iterator[Any]:
    """``members`` while there is room (checked before each); one ``…`` for the rest.

    Lazy: the caller shows each member before asking for the next, so the room
    it used is spent by then.
    """
    for member in members:
        if room[0] <= 0:
            yield _MORE
            return
        yield member


#: Stands for the members :func:`show` had no room for.
_MORE = Constructed("", "…", None, "more")


def _members(lines: list[str], pad: str) -> str:
    return "(\n" + ",\n".join(lines) + f"\n{pad})"


def _inline(value: Any, budget: int = _INLINE + 1) -> str | None:
    """The one-line form (``None`` for a container once it is longer than ``budget``)."""
    if value is _MORE:
        return "…"
    if value is None or isinstance(value, bool | int | float | str):
        text = json.dumps(value, ensure_ascii=False)
        return text if len(text) <= budget or not isinstance(value, str) else None
    if isinstance(value, bytes):
        return f"<{len(value)} bytes>"
    if isinstance(value, Constructed):
        if value.style == "args" and isinstance(value.fields, list):
            body = _inline(value.fields, budget)
            return None if body is None else f"{value.name}({body[1:-1]})"
        body = _inline(value.fields, budget)
        if body is None:
            return None
        return f"{value.name} {body}" if value.style == "kwargs" else f"{value.name}({body})"
    if isinstance(value, dict):
        parts, used = [], 2
        for k, v in value.items():
            piece = _inline(v, budget - used)
            if piece is None:
                return None
            parts.append(f"{_key(k)}: {piece}")
            used += len(parts[-1]) + 2
            if used > budget:
                return None
        return "{" + ", ".join(parts) + "}"
    if isinstance(value, list | tuple):
        parts, used = [], 2
        for v in value:
            piece = _inline(v, budget - used)
            if piece is None:
                return None
            parts.append(piece)
            used += len(piece) + 2
            if used > budget:
                return None
        return "[" + ", ".join(parts) + "]"
    return str(value)


def _key(key: Any) -> str:
    return json.dumps(key if isinstance(key, str) else str(key), ensure_ascii=False)


# -- LangChain messages ------------------------------------------------------------------

#: LangChain message types (the ``type`` field of their model dump) and the role each plays.
_ROLES = {"human": "user", "ai": "assistant", "system": "system", "developer": "developer"}


def _message_fields(value: Any) -> dict[str, Any] | None:
    """The fields of a LangChain message (``None`` when ``value`` is not one)."""
    if not isinstance(value, Constructed) or not isinstance(value.fields, dict):
        return None
    if not (value.module.startswith("langchain") and value.name.endswith(("Message", "Chunk"))):
        return None
    return value.fields


def message_items(value: Any) -> list[dict[str, Any]] | None:
    """LangChain messages (one, or a list of them) as the Responses items they are.

    ``None`` when ``value`` is not made of LangChain messages, so the caller shows
    it as data instead.
    """
    messages = value if isinstance(value, list | tuple) else [value]
    if not messages:
        return None
    fields = [_message_fields(m) for m in messages]
    if any(f is None for f in fields):
        return None
    items: list[dict[str, Any]] = []
    for one in fields:
        assert one is not None
        items.extend(_items_of(one))
    return items


def _items_of(fields: dict[str, Any]) -> list[dict[str, Any]]:
    kind = str(fields.get("type", "")).removesuffix("Chunk").lower()
    kind = {"aimessage": "ai", "humanmessage": "human"}.get(kind, kind)
    content = fields.get("content")
    if kind == "tool":
        return [
            {
                "type": "function_call_output",
                "call_id": str(fields.get("tool_call_id", "")),
                "output": _content_text(content),
            }
        ]
    if kind == "remove":
        return [{"type": "remove message", "id": fields.get("id")}]
    role = str(fields.get("role", "")) if kind == "chat" else _ROLES.get(kind, kind)
    items: list[dict[str, Any]] = []
    blocks = _content_blocks(content, "output_text" if role == "assistant" else "input_text")
    calls = [c for c in fields.get("tool_calls") or () if isinstance(c, dict)]
    if blocks or not calls:
        items.append({"type": "message", "role": role, "content": blocks})
    for call in calls:
        args = call.get("args", {})
        items.append(
            {
                "type": "function_call",
                "name": str(call.get("name", "")),
                "arguments": args
                if isinstance(args, str)
                else json.dumps(args, ensure_ascii=False),
                "call_id": str(call.get("id") or ""),
            }
        )
    return items


def _content_blocks(content: Any, text_type: str) -> list[dict[str, Any]]:
    """A message's content (text, or LangChain content blocks) as Responses content parts."""
    if isinstance(content, str):
        return [{"type": text_type, "text": content}] if content else []
    blocks: list[dict[str, Any]] = []
    for block in content if isinstance(content, list) else ():
        if isinstance(block, str):
            blocks.append({"type": text_type, "text": block})
        elif isinstance(block, dict):
            kind = str(block.get("type", ""))
            if isinstance(block.get("text"), str):
                blocks.append({"type": text_type, "text": block["text"]})
            elif kind in ("image_url", "image"):
                blocks.append({"type": "input_image"})
            else:
                blocks.append({"type": kind or "part"})
    return blocks


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    texts = [b.get("text", "") for b in _content_blocks(content, "text")]
    return "\n".join(t for t in texts if t) or show(content, 400)
