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


# -- what an append writes back into data, member by member (decision record 0036) --------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from agentstore.stores.tree_rows import encode_data  # noqa: E402

TOOL_TEXT = 'tool: read\narguments: {"a": 1}\nerror: no\n'  # 40 characters stripped


@pytest.mark.parametrize(
    ("entry_type", "role", "content", "data", "members", "columns"),
    [
        # columns: (token_estimate, model_facing, display, tool_name, tool_status,
        #           tool_args_json, first_kept, tokens_before, branch_from)
        pytest.param(
            "message", "user", "hi", {},
            [("token_estimate", 1), ("model_facing", True), ("display", True)],
            (1, True, True, "", "", "", "", 0, ""),
            id="no-data",
        ),
        pytest.param(
            "message", "user", "", {"token_estimate": 5},
            [("model_facing", True), ("display", True)],
            (0, True, True, "", "", "", "", 0, ""),
            id="a-zero-estimate-removes-the-given-one",
        ),
        pytest.param(
            "message", "user", "hi", {"extra": 1, "display": False, "token_estimate": 99},
            [("extra", 1), ("display", False), ("token_estimate", 1), ("model_facing", True)],
            (1, True, False, "", "", "", "", 0, ""),
            id="given-members-keep-their-places",
        ),
        pytest.param(
            "message", "assistant", "hi", {"model_facing": False, "display": None},
            [("model_facing", False), ("display", True), ("token_estimate", 1)],
            (1, False, True, "", "", "", "", 0, ""),
            id="a-given-flag-wins-a-null-one-is-defaulted",
        ),
        pytest.param(
            "message", "user", "hi", {"model_facing": None, "extra": "x"},
            [("model_facing", True), ("extra", "x"), ("token_estimate", 1), ("display", True)],
            (1, True, True, "", "", "", "", 0, ""),
            id="a-null-model-facing-is-filled-in-place",
        ),
        pytest.param(
            "label", "", "", {},
            [("model_facing", False), ("display", False)],
            (0, False, False, "", "", "", "", 0, ""),
            id="a-hidden-type",
        ),
        pytest.param(
            "custom", "", "x", {"display": True, "model_facing": True},
            [("display", True), ("model_facing", True), ("token_estimate", 1)],
            (1, True, True, "", "", "", "", 0, ""),
            id="both-flags-given",
        ),
        pytest.param(
            "compaction", "", "hi",
            {"tokens_before": 7, "first_kept_entry_id": "k", "from_id": "f"},
            [
                ("tokens_before", 7),
                ("first_kept_entry_id", "k"),
                ("from_id", "f"),
                ("token_estimate", 1),
                ("model_facing", True),
                ("compaction_first_kept_entry_id", "k"),
                ("compaction_tokens_before", 7),
                ("branch_from_entry_id", "f"),
                ("display", True),
            ],
            (1, True, True, "", "", "", "k", 7, "f"),
            id="legacy-keys-are-copied-to-the-current-ones",
        ),
        pytest.param(
            "compaction", "", "hi",
            {
                "compaction_tokens_before": 3,
                "tokens_before": 7,
                "compaction_first_kept_entry_id": " ",
                "first_kept_entry_id": "k",
            },
            [
                ("compaction_tokens_before", 3),
                ("tokens_before", 7),
                ("compaction_first_kept_entry_id", "k"),
                ("first_kept_entry_id", "k"),
                ("token_estimate", 1),
                ("model_facing", True),
                ("display", True),
            ],
            (1, True, True, "", "", "", "k", 3, ""),
            id="current-keys-first-blank-text-skipped",
        ),
        pytest.param(
            "compaction", "", "hi",
            {
                "tokens_before": -2,
                "compaction_tokens_before": 0,
                "branch_from_entry_id": "",
                "from_id": " ",
            },
            [
                ("tokens_before", -2),
                ("from_id", " "),
                ("token_estimate", 1),
                ("model_facing", True),
                ("display", True),
            ],
            (1, True, True, "", "", "", "", 0, ""),
            id="zero-negative-and-blank-pointers-are-none",
        ),
        pytest.param(
            "message", "toolResult", TOOL_TEXT, {},
            [
                ("tool_name", "read"),
                ("tool_status", "error"),
                ("tool_args_json", '{"a":1}'),
                ("token_estimate", 10),
                ("model_facing", False),
                ("display", True),
            ],
            (10, False, True, "read", "error", '{"a":1}', "", 0, ""),
            id="a-tool-result-parsed",
        ),
        pytest.param(
            "message", "toolResult", "hi", {"tool_name": "", "tool_status": " "},
            [
                ("tool_status", "success"),
                ("token_estimate", 1),
                ("model_facing", False),
                ("display", True),
            ],
            (1, False, True, "", "success", "", "", 0, ""),
            id="a-tool-result-without-sections",
        ),
        pytest.param(
            "message", "toolResult", TOOL_TEXT,
            {"tool_name": "write", "tool_status": "ok", "tool_args_json": "raw"},
            [
                ("tool_name", "write"),
                ("tool_status", "ok"),
                ("tool_args_json", "raw"),
                ("token_estimate", 10),
                ("model_facing", False),
                ("display", True),
            ],
            (10, False, True, "write", "ok", "raw", "", 0, ""),
            id="given-tool-members-win",
        ),
        pytest.param(
            "message", "user", TOOL_TEXT,
            {"tool_name": "kept", "tool_status": "", "tool_args_json": "x"},
            [("token_estimate", 10), ("model_facing", True), ("display", True)],
            (10, True, True, "", "", "", "", 0, ""),
            id="tool-members-of-another-role-are-dropped",
        ),
    ],
)  # fmt: skip
def test_derived_members_and_columns(
    entry_type: str,
    role: str,
    content: str,
    data: dict[str, object],
    members: list[tuple[str, object]],
    columns: tuple[object, ...],
) -> None:
    given_data = dict(data)
    got = derive_metadata(entry_type, role=role, content=content, summary="", data=data)
    # The same members in the same order: the stored data JSON is their text.
    assert list(got.data.items()) == members
    assert (
        got.token_estimate,
        got.model_facing,
        got.display,
        got.tool_name,
        got.tool_status,
        got.tool_args_json,
        got.compaction_first_kept_entry_id,
        got.compaction_tokens_before,
        got.branch_from_entry_id,
    ) == columns
    assert data == given_data  # the caller's dict is left alone


#: The members derive_metadata writes, each with its column and the value it omits.
DERIVED = {
    "tool_name": ("tool_name", ""),
    "tool_status": ("tool_status", ""),
    "tool_args_json": ("tool_args_json", ""),
    "token_estimate": ("token_estimate", 0),
    "compaction_first_kept_entry_id": ("compaction_first_kept_entry_id", ""),
    "compaction_tokens_before": ("compaction_tokens_before", 0),
    "branch_from_entry_id": ("branch_from_entry_id", ""),
}

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
    st.sampled_from(["", "hi", TOOL_TEXT]),
    data_dicts,
)
def test_the_data_written_back_agrees_with_the_columns(entry_type, role, content, data) -> None:
    try:
        got = derive_metadata(entry_type, role=role, content=content, summary="", data=data)
    except exceptions.ValidationError as error:
        assert error.field.removeprefix("entry.data_json.") in data  # a given member's type
        return
    # Every derived member says what its column says (absent when that is zero) …
    for key, (column, zero) in DERIVED.items():
        assert got.data.get(key, zero) == getattr(got, column), key
    assert got.data["model_facing"] is got.model_facing
    assert got.data["display"] is got.display
    # … and every other member is kept as given, in its order.
    others = [(k, v) for k, v in data.items() if k not in (*DERIVED, "model_facing", "display")]
    assert [(k, v) for k, v in got.data.items() if k in dict(others)] == others


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
