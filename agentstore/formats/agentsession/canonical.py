"""Canonical JSON for agentsession: RFC 8785 (JCS) bytes and the I-JSON rule.

Every agentsession hash — an entry's content hash, its id, a request hash — is
SHA-256 over the RFC 8785 *JSON Canonicalization Scheme* bytes of a JSON value.
JCS is not "``json.dumps(sort_keys=True)``": numbers use the ECMAScript
rendering (``1e+21``, ``0.1``, ``1`` for ``1.0``), members sort by UTF-16 code
units (so ``"\\U0001F600"`` sorts before ``"\\uFB01"``), and strings escape only
what JSON requires. We delegate that to the ``rfc8785`` package and add what it
leaves to us:

* :func:`parse` — a strict reader for one JSON text. It enforces the I-JSON rule
  of the format: finite numbers only; integers must be exactly representable
  as a binary64 double *or* be spelt exactly as that double's canonical
  rendering (so ``9007199254740993`` is refused, ``1152921504606847000`` is
  accepted); no duplicate member names; no lone surrogates. Large integers come
  back as ``float`` so that :func:`dumps` renders them the ECMAScript way.
* :func:`dumps` — the canonical bytes of a value.
* :func:`sha256_hex` / :func:`hash_value` — the ``sha256:<hex>`` notation.
* :func:`normalise` — what a *writer* does with provider output that breaks the
  rule: a lone surrogate becomes U+FFFD and an integer that is not exactly
  representable is rounded to the nearest double, each change recorded as
  ``{"at": <JSON Pointer>, "was": <original JSON text>}`` in the entry's
  ``normalised`` member.

This module is pure Python; it needs no Django settings.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable
from typing import Any, cast

import rfc8785

from agentstore import exceptions
from agentstore.formats.json_encoder import make_encoder

__all__ = [
    "HASH_PREFIX",
    "dumps",
    "hash_bytes",
    "hash_text",
    "hash_value",
    "loads_own",
    "normalise",
    "parse",
    "plain",
    "render_number",
]

#: The prefix of every hash the format writes.
HASH_PREFIX = "sha256:"

# Integers up to this magnitude are safe for ``rfc8785`` as Python ints;
# beyond it the library refuses ints, so we hand it the equivalent double.
_SAFE_INT = 2**53 - 1


def render_number(value: float) -> str:
    """The ECMAScript (JCS) rendering of a finite double, e.g. ``1e+21``."""
    return rfc8785.dumps(value).decode("ascii")


def _int_value(text: str) -> int | float:
    """Parse an integer literal under the I-JSON rule (see module docstring)."""
    n = int(text)
    if -_SAFE_INT <= n <= _SAFE_INT:
        return n
    nearest = float(n)
    if math.isinf(nearest):
        raise exceptions.ValidationError(f"number {text} is out of range", field="json")
    if int(nearest) == n or render_number(nearest) == text.lstrip("+"):
        return nearest
    raise exceptions.ValidationError(
        f"integer {text} is not exactly representable as a double (I-JSON)", field="json"
    )


def _float_value(text: str) -> float:
    value = float(text)
    if math.isinf(value) or math.isnan(value):
        raise exceptions.ValidationError(f"number {text} is not finite", field="json")
    if value.is_integer() and abs(value) > _SAFE_INT:
        # 9.007199254740993e15 spells an integer that no double holds; the
        # writer must have normalised it. Exactness is decided on the text.
        from decimal import Decimal

        if Decimal(text) != Decimal(value) and render_number(value) != text:
            raise exceptions.ValidationError(
                f"number {text} is not exactly representable as a double (I-JSON)",
                field="json",
            )
    return value


def _refuse_constant(name: str) -> Any:
    raise exceptions.ValidationError(f"{name} is not valid JSON", field="json")


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise exceptions.ValidationError(f"duplicate member {key!r}", field="json")
        out[key] = value
    return out


def _has_lone_surrogate(text: str) -> bool:
    # json.loads decodes "\\ud83d" to a lone surrogate code point; a valid
    # pair has already been combined, so any surrogate left is lone. Strict
    # UTF-8 encoding refuses exactly those, and does it in C: checking each
    # character in Python took a quarter of a LogStore append.
    if text.isascii():
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


#: A JSON escape of a surrogate code point (an escaped backslash before "ud8…" also
#: matches: then the full check runs, which is merely slower).
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _check_strings(value: Any) -> None:
    if isinstance(value, str):
        if _has_lone_surrogate(value):
            raise exceptions.ValidationError("string contains a lone surrogate", field="json")
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_strings(key)
            _check_strings(item)
    elif isinstance(value, list):
        for item in value:
            _check_strings(item)


def parse(text: str | bytes) -> Any:
    """Parse one JSON text under the I-JSON rule; raise ``ValidationError``."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise exceptions.ValidationError("text is not valid UTF-8", field="json") from exc
    try:
        value = json.loads(
            text,
            object_pairs_hook=_object,
            parse_int=_int_value,
            parse_float=_float_value,
            parse_constant=_refuse_constant,
        )
    except json.JSONDecodeError as exc:
        raise exceptions.ValidationError(f"not valid JSON: {exc.msg}", field="json") from exc
    # A lone surrogate can only come from the text itself or from a \uD800–\uDFFF
    # escape; when the text has neither (two scans in C), skip the walk over every
    # decoded string (a fifth of reading a session).
    if not _has_lone_surrogate(text) and not _SURROGATE_ESCAPE.search(text):
        return value
    _check_strings(value)
    return value


def _prepare(value: Any) -> Any:
    """Make a Python value acceptable to ``rfc8785`` without changing its JSON meaning."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        if -_SAFE_INT <= value <= _SAFE_INT:
            return value
        nearest = float(value)
        if int(nearest) != value:
            raise exceptions.ValidationError(
                f"integer {value} is not exactly representable as a double (I-JSON)",
                field="json",
            )
        return nearest
    if isinstance(value, float):
        if math.isinf(value) or math.isnan(value):
            raise exceptions.ValidationError("number is not finite", field="json")
        return value
    if isinstance(value, dict):
        return {str(k): _prepare(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_prepare(v) for v in value]
    raise exceptions.ValidationError(f"{type(value).__name__} is not a JSON value", field="json")


def _plain(value: Any) -> bool:
    """True when ``json.dumps(sort_keys=True)`` already gives the JCS bytes.

    That holds for values without floats or unsafe integers (their ECMAScript
    spelling differs from Python's: ``1.0`` vs ``1``, ``1e-07`` vs ``1e-7``) and
    whose member names are ASCII (UTF-16 and code-point order then agree).
    Raises ``ValidationError`` for a lone surrogate on the way.
    """
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise exceptions.ValidationError(
                "string contains a lone surrogate", field="json"
            ) from exc
        return True
    if value is None or isinstance(value, bool):
        return True
    if isinstance(value, int):
        return -_SAFE_INT <= value <= _SAFE_INT
    if isinstance(value, dict):
        plain = True
        for key, item in value.items():
            if not isinstance(key, str) or not key.isascii():
                plain = False
            if not _plain(item):
                plain = False
        return plain
    if isinstance(value, list | tuple):
        plain = True
        for item in value:
            if not _plain(item):
                plain = False
        return plain
    return False


def plain(value: Any) -> bool:
    """Whether ``value`` is *plain*: :func:`normalise` leaves it as it is and
    ``json.dumps`` gives its canonical bytes (see :func:`dumps`).

    Plain is: dicts with ASCII ``str`` member names, lists, strings without a
    lone surrogate, safe integers, booleans and ``None`` — exact types, so a
    subclass (or a tuple) answers ``False`` and takes the general path. Never
    raises. A writer that encodes one entry three times (content, envelope,
    line) and normalises it first asks once and passes ``plain=True``.
    """
    # Strings, most of a value's leaves, are checked in the loops rather than
    # by a call each (an append asks this of every entry).
    kind = type(value)
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or not key.isascii():
                return False
            if type(item) is str:
                if not item.isascii() and not _encodes(item):
                    return False
            elif not plain(item):
                return False
        return True
    if kind is list:
        for item in value:
            if type(item) is str:
                if not item.isascii() and not _encodes(item):
                    return False
            elif not plain(item):
                return False
        return True
    if kind is str:
        return value.isascii() or _encodes(value)
    if value is None or kind is bool:
        return True
    if kind is int:
        return bool(-_SAFE_INT <= value <= _SAFE_INT)
    return False


def _encodes(text: str) -> bool:
    """Whether ``text`` has no lone surrogate (strict UTF-8 encodes it)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


_is_plain = plain


#: ``json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)``,
#: the encoder made once (:mod:`agentstore.formats.json_encoder`): ``json.dumps``
#: builds it on every call — a third of encoding one entry, and an append
#: encodes four values (content, envelope, line, the session's head). Made
#: without the circular-reference check (a shared ``markers`` dict would not be
#: thread-safe): the values it sees are plain (:func:`plain` walked them, which
#: a cycle does not survive), and a cycle would still end in ``RecursionError``
#: rather than loop. Same bytes: the same C function with the same arguments.
_encode_plain: Callable[[Any], str] = make_encoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, check_circular=False
)


def dumps(value: Any, *, plain: bool = False) -> bytes:
    """The RFC 8785 canonical bytes of a JSON value (dicts, lists, str, numbers …).

    Values made only of strings, safe integers, booleans, nulls and ASCII member
    names take a fast path through the C ``json`` encoder, which produces the
    same bytes for them (a property test checks this against ``rfc8785``);
    everything else goes through ``rfc8785``. ``plain=True`` says the caller
    already knows the value is plain (:func:`plain`): no walk to find out.
    """
    # _is_plain (exact types, no encoding) answers most values before _plain
    # (which also checks every string's encoding) is needed; what it accepts
    # _plain accepts too.
    if plain or _is_plain(value) or _plain(value):
        return _encode_plain(value).encode("utf-8")
    _check_strings(value)
    try:
        return rfc8785.dumps(_prepare(value))
    except rfc8785.CanonicalizationError as exc:
        raise exceptions.ValidationError(str(exc), field="json") from exc


#: The C scanner of a default ``json.JSONDecoder``: what ``json.loads`` runs, without
#: its checks for a BOM, surrounding whitespace and trailing data.
_scan_once: Callable[[str, int], tuple[Any, int]] = cast(Any, json.JSONDecoder()).scan_once


def loads_own(text: str) -> Any:
    """``json.loads(text)`` for a text :func:`dumps` wrote (decoded), and only for one.

    :func:`dumps` writes one compact value — no BOM, no whitespace around it, no
    data after it — so ``json.loads``'s checks for those (two regular-expression
    scans and three Python calls, a third of decoding a short line) can only
    pass: the same scanner gives the same value. A text from anywhere else
    must go through :func:`parse` (or ``json.loads``).
    """
    return _scan_once(text, 0)[0]


def hash_bytes(data: bytes) -> str:
    """``sha256:`` + lowercase hex SHA-256 of ``data``."""
    return HASH_PREFIX + hashlib.sha256(data).hexdigest()


def hash_text(text: str) -> str:
    """The hash of a string's UTF-8 bytes (how config deltas name instruction parts)."""
    return hash_bytes(text.encode("utf-8"))


def hash_value(value: Any, *, plain: bool = False) -> str:
    """``sha256:`` + hex SHA-256 of the JCS bytes of ``value`` (``plain``: see :func:`dumps`)."""
    if plain:
        # dumps(plain=True) and hash_bytes in one step: an append hashes twice.
        return HASH_PREFIX + hashlib.sha256(_encode_plain(value).encode("utf-8")).hexdigest()
    return hash_bytes(dumps(value))


def _pointer_token(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def normalise(value: Any, at: str = "") -> tuple[Any, list[dict[str, str]]]:
    """Return ``(value', records)``: ``value`` made I-JSON, and what changed.

    A writer calls this on a body before hashing: lone surrogates become U+FFFD
    and integers a double cannot hold are rounded to the nearest double. Each
    change is one ``{"at": JSON Pointer, "was": original JSON text}`` record.
    Values that already obey the rule come back unchanged with no records.
    """
    records: list[dict[str, str]] = []

    def walk(v: Any, pointer: str) -> Any:
        if isinstance(v, str):
            if _has_lone_surrogate(v):
                was = json.dumps(v)
                fixed = "".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in v)
                records.append({"at": pointer, "was": was})
                return fixed
            return v
        if isinstance(v, bool) or v is None:
            return v
        if isinstance(v, int):
            if -_SAFE_INT <= v <= _SAFE_INT or int(float(v)) == v:
                return v
            records.append({"at": pointer, "was": str(v)})
            return float(v)
        if isinstance(v, dict):
            return {k: walk(item, pointer + "/" + _pointer_token(k)) for k, item in v.items()}
        if isinstance(v, list | tuple):
            return [walk(item, f"{pointer}/{i}") for i, item in enumerate(v)]
        return v

    out = walk(value, at)
    records.sort(key=lambda r: r["at"])
    return out, records
