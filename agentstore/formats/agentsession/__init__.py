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

Modules, each importing only those before it (no import cycle):
:mod:`.canonical` (RFC 8785 + I-JSON), :mod:`.header`, :mod:`.entry` (envelope,
hashes, ``ts``), :mod:`.legacy` (the pre-0.5 migration), :mod:`.context`
(context building, the canonical request and request hash, ``extra`` helpers;
functions take any object with ``path``/``entry``), :mod:`.results` (what an
append returns, the resume state), then ``Session`` in layers — :mod:`.tree`
(the entries and the tree's answers), :mod:`.leaf` (the leaf rules),
:mod:`.appending` (the append rules, ``prepare``/``commit``), :mod:`.session`
(reading, forks, verification) —, :mod:`.context_hash` (the RFC 0002
prefix-cache key), :mod:`.compaction` (compaction and branch-summary builders),
:mod:`.jsonl` (whole files). ``docs/agentsession-format.md`` is the guide.
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
from agentstore.formats.agentsession.compaction import (
    checkpoint,
    compact,
    compact_from,
    compact_keeping,
    summarise_branch,
)
from agentstore.formats.agentsession.context import (
    PART_SEPARATOR,
    Context,
    PathSource,
    apply_config,
    build_context,
    canonical_request,
    canonical_settings,
    canonical_tool,
    clear_extra,
    extra_value,
    output_entries,
    request_context,
    request_hash,
    set_extra,
    verify_response,
)
from agentstore.formats.agentsession.context_hash import EMPTY as EMPTY_CONTEXT_HASH
from agentstore.formats.agentsession.context_hash import context_hash, context_hashes
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
from agentstore.formats.agentsession.jsonl import dumps, loads
from agentstore.formats.agentsession.legacy import migrate_legacy
from agentstore.formats.agentsession.session import (
    AppendResult,
    Outcome,
    PendingAppend,
    ResumeState,
    Session,
)

__all__ = [
    "CURRENT_FORMAT",
    "CURRENT_MINOR",
    "CURRENT_PAYLOAD",
    "EMPTY_CONTEXT_HASH",
    "ENVELOPE",
    "HASH_PREFIX",
    "PART_SEPARATOR",
    "AppendResult",
    "Context",
    "Entry",
    "Outcome",
    "PathSource",
    "PendingAppend",
    "ResumeState",
    "Session",
    "apply_config",
    "build_context",
    "canonical_json",
    "canonical_request",
    "canonical_settings",
    "canonical_tool",
    "check_ts",
    "checkpoint",
    "clear_extra",
    "compact",
    "compact_from",
    "compact_keeping",
    "content_hash",
    "content_of",
    "context_hash",
    "context_hashes",
    "dumps",
    "entry_id",
    "envelope_of",
    "extra_value",
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
    "set_extra",
    "summarise_branch",
    "validate_header",
    "verify_response",
]
