"""Identifiers: monotonic UUIDv7 strings and random tokens.

Session, entry, task and event ids are UUIDv7 (RFC 9562): a 48-bit Unix
millisecond timestamp, then random bits. Lists that say "newest first" break
timestamp ties with ``id DESC``, so ids made by one process must sort in the
order they were made even inside one millisecond. :func:`new_id` guarantees that
with a 12-bit counter in ``rand_a`` (RFC 9562 §6.2, method 1), seeded randomly
each millisecond and carried into the next millisecond on overflow::

    >>> a, b = new_id(), new_id()
    >>> a < b
    True
"""

from __future__ import annotations

import os
import re
import secrets
import threading
import time

__all__ = ["SHORT", "is_uuid7", "new_id", "new_token", "short_id"]

_UUID7 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")

_lock = threading.Lock()
_last_ms = 0
_counter = 0


def new_id() -> str:
    """Return a new UUIDv7 in canonical lowercase form, greater than the last one."""
    global _last_ms, _counter
    with _lock:
        now_ms = time.time_ns() // 1_000_000
        if now_ms > _last_ms:
            _last_ms = now_ms
            # Start low in the 12-bit space so many ids fit in this millisecond.
            _counter = secrets.randbits(10)
        else:
            _counter += 1
            if _counter > 0xFFF:
                # Overflow (or the clock stepped back): borrow the next millisecond.
                _last_ms += 1
                _counter = secrets.randbits(10)
        ms, counter = _last_ms, _counter
    rand_b = secrets.randbits(62)
    value = (ms & 0xFFFF_FFFF_FFFF) << 80
    value |= 0x7 << 76
    value |= counter << 64
    value |= 0b10 << 62
    value |= rand_b
    # str(uuid.UUID(int=value)) without UUID's checks: the same text, ~1 µs less
    # of the ~4 a claim cycle makes
    # (bench/results/2026-12-01-claim-cycle-checkpoint.md).
    digits = f"{value:032x}"
    return f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"


def is_uuid7(value: str) -> bool:
    """Tell whether ``value`` is a canonical (lowercase, hyphenated) UUIDv7."""
    return bool(_UUID7.match(value))


#: Characters of a short id (decision record 0060).
SHORT = 12


def short_id(value: str) -> str:
    """The short form of an id that people read and the command line accepts back.

    * a UUID: its last 12 hex digits. A UUIDv7 *starts* with its millisecond
      timestamp, so every entry and task of one busy session shares the first
      8–11 characters; the tail is the random part and tells them apart.
    * a ``sha256:`` hash (agentsession entry ids): the first 12 hex digits.
    * any other id of up to 20 characters: itself; a longer one its first 12.

    ``selectors.short_ids.resolve`` turns any of these back into the full id
    when it is unique (a prefix or a suffix, as git resolves abbreviations).
    """
    if not value:
        return ""
    if value.startswith("sha256:"):
        return value[7 : 7 + SHORT]
    if len(value) == 36 and value.count("-") == 4:
        return value[-SHORT:]
    return value if len(value) <= 20 else value[:SHORT]


def new_token() -> str:
    """Return 16 random hex characters (store identities, session incarnations)."""
    return secrets.token_hex(8)


def _reset_after_fork() -> None:
    global _lock
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_reset_after_fork)
