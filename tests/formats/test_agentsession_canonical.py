"""RFC 8785 bytes, the I-JSON rule, hashes and the ``ts`` spelling, by hand-made vectors."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Any

import pytest
import rfc8785

from agentstore import exceptions
from agentstore.formats.agentsession import canonical
from agentstore.formats.agentsession.entry import check_ts, content_hash, entry_id, format_ts
from agentstore.formats.agentsession.header import fill_header, format_version, validate_header


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        # ECMAScript number rendering, not Python's repr.
        (1.0, b"1"),
        (-0.0, b"0"),
        (1e21, b"1e+21"),
        (1e-7, b"1e-7"),
        (0.000001, b"0.000001"),
        (0.1, b"0.1"),
        (123456789012345680000.0, b"123456789012345680000"),
        (2**53, b"9007199254740992"),  # an exactly representable big int
        (2**64, b"18446744073709552000"),
        # Strings: only what JSON requires is escaped; U+2028 and é stay raw.
        ('\u000f/é\u2028"\\', b'"\\u000f/\xc3\xa9\xe2\x80\xa8\\"\\\\"'),
        ("\n\t\b\f\r", b'"\\n\\t\\b\\f\\r"'),
        # Members sort by UTF-16 code units: U+1F600 is D83D DE00, which sorts
        # before U+FB01 although its code point is larger.
        ({"\ufb01": 1, "\U0001f600": 2, "b": 3, "a": 4}, '{"a":4,"b":3,"😀":2,"ﬁ":1}'.encode()),
        ({"z": [True, False, None], "a": {}}, b'{"a":{},"z":[true,false,null]}'),
    ],
)
def test_jcs_bytes(value, expected):
    assert canonical.dumps(value) == expected


def test_parse_refuses_what_i_json_refuses():
    with pytest.raises(exceptions.ValidationError, match="not exactly representable"):
        canonical.parse('{"n":9007199254740993}')
    with pytest.raises(exceptions.ValidationError, match="not exactly representable"):
        canonical.parse('{"n":9.007199254740993e15}')
    with pytest.raises(exceptions.ValidationError, match="duplicate member"):
        canonical.parse('{"a":1,"a":2}')
    with pytest.raises(exceptions.ValidationError, match="lone surrogate"):
        canonical.parse('{"a":"cut \\ud83d"}')
    with pytest.raises(exceptions.ValidationError):
        canonical.parse('{"a":NaN}')
    with pytest.raises(exceptions.ValidationError, match="not finite"):
        canonical.parse('{"a":1e400}')
    with pytest.raises(exceptions.ValidationError, match="not valid JSON"):
        canonical.parse('{"a":')


def test_parse_accepts_canonical_renderings_of_big_doubles():
    # 2^60 written the ECMAScript way is the double's own spelling: accepted,
    # and rendered back byte for byte.
    value = canonical.parse('{"pow60":1152921504606847000,"pair":"\\ud83d\\ude00"}')
    assert value["pair"] == "\U0001f600"
    assert canonical.dumps(value) == '{"pair":"😀","pow60":1152921504606847000}'.encode()


def test_dumps_refuses_non_json():
    with pytest.raises(exceptions.ValidationError):
        canonical.dumps({"a": float("nan")})
    with pytest.raises(exceptions.ValidationError):
        canonical.dumps({"a": 2**53 + 1})
    with pytest.raises(exceptions.ValidationError):
        canonical.dumps({"a": object()})
    with pytest.raises(exceptions.ValidationError):
        canonical.dumps("lone \ud800")


def test_normalise_records_each_change():
    value, records = canonical.normalise(
        {"text": "cut \ud83d", "n": 2**53 + 1, "ok": [1, "fine"], "a/b": {"m": "\udc00"}}
    )
    assert value["text"] == "cut \ufffd"
    assert value["n"] == float(2**53)
    assert value["a/b"]["m"] == "\ufffd"
    assert records == [
        {"at": "/a~1b/m", "was": '"\\udc00"'},
        {"at": "/n", "was": "9007199254740993"},
        {"at": "/text", "was": '"cut \\ud83d"'},
    ]
    untouched, none = canonical.normalise({"x": [1, 2.5, "y"]})
    assert untouched == {"x": [1, 2.5, "y"]} and none == []


def test_hash_notation():
    assert canonical.hash_text("abc") == "sha256:" + hashlib.sha256(b"abc").hexdigest()
    assert canonical.hash_value({"b": 1, "a": [1.0]}) == (
        "sha256:" + hashlib.sha256(b'{"a":[1],"b":1}').hexdigest()
    )


def test_content_hash_and_id_computed_independently():
    entry = {
        "type": "item",
        "parent": None,
        "ts": "2026-09-17T12:00:01Z",
        "item": {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": "hi"}],
        },
        "acme:x": 1.5,
    }
    content_bytes = (
        b'{"acme:x":1.5,"item":{"content":[{"text":"hi","type":"input_text"}],'
        b'"role":"user","type":"message"}}'
    )
    expected_content = "sha256:" + hashlib.sha256(content_bytes).hexdigest()
    assert content_hash(entry) == expected_content
    envelope = (
        b'{"content":"' + expected_content.encode() + b'","parent":null,'
        b'"ts":"2026-09-17T12:00:01Z","type":"item"}'
    )
    assert entry_id(entry) == "sha256:" + hashlib.sha256(envelope).hexdigest()
    # parents appear in the envelope only when non-empty.
    assert entry_id({**entry, "parents": []}) == entry_id(entry)
    with_parents = {**entry, "parents": [{"entry": "sha256:" + "0" * 64}]}
    envelope2 = (
        b'{"content":"'
        + expected_content.encode()
        + b'","parent":null,"parents":[{"entry":"sha256:'
        + b"0" * 64
        + b'"}],"ts":"2026-09-17T12:00:01Z","type":"item"}'
    )
    assert entry_id(with_parents) == "sha256:" + hashlib.sha256(envelope2).hexdigest()


def test_basic_fixture_first_entry_by_hand():
    # The first entry of basic.jsonl, hashed here from its own members.
    line = (
        '{"extra":{"temperature":0.2},"instructions":"Be brief.","legacy_id":"c0000001",'
        '"model":"gpt-5","parent":null,"reasoning":{"effort":"low","summary":null},'
        '"tools_added":[{"description":"Look something up","name":"lookup","parameters":'
        '{"properties":{"q":{"type":"string"}},"required":["q"],"type":"object"},'
        '"type":"function"}],"ts":"2026-09-17T12:00:00Z","type":"config"}'
    )
    obj = canonical.parse(line)
    content = {k: v for k, v in obj.items() if k not in ("type", "parent", "ts")}
    content_digest = hashlib.sha256(canonical.dumps(content)).hexdigest()
    env = {"type": "config", "parent": None, "ts": obj["ts"], "content": "sha256:" + content_digest}
    assert "sha256:" + hashlib.sha256(canonical.dumps(env)).hexdigest() == (
        "sha256:315d501de2a8de2894e81df8b33412d172347001eab703c2676ae43cb2e0c17a"
    )
    assert (
        entry_id(obj) == "sha256:315d501de2a8de2894e81df8b33412d172347001eab703c2676ae43cb2e0c17a"
    )


@pytest.mark.parametrize(
    "good", ["2026-09-17T12:00:02.5Z", "2026-09-17T12:00:02Z", "2026-09-17T12:00:02.123456789Z"]
)
def test_ts_spelling_accepted(good):
    assert check_ts(good) == good


@pytest.mark.parametrize(
    "bad",
    [
        "2026-09-17T12:00:02.50Z",  # trailing zero
        "2026-09-17T12:00:02.0Z",  # zero fraction
        "2026-09-17t12:00:02Z",  # lowercase t
        "2026-09-17T12:00:02+00:00",  # not Z
        "2026-09-17T12:00:60Z",  # leap second
        "2026-09-17T12:00:02.1234567891Z",  # 10 digits
        "2026-02-30T12:00:02Z",  # no such day
        20260917,
    ],
)
def test_ts_spelling_refused(bad):
    with pytest.raises(exceptions.ValidationError):
        check_ts(bad)


def test_format_ts_rules():
    assert format_ts("2026-09-17T12:00:02.500000000Z") == "2026-09-17T12:00:02.5Z"
    assert format_ts("2026-09-17T12:00:02.1234567891234Z") == "2026-09-17T12:00:02.123456789Z"
    assert format_ts("2026-12-31T23:59:60Z") == "2026-12-31T23:59:59Z"
    assert format_ts("2026-09-17T14:00:02+02:00") == "2026-09-17T12:00:02Z"
    assert format_ts(datetime(2026, 9, 17, 12, 0, 2, 250000, tzinfo=UTC)) == (
        "2026-09-17T12:00:02.25Z"
    )
    assert format_ts(datetime(2026, 9, 17, 12, 0, 2, tzinfo=UTC), nanos=120) == (
        "2026-09-17T12:00:02.00000012Z"
    )
    with pytest.raises(exceptions.ValidationError):
        format_ts(datetime(2026, 9, 17, 12, 0, 2))


def test_header_validation_and_fill():
    header = fill_header(
        {"cwd": "/p", "acme:extra": {"x": 1}},
        now=lambda: datetime(2026, 9, 17, 12, 0, 0, 500000, tzinfo=UTC),
        id_factory=lambda: "given",
    )
    assert header == {
        "cwd": "/p",
        "acme:extra": {"x": 1},
        "type": "session",
        "format": "agentsession/0.11",
        "payload": "openresponses/2026-04-24",
        "id": "given",
        "created_at": "2026-09-17T12:00:00.5Z",
    }
    kept = fill_header({"id": "x", "created_at": "2020-01-01T00:00:00+02:00"})
    assert kept["created_at"] == "2020-01-01T00:00:00+02:00"  # kept as given
    assert format_version("agentsession/0.11") == (0, 11)
    for bad, field in [
        ({**header, "format": "agentsession/1.0"}, "header.format"),
        ({**header, "format": "nope"}, "header.format"),
        ({**header, "payload": "other/1"}, "header.payload"),
        ({**header, "id": ""}, "header.id"),
        ({**header, "type": "entry"}, "header.type"),
        ({k: v for k, v in header.items() if k != "created_at"}, "header.created_at"),
    ]:
        with pytest.raises(exceptions.ValidationError) as exc:
            validate_header(bad)
        assert exc.value.field == field


def test_the_plain_path_writes_what_json_dumps_and_rfc8785_write() -> None:
    # Decision record 0040: the C encoder built once gives json.dumps' bytes, top-level strings too.
    values: list[Any] = [
        "x",
        'é\u2028\x00\n"\\',
        0,
        -(2**53 - 1),
        None,
        True,
        [],
        {},
        {"b": [1, {"a": "z", "A": False}], "a": None, "c": "é"},
    ]
    for value in values:
        expected = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        assert canonical.dumps(value) == expected.encode("utf-8") == rfc8785.dumps(value)
