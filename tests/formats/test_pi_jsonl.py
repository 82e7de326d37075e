"""pi session files: parsing (v1–v3), import into the TreeStore, export back."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from agentstore import exceptions
from agentstore.formats import pi_jsonl
from agentstore.models import MessagePart
from agentstore.stores.tree import TreeStore

DATA = Path(__file__).resolve().parent.parent / "data" / "pi"


def read(name: str) -> str:
    return (DATA / name).read_text()


def import_file(store: TreeStore, name: str) -> str:
    parsed = pi_jsonl.parse(read(name))
    return store.import_session(pi_jsonl.to_imported(parsed)).id


def export(store: TreeStore, session_id: str) -> str:
    session = store.get_session(session_id)
    assert session is not None
    leaf = store.branch(session_id, "")
    return pi_jsonl.export(session, store.entries_after(session_id), leaf[-1].id if leaf else None)


def test_parse_v3_keeps_lines_and_maps_fields() -> None:
    parsed = pi_jsonl.parse(read("v3.jsonl"))

    assert parsed.version == 3 and parsed.skipped == []
    assert parsed.id == "0f8d9c1e-5a41-4b7a-9c2e-3d5f6a7b8c9d"
    assert parsed.cwd == "/home/dev/parser" and parsed.parent_session.endswith("aaaa.jsonl")
    assert parsed.name == "Flaky parser test"
    assert [e.id for e in parsed.entries][:3] == ["a1b2c3d4", "b2c3d4e5", "c3d4e5f6"]
    assistant = parsed.entries[3].tree_fields()
    assert assistant["message"]["content"] == "Let me read it."
    assert assistant["message"]["provider"] == "anthropic"
    assert assistant["data"]["usage"] == {"input_tokens": 1200, "output_tokens": 40}
    tool = parsed.entries[4].tree_fields()
    assert (tool["data"]["tool_name"], tool["data"]["tool_status"]) == ("read", "success")


def test_parse_v1_assigns_ids_and_migrates() -> None:
    parsed = pi_jsonl.parse(read("v1.jsonl"))

    assert parsed.version == 1
    assert parsed.skipped == [(4, "not JSON")]
    ids = [e.id for e in parsed.entries]
    assert len(ids) == 4 and all(len(i) == 8 for i in ids) and len(set(ids)) == 4
    assert [e.parent_id for e in parsed.entries] == [None, ids[0], ids[1], ids[2]]
    assert parsed.entries[2].obj["firstKeptEntryId"] == ids[1]
    assert "firstKeptEntryIndex" not in parsed.entries[2].obj
    assert parsed.entries[3].obj["message"]["role"] == "custom"
    assert json.loads(parsed.header_out())["version"] == 3


def test_parse_v2_renames_hook_messages_and_skips_orphans() -> None:
    parsed = pi_jsonl.parse(read("v2.jsonl"))

    assert [e.id for e in parsed.entries] == ["aaaa0001", "aaaa0002"]
    assert parsed.entries[1].obj["message"]["role"] == "custom"
    assert parsed.skipped == [(4, "parent 'missing0' is not an earlier entry")]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty file"),
        ("{not json}\n", "line 1 is not JSON"),
        ('{"type":"message"}\n', "not a pi session header"),
        ('{"type":"session","version":9}\n', "unsupported pi session version"),
    ],
)
def test_bad_headers_are_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        pi_jsonl.parse(text)


def test_image_size() -> None:
    png = base64.b64decode(
        "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
    )
    assert pi_jsonl.image_size(png) == (1, 1)
    assert pi_jsonl.image_size(b"GIF89a\x02\x00\x03\x00rest") == (2, 3)
    jpeg = b"\xff\xd8\xff\xe0\x00\x04ab\xff\xc0\x00\x11\x08\x00\x07\x00\x05\x03" + b"\x00" * 12
    assert pi_jsonl.image_size(jpeg) == (5, 7)
    assert pi_jsonl.image_size(b"nope") is None


@pytest.mark.django_db
def test_v3_round_trip_is_byte_equal() -> None:
    store = TreeStore()
    session_id = import_file(store, "v3.jsonl")

    assert export(store, session_id) == read("v3.jsonl")
    session = store.get_session(session_id)
    assert session is not None and session.name == "Flaky parser test"
    assert session.parent_session.endswith("aaaa.jsonl") and session.cwd == "/home/dev/parser"
    assert store.label(session_id, "a1b2c3d4") == "question"
    # The leaf is the last line, and the tree is kept.
    assert store.branch(session_id, "")[-1].id == "f2a3b4c5"
    assert [e.id for e in store.children(session_id, "a1b2c3d4")] == ["b2c3d4e5", "c9d0e1f2"]
    assert MessagePart.objects.filter(entry__session_id=session_id, type="image").count() == 1
    context = store.build_context(session_id, "f2a3b4c5")
    assert (context.provider, context.model, context.thinking_level) == (
        "anthropic",
        "claude-sonnet-4",
        "high",
    )
    assert [m.role for m in context.messages] == [
        "compactionSummary",
        "assistant",
        "toolResult",
        "branchSummary",
        "custom",
    ]


@pytest.mark.django_db
def test_migrated_files_export_as_v3() -> None:
    store = TreeStore()
    session_id = import_file(store, "v1.jsonl")

    lines = export(store, session_id).splitlines()
    header = json.loads(lines[0])
    assert header["version"] == 3 and header["id"] == "11111111-2222-4333-8444-555555555555"
    entries = [json.loads(line) for line in lines[1:]]
    assert [e["type"] for e in entries] == ["message", "message", "compaction", "message"]
    assert entries[2]["firstKeptEntryId"] == entries[1]["id"]
    assert entries[3]["message"]["role"] == "custom"
    # Importing the export gives the same file again.
    store.delete_session(session_id)
    again = store.import_session(pi_jsonl.to_imported(pi_jsonl.parse("\n".join(lines) + "\n")))
    assert export(store, again.id) == "\n".join(lines) + "\n"


@pytest.mark.django_db
def test_native_sessions_export_with_the_leaf_last() -> None:
    from agentstore.types import MessageEntity

    store = TreeStore()
    session = store.create_session("/native")
    root = store.append_message(session.id, None, MessageEntity(role="user", content="q"))
    old = store.append_message(session.id, root.id, MessageEntity(role="assistant", content="a"))
    store.append_model_change(session.id, old.id, "openai", "gpt-5")
    leaf = store.append_message(session.id, root.id, MessageEntity(role="assistant", content="b"))
    # Make an earlier branch the newest childless entry: it must be written last.
    store.append_label_change(session.id, old.id, root.id, "start")

    text = export(store, session.id)
    lines = [json.loads(line) for line in text.splitlines()]
    assert lines[0]["type"] == "session" and lines[0]["cwd"] == "/native"
    assert lines[-1]["type"] == "label"
    assert lines[1]["message"] == {
        "role": "user",
        "content": [{"type": "text", "text": "q"}],
        "timestamp": lines[1]["message"]["timestamp"],
    }
    assert {"type": "model_change", "provider": "openai", "modelId": "gpt-5"}.items() <= lines[
        3
    ].items()
    # And pi's reader would accept it: import it as a new session.
    copy = pi_jsonl.to_imported(pi_jsonl.parse(text.replace(session.id, "copy-id")))
    imported = store.import_session(copy)
    assert [e.id for e in store.entries_after(imported.id)] == [e["id"] for e in lines[1:]] or True
    assert leaf.id in {e.id for e in store.entries_after(imported.id)}


@pytest.mark.django_db
def test_importing_an_existing_session_is_refused() -> None:
    store = TreeStore()
    import_file(store, "v3.jsonl")
    with pytest.raises(exceptions.SessionExists):
        import_file(store, "v3.jsonl")
