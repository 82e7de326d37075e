"""Ref names: the naming rules and the creation conflict rules (docs/log-store.md, "Refs").

Private to the stores: :mod:`agentstore.stores.refs` (which owns the rows) and
:mod:`agentstore.stores.log_named` (``session_for`` checks a name before creating).

* A **name** is non-empty, at most 200 bytes, ``/``-separated segments, none
  empty, ``.`` or ``..``, characters ``[A-Za-z0-9._-]`` only — so ``a..b`` and
  ``.hidden`` are fine, ``a//b``, ``a/./b``, ``a b`` and ``é`` are not.
* A **prefix** (for listing) is at most 200 bytes of those characters plus
  ``/``, may be empty and need not end at a segment; so is a listing's
  ``after`` (the last name a page showed).
* On **creation** only, against every existing name: refuse a name whose
  leading segments differ from an existing name's *only in ASCII case*
  (``CONVERSATIONS/x`` beside ``conversations/y``), and refuse a name that is a
  segment-prefix of another, either way (no ref under a ref, none above one).
  The check must run inside the write transaction that inserts the row, or two
  racing creators could both pass it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from agentstore import exceptions
from agentstore.validation import name_problem

__all__ = ["MAX_NAME", "check_after", "check_name", "check_prefix", "conflict"]

MAX_NAME = 200
_SEGMENT = re.compile(r"^[A-Za-z0-9._-]+$")
_PREFIX = re.compile(r"^[A-Za-z0-9._/-]*$")


def check_name(name: object) -> str:
    """Return ``name`` if it is a valid ref name, else raise ``RefNameError``."""
    if not isinstance(name, str) or not name:
        raise exceptions.RefNameError("ref name is required", field="name")
    # "surrogatepass": a lone surrogate is measured here and refused below as a
    # name_problem, not a UnicodeEncodeError out of the length check.
    if len(name.encode("utf-8", "surrogatepass")) > MAX_NAME:
        raise exceptions.RefNameError(f"ref name is longer than {MAX_NAME} bytes", field="name")
    for segment in name.split("/"):
        # The shared rule for names (agentstore.validation) holds for every
        # segment; the ref grammar is stricter still (ASCII letters, digits, ._-).
        if name_problem(segment, MAX_NAME) or not _SEGMENT.match(segment):
            raise exceptions.RefNameError(
                f"ref name {name!r}: segments are non-empty [A-Za-z0-9._-], not . or ..",
                field="name",
            )
    return name


def check_prefix(prefix: object) -> str:
    """Return ``prefix`` if it is a valid listing prefix, else raise ``RefNameError``."""
    if not isinstance(prefix, str):
        raise exceptions.RefNameError("ref prefix must be a string", field="prefix")
    if len(prefix.encode("utf-8", "surrogatepass")) > MAX_NAME or not _PREFIX.match(prefix):
        raise exceptions.RefNameError(
            f"ref prefix {prefix!r}: at most {MAX_NAME} bytes of [A-Za-z0-9._/-]",
            field="prefix",
        )
    return prefix


def check_after(after: object) -> str:
    """Return ``after`` (a listing's keyset: the last name seen) if valid, else ``RefNameError``.

    The prefix rules (``""`` allowed, need not be a whole name), on ``field: after``.
    """
    if not isinstance(after, str) or len(after.encode("utf-8", "surrogatepass")) > MAX_NAME:
        raise exceptions.RefNameError(
            f"after: at most {MAX_NAME} bytes of [A-Za-z0-9._/-]", field="after"
        )
    if not _PREFIX.match(after):
        raise exceptions.RefNameError(
            f"after {after!r}: at most {MAX_NAME} bytes of [A-Za-z0-9._/-]", field="after"
        )
    return after


def conflict(name: str, existing: Iterable[str]) -> str:
    """The existing name that forbids creating ``name``, or ``""``."""
    mine = name.split("/")
    for other in existing:
        if other == name:
            continue
        theirs = other.split("/")
        shared = min(len(mine), len(theirs))
        for a, b in zip(mine[:shared], theirs[:shared], strict=True):
            if a == b:
                continue
            if a.lower() == b.lower():
                return other  # same path up to ASCII case
            break
        else:
            # Every shared segment equal (case-insensitively): one name is a
            # segment-prefix of the other — a ref under (or above) a ref.
            return other
    return ""
