"""The log row's per-append shortcuts give what the general code gives.

Decision records 0036 and 0040.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentstore import exceptions, sql
from agentstore.formats.agentsession import Entry, ResumeState, canonical_json
from agentstore.formats.agentsession.describe import describe, searchable
from agentstore.models import Entry as EntryRow
from agentstore.stores import log_open, log_rows


def _searchable_before(data):
    """``describe.searchable`` as it was: every entry through ``describe``."""
    view = describe(data)
    role = view.role if view.kind == "message" else ""
    content = f"{view.tool}({view.arguments})" if view.kind == "tool call" else view.text
    summary = view.text if view.type in ("compaction", "branch_summary") else ""
    model = data.get("model") if view.type in ("config", "response") else ""
    return (
        role[:64],
        content if not summary else "",
        view.tool[:255],
        summary,
        model[:255] if isinstance(model, str) else "",
    )


ITEMS = [
    {"type": "message", "role": "user", "content": "hi"},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "a"}]},
    {"type": "message", "content": [{"type": "input_image"}, "x", {"type": "refusal"}]},
    {"type": "function_call", "call_id": "c1", "name": "f", "arguments": '{"a":1}'},
    {"type": "function_call", "call_id": "c1", "name": "f", "arguments": {"a": "é"}},
    {"type": "custom_tool_call", "call_id": "c2", "name": "g", "input": "raw"},
    {"type": "custom_tool_call", "call_id": "c2"},
    {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
    {"type": "custom_tool_call_output", "call_id": "c2", "output": [{"type": "text", "text": "t"}]},
    {"type": "reasoning", "summary": [{"type": "summary_text", "text": "s"}], "content": []},
    {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "r"}]},
    {"type": "web_search_call", "id": "ws", "status": "completed", "action": {"q": "x"}},
    {"type": "tool call", "call_id": "c3", "content": "an unknown type spelt as a kind"},
    {"type": "tool output", "call_id": "c4"},
    {"type": "item_x", "content": "text"},
    {"type": 5, "role": "user"},
    {"role": "user"},
    {"type": "message", "role": "r" * 100, "content": "long role"},
    {"type": "function_call", "name": "n" * 300, "arguments": "x"},
]


@pytest.mark.parametrize("item", [*ITEMS, "not an object", None, [1, 2]])
@pytest.mark.parametrize("extra", [{}, {"response": "resp_1"}, {"parents": [{"entry": "e"}]}])
def test_an_items_projection_and_description_are_as_before(item, extra) -> None:
    data = {"type": "item", "item": item, "id": "sha256:x", "ts": "2026-01-01T00:00:00Z", **extra}
    assert searchable(data) == _searchable_before(data)
    view = describe(data)
    assert view.type == "item" and view.converges == len(extra.get("parents", ()))
    if isinstance(item, dict) and item.get("type") in (
        "function_call",
        "custom_tool_call",
        "function_call_output",
        "custom_tool_call_output",
    ):
        assert view.call_id == item.get("call_id", "")
    else:
        assert view.call_id == ""


@pytest.mark.parametrize(
    "data",
    [
        {"type": "config", "model": "gpt-5", "instructions": "be brief"},
        {"type": "response", "model": "m" * 300, "usage": {"total_tokens": 3}},
        {"type": "compaction", "summary": {"type": "message", "content": "sum"}, "first_kept": "e"},
        {"type": "label", "target": "e", "label": "leaf"},
        {"type": "info", "name": "n"},
        {"type": "custom", "x": 1},
    ],
)
def test_other_entries_still_go_through_describe(data) -> None:
    assert searchable(data) == _searchable_before(data)


def _created_before(ts: str, fallback: datetime) -> datetime:
    try:
        return log_rows.parse_time(ts, "entry.ts") if ts else fallback
    except exceptions.ValidationError:
        return fallback


def _entry(ts: str) -> Entry:
    return Entry(id="sha256:x", type="item", parent=None, ts=ts, line="{}")


FALLBACK = datetime(2000, 1, 1, tzinfo=UTC)
STAMPS = [
    "2026-12-01T23:00:00Z",
    "2026-12-01T23:00:00.5Z",
    "2026-12-01T23:00:00.123456789Z",
    "2026-12-01T23:00:00.1234567891234Z",
    "2026-12-01T23:00:00.000001Z",
    "2026-12-01T23:00:00.0000009Z",
    "2026-12-01T23:00:00.Z",
    "2026-12-01T23:00:00.1z",
    "2026-12-01T23:00:00.1Zx",
    "2026-12-01T23:00:00.1\nZ",
    "2026-12-01T23:00:00.1Z\n",
    "2026-12-01T23:00:00.١٢Z",  # Arabic-Indic digits: \d, as parse_time reads them
    "2026-12-01T23:00:00.1+01:00",
    "2026-12-01t23:00:00.1Z",
    "2026-12-01 23:00:00.1Z",
    "2026-12-01T23:00:01Z",
    "2026-02-30T23:00:00.1Z",
    "2026-02-30T23:00:00Z",
    "2026-12-01T23:00:00",
    "",
    "garbage",
    "2026-12-01T23:00:0",
]


def test_an_entrys_created_at_is_parse_times_in_any_order() -> None:
    # The second is remembered between calls: every order of these (each
    # repeated) must give what parse_time gives, cache hit or miss.
    for order in itertools.islice(itertools.permutations(STAMPS[:8]), 200):
        for ts in order:
            assert log_rows.entry_created_at(_entry(ts), FALLBACK) == _created_before(ts, FALLBACK)
    for first in STAMPS:
        for ts in STAMPS:
            log_rows.entry_created_at(_entry(first), FALLBACK)
            got = log_rows.entry_created_at(_entry(ts), FALLBACK)
            assert got == _created_before(ts, FALLBACK), (first, ts)
            assert got.tzinfo is _created_before(ts, FALLBACK).tzinfo


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(2100, 1, 1)),
            st.text(alphabet="0123456789", max_size=12),
            st.sampled_from(["Z", "z", "+00:00", "-02:30", ""]),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_an_entrys_created_at_is_parse_times_for_any_stamp(stamps) -> None:
    for when, digits, zone in stamps:
        for ts in (
            when.strftime("%Y-%m-%dT%H:%M:%S") + (f".{digits}" if digits else "") + zone,
            when.strftime("%Y-%m-%dT%H:%M:%S") + "." + digits + zone,
        ):
            assert log_rows.entry_created_at(_entry(ts), FALLBACK) == _created_before(ts, FALLBACK)


def _head_before(lines: int, state: ResumeState) -> str:
    head = {"lines": lines, "leaf": state.leaf}
    if state.mark:
        head.update(mark=state.mark, mark_at=state.mark_at, newest=state.newest)
    return canonical_json(head).decode("utf-8")


@pytest.mark.parametrize("lines", [0, 1, 7, 2**53 - 1, 2**53, 2**60])
@pytest.mark.parametrize(
    "state",
    [
        ResumeState(),
        ResumeState(leaf="sha256:" + "a" * 64),
        ResumeState(leaf='quote " and \\ back\n'),
        ResumeState(leaf="é"),
        ResumeState(leaf="sha256:b", mark="sha256:m", mark_at=3, newest="sha256:n"),
    ],
)
def test_the_head_text_is_the_canonical_encoding(lines, state) -> None:
    assert log_open.encode_head(lines, state) == _head_before(lines, state)


def test_a_lone_surrogate_leaf_is_refused_as_before() -> None:
    with pytest.raises(exceptions.ValidationError):
        log_open.encode_head(1, ResumeState(leaf="\ud800"))


NAMES = ("session_id", "seq", "entry_id", "type", "created_at", "line", "compaction_settings")


@pytest.mark.parametrize(
    "values",
    [
        ("s", 1, "e", "t", "2026-01-01 00:00:00", "{}", None),
        ("s", 2, "e", "t", "2026-01-01 00:00:00", None, "{}"),
    ],
)
def test_a_row_builder_gives_rows_list(values) -> None:
    build = sql.row_builder(EntryRow, NAMES)
    assert build(*values) == sql.row(EntryRow, **dict(zip(NAMES, values, strict=True)))
    # ``exclude`` as row() takes it (the tree store's INSERT computes seq).
    names = tuple(n for n in NAMES if n != "seq")
    given = [v for n, v in zip(NAMES, values, strict=True) if n != "seq"]
    build = sql.row_builder(EntryRow, names, exclude=("seq",))
    assert build(*given) == sql.row(
        EntryRow, exclude=("seq",), **dict(zip(names, given, strict=True))
    )


def test_a_row_builder_calls_a_callable_default_per_row() -> None:
    from agentstore.models import Session

    build = sql.row_builder(Session, ("id", "kind", "created_at", "updated_at"))
    made = [build("s", "log", "t", "t"), build("s", "log", "t", "t")]
    reference = sql.row(Session, id="s", kind="log", created_at="t", updated_at="t")
    assert len(made[0]) == len(reference)
    changed = [i for i, (a, b) in enumerate(zip(made[0], made[1], strict=True)) if a != b]
    assert changed  # the incarnation: a fresh token per row, as row() gives
    for i, value in enumerate(reference):
        if i not in changed:
            assert made[0][i] == value


def test_a_row_builder_refuses_what_row_would_refuse() -> None:
    with pytest.raises(KeyError, match="created_at"):
        sql.row_builder(EntryRow, ("session_id", "seq", "entry_id", "type"))
    with pytest.raises(KeyError):
        sql.row_builder(EntryRow, ("session_id", "seq", "entry_id", "type", "created_at", "nope"))
