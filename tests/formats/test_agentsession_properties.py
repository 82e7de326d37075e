"""Property tests: whatever a writer appends reads back with the same ids and bytes."""

from __future__ import annotations

import itertools

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


def _plain_before(value):
    """``canonical.plain`` before its loops checked strings inline (decision record 0040)."""
    kind = type(value)
    if kind is str:
        if value.isascii():
            return True
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
        return True
    if kind is dict:
        for key, item in value.items():
            if type(key) is not str or not key.isascii() or not _plain_before(item):
                return False
        return True
    if kind is list:
        return all(_plain_before(item) for item in value)
    if value is None or kind is bool:
        return True
    if kind is int:
        return bool(-(2**53) + 1 <= value <= 2**53 - 1)
    return False


class _Str(str):
    pass


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
def test_plain_answers_as_before(value):
    assert canonical.plain(value) is _plain_before(value)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(keys, values, max_size=5))
def test_loads_own_reads_what_dumps_wrote_as_json_loads_does(value):
    import json

    text = canonical.dumps(value).decode("utf-8")
    # repr tells 1 from 1.0 and keeps the members' order.
    assert repr(canonical.loads_own(text)) == repr(json.loads(text))
