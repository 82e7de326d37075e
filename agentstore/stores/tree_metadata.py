"""Metadata derivation for tree entries: what every append computes before it writes.

librecode derives a fixed set of columns from an entry's type, message and data
object (docs/tree-store.md, "Appends")::

    derived = derive_metadata("message", role="toolResult", content=text, summary="", data={})
    derived.tool_name, derived.model_facing, derived.data   # data now carries the keys too

* ``token_estimate`` — ``ceil(characters / 4)`` of the content (or the summary),
  at least 1 for non-blank text;
* ``model_facing`` / ``display`` — the data keys when present, else defaults by
  type and role (tool results are displayed but not model-facing);
* compaction and branch-summary pointers, read from their current or legacy keys;
* for ``toolResult`` messages, the tool name, status and arguments parsed from the
  ``tool:`` / ``arguments:`` / ``error:`` / ``output:`` sections of the content.

Unlike librecode, keys this module does not know are kept as given: the Go code
decoded the data into a fixed struct and silently dropped everything else.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from agentstore.exceptions import ValidationError
from agentstore.types.frozen import positional_builder, require_fields

__all__ = ["DerivedMetadata", "default_display", "default_model_facing", "derive_metadata"]

_MODEL_FACING_TYPES = frozenset({"custom_message", "branch_summary", "compaction"})
_HIDDEN_TYPES = frozenset({"model_change", "thinking_level_change", "label", "session_info"})
_TOOL_SECTIONS = ("tool", "arguments", "error", "details", "output")

# Known data keys and the JSON types they must have (bool is not an int here).
_BOOL_KEYS = ("display", "model_facing", "from_hook")
_STR_KEYS = (
    "from_id",
    "branch_from_entry_id",
    "target_id",
    "thinking_level",
    "tool_name",
    "tool_status",
    "tool_args_json",
    "name",
    "first_kept_entry_id",
    "compaction_first_kept_entry_id",
)
_INT_KEYS = ("token_estimate", "compaction_tokens_before", "tokens_before")


@dataclass(frozen=True, slots=True)
class DerivedMetadata:
    data: dict[str, Any]
    token_estimate: int
    model_facing: bool
    display: bool
    tool_name: str
    tool_status: str
    tool_args_json: str
    compaction_first_kept_entry_id: str
    compaction_tokens_before: int
    branch_from_entry_id: str


#: The derived metadata, built every append: the positional builder (decision record 0035;
#: the fields pinned in this order).
require_fields(
    DerivedMetadata,
    (
        "data",
        "token_estimate",
        "model_facing",
        "display",
        "tool_name",
        "tool_status",
        "tool_args_json",
        "compaction_first_kept_entry_id",
        "compaction_tokens_before",
        "branch_from_entry_id",
    ),
)
_new_derived = positional_builder(DerivedMetadata)
#: The values ``data`` omits (compared with ``==``, as librecode's encoder does).
_ZERO = ("", 0, None)


def default_model_facing(entry_type: str, role: str) -> bool:
    if entry_type == "message":
        return role in ("user", "assistant")
    return entry_type in _MODEL_FACING_TYPES


def default_display(entry_type: str) -> bool:
    return entry_type not in _HIDDEN_TYPES


def estimate_tokens(content: str, summary: str) -> int:
    text = content if content.strip() else summary
    text = text.strip()
    return 0 if not text else max(1, math.ceil(len(text) / 4))


def _check_types(data: dict[str, Any]) -> None:
    if not data:
        # Most appends carry no data (a plain message): nothing to check.
        return

    def bad(key: str, kind: str) -> ValidationError:
        return ValidationError(
            f"entry.data_json.{key} must be {kind}", field=f"entry.data_json.{key}"
        )

    for key in _BOOL_KEYS:
        if key in data and data[key] is not None and not isinstance(data[key], bool):
            raise bad(key, "a boolean")
    for key in _STR_KEYS:
        if key in data and data[key] is not None and not isinstance(data[key], str):
            raise bad(key, "a string")
    for key in _INT_KEYS:
        value = data.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise bad(key, "an integer")
    for key in ("details", "usage"):
        if key in data and data[key] is not None and not isinstance(data[key], dict):
            raise bad(key, "an object")
    if "label" in data and data["label"] is not None and not isinstance(data["label"], str):
        raise bad("label", "a string")
    usage = data.get("usage") or {}
    for key, value in usage.items():
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad(f"usage.{key}", "an integer")


def _first_text(data: dict[str, Any], *keys: str) -> str:
    for key in keys:
        value = data.get(key)
        if isinstance(value, str) and value.strip():
            return value
    return ""


def _first_positive(data: dict[str, Any], *keys: str) -> int:
    for key in keys:
        value = data.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return 0


def parse_tool_result(content: str) -> dict[str, str]:
    """Split a tool result's text into its ``tool:``/``arguments:``/… sections."""
    sections: dict[str, list[str]] = {}
    current: str | None = None
    for line in content.split("\n"):
        header = next((name for name in _TOOL_SECTIONS if line.startswith(name + ":")), None)
        if header is not None:
            current = header
            sections[current] = [line[len(header) + 1 :].strip()]
        elif current is not None:
            sections[current].append(line)
    result: dict[str, str] = {}
    for name, lines in sections.items():
        first, rest = lines[0], lines[1:]
        if not first and rest:
            # "output:" alone on its line: the value starts on the next line.
            first, rest = rest[0], rest[1:]
        result[name] = "\n".join([first, *rest])
    return result


def _compact_json(text: str) -> str:
    try:
        return json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False)
    except ValueError:
        return text


def derive_metadata(
    entry_type: str, *, role: str, content: str, summary: str, data: dict[str, Any]
) -> DerivedMetadata:
    """Return the derived columns and ``data`` with the derived keys written back."""
    _check_types(data)
    out = dict(data)

    token_estimate = estimate_tokens(content, summary)
    model_facing = data.get("model_facing")
    if not isinstance(model_facing, bool):
        model_facing = default_model_facing(entry_type, role)
    display = data.get("display")
    display_given = isinstance(display, bool)
    if not isinstance(display, bool):
        display = default_display(entry_type)

    if data:
        first_kept = _first_text(data, "compaction_first_kept_entry_id", "first_kept_entry_id")
        tokens_before = _first_positive(data, "compaction_tokens_before", "tokens_before")
        branch_from = _first_text(data, "branch_from_entry_id", "from_id")
    else:  # what the three give for no data, without asking
        first_kept, tokens_before, branch_from = "", 0, ""

    tool_name = tool_status = tool_args = ""
    if role == "toolResult":
        sections = parse_tool_result(content)
        tool_name = _first_text(data, "tool_name") or sections.get("tool", "").strip()
        tool_status = _first_text(data, "tool_status") or (
            "error" if sections.get("error", "").strip() else "success"
        )
        tool_args = _first_text(data, "tool_args_json") or _compact_json(
            sections.get("arguments", "").strip()
        )

    # Zero values are omitted, as librecode's encoder does (never a bool:
    # model_facing, always a bool, is always written). In this order: the
    # keys' order in ``data`` is the stored JSON's.
    for key, value in (
        ("tool_name", tool_name),
        ("tool_status", tool_status),
        ("tool_args_json", tool_args),
        ("token_estimate", token_estimate),
        ("model_facing", model_facing),
        ("compaction_first_kept_entry_id", first_kept),
        ("compaction_tokens_before", tokens_before),
        ("branch_from_entry_id", branch_from),
    ):
        if value in _ZERO and not isinstance(value, bool):
            out.pop(key, None)
        else:
            out[key] = value
    if not display_given:
        out["display"] = display

    return _new_derived(
        out,
        token_estimate,
        model_facing,
        display,
        tool_name,
        tool_status,
        tool_args,
        first_kept,
        tokens_before,
        branch_from,
    )
