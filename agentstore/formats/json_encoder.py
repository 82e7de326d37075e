"""``json.dumps`` for the hot paths: the C encoder, built with ``json.dumps``'s own arguments.

Why it exists. ``json.dumps(value, **options)`` builds a ``JSONEncoder`` on every
call, and its ``encode`` → ``iterencode`` then builds the C encoder in Python
(an ``isinstance``, a ``floatstr`` closure it never uses on this path, nine
attribute reads) before any byte is written: for the small objects an append
encodes that is most of the cost. Several writers encode on every append or
``put`` (a tree entry's data, a LangGraph checkpoint's metadata, every
canonical agentsession value), so::

    from agentstore.formats.json_encoder import make_encoder

    encode = make_encoder(separators=(",", ":"), ensure_ascii=False)  # once, at import
    encode({"b": 1, "a": "é"})  # == json.dumps(same value, same options): '{"b":1,"a":"é"}'

:func:`make_encoder` calls CPython's ``json.encoder.c_make_encoder`` with the
arguments ``JSONEncoder.iterencode`` passes it, in its order, so the text and
the errors are ``json.dumps``'s (``TypeError`` for a value JSON has no form
for, ``ValueError`` for a cycle when ``check_circular``).

One fallback policy. The C factory is used only when the interpreter has it and
it accepts those arguments and writes what ``JSONEncoder.encode`` writes for a
probe value — checked once, when the encoder is made. Otherwise (another
interpreter, a changed signature) the encoder is ``JSONEncoder(**options).encode``
itself: slower, never different.

Pure Python, no Django: the agentsession format and the stores both use it.
"""

from __future__ import annotations

import json
import json.encoder
from collections.abc import Callable
from typing import Any

__all__ = ["make_encoder"]

#: What the C encoder must encode as ``JSONEncoder.encode`` does before it is
#: trusted: member order (sorted or kept), nesting, both string encoders
#: (non-ASCII, a control character, an astral character), numbers and constants.
_PROBE: dict[str, Any] = {"b": [1, 2.5, None, True], "a": {"é\n\U0001f600": "x\u2028"}}


def make_encoder(
    *,
    sort_keys: bool = False,
    separators: tuple[str, str] = (", ", ": "),
    ensure_ascii: bool = True,
    check_circular: bool = True,
) -> Callable[[Any], str]:
    """A function giving ``json.dumps(value, <these options>)`` for any value.

    The options mean what they mean to ``json.dumps`` (``separators`` is
    ``(item, key)``), with its defaults. Without ``check_circular`` the encoder
    is made once and shared (it keeps no state, so threads may share it); give
    it only values known to hold no cycle — one would end in ``RecursionError``.
    With it, each call makes a fresh C encoder around a fresh ``markers`` dict
    (one shared dict would see another thread's values as a cycle): the
    factory call costs a fraction of ``json.dumps``'s layers around it.
    """
    reference = json.JSONEncoder(
        sort_keys=sort_keys,
        separators=separators,
        ensure_ascii=ensure_ascii,
        check_circular=check_circular,
    )
    # The C accelerator's encoder factory (typeshed does not declare it;
    # CPython has it), looked up when an encoder is made.
    make: Any = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return reference.encode
    default = reference.default  # raises TypeError, as json.dumps does
    string = (
        json.encoder.encode_basestring_ascii if ensure_ascii else json.encoder.encode_basestring
    )
    item_separator, key_separator = separators
    # The arguments JSONEncoder.iterencode passes the factory, in its order:
    # markers, default, encoder, indent, key separator, item separator,
    # sort_keys, skipkeys, allow_nan (json.dumps's defaults for the last two).
    try:
        shared = make(
            None, default, string, None, key_separator, item_separator, sort_keys, False, True
        )
        trusted = "".join(shared(_PROBE, 0)) == reference.encode(_PROBE)
    except TypeError:  # a factory with another signature
        trusted = False
    if not trusted:
        return reference.encode
    if not check_circular:
        return lambda value: "".join(shared(value, 0))

    def encode(value: Any) -> str:
        return "".join(
            make({}, default, string, None, key_separator, item_separator, sort_keys, False, True)(
                value, 0
            )
        )

    return encode
