"""Input checks shared by the stores: each raises ``ValidationError`` naming the field.

Stores validate *before* opening a write transaction, so bad input never
half-writes::

    cwd = require_text(cwd, "session.cwd")             # "session.cwd is required"
    sid = require_uuid7(session_id, "entry.session_id")  # canonical lowercase form
    data = require_json(data_json, "entry.data_json")    # parsed value
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

from agentstore.exceptions import ValidationError

__all__ = [
    "parse_json",
    "require_aware",
    "require_json",
    "require_json_object",
    "require_max_length",
    "require_text",
    "require_uuid7",
]


def require_text(value: str | None, field: str) -> str:
    """Return ``value`` if it has non-blank text, else raise "<field> is required"."""
    if value is None or not str(value).strip():
        raise ValidationError(f"{field} is required", field=field)
    return value


def require_uuid7(value: str | None, field: str) -> str:
    """Return ``value`` as a canonical lowercase UUIDv7 string.

    Accepts what :class:`uuid.UUID` parses (hyphenated, braced, ``urn:uuid:``,
    32 hex digits) after trimming whitespace, so every id is stored in one
    spelling; anything else raises "<field> must be a UUIDv7".
    """
    text = (value or "").strip()
    if not text:
        raise ValidationError(f"{field} is required", field=field)
    try:
        parsed = uuid.UUID(text)
    except ValueError:
        raise ValidationError(f"{field} must be a UUIDv7", field=field) from None
    if parsed.version != 7 or parsed.variant != uuid.RFC_4122:
        raise ValidationError(f"{field} must be a UUIDv7", field=field)
    return str(parsed)


def _reject_constant(name: str) -> Any:
    # JSON has no NaN or Infinity; Python's parser accepts them unless told not to.
    raise ValueError(f"{name} is not valid JSON")


def parse_json(text: str) -> Any:
    """Parse strict JSON (no NaN/Infinity); raise ``ValueError`` when invalid."""
    return json.loads(text, parse_constant=_reject_constant)


def require_json(text: str | bytes | None, field: str) -> Any:
    """Parse ``text`` as JSON of any shape, or raise "<field> must be valid JSON"."""
    if text is None:
        raise ValidationError(f"{field} must be valid JSON", field=field)
    try:
        return parse_json(text.decode() if isinstance(text, bytes) else text)
    except (ValueError, UnicodeDecodeError):
        raise ValidationError(f"{field} must be valid JSON", field=field) from None


def require_json_object(text: str | bytes | None, field: str) -> dict[str, Any]:
    """Parse ``text`` as a JSON object, or raise "<field> must be a JSON object"."""
    try:
        value = require_json(text, field)
    except ValidationError:
        raise ValidationError(f"{field} must be a JSON object", field=field) from None
    if not isinstance(value, dict):
        raise ValidationError(f"{field} must be a JSON object", field=field)
    return value


def require_max_length(value: str, limit: int, field: str) -> str:
    """Refuse text longer than ``limit`` characters (the column's size)."""
    if len(value) > limit:
        raise ValidationError(f"{field} is longer than {limit} characters", field=field)
    return value


def require_aware(value: datetime, field: str) -> datetime:
    """Return ``value`` in UTC; naive datetimes are refused (their zone is a guess)."""
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValidationError(f"{field} must be timezone-aware", field=field)
    return value.astimezone(UTC)
