"""Entries: the envelope, the two hashes, the one ``ts`` spelling.

An agentsession entry is one JSON object on one line. Six members form the
*envelope* and are reserved — a body never carries them at top level:
``type``, ``id``, ``parent``, ``parents``, ``ts`` and the computed ``content``.
Everything else (known or unknown members alike) is the entry's *content*.

Two hashes, both SHA-256 over RFC 8785 bytes (see :mod:`.canonical`)::

    content hash = sha256:hex( JCS(entry minus envelope members) )
    id           = sha256:hex( JCS({"type", "parent", ["parents",] "ts",
                                   "content": <content hash>}) )

``parent`` is ``null`` for a root and ``parents`` appears only when non-empty.
Because the id covers the parent's id, an id commits to the whole path, and two
entries with the same type, content, parent(s) and ts *are the same entry*.

:class:`Entry` keeps the exact line it was read from (or the canonical line the
writer produced): nothing downstream ever re-encodes it, because re-encoding
(dropping an unknown member, re-spelling a number) would change the hash.
``ts`` stays a string for the same reason: it may carry 9 fractional digits,
which a Python ``datetime`` cannot hold.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from agentstore import exceptions
from agentstore.formats.agentsession import canonical
from agentstore.types.frozen import positional_builder, require_fields

__all__ = [
    "ENVELOPE",
    "Entry",
    "check_ts",
    "content_hash",
    "content_of",
    "entry_id",
    "envelope_of",
    "format_ts",
    "is_hash_id",
]

#: Members of the envelope; a body must not carry them.
ENVELOPE = frozenset({"type", "id", "parent", "parents", "ts", "content"})

_TS = re.compile(r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):([0-5]\d)(?:\.(\d{0,8}[1-9]))?Z$")
_HASH_ID = re.compile(r"^sha256:[0-9a-f]{64}$")


def is_hash_id(value: Any) -> bool:
    """True for a well-formed ``sha256:<64 hex>`` id."""
    return isinstance(value, str) and bool(_HASH_ID.match(value))


def check_ts(value: Any, field_name: str = "entry.ts") -> str:
    """Return ``value`` if it is the format's single ``ts`` spelling, else raise.

    UTC, uppercase ``T``/``Z``, seconds 00–59, a fraction only when non-zero,
    without trailing zeros and at most 9 digits: ``2026-09-17T12:00:02.5Z``.
    """
    m = _TS.match(value) if isinstance(value, str) else None
    if m is None:
        raise exceptions.ValidationError(
            f"{field_name} {value!r} is not in the format's ts spelling "
            "(UTC, T/Z, fraction without trailing zeros)",
            field=field_name,
        )
    try:
        # The constructor checks what strptime did (a real date and time), at a
        # tenth of its cost: it runs once per line when a session is read.
        year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
        datetime(year, month, day, hour, minute, second)  # noqa: DTZ001 (only validated)
    except ValueError as exc:
        raise exceptions.ValidationError(
            f"{field_name} {value!r} is not a real date", field=field_name
        ) from exc
    return m.string


def format_ts(value: datetime | str, nanos: int | None = None) -> str:
    """Render a time in the single ``ts`` spelling.

    A ``datetime`` (aware; converted to UTC) gives microsecond precision; pass
    ``nanos`` (0–999999999) to write a nanosecond fraction instead. A string in
    RFC 3339 form is re-spelt: fraction truncated to 9 digits and stripped of
    trailing zeros, a leap second ``60`` written as ``59`` (the writers' rules).
    """
    if isinstance(value, str):
        m = re.match(
            r"^(\d{4}-\d{2}-\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:\d{2})$",
            value,
        )
        if not m:
            raise exceptions.ValidationError(f"ts {value!r} is not RFC 3339", field="entry.ts")
        date, hh, mm, ss, frac, zone = m.groups()
        if ss == "60":
            ss = "59"
        if zone not in ("Z", "z", "+00:00", "-00:00"):
            base = datetime.fromisoformat(f"{date}T{hh}:{mm}:{ss}{zone}").astimezone(UTC)
            date, hh, mm, ss = (
                base.strftime("%Y-%m-%d"),
                base.strftime("%H"),
                base.strftime("%M"),
                base.strftime("%S"),
            )
        frac = (frac or "")[:9].rstrip("0")
        return f"{date}T{hh}:{mm}:{ss}" + (f".{frac}" if frac else "") + "Z"
    if value.tzinfo is None:
        raise exceptions.ValidationError("ts must be an aware datetime", field="entry.ts")
    utc = value.astimezone(UTC)
    digits = f"{nanos:09d}" if nanos is not None else f"{utc.microsecond:06d}"
    frac = digits.rstrip("0")
    return utc.strftime("%Y-%m-%dT%H:%M:%S") + (f".{frac}" if frac else "") + "Z"


def content_of(obj: dict[str, Any]) -> dict[str, Any]:
    """The entry's content: every member except the envelope ones."""
    return {k: v for k, v in obj.items() if k not in ENVELOPE}


def content_hash(obj: dict[str, Any], *, plain: bool = False) -> str:
    """``sha256:`` of the JCS bytes of the entry's content.

    ``plain``: the caller knows ``obj`` is plain (``canonical.plain``).
    """
    return canonical.hash_value(content_of(obj), plain=plain)


def envelope_of(obj: dict[str, Any], *, plain: bool = False) -> dict[str, Any]:
    """The object the id hashes: type, parent, parents (if any), ts, content hash."""
    env: dict[str, Any] = {
        "type": obj.get("type"),
        "parent": obj.get("parent"),
        "ts": obj.get("ts"),
        "content": content_hash(obj, plain=plain),
    }
    parents = obj.get("parents")
    if parents:
        env["parents"] = parents
    return env


def entry_id(obj: dict[str, Any], *, plain: bool = False) -> str:
    """The entry's id: ``sha256:`` of the JCS bytes of its envelope.

    ``plain``: the caller knows ``obj`` is plain (``canonical.plain``); its
    envelope, made of its members and a hash, then is too.
    """
    return canonical.hash_value(envelope_of(obj, plain=plain), plain=plain)


@dataclass(frozen=True, slots=True, kw_only=True)
class Entry:
    """One entry as held by a :class:`~.session.Session`.

    ``line`` is the exact JSON text (no newline) the entry was read as or
    written as; ``data`` is its decoded object (treat it as read-only).
    """

    id: str
    type: str
    parent: str | None
    ts: str
    line: str
    data: dict[str, Any] = field(default_factory=dict)
    parents: tuple[dict[str, Any], ...] = ()

    @property
    def legacy_id(self) -> str:
        """The pre-0.5 id this entry had before migration, or ``""``."""
        value = self.data.get("legacy_id", "")
        return value if isinstance(value, str) else ""

    def get(self, key: str, default: Any = None) -> Any:
        """A member of the entry (``entry.get("item")``)."""
        return self.data.get(key, default)

    @property
    def is_leaf_label(self) -> bool:
        """True for a ``label`` entry whose value is the reserved ``leaf``."""
        return self.type == "label" and self.data.get("label") == "leaf"

    @classmethod
    def from_object(cls, obj: dict[str, Any], line: str) -> Entry:
        """Build from an already validated object and its exact line."""
        parents = obj.get("parents") or ()
        if cls is Entry:
            # Every line written or read builds one (the same object, a third the cost).
            return _new_entry(
                obj["id"], obj["type"], obj.get("parent"), obj["ts"], line, obj, tuple(parents)
            )
        return cls(
            id=obj["id"],
            type=obj["type"],
            parent=obj.get("parent"),
            ts=obj["ts"],
            line=line,
            data=obj,
            parents=tuple(parents),
        )


require_fields(Entry, ("id", "type", "parent", "ts", "line", "data", "parents"))
_new_entry = positional_builder(Entry)
