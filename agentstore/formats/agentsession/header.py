"""The session header: line 1 of every agentsession file.

A header is a JSON object with ``type: "session"``, ``format``
(``agentsession/<major>.<minor>``), ``id``, ``created_at`` (RFC 3339) and
``payload`` (``openresponses/<spec date>``), plus optional members (``harness``,
``records``, ``cwd``, ``parent_session``, ``spawned_by``, ``base``, ``media``,
``redacted``) and any unknown members, which are preserved untouched.

* :func:`validate_header` refuses what a reader must refuse: a major version
  other than 0, a missing id/created_at/payload, a payload that is not
  ``openresponses/…``.
* :func:`fill_header` is what ``Create`` does: fill an empty ``format``,
  ``payload``, ``id`` (a UUIDv7) and ``created_at`` (now, UTC); a caller's own
  values are kept exactly as given.
* :func:`format_version` parses ``agentsession/0.11`` into ``(0, 11)``; headers
  are kept as plain dicts (the Python contract of ``LogStore``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from agentstore import exceptions

__all__ = [
    "CURRENT_FORMAT",
    "CURRENT_MINOR",
    "CURRENT_PAYLOAD",
    "fill_header",
    "format_version",
    "new_session_id",
    "validate_header",
]

#: The format this module writes.
CURRENT_MINOR = 11
CURRENT_FORMAT = f"agentsession/0.{CURRENT_MINOR}"
#: The only payload profile: Open Responses items at this spec date.
CURRENT_PAYLOAD = "openresponses/2026-04-24"

_FORMAT = re.compile(r"^agentsession/(\d+)\.(\d+)$")


def format_version(value: Any) -> tuple[int, int]:
    """``"agentsession/0.11"`` → ``(0, 11)``; raise ``ValidationError`` otherwise."""
    m = _FORMAT.match(value) if isinstance(value, str) else None
    if not m:
        raise exceptions.ValidationError(
            f"header.format {value!r} is not agentsession/<major>.<minor>", field="header.format"
        )
    return int(m.group(1)), int(m.group(2))


def new_session_id() -> str:
    """A fresh UUIDv7 session id (the header's recommended id)."""
    from agentstore.ids import new_id

    return new_id()


def validate_header(header: Any) -> dict[str, Any]:
    """Check a decoded header; return it unchanged or raise ``ValidationError``."""
    if not isinstance(header, dict):
        raise exceptions.ValidationError("header must be a JSON object", field="header")
    if header.get("type") != "session":
        raise exceptions.ValidationError('header.type must be "session"', field="header.type")
    major, _minor = format_version(header.get("format"))
    if major != 0:
        raise exceptions.ValidationError(
            f"header.format {header['format']!r}: unsupported major version {major}",
            field="header.format",
        )
    for name in ("id", "created_at", "payload"):
        value = header.get(name)
        if not isinstance(value, str) or not value:
            raise exceptions.ValidationError(f"header.{name} is required", field=f"header.{name}")
    if not header["payload"].startswith("openresponses/"):
        raise exceptions.ValidationError(
            f"header.payload {header['payload']!r} must start with openresponses/",
            field="header.payload",
        )
    try:
        datetime.fromisoformat(header["created_at"].replace("z", "Z"))
    except ValueError as exc:
        raise exceptions.ValidationError(
            f"header.created_at {header['created_at']!r} is not RFC 3339",
            field="header.created_at",
        ) from exc
    base = header.get("base")
    if base is not None and (not isinstance(base, str) or not base):
        raise exceptions.ValidationError("header.base must be an entry id", field="header.base")
    return header


def _rfc3339(now: datetime) -> str:
    utc = now.astimezone(UTC)
    frac = f"{utc.microsecond:06d}".rstrip("0")
    return utc.strftime("%Y-%m-%dT%H:%M:%S") + (f".{frac}" if frac else "") + "Z"


def fill_header(
    header: dict[str, Any] | None = None,
    *,
    now: Callable[[], datetime] | None = None,
    id_factory: Callable[[], str] = new_session_id,
) -> dict[str, Any]:
    """Return a copy of ``header`` with the empty required members filled.

    ``type`` becomes ``session``; empty ``format``/``payload``/``id``/``created_at``
    get the current format, the current payload, a new UUIDv7 and ``now()`` in
    UTC. The result is validated.
    """
    out: dict[str, Any] = dict(header or {})
    out["type"] = "session"
    if not out.get("format"):
        out["format"] = CURRENT_FORMAT
    if not out.get("payload"):
        out["payload"] = CURRENT_PAYLOAD
    if not out.get("id"):
        out["id"] = id_factory()
    if not out.get("created_at"):
        out["created_at"] = _rfc3339((now or (lambda: datetime.now(UTC)))())
    return validate_header(out)
