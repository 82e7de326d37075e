"""agentsession: the session-log format (RFC 0001, format ``agentsession/0.11``).

A pure-Python implementation of the agentsession JSONL format — no Django
settings or app registry needed — used by :class:`agentstore.stores.LogStore`
and usable on its own::

    from agentstore.formats import agentsession

    session = agentsession.Session.new({"cwd": "/p", "harness": {"name": "demo"}})
    cfg = session.append({"type": "config", "model": "gpt-5", "instructions": "Be brief."})
    hi = session.append({"type": "item", "item": {"type": "message", "role": "user",
                         "content": [{"type": "input_text", "text": "hi"}]}})
    hi.outcome            # Outcome.CONTINUED; hi.id == "sha256:…"; hi.line is the exact line
    session.context().request_hash()
    text = agentsession.dumps(session)
    again = agentsession.loads(text)   # verifies every id
    again.verify()                     # and every recorded request hash

Modules: :mod:`.canonical` (RFC 8785 + I-JSON), :mod:`.header`, :mod:`.entry`
(envelope, hashes, ``ts``), :mod:`.session` (tree, leaf rules, append rules,
forks), :mod:`.context` (context building, request hash), :mod:`.jsonl`
(whole files, legacy migration). ``docs/agentsession-format.md`` is the guide.
"""

from __future__ import annotations

from agentstore.formats.agentsession.canonical import (
    HASH_PREFIX,
    hash_text,
    hash_value,
    normalise,
)
from agentstore.formats.agentsession.canonical import dumps as canonical_json
from agentstore.formats.agentsession.canonical import parse as parse_json
from agentstore.formats.agentsession.context import (
    PART_SEPARATOR,
    Context,
    apply_config,
    build_context,
    canonical_request,
    output_entries,
    request_context,
    request_hash,
)
from agentstore.formats.agentsession.entry import (
    ENVELOPE,
    Entry,
    check_ts,
    content_hash,
    content_of,
    entry_id,
    envelope_of,
    format_ts,
    is_hash_id,
)
from agentstore.formats.agentsession.header import (
    CURRENT_FORMAT,
    CURRENT_MINOR,
    CURRENT_PAYLOAD,
    fill_header,
    format_version,
    validate_header,
)
from agentstore.formats.agentsession.jsonl import dumps, loads, migrate_legacy
from agentstore.formats.agentsession.session import (
    AppendResult,
    Outcome,
    PendingAppend,
    Session,
)

__all__ = [
    "CURRENT_FORMAT",
    "CURRENT_MINOR",
    "CURRENT_PAYLOAD",
    "ENVELOPE",
    "HASH_PREFIX",
    "PART_SEPARATOR",
    "AppendResult",
    "Context",
    "Entry",
    "Outcome",
    "PendingAppend",
    "Session",
    "apply_config",
    "build_context",
    "canonical_json",
    "canonical_request",
    "check_ts",
    "content_hash",
    "content_of",
    "dumps",
    "entry_id",
    "envelope_of",
    "fill_header",
    "format_ts",
    "format_version",
    "hash_text",
    "hash_value",
    "is_hash_id",
    "loads",
    "migrate_legacy",
    "normalise",
    "output_entries",
    "parse_json",
    "request_context",
    "request_hash",
    "validate_header",
]
