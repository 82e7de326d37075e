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
