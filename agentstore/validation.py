"""Input checks shared by the stores: each raises ``ValidationError`` naming the field.

Stores validate *before* opening a write transaction, so bad input never
half-writes::

    cwd = require_text(cwd, "session.cwd")             # "session.cwd is required"
    sid = require_uuid7(session_id, "entry.session_id")  # canonical lowercase form
    data = require_json(data_json, "entry.data_json")    # parsed value
    sid = require_name(session_id, "session.id")          # safe as one path segment

``require_name`` is the one rule for the names agentstore stores and a file
system or URL may later see as a path segment — session ids, entry ids, the
segments of ref names, document namespaces and keys (docs/api.md "Names").
"""

from __future__ import annotations

import json
import math
import uuid
from datetime import UTC, datetime
from typing import Any

from agentstore.exceptions import ValidationError

__all__ = [
    "MAX_NAME_LENGTH",
    "UnstorableJSON",
    "json_depth",
    "json_problem",
    "json_text_problem",
    "name_problem",
    "parse_json",
    "require_aware",
    "require_int",
    "require_json",
    "require_json_object",
    "require_max_length",
    "require_name",
    "require_stored_text",
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


#: The longest name :func:`require_name` accepts by default (the id columns' size).
MAX_NAME_LENGTH = 255


def name_problem(value: object, limit: int = MAX_NAME_LENGTH) -> str:
    """Why ``value`` is not a safe name, or ``""`` when it is one.

    A safe name is non-blank text of at most ``limit`` characters with no
    ``/``, ``\\``, control character (NUL included: PostgreSQL text cannot
    hold it) or lone surrogate, and is neither ``.`` nor ``..``. Such a name is
    one path segment wherever it lands (an export file name, a URL, a
    directory): without separators, ``..`` *as the whole name* is the only way
    to climb, so ``a..b`` stays valid (agentsession ref names allow it;
    docs/decisions.md "Inputs: one rule for names").
    """
    if not isinstance(value, str) or not value.strip():
        return "is required"
    if len(value) > limit:
        return f"is longer than {limit} characters"
    if "/" in value or "\\" in value:
        return "must not contain / or \\"
    if value in (".", ".."):
        return "must not be . or .."
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):
        return "must not contain control characters (NUL included)"
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "must not contain lone surrogates"
    return ""


def require_name(value: str | None, field: str, limit: int = MAX_NAME_LENGTH) -> str:
    """Return ``value`` if :func:`name_problem` finds nothing, else raise ``ValidationError``."""
    problem = name_problem(value, limit)
    if problem:
        raise ValidationError(f"{field} {problem}", field=field)
    assert isinstance(value, str)
    return value


def json_text_problem(value: Any) -> str:
    """What a parsed JSON value holds that the databases cannot store, or ``""``.

    NUL characters (PostgreSQL text refuses them; SQLite would keep a value the
    other backend cannot) and lone surrogates (not encodable as UTF-8). The walk
    is iterative, so a deeply nested value cannot exhaust the stack.
    """
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return "contains a NUL character"
            if not item.isascii():
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError:
                    return "contains a lone surrogate"
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return ""


class UnstorableJSON(ValueError):
    """Well-formed JSON text whose value agentstore will not store (``1e999``).

    Apart from plain syntax errors so that importers can refuse the file
    (naming the line) instead of skipping the line as damaged.
    """


def _reject_constant(name: str) -> Any:
    # JSON has no NaN or Infinity; Python's parser accepts them unless told not to.
    raise UnstorableJSON(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    # ``1e999`` is valid JSON syntax but Python reads it as inf, which no JSON
    # writer can render back: refuse it where it comes in.
    value = float(text)
    if not math.isfinite(value):
        raise UnstorableJSON(f"number {text} is out of range")
    return value


def parse_json(text: str) -> Any:
    """Parse strict JSON (no NaN/Infinity, no ``1e999``); raise ``ValueError`` when invalid.

    Non-finite numbers raise :class:`UnstorableJSON`; nesting too deep for the
    parser is a ``ValueError`` too, never a ``RecursionError``.
    """
    try:
        return json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float)
    except RecursionError:
        raise ValueError("JSON is nested too deeply") from None


def json_depth(value: Any) -> int:
    """How deeply ``value`` nests arrays and objects (a scalar is 0), walked iteratively."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        depth += 1
        deepest = max(deepest, depth)
        stack.extend((child, depth) for child in children)
    return deepest


def json_problem(value: Any) -> str:
    """Why a parsed JSON value may not be stored, or ``""``: too deep, NUL, lone surrogate.

    The depth limit is the ``JSON_MAX_DEPTH`` setting (docs/operations.md); the
    API's parser and the importers apply the same rule.
    """
    from agentstore.conf import agentstore_settings

    limit = int(agentstore_settings.JSON_MAX_DEPTH)
    if json_depth(value) > limit:
        return f"nests deeper than {limit} levels (JSON_MAX_DEPTH)"
    return json_text_problem(value)


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


#: The range of a ``BigIntegerField`` (token counts, durations, sizes).
INT64_MAX = 2**63 - 1


def require_int(value: Any, field: str, minimum: int = 0, maximum: int = INT64_MAX) -> int:
    """Return ``value`` if it is an ``int`` (not a ``bool``) in ``[minimum, maximum]``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValidationError(f"{field} must be an integer", field=field)
    if value < minimum:
        if minimum == 0:
            raise ValidationError(f"{field} must not be negative", field=field)
        raise ValidationError(f"{field} must be at least {minimum}", field=field)
    if value > maximum:
        raise ValidationError(f"{field} must be at most {maximum}", field=field)
    return value


def require_stored_text(value: Any, field: str, max_length: int | None = None) -> str:
    """Return ``value`` if both databases can store it as text: a ``str`` without NUL.

    No NUL (PostgreSQL text cannot hold it) and no lone surrogate (not
    encodable as UTF-8), at most ``max_length`` characters (the column's size).
    """
    if not isinstance(value, str):
        raise ValidationError(f"{field} must be a string", field=field)
    if max_length is not None and len(value) > max_length:
        raise ValidationError(f"{field} is longer than {max_length} characters", field=field)
    problem = json_text_problem(value)
    if problem:
        raise ValidationError(f"{field} {problem}", field=field)
    return value
