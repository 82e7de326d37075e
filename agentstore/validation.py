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
``require_storable_text`` is the rule for other text a column keeps (a LangGraph
checkpoint namespace, a task id), and ``require_json_value`` the rule for a
Python value stored as JSON — the checks the API's parser and serializers apply
to a request body, so the Python doors refuse what the HTTP door refuses::

    ns = require_storable_text(ns, "checkpoint_ns")         # no NUL, no lone surrogate
    item = require_json_value(item, "items[0]")             # depth, types, finite, text
"""

from __future__ import annotations

import json
import math
import uuid
from datetime import UTC, datetime
from typing import Any

from agentstore.conf import agentstore_settings
from agentstore.exceptions import ValidationError

__all__ = [
    "MAX_NAME_LENGTH",
    "UnstorableJSON",
    "could_be_stored",
    "json_depth",
    "json_problem",
    "json_text_problem",
    "json_value_problem",
    "name_problem",
    "parse_json",
    "require_aware",
    "require_int",
    "require_json",
    "require_json_object",
    "require_json_value",
    "require_max_length",
    "require_name",
    "require_storable_text",
    "require_text",
    "require_uuid7",
    "storable_text_problem",
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
    decision record 0079).
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


def _string_problem(text: str) -> str:
    """What a string holds that the databases cannot store, or ``""``: the one text rule.

    A NUL character (PostgreSQL text refuses it; SQLite would keep a value the
    other backend cannot) or a lone surrogate (not encodable as UTF-8).
    """
    if "\x00" in text:
        return "contains a NUL character"
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return "contains a lone surrogate"
    return ""


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
            problem = _string_problem(item)
            if problem:
                return problem
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


def storable_text_problem(value: object, limit: int | None = None, *, blank: bool = True) -> str:
    """Why ``value`` is not text a column can keep, or ``""`` when it is.

    Text (``str``), at most ``limit`` characters when given, non-blank unless
    ``blank``, without NUL (PostgreSQL text cannot hold it; SQLite would keep
    what PostgreSQL refuses) or a lone surrogate (not encodable as UTF-8). Less
    than :func:`name_problem`: for values that are never a path segment — a
    LangGraph checkpoint namespace is ``""`` at the root and holds node names
    that may contain ``/``.
    """
    if not isinstance(value, str):
        return "must be a string"
    if not blank and not value.strip():
        return "is required"
    if limit is not None and len(value) > limit:
        return f"is longer than {limit} characters"
    return _string_problem(value)


def could_be_stored(value: object) -> bool:
    """Whether a row could have ``value`` as a key: a lookup by anything else finds nothing.

    For the lookups by an id a request names (the API's paths, bodies and filters): an
    id with NUL or a lone surrogate was never stored (:func:`storable_text_problem`), so
    it is "not there" without asking the database — which PostgreSQL could not be
    asked (psycopg refuses NUL in a text parameter: a ``DataError``, a 500).
    """
    return not storable_text_problem(value)


def require_storable_text(
    value: object, field: str, limit: int | None = None, *, blank: bool = True
) -> str:
    """Return ``value`` if :func:`storable_text_problem` finds nothing, else raise."""
    problem = storable_text_problem(value, limit, blank=blank)
    if problem:
        raise ValidationError(f"{field} {problem}", field=field)
    assert isinstance(value, str)
    return value


def json_value_problem(value: Any, where: str = "value", *, strict: bool = False) -> str:
    """Why a Python value may not be stored as JSON, or ``""``: the API's body rules.

    The one rule for values handed to agentstore from Python rather than parsed
    from a request body (an integration's items and checkpoint metadata, a
    ``django.tasks`` call's arguments), matching what the API's strict parser
    and serializers let through (docs/operations.md, "Request limits"):
    ``None``, booleans, integers, finite floats, strings, lists and objects with
    string keys, nested at most ``JSON_MAX_DEPTH`` deep (which also stops a
    value that contains itself), with no NUL or lone surrogate in any string or
    key. ``strict``: the value must also read back *unchanged* — a tuple (JSON
    gives a list back) is refused rather than converted (``django.tasks``
    arguments); otherwise a tuple is an array. Sets, bytes and other objects
    are never JSON. The answer names the place, from ``where``
    (``args[0]['when'] is a datetime: not JSON (datetime)``).

    One iterative walk (a deep value cannot exhaust the stack), exact types
    first and a container's scalar members checked in place: the LangGraph
    saver checks every checkpoint's metadata this way (~2 µs, not ~10). Byte
    size is the HTTP door's own bound (``DATA_UPLOAD_MAX_MEMORY_SIZE`` protects
    a server from its clients) and is not applied here.
    """
    limit = int(agentstore_settings.JSON_MAX_DEPTH)
    stack: list[tuple[Any, int, str]] = [(value, 0, where)]
    push, pop = stack.append, stack.pop
    while stack:
        item, depth, path = pop()
        kind = type(item)
        if kind is dict or kind is list or (kind is tuple and not strict):
            if depth >= limit:
                return f"{path} nests deeper than {limit} levels (JSON_MAX_DEPTH)"
            depth += 1
            if kind is dict:
                for key, child in item.items():
                    if type(key) is not str and not isinstance(key, str):
                        return (
                            f"{path} has the key {key!r}: a key that is not a string "
                            "(JSON object keys are text)"
                        )
                    if "\x00" in key or (not key.isascii() and _string_problem(key)):
                        return f"{path} has a key that {_string_problem(key)}"
                    step = type(child)
                    if step is str:
                        if "\x00" in child or (not child.isascii() and _string_problem(child)):
                            return f"{path}[{key!r}] {_string_problem(child)}"
                    elif not (child is None or step is int or step is bool):
                        push((child, depth, f"{path}[{key!r}]"))
            else:
                for n, child in enumerate(item):
                    step = type(child)
                    if step is str:
                        if "\x00" in child or (not child.isascii() and _string_problem(child)):
                            return f"{path}[{n}] {_string_problem(child)}"
                    elif not (child is None or step is int or step is bool):
                        push((child, depth, f"{path}[{n}]"))
        elif kind is str or isinstance(item, str):
            problem = _string_problem(item)
            if problem:
                return f"{path} {problem}"
        elif item is None or isinstance(item, int):  # booleans included
            continue
        elif isinstance(item, float):
            if not math.isfinite(item):
                return f"{path} is {item!r}: a number that is not finite (JSON has none)"
        elif isinstance(item, dict):
            push((dict(item), depth, path))  # a dict subclass: checked as the dict it encodes
        elif isinstance(item, list):
            push((list(item), depth, path))
        elif isinstance(item, tuple):
            if strict:
                return f"{path} is a tuple: JSON would read it back as a list (pass a list)"
            push((list(item), depth, path))
        elif isinstance(item, bytes | bytearray | memoryview):
            return f"{path} is bytes: not JSON (bytes), pass text such as base64"
        else:
            name = kind.__name__
            return f"{path} is a {name}: not JSON ({name})"
    return ""


def require_json_value(value: Any, field: str, *, strict: bool = False) -> Any:
    """Return ``value`` if :func:`json_value_problem` finds nothing, else raise naming the place."""
    problem = json_value_problem(value, field, strict=strict)
    if problem:
        raise ValidationError(problem, field=field)
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
