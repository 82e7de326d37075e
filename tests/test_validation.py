"""The shared input checks and the store base class."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest

from agentstore.exceptions import ValidationError
from agentstore.ids import new_id
from agentstore.stores.base import StoreBase
from agentstore.validation import (
    json_value_problem,
    require_aware,
    require_json,
    require_json_object,
    require_json_value,
    require_max_length,
    require_storable_text,
    require_text,
    require_uuid7,
)


def test_require_text() -> None:
    assert require_text("/repo", "session.cwd") == "/repo"
    for blank in ("", "   ", None):
        with pytest.raises(ValidationError, match="session.cwd is required") as info:
            require_text(blank, "session.cwd")
        assert info.value.field == "session.cwd"


def test_require_uuid7_normalises_spellings() -> None:
    value = new_id()
    for spelling in (
        value,
        value.upper(),
        f"  {value} ",
        "{" + value + "}",
        value.replace("-", ""),
    ):
        assert require_uuid7(spelling, "task.id") == value
    assert require_uuid7(f"urn:uuid:{value}", "task.id") == value


@pytest.mark.parametrize(
    "bad", ["nope", str(uuid.uuid4()), "0" * 32, "01234567-89ab-7def-0123-456789abcdef"]
)
def test_require_uuid7_refuses_others(bad: str) -> None:
    with pytest.raises(ValidationError, match="task.id must be a UUIDv7"):
        require_uuid7(bad, "task.id")


def test_require_uuid7_blank_is_required() -> None:
    with pytest.raises(ValidationError, match="task.id is required"):
        require_uuid7("  ", "task.id")


def test_require_json() -> None:
    assert require_json('{"a": [1, 2]}', "x") == {"a": [1, 2]}
    assert require_json(b"null", "x") is None
    for bad in ("", "{", "NaN", '{"a": Infinity}', None, b"\xff"):
        with pytest.raises(ValidationError, match="x must be valid JSON"):
            require_json(bad, "x")


def test_require_json_object() -> None:
    assert require_json_object("{}", "args") == {}
    for bad in ("[]", "null", "1", "{", ""):
        with pytest.raises(ValidationError, match="args must be a JSON object"):
            require_json_object(bad, "args")


def test_require_max_length() -> None:
    assert require_max_length("abc", 3, "name") == "abc"
    with pytest.raises(ValidationError, match="name is longer than 3 characters"):
        require_max_length("abcd", 3, "name")


def test_require_aware_converts_to_utc() -> None:
    plus_two = datetime(2026, 1, 1, 14, 0, tzinfo=timezone(timedelta(hours=2)))
    assert require_aware(plus_two, "t") == datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    assert require_aware(plus_two, "t").tzinfo is UTC
    with pytest.raises(ValidationError, match="t must be timezone-aware"):
        require_aware(datetime(2026, 1, 1), "t")


def test_store_base_uses_the_injected_clock() -> None:
    fixed = datetime(2026, 5, 31, 12, 0, tzinfo=timezone(timedelta(hours=-5)))
    store = StoreBase(using="default", clock=lambda: fixed)

    assert store.using == "default"
    assert store.now() == fixed
    assert store.now().tzinfo is UTC
    with pytest.raises(ValidationError, match="clock"):
        StoreBase(clock=lambda: datetime(2026, 1, 1)).now()
    assert StoreBase().now().tzinfo is UTC


def nested(levels: int) -> object:
    value: object = 1
    for _ in range(levels):
        value = {"k": [value]} if levels % 2 else [value]
    return value


def test_json_values_follow_the_api_body_rules() -> None:
    import enum
    import json

    class Colour(enum.StrEnum):
        RED = "red"

    ok = {"a": [1, 2.5, True, None, "é ☀", ("tuple", "is an array")], "c": Colour.RED}
    assert require_json_value(ok, "body") is ok
    assert json_value_problem(json.loads("[" * 100 + "]" * 100)) == ""  # exactly the limit
    assert "JSON_MAX_DEPTH" in json_value_problem(json.loads("[" * 101 + "]" * 101))
    assert "JSON_MAX_DEPTH" in json_value_problem(nested(5000))  # no RecursionError
    for bad, words in [
        ({"x": float("inf")}, "not finite"),
        ([float("nan")], "not finite"),
        ({"x": "a\x00"}, "NUL"),
        ({"a\x00": 1}, "NUL"),
        (["\ud800"], "lone surrogate"),
        ({1: "int key"}, "key that is not a string"),
        ({"x": b"bytes"}, r"not JSON \(bytes\)"),
        ({"x": {1, 2}}, r"not JSON \(set\)"),
    ]:
        with pytest.raises(ValidationError, match=words) as info:
            require_json_value(bad, "items[2]")
        assert info.value.field == "items[2]"


def test_storable_text() -> None:
    assert require_storable_text("", "checkpoint_ns") == ""
    assert require_storable_text("graph:1|sub/node:2", "checkpoint_ns") == "graph:1|sub/node:2"
    for bad, words in [
        ("a\x00", "NUL"),
        ("\udfff", "lone surrogate"),
        (3, "must be a string"),
        ("x" * 65, "longer than 64"),
    ]:
        with pytest.raises(ValidationError, match=words) as info:
            require_storable_text(bad, "checkpoint.id", 64)
        assert info.value.field == "checkpoint.id"
    with pytest.raises(ValidationError, match="is required"):
        require_storable_text("  ", "task_id", blank=False)
