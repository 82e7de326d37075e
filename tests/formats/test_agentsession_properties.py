"""Property tests: whatever a writer appends reads back with the same ids and bytes."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentstore.formats import agentsession
from agentstore.formats.agentsession import Session, canonical

keys = st.text(min_size=1, max_size=8).filter(
    lambda k: k not in agentsession.ENVELOPE and k != "normalised"
)
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=12,
)
bodies = st.dictionaries(keys, values, max_size=5)
types = st.sampled_from(["info", "custom", "env", "outcome", "acme:note"])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(types, bodies, st.integers(min_value=0, max_value=9)), max_size=8))
def test_write_read_round_trips_ids_byte_for_byte(plan):
    counter = itertools.count()
    session = Session.new({"id": "prop", "created_at": "2026-09-17T12:00:00Z"})
    session.clock = lambda: f"2026-09-17T12:{next(counter) % 60:02d}:00.5Z"
    for kind, body, hop in plan:
        entries = session.entries
        if entries and hop < len(entries):
            session.branch(entries[hop].id)
        session.append({**body, "type": kind})
    text = agentsession.dumps(session)
    again = agentsession.loads(text)
    assert [e.id for e in again] == [e.id for e in session]
    assert agentsession.dumps(again) == text
    for e in again:
        assert agentsession.entry_id(canonical.parse(e.line)) == e.id
    again.verify()


@settings(max_examples=100, deadline=None)
@given(values)
def test_canonical_bytes_are_a_fixed_point(value):
    data = canonical.dumps(value)
    assert canonical.dumps(canonical.parse(data)) == data


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=16,
)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_fast_path_equals_rfc8785(value):
    # canonical.dumps takes a C-encoder fast path for plain values; it must
    # give exactly the bytes of the reference RFC 8785 implementation.
    import rfc8785

    assert canonical.dumps(value) == rfc8785.dumps(value)


class _Str(str):
    pass


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        False,
        0,
        2**53 - 1,
        -(2**53) + 1,
        "",
        "ascii",
        "é",
        "\U0001f600",  # a whole astral character (no surrogate)
        {},
        [],
        {"a": "é", "b": None},
        ["é", 1, None, [{"k": True}]],
        {"a": {"b": ["x", {"c": -5}]}},
    ],
)
def test_plain_values(value):
    assert canonical.plain(value) is True


@pytest.mark.parametrize(
    "value",
    [
        2**53,  # an unsafe integer (dumps spells it as a double)
        -(2**53),
        2**60,
        1.0,  # any float: Python's spelling is not ECMAScript's
        0.5,
        float("nan"),
        "\ud800",  # a lone surrogate (normalise changes it)
        "a\udfff",
        {"é": 1},  # a non-ASCII member name (UTF-16 order may differ)
        {1: "x"},  # a member name that is not a str
        {"a": 1, 2: "x"},
        ("a",),  # a tuple, not a list
        _Str("a"),  # a subclass, not a str
        {"a": _Str("x")},
        [_Str("x")],
        [1.0],
        {"a": ["\ud800"]},
        ["ok", 2**60],
        {"a": (1,)},
        [True, 1.5],
        b"x",
        object(),
    ],
)
def test_values_that_are_not_plain(value):
    assert canonical.plain(value) is False


# Built only from what plain() accepts, with exact types.
plain_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | st.text(max_size=6)  # hypothesis's text() draws no surrogates
)
plain_values = st.recursive(
    plain_scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.text(alphabet=st.characters(max_codepoint=0x7F), max_size=4), inner, max_size=4
        )
    ),
    max_leaves=16,
)
# Each is not plain, and makes any value holding it not plain.
not_plain = st.sampled_from(
    [2**53, -(2**60), 1.0, -0.0, "\ud800", "x\udc00y", ("a",), _Str("a"), {"é": 1}, {1: 1}]
)


@settings(max_examples=300, deadline=None)
@given(plain_values)
def test_what_is_built_of_plain_parts_is_plain(value):
    assert canonical.plain(value) is True


@settings(max_examples=300, deadline=None)
@given(st.lists(plain_values, max_size=3), not_plain, st.integers(0, 3), st.booleans())
def test_one_part_that_is_not_plain_makes_the_whole_not_plain(items, bad, at, as_member):
    held = {"k": bad} if as_member else bad
    value = [*items[:at], held, *items[at:]]
    assert canonical.plain(value) is False
    assert canonical.plain({"outer": value}) is False


# Everything plain() must tell apart: big integers, floats, lone surrogates,
# non-ASCII and non-string keys, tuples and subclasses.
odd_scalars = (
    scalars
    | st.integers()
    | st.text(alphabet=st.characters(min_codepoint=0xD7F0, max_codepoint=0xE010), max_size=3)
    | st.builds(_Str, st.text(max_size=3))
)
odd_values = st.recursive(
    odd_scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=4) | st.integers(0, 3), inner, max_size=4)
    ),
    max_leaves=16,
)


@settings(max_examples=400, deadline=None)
@given(odd_values)
def test_a_plain_value_keeps_what_plain_promises(value):
    # What plain() answers True for, checked against independent oracles:
    # normalise leaves it alone, and json.dumps gives the RFC 8785 bytes.
    import json

    import rfc8785

    if not canonical.plain(value):
        return
    assert canonical.normalise(value) == (value, [])
    fast = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert fast.encode("utf-8") == rfc8785.dumps(value)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(keys, values, max_size=5))
def test_loads_own_reads_what_dumps_wrote_as_json_loads_does(value):
    import json

    text = canonical.dumps(value).decode("utf-8")
    # repr tells 1 from 1.0 and keeps the members' order.
    assert repr(canonical.loads_own(text)) == repr(json.loads(text))
