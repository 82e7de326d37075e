"""Metadata derivation on append (docs/tree-store.md; librecode's session_metadata catalogue)."""

from __future__ import annotations

import json

import pytest

from agentstore import exceptions
from agentstore.stores.tree import TreeStore
from agentstore.stores.tree_metadata import derive_metadata, estimate_tokens, parse_tool_result
from agentstore.types.tree import AppendCompactionInput, MessageEntity
from tests.stores.conftest import user

pytestmark = pytest.mark.django_db


def test_enriches_entry_metadata(tree: TreeStore) -> None:
    session = tree.create_session("/w")
    hello = tree.append_message(session.id, None, user("hello world"))
    result = tree.append_message(
        session.id,
        hello.id,
        MessageEntity(
            role="toolResult",
            content='tool: read\narguments: {"path": "main.go"}\noutput:\npackage main\n',
        ),
    )

    assert (hello.model_facing, hello.display, hello.token_estimate, hello.tool_name) == (
        True,
        True,
        3,
        "",
    )
    assert (result.model_facing, result.display) == (False, True)
    assert (result.tool_name, result.tool_status) == ("read", "success")
    assert json.loads(result.tool_args_json) == {"path": "main.go"}
    assert result.token_estimate > 0
    assert tree.entry(session.id, result.id) == result


def test_tool_result_error_status() -> None:
    derived = derive_metadata(
        "message",
        role="toolResult",
        content="tool: bash\nerror: exit 1\noutput:\nboom",
        summary="",
        data={},
    )
    assert (derived.tool_name, derived.tool_status) == ("bash", "error")


def test_explicit_tool_keys_win_over_parsed_sections() -> None:
    derived = derive_metadata(
        "message",
        role="toolResult",
        content="tool: read\narguments: not json",
        summary="",
        data={"tool_name": "write", "tool_status": "error"},
    )
    assert (derived.tool_name, derived.tool_status, derived.tool_args_json) == (
        "write",
        "error",
        "not json",
    )


def test_parse_tool_result_sections() -> None:
    sections = parse_tool_result("ignored\ntool: grep \noutput:\nline one\nline two")
    assert sections == {"tool": "grep", "output": "line one\nline two"}


@pytest.mark.parametrize(
    ("content", "summary", "expected"),
    [
        ("", "", 0),
        ("   ", "", 0),
        ("a", "", 1),
        ("hello world", "", 3),
        ("", "abcde", 2),
        ("日本語の", "", 1),
    ],
)
def test_token_estimate(content: str, summary: str, expected: int) -> None:
    assert estimate_tokens(content, summary) == expected


@pytest.mark.parametrize(
    ("entry_type", "role", "model_facing", "display"),
    [
        ("message", "user", True, True),
        ("message", "assistant", True, True),
        ("message", "toolResult", False, True),
        ("message", "thinking", False, True),
        ("message", "bashExecution", False, True),
        ("custom_message", "custom", True, True),
        ("branch_summary", "", True, True),
        ("compaction", "", True, True),
        ("custom", "", False, True),
        ("label", "", False, False),
        ("model_change", "", False, False),
        ("session_info", "", False, False),
        ("thinking_level_change", "", False, False),
        ("future_type", "", False, True),
    ],
)
def test_defaults_by_type_and_role(
    entry_type: str, role: str, model_facing: bool, display: bool
) -> None:
    derived = derive_metadata(entry_type, role=role, content="x", summary="", data={})
    assert (derived.model_facing, derived.display) == (model_facing, display)
    assert derived.data["model_facing"] is model_facing
    assert derived.data["display"] is display


def test_legacy_keys_fill_pointer_columns() -> None:
    derived = derive_metadata(
        "compaction",
        role="",
        content="",
        summary="s",
        data={"first_kept_entry_id": "k", "tokens_before": 7, "from_id": "f", "extra": [1]},
    )
    assert (
        derived.compaction_first_kept_entry_id,
        derived.compaction_tokens_before,
        derived.branch_from_entry_id,
    ) == ("k", 7, "f")
    assert derived.data["extra"] == [1]  # unknown keys survive
    assert derived.data["compaction_first_kept_entry_id"] == "k"


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"model_facing": "yes"}, "entry.data_json.model_facing"),
        ({"display": 1}, "entry.data_json.display"),
        ({"tokens_before": "10"}, "entry.data_json.tokens_before"),
        ({"usage": {"input_tokens": "many"}}, "entry.data_json.usage.input_tokens"),
        ({"details": []}, "entry.data_json.details"),
    ],
)
def test_known_keys_with_wrong_types_are_refused(data: dict[str, object], field: str) -> None:
    with pytest.raises(exceptions.ValidationError) as info:
        derive_metadata("custom", role="", content="", summary="", data=data)
    assert info.value.field == field


def test_enriches_compaction_metadata(tree: TreeStore) -> None:
    session = tree.create_session("/w")
    root = tree.append_message(session.id, None, user("root"))
    compaction = tree.append_compaction(
        AppendCompactionInput(
            session_id=session.id,
            parent_id=root.id,
            summary="summary",
            first_kept_entry_id=root.id,
            tokens_before=1234,
            operation_id="op",
        )
    )
    assert (compaction.model_facing, compaction.display) == (True, True)
    assert compaction.compaction_first_kept_entry_id == root.id
    assert compaction.compaction_tokens_before == 1234
    assert compaction.token_estimate > 0


# -- the append's shortcuts give what the general code gave (decision record 0036) ---

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from agentstore.stores.tree_metadata import (  # noqa: E402
    default_display,
    default_model_facing,
)
from agentstore.stores.tree_rows import encode_data  # noqa: E402


def _derive_before(entry_type, *, role, content, summary, data):
    """derive_metadata's put-per-key body as it was (its type checks and parsing reused)."""
    from agentstore.stores import tree_metadata as tm

    tm._check_types(data)
    out = dict(data)
    model_facing = data.get("model_facing")
    if not isinstance(model_facing, bool):
        model_facing = default_model_facing(entry_type, role)
    display = data.get("display")
    display_given = isinstance(display, bool)
    if not isinstance(display, bool):
        display = default_display(entry_type)
    first_kept = tm._first_text(data, "compaction_first_kept_entry_id", "first_kept_entry_id")
    tokens_before = tm._first_positive(data, "compaction_tokens_before", "tokens_before")
    branch_from = tm._first_text(data, "branch_from_entry_id", "from_id")
    tool_name = tool_status = tool_args = ""
    if role == "toolResult":
        sections = parse_tool_result(content)
        tool_name = tm._first_text(data, "tool_name") or sections.get("tool", "").strip()
        tool_status = tm._first_text(data, "tool_status") or (
            "error" if sections.get("error", "").strip() else "success"
        )
        tool_args = tm._first_text(data, "tool_args_json") or tm._compact_json(
            sections.get("arguments", "").strip()
        )

    def put(key, value):
        if value in ("", 0, None) and not isinstance(value, bool):
            out.pop(key, None)
        else:
            out[key] = value

    put("tool_name", tool_name)
    put("tool_status", tool_status)
    put("tool_args_json", tool_args)
    put("token_estimate", estimate_tokens(content, summary))
    out["model_facing"] = model_facing
    put("compaction_first_kept_entry_id", first_kept)
    put("compaction_tokens_before", tokens_before)
    put("branch_from_entry_id", branch_from)
    if not display_given:
        out["display"] = display
    return out, (model_facing, display, tool_name, tool_status, tool_args, first_kept)


known_values = st.none() | st.booleans() | st.integers(-2, 3) | st.sampled_from(["", "x", " "])
data_dicts = st.dictionaries(
    st.sampled_from(
        [
            "display",
            "model_facing",
            "tool_name",
            "tool_status",
            "tool_args_json",
            "token_estimate",
            "compaction_first_kept_entry_id",
            "first_kept_entry_id",
            "compaction_tokens_before",
            "tokens_before",
            "branch_from_entry_id",
            "from_id",
            "extra",
        ]
    ),
    known_values,
    max_size=6,
)


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(["message", "custom", "compaction", "branch_summary", "label"]),
    st.sampled_from(["", "user", "assistant", "toolResult"]),
    st.sampled_from(["", "hi", 'tool: read\narguments: {"a": 1}\nerror: no\n']),
    data_dicts,
)
def test_derived_metadata_is_as_before(entry_type, role, content, data) -> None:
    try:
        want = _derive_before(entry_type, role=role, content=content, summary="", data=data)
    except exceptions.ValidationError as error:
        with pytest.raises(exceptions.ValidationError, match=error.message):
            derive_metadata(entry_type, role=role, content=content, summary="", data=data)
        return
    got = derive_metadata(entry_type, role=role, content=content, summary="", data=data)
    # The same members in the same order: the stored data JSON is their text.
    assert list(got.data.items()) == list(want[0].items())
    assert json.dumps(got.data) == json.dumps(want[0])
    assert (
        got.model_facing,
        got.display,
        got.tool_name,
        got.tool_status,
        got.tool_args_json,
        got.compaction_first_kept_entry_id,
    ) == want[1]


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=4) | st.integers() | st.booleans(), inner, max_size=3)
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=4), json_values, max_size=4))
def test_the_data_json_is_json_dumps(data) -> None:
    expected = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    assert encode_data(data) == expected


def test_the_data_json_still_refuses_a_cycle_and_a_non_json_value() -> None:
    cycle: dict[str, object] = {}
    cycle["self"] = cycle
    with pytest.raises(ValueError, match="Circular reference"):
        encode_data(cycle)
    with pytest.raises(TypeError):
        encode_data({"x": object()})
    # A failed encode leaves nothing behind for the next one.
    shared = {"a": 1}
    assert encode_data({"x": shared, "y": shared}) == '{"x":{"a":1},"y":{"a":1}}'
