"""The log row's per-append shortcuts, against explicit values (decision records 0036 and 0040).

Each shortcut (the search projection, ``created_at`` from ``ts``, the session's
head text) is checked on chosen inputs, edge cases included, against the
values it must give, written out — not against a second copy of the code.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentstore import exceptions, sql
from agentstore.formats.agentsession import Entry, ResumeState
from agentstore.formats.agentsession.describe import describe, searchable
from agentstore.models import Entry as EntryRow
from agentstore.stores import log_open, log_rows

#: Items and the ``(role, content, tool_name, summary, model)`` they project.
ITEMS = [
    ({"type": "message", "role": "user", "content": "hi"}, ("user", "hi", "", "", "")),
    (
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "a"}]},
        ("assistant", "a", "", "", ""),
    ),
    (
        {"type": "message", "content": [{"type": "input_image"}, "x", {"type": "refusal"}]},
        ("", "[image]\nx\n[refusal] ", "", "", ""),
    ),
    (
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": '{"a":1}'},
        ("", 'f({"a":1})', "f", "", ""),
    ),
    (
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": {"a": "é"}},
        ("", 'f({"a": "é"})', "f", "", ""),
    ),
    (
        {"type": "custom_tool_call", "call_id": "c2", "name": "g", "input": "raw"},
        ("", "g(raw)", "g", "", ""),
    ),
    ({"type": "custom_tool_call", "call_id": "c2"}, ("", "()", "", "", "")),
    (
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
        ("", "sunny", "", "", ""),
    ),
    (
        {
            "type": "custom_tool_call_output",
            "call_id": "c2",
            "output": [{"type": "text", "text": "t"}],
        },
        ("", "t", "", "", ""),
    ),
    (
        {"type": "reasoning", "summary": [{"type": "summary_text", "text": "s"}], "content": []},
        ("", "s", "", "", ""),
    ),
    (
        {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "r"}]},
        ("", "r", "", "", ""),
    ),
    (
        {"type": "web_search_call", "id": "ws", "status": "completed", "action": {"q": "x"}},
        ("", '{"action": {"q": "x"}}', "", "", ""),
    ),
    (
        {"type": "tool call", "call_id": "c3", "content": "an unknown type spelt as a kind"},
        ("", "()", "", "", ""),
    ),
    ({"type": "tool output", "call_id": "c4"}, ("", '{"call_id": "c4"}', "", "", "")),
    ({"type": "item_x", "content": "text"}, ("", "text", "", "", "")),
    ({"type": 5, "role": "user"}, ("", '{"role": "user"}', "", "", "")),
    ({"role": "user"}, ("", '{"role": "user"}', "", "", "")),
    # The role keeps 64 characters, the tool name 255; the content keeps all
    # (the store cuts it to PROJECTED_CHARS).
    (
        {"type": "message", "role": "r" * 100, "content": "long role"},
        ("r" * 64, "long role", "", "", ""),
    ),
    (
        {"type": "function_call", "name": "n" * 300, "arguments": "x"},
        ("", "n" * 300 + "(x)", "n" * 255, "", ""),
    ),
    ("not an object", ("", "", "", "", "")),
    (None, ("", "", "", "", "")),
    ([1, 2], ("", "", "", "", "")),
]


@pytest.mark.parametrize(("item", "words"), ITEMS)
@pytest.mark.parametrize("extra", [{}, {"response": "resp_1"}, {"parents": [{"entry": "e"}]}])
def test_an_items_projection_and_description(item, words, extra) -> None:
    data = {"type": "item", "item": item, "id": "sha256:x", "ts": "2026-01-01T00:00:00Z", **extra}
    assert searchable(data) == words
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
    ("data", "words"),
    [
        (
            {"type": "config", "model": "gpt-5", "instructions": "be brief"},
            ("", "", "", "", "gpt-5"),
        ),
        (
            {"type": "response", "model": "m" * 300, "usage": {"total_tokens": 3}},
            ("", "", "", "", "m" * 255),
        ),
        (
            {
                "type": "compaction",
                "summary": {"type": "message", "content": "sum"},
                "first_kept": "e",
            },
            ("", "", "", "sum", ""),
        ),
        ({"type": "label", "target": "e", "label": "leaf"}, ("", "", "", "", "")),
        ({"type": "info", "name": "n"}, ("", "n", "", "", "")),
        ({"type": "custom", "x": 1}, ("", "", "", "", "")),
    ],
)
def test_other_entries_project_through_describe(data, words) -> None:
    assert searchable(data) == words


def _entry(ts: str) -> Entry:
    return Entry(id="sha256:x", type="item", parent=None, ts=ts, line="{}")


FALLBACK = datetime(2000, 1, 1, tzinfo=UTC)


def _at(microsecond: int = 0, *, second: int = 0, hour: int = 23) -> datetime:
    return datetime(2026, 12, 1, hour, 0, second, microsecond, tzinfo=UTC)


#: Entry ``ts`` values and the ``created_at`` each gives (FALLBACK: not a time).
STAMPS = {
    "2026-12-01T23:00:00Z": _at(),
    "2026-12-01T23:00:00.5Z": _at(500000),
    "2026-12-01T23:00:00.123456789Z": _at(123456),  # truncated, not rounded
    "2026-12-01T23:00:00.1234567891234Z": _at(123456),
    "2026-12-01T23:00:00.000001Z": _at(1),
    "2026-12-01T23:00:00.0000009Z": _at(0),
    "2026-12-01T23:00:00.Z": FALLBACK,
    "2026-12-01T23:00:00.1z": _at(100000),
    "2026-12-01T23:00:00.1Zx": FALLBACK,
    "2026-12-01T23:00:00.1\nZ": FALLBACK,
    "2026-12-01T23:00:00.1Z\n": _at(100000),  # "$" matches before a final newline
    "2026-12-01T23:00:00.١٢Z": _at(120000),  # Arabic-Indic digits: \d, as parse_time reads them
    "2026-12-01T23:00:00.1+01:00": _at(100000, hour=22),
    "2026-12-01t23:00:00.1Z": _at(100000),
    "2026-12-01 23:00:00.1Z": _at(100000),
    "2026-12-01T23:00:01Z": _at(second=1),
    "2026-02-30T23:00:00.1Z": FALLBACK,
    "2026-02-30T23:00:00Z": FALLBACK,
    "2026-12-01T23:00:00": FALLBACK,
    "": FALLBACK,
    "garbage": FALLBACK,
    "2026-12-01T23:00:0": FALLBACK,
}


def test_an_entrys_created_at_in_any_order() -> None:
    # The second is remembered between calls: every order of these (each
    # repeated) must give the same answers, cache hit or miss.
    first_eight = list(STAMPS)[:8]
    for order in itertools.islice(itertools.permutations(first_eight), 200):
        for ts in order:
            assert log_rows.entry_created_at(_entry(ts), FALLBACK) == STAMPS[ts]
    for first in STAMPS:
        for ts, expected in STAMPS.items():
            log_rows.entry_created_at(_entry(first), FALLBACK)
            got = log_rows.entry_created_at(_entry(ts), FALLBACK)
            assert got == expected, (first, ts)
            assert got.tzinfo is UTC


def test_parse_time_refuses_what_gives_the_fallback() -> None:
    for ts, expected in STAMPS.items():
        if expected is FALLBACK:
            with pytest.raises(exceptions.ValidationError):
                log_rows.parse_time(ts, "entry.ts")
        else:
            assert log_rows.parse_time(ts, "entry.ts") == expected


ZONES = {"Z": UTC, "z": UTC, "+00:00": UTC, "-02:30": timezone(-timedelta(hours=2, minutes=30))}


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(2100, 1, 1)),
            st.text(alphabet="0123456789", max_size=12),
            st.sampled_from([*ZONES, ""]),
        ),
        min_size=1,
        max_size=6,
    )
)
def test_an_entrys_created_at_for_any_stamp(stamps) -> None:
    # The oracle builds the time from the parts the stamp was written from.
    for when, digits, zone in stamps:
        base = when.strftime("%Y-%m-%dT%H:%M:%S")
        if zone:
            exact = when.replace(microsecond=0, tzinfo=ZONES[zone]).astimezone(UTC)
            expected = exact.replace(microsecond=int(digits[:6].ljust(6, "0")))
        else:
            expected = FALLBACK  # no zone: not RFC 3339
        with_fraction = base + (f".{digits}" if digits else "") + zone
        assert log_rows.entry_created_at(_entry(with_fraction), FALLBACK) == expected
        dot = base + "." + digits + zone  # a dot without digits is not RFC 3339
        assert log_rows.entry_created_at(_entry(dot), FALLBACK) == (
            expected if digits else FALLBACK
        )


A64 = "sha256:" + "a" * 64
MARKED = ResumeState(leaf="sha256:b", mark="sha256:m", mark_at=3, newest="sha256:n")


@pytest.mark.parametrize(
    ("lines", "state", "text"),
    [
        (0, ResumeState(), '{"leaf":"","lines":0}'),
        (1, ResumeState(leaf=A64), '{"leaf":"' + A64 + '","lines":1}'),
        (
            7,
            ResumeState(leaf='quote " and \\ back\n'),
            r'{"leaf":"quote \" and \\ back\n","lines":7}',
        ),
        (7, ResumeState(leaf="é"), '{"leaf":"é","lines":7}'),
        # JCS escapes the controls below U+0020 only; DEL, U+2028 and an astral
        # character are written as they are (UTF-8).
        (
            7,
            ResumeState(leaf="\x00\x1f\x7f\u2028\U0001f600"),
            '{"leaf":"\\u0000\\u001f\x7f\u2028\U0001f600","lines":7}',
        ),
        (
            7,
            MARKED,
            '{"leaf":"sha256:b","lines":7,"mark":"sha256:m","mark_at":3,"newest":"sha256:n"}',
        ),
        (
            2,
            ResumeState(leaf="x", mark="m"),
            '{"leaf":"x","lines":2,"mark":"m","mark_at":0,"newest":""}',
        ),
        # Integers: exact up to 2**53 - 1, then the nearest double's ECMAScript spelling.
        (2**53 - 1, ResumeState(leaf="x"), '{"leaf":"x","lines":9007199254740991}'),
        (2**53, ResumeState(leaf="x"), '{"leaf":"x","lines":9007199254740992}'),
        (2**53, ResumeState(leaf="é"), '{"leaf":"é","lines":9007199254740992}'),
        (2**60, ResumeState(leaf="x"), '{"leaf":"x","lines":1152921504606847000}'),
        (
            2**60,
            MARKED,
            '{"leaf":"sha256:b","lines":1152921504606847000,"mark":"sha256:m","mark_at":3,'
            '"newest":"sha256:n"}',
        ),
    ],
)
def test_the_head_text(lines, state, text) -> None:
    assert log_open.encode_head(lines, state) == text


def test_a_lone_surrogate_leaf_is_refused() -> None:
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
