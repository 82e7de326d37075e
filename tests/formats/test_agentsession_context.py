"""Context building: config replay, compaction, omit, the canonical request and its hash."""

from __future__ import annotations

import hashlib
import itertools

import pytest

from agentstore import exceptions
from agentstore.formats import agentsession
from agentstore.formats.agentsession import Session, apply_config, canonical, hash_text
from agentstore.formats.agentsession.context import canonical_request, request_context


def msg(role: str, text: str, **extra):
    kind = "output_text" if role == "assistant" else "input_text"
    return {
        "type": "item",
        "item": {"type": "message", "role": role, "content": [{"type": kind, "text": text}]},
        **extra,
    }


@pytest.fixture
def s():
    counter = itertools.count(1)
    session = Session.new({"id": "ctx-1"})
    session.clock = lambda: f"2026-09-17T12:00:{next(counter):02d}Z"
    return session


def test_config_replay_rules():
    tool = {"type": "function", "name": "lookup", "parameters": {}}
    st = apply_config(
        {},
        {
            "model": "gpt-5",
            "instructions": "Be brief.",
            "tools_added": [tool, {"type": "function", "name": "bash"}],
            "extra": {"temperature": 0.2, "top_p": 1},
            "reasoning": {"effort": "low"},
        },
    )
    assert st["model"] == "gpt-5" and st["instructions"] == "Be brief."
    st2 = apply_config(
        st,
        {
            "tools_removed": ["bash"],
            "tools_added": [{**tool, "description": "v2"}],
            "extra": {"temperature": None, "seed": 7},
        },
    )
    # tools_removed first, then a same-named tool replaces and is appended.
    assert st2["tools"] == [{**tool, "description": "v2"}]
    assert st2["extra"] == {"top_p": 1, "seed": 7}
    assert st2["model"] == "gpt-5" and st2["reasoning"] == {"effort": "low"}
    assert st["extra"] == {"temperature": 0.2, "top_p": 1}  # input not modified
    empty = apply_config(st2, {"tools_removed": ["lookup"], "extra": {"top_p": None, "seed": None}})
    assert "tools" not in empty and "extra" not in empty
    replaced = apply_config(st2, {"replace": True, "model": "other"})
    assert replaced == {"model": "other"}


def test_instruction_parts_replay():
    st = apply_config(
        {},
        {
            "instructions_parts": [
                {"id": "a", "text": "A", "source": "s"},
                {"id": "b", "text": "B"},
                {"id": "c", "text": "C"},
                {"id": "d", "text": "D"},
            ]
        },
    )
    assert st["instructions"] == "A\n\nB\n\nC\n\nD"
    # keep 1 (a), then b by hash, c dropped by skipping, new e, keep 1 (d).
    st2 = apply_config(
        st,
        {
            "instructions_parts": [
                {"keep": 1},
                {"id": "c", "hash": hash_text("C")},
                {"id": "e", "text": "E"},
                {"keep": 1},
            ]
        },
    )
    assert [p["id"] for p in st2["instructions_parts"]] == ["a", "c", "e", "d"]
    assert st2["instructions"] == "A\n\nC\n\nE\n\nD"
    assert st2["instructions_parts"][0] == {"id": "a", "text": "A", "source": "s"}
    # A hash whose text is nowhere on the path stays unresolved; the writer's
    # string stands for what was sent.
    st3 = apply_config(
        st2, {"instructions_parts": [{"id": "z", "hash": hash_text("?")}], "instructions": "Z!"}
    )
    assert st3["instructions_parts"] == [{"id": "z", "hash": hash_text("?")}]
    assert st3["instructions"] == "Z!"
    # A plain string replaces the composition.
    st4 = apply_config(st2, {"instructions": "plain"})
    assert st4["instructions"] == "plain" and "instructions_parts" not in st4


def test_compaction_checkpoint_first_kept_and_pinned(s):
    s.append({"type": "config", "model": "m1", "instructions": "old", "extra": {"t": 1}})
    s.append(msg("user", "one"))
    kept = s.append(msg("assistant", "two"))
    s.append({"type": "config", "model": "m2"})
    three = s.append(msg("user", "three"))
    comp = s.append(
        {
            "type": "compaction",
            "first_kept": kept.id,
            "summary": {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "S"}],
            },
            "pinned": [{"type": "message", "role": "developer", "content": []}],
            "config": {"model": "m2", "instructions": "checkpoint"},
        }
    )
    after = s.append({"type": "config", "extra": {"t": 2}})
    four = s.append(msg("user", "four"))
    ctx = s.context()
    # The checkpoint replaces every earlier config; only later ones replay.
    assert ctx.settings == {"model": "m2", "instructions": "checkpoint", "extra": {"t": 2}}
    texts = [i["content"][0]["text"] if i["content"] else "(pinned)" for i in ctx.items]
    assert texts == ["S", "(pinned)", "two", "three", "four"]
    assert ctx.item_entries == [comp.id, comp.id, kept.id, three.id, four.id]
    assert ctx.entries[0] == comp.id and ctx.entries[-2:] == [after.id, four.id]
    # Only the last compaction applies; a first_kept off the path is refused.
    s.branch(three.id)
    with pytest.raises(exceptions.NoEntry):
        s.append({"type": "compaction", "first_kept": four.id, "summary": {"type": "message"}})


def test_canonical_request_and_hash_by_hand():
    settings = {
        "model": "gpt-5",
        "instructions": "Be brief.",
        "tools": [{"type": "function", "name": "f"}],
        "extra": {"temperature": 0.5},
    }
    items = [{"type": "message", "role": "user", "content": "hi"}]
    request = canonical_request(settings, items)
    # The function tool takes its typed shape: description "" and parameters
    # null when absent (tool-schema canonicalisation).
    assert request == {
        "model": "gpt-5",
        "instructions": "Be brief.",
        "tools": [{"type": "function", "name": "f", "description": "", "parameters": None}],
        "input": items,
        "store": False,
        "temperature": 0.5,
    }
    expected = (
        b'{"input":[{"content":"hi","role":"user","type":"message"}],"instructions":"Be brief.",'
        b'"model":"gpt-5","store":false,"temperature":0.5,'
        b'"tools":[{"description":"","name":"f","parameters":null,"type":"function"}]}'
    )
    assert canonical.dumps(request) == expected
    assert agentsession.request_hash(request) == "sha256:" + hashlib.sha256(expected).hexdigest()
    # Stable under member order.
    assert agentsession.request_hash(dict(reversed(list(request.items())))) == (
        agentsession.request_hash(request)
    )


def test_request_context_and_verify(s):
    s.append({"type": "config", "model": "m"})
    s.append(msg("user", "q"))
    req_ctx = s.context()
    s.append(msg("assistant", "part 1", response="resp_1"))
    s.append({"type": "custom", "ns": "policy", "data": {}})  # between two output items
    s.append(msg("assistant", "part 2", response="resp_1"))
    good = s.append(
        {
            "type": "response",
            "response_id": "resp_1",
            "model": "m",
            "status": "completed",
            "request_hash": req_ctx.request_hash(),
        }
    )
    rebuilt = request_context(s, good.id)
    assert rebuilt.items == req_ctx.items
    s.verify()
    s.append(
        {
            "type": "response",
            "response_id": "resp_2",
            "status": "completed",
            "request_hash": "sha256:" + "1" * 64,
        }
    )
    with pytest.raises(exceptions.HashMismatch):
        s.verify()
    with pytest.raises(exceptions.ValidationError):
        request_context(s, s.entries[0].id)
    with pytest.raises(exceptions.NoEntry):
        s.context_at("sha256:nope")


def test_omit_drops_other_models_reasoning_and_listed_items(s):
    s.append({"type": "config", "model": "a"})
    s.append(msg("user", "q1"))
    r1 = s.append({"type": "item", "item": {"type": "reasoning", "summary": []}, "response": "r1"})
    s.append({"type": "config", "model": "b", "omit": {"reasoning": "other_models"}})
    s.append(msg("user", "q2"))
    r2 = s.append({"type": "item", "item": {"type": "reasoning", "summary": []}, "response": "r2"})
    q3 = s.append(msg("user", "q3"))
    ctx = s.context()
    assert ctx.omitted == [{"entry": r1.id, "reason": "other_models"}]
    assert r2.id in ctx.item_entries and r1.id in ctx.entries
    s.append({"type": "config", "omit": {"items": [q3.id]}})
    ctx2 = s.context()
    assert {"entry": q3.id, "reason": "items"} in ctx2.omitted
    assert ctx2.settings["omit"] == {"reasoning": "other_models", "items": [q3.id]}
    assert q3.id not in ctx2.item_entries
