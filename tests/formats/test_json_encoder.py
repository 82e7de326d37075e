"""``make_encoder``: ``json.dumps``'s text through the C encoder, byte for byte.

Three encoders are made in the code: a tree entry's data (compact, UTF-8), a
LangGraph checkpoint's JSON on SQLite (``json.dumps``'s defaults) and the
canonical agentsession text (sorted, compact, UTF-8, no cycle check). Each is
checked here against the text written out, for values where encoders differ:
non-ASCII and astral text, controls, lone surrogates, floats, big integers,
nesting, member order, non-string member names and separators. The texts are
those the three hand-built encoders wrote before they shared this helper.
"""

from __future__ import annotations

import json
import json.encoder
from typing import Any

import pytest

from agentstore.formats.json_encoder import make_encoder

#: A tree entry's data JSON (agentstore/stores/tree.py).
TREE = make_encoder(separators=(",", ":"), ensure_ascii=False)
#: A checkpoint's JSON column on SQLite: json.dumps(value) (agentstore/stores/checkpoints.py).
CHECKPOINT = make_encoder()
#: Canonical agentsession text of a plain value (agentstore/formats/agentsession/canonical.py).
CANONICAL = make_encoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, check_circular=False
)


class _Str(str):
    pass


TEXT = {"s": 'é 日本 \U0001f600 \u2028 \x00\x1f\x7f "q" \\ /'}
LONE = {"s": "a\ud800b\udfff"}
NUMBERS = {
    "f": [1.0, 0.1, 1e-07, 1e21, 1e16, -0.0, 2.5e-320, float("nan"), float("inf"), -float("inf")],
    "i": [2**60, -7, 0, True, False, None],
}
NESTED = {"b": [1, {"z": [], "a": {}}, (2, 3)], "a": None, "é": {"y": "x"}}
KEYS = {"b": 1, "a": 2, "B": 3, "": 4, "é": 5, "\U0001f600": 6, "\uff01": 7}
NON_STR_KEYS = {2: "two", 1.5: "f", True: "t", None: "n"}
SUBCLASS = {"s": _Str("sub"), "t": (_Str("x"),)}

CASES = [
    # (value, TREE's text, CHECKPOINT's text, CANONICAL's text)
    pytest.param(
        TEXT,
        '{"s":"é 日本 \U0001f600 \u2028 \\u0000\\u001f\x7f \\"q\\" \\\\ /"}',
        '{"s": "\\u00e9 \\u65e5\\u672c \\ud83d\\ude00 \\u2028 '
        '\\u0000\\u001f\\u007f \\"q\\" \\\\ /"}',
        '{"s":"é 日本 \U0001f600 \u2028 \\u0000\\u001f\x7f \\"q\\" \\\\ /"}',
        id="text",
    ),
    # A lone surrogate is passed through as it is by the UTF-8 encoders (the
    # canonical path refuses one before it encodes), escaped by the ASCII one.
    pytest.param(
        LONE,
        '{"s":"a\ud800b\udfff"}',
        '{"s": "a\\ud800b\\udfff"}',
        '{"s":"a\ud800b\udfff"}',
        id="lone-surrogates",
    ),
    pytest.param(
        NUMBERS,
        '{"f":[1.0,0.1,1e-07,1e+21,1e+16,-0.0,2.5e-320,NaN,Infinity,-Infinity],'
        '"i":[1152921504606846976,-7,0,true,false,null]}',
        '{"f": [1.0, 0.1, 1e-07, 1e+21, 1e+16, -0.0, 2.5e-320, NaN, Infinity, -Infinity], '
        '"i": [1152921504606846976, -7, 0, true, false, null]}',
        '{"f":[1.0,0.1,1e-07,1e+21,1e+16,-0.0,2.5e-320,NaN,Infinity,-Infinity],'
        '"i":[1152921504606846976,-7,0,true,false,null]}',
        id="numbers",
    ),
    pytest.param(
        NESTED,
        '{"b":[1,{"z":[],"a":{}},[2,3]],"a":null,"é":{"y":"x"}}',
        '{"b": [1, {"z": [], "a": {}}, [2, 3]], "a": null, "\\u00e9": {"y": "x"}}',
        '{"a":null,"b":[1,{"a":{},"z":[]},[2,3]],"é":{"y":"x"}}',
        id="nested",
    ),
    # Sorted by code point (U+FF01 before U+1F600), which is not RFC 8785's
    # UTF-16 order: canonical.dumps sends non-ASCII member names elsewhere.
    pytest.param(
        KEYS,
        '{"b":1,"a":2,"B":3,"":4,"é":5,"\U0001f600":6,"\uff01":7}',
        '{"b": 1, "a": 2, "B": 3, "": 4, "\\u00e9": 5, "\\ud83d\\ude00": 6, "\\uff01": 7}',
        '{"":4,"B":3,"a":2,"b":1,"é":5,"\uff01":7,"\U0001f600":6}',
        id="member-order",
    ),
    pytest.param(
        SUBCLASS,
        '{"s":"sub","t":["x"]}',
        '{"s": "sub", "t": ["x"]}',
        '{"s":"sub","t":["x"]}',
        id="subclass-and-tuple",
    ),
    pytest.param("é\n", '"é\\n"', '"\\u00e9\\n"', '"é\\n"', id="a-string-alone"),
    pytest.param(2**60, "1152921504606846976", "1152921504606846976", "1152921504606846976"),
    pytest.param([], "[]", "[]", "[]", id="empty-list"),
]


@pytest.mark.parametrize(("value", "tree", "checkpoint", "canonical"), CASES)
def test_the_three_encoders_write_these_texts(
    value: Any, tree: str, checkpoint: str, canonical: str
) -> None:
    assert TREE(value) == tree
    assert CHECKPOINT(value) == checkpoint
    assert CANONICAL(value) == canonical


def test_member_names_that_are_not_strings() -> None:
    assert TREE(NON_STR_KEYS) == '{"2":"two","1.5":"f","true":"t","null":"n"}'
    assert CHECKPOINT(NON_STR_KEYS) == '{"2": "two", "1.5": "f", "true": "t", "null": "n"}'
    with pytest.raises(TypeError, match="not supported between instances"):
        CANONICAL(NON_STR_KEYS)  # names of mixed types cannot be sorted


def test_errors_are_json_dumps_errors() -> None:
    cycle: dict[str, Any] = {}
    cycle["self"] = cycle
    for encode in (TREE, CHECKPOINT):
        with pytest.raises(ValueError, match="Circular reference detected"):
            encode(cycle)
        with pytest.raises(TypeError, match="Object of type object is not JSON serializable"):
            encode({"x": object()})
        # A failed encode leaves nothing behind: a value seen twice is no cycle.
        shared = {"a": 1}
        assert json.loads(encode({"x": shared, "y": shared})) == {"x": shared, "y": shared}
    with pytest.raises(RecursionError):
        CANONICAL(cycle)  # no cycle check: canonical values are walked before


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"separators": (",", ":"), "ensure_ascii": False},
        {"sort_keys": True, "separators": (",", ":"), "ensure_ascii": False},
        {"sort_keys": True, "check_circular": False},
    ],
)
def test_any_options_give_json_dumps(options: dict[str, Any]) -> None:
    encode = make_encoder(**options)
    for value in (TEXT, LONE, NUMBERS, NESTED, KEYS, SUBCLASS, "é", 1.5, None):
        assert encode(value) == json.dumps(value, **options)


def _fallback_cases() -> list[Any]:
    real = json.encoder.c_make_encoder

    def other_signature(*args: Any) -> Any:
        raise TypeError("c_make_encoder() takes 10 arguments")

    def other_text(markers: Any, *rest: Any) -> Any:
        # Right for JSONEncoder (it passes a markers dict), another text for the
        # shared encoder the probe is made with (markers None).
        if markers is None:
            return lambda value, level: ["{}"]
        return real(markers, *rest)

    return [
        pytest.param(None, id="no-accelerator"),
        pytest.param(other_signature, id="another-signature"),
        pytest.param(other_text, id="another-text"),
    ]


@pytest.mark.parametrize("factory", _fallback_cases())
def test_without_a_trusted_c_factory_it_is_json_encoders_encode(
    monkeypatch: pytest.MonkeyPatch, factory: Any
) -> None:
    with monkeypatch.context() as patch:
        patch.setattr(json.encoder, "c_make_encoder", factory)
        encode = make_encoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    # JSONEncoder(**options).encode itself (which finds the real factory again).
    assert getattr(encode, "__func__", None) is json.JSONEncoder.encode
    assert encode(KEYS) == '{"":4,"B":3,"a":2,"b":1,"é":5,"\uff01":7,"\U0001f600":6}'
