"""The bytes an append stores do not change when the append path is made faster.

Entries of every shape the encoder treats differently (plain ASCII members,
non-ASCII text, floats and big integers that take the RFC 8785 path, a typeless
SDK item, a function call and its output, a root, a branch, a leaf label) are
appended through :class:`LogStore` and :class:`AgentStoreSession`'s item
mapping with fixed ``ts`` values; the exported JSONL must hash to the digest the
code before the append-path work (decision record 0040) produced. A change to
this digest is a change to the stored format: every id in every stored chain.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from agentstore.integrations.openai_agents import item_entry
from agentstore.stores import LogStore

pytestmark = pytest.mark.django_db

#: sha256 of the export below, as written by main before the work of decision record 0040.
EXPECTED = "17b5358e3c27f365eab6f6900ad45e991a54dd55aaedef26b08d607aa6401768"


def _entries() -> list[dict[str, Any]]:
    ts = "2026-12-01T10:00:0{}.{}Z"
    items: list[dict[str, Any]] = [
        {"role": "user", "content": "What is the weather in Zürich? ☀ \U0001f600"},
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "weather",
            "arguments": '{"city": "Zürich"}',
        },
        {"type": "function_call_output", "call_id": "call_1", "output": "12 °C, sunny"},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "It is 12 °C.", "annotations": []}],
        },
        {"type": "message", "role": "user", "content": "numbers", "meta": {"x": 1.5, "y": 1.0}},
        {"type": "message", "role": "user", "content": "big", "meta": {"n": 2**60, "m": -7}},
        {"type": "message", "role": "user", "content": "keys", "meta": {"é": 1, "b": [True, None]}},
    ]
    out = [item_entry(item, index=i) for i, item in enumerate(items)]
    for n, entry in enumerate(out):
        entry["ts"] = ts.format(n, 123456789 if n % 2 else 5)
    return out


def export_text() -> str:
    """The export of a session built the same way every time."""
    store = LogStore()
    header = {
        "id": "bytes-1",
        "created_at": "2026-12-01T09:59:59.5Z",
        "harness": {"name": "openai-agents"},
    }
    try:
        store.create(header)
        ids = store.append_many("bytes-1", _entries())
        # A branch from the second entry, a root, and the leaf moved back.
        store.append(
            "bytes-1",
            {"type": "info", "parent": ids[1], "ts": "2026-12-01T10:00:10Z", "name": "side"},
        )
        store.append(
            "bytes-1", {"type": "info", "parent": None, "ts": "2026-12-01T10:00:11.1Z", "x": "r"}
        )
        store.append(
            "bytes-1",
            {"type": "label", "target": ids[-1], "label": "leaf", "ts": "2026-12-01T10:00:12Z"},
        )
        return store.export_jsonl("bytes-1")
    finally:
        store.close()


def test_the_exported_bytes_are_unchanged() -> None:
    text = export_text()
    assert hashlib.sha256(text.encode("utf-8")).hexdigest() == EXPECTED, text
