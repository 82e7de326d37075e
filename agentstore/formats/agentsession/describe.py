"""agentsession entries in words: what a person debugging an agent wants to read.

    from agentstore.formats.agentsession.describe import describe, item_text

    view = describe(entry.data)      # any entry's decoded object (a dict)
    view.kind                        # "message", "tool call", "tool output", "reasoning",
                                     # "config", "response", "label", "decision", …
    view.role, view.text             # "user", "What is 2+2?"
    view.tool, view.arguments        # "lookup", '{"q":"2+2"}'  (tool calls)
    view.detail                      # one line of facts: "gpt-5 · 52 tokens · 500 ms"
    items_of(view)                   # the items it carries: its parts, or itself

Pure functions over the decoded JSON object of an entry (no Django): the
admin, the command line and the log store's write-time text projection
(:func:`searchable`) all read entries through them, so a tool call reads the
same everywhere. Nothing here decides what the *model* is sent — that is
:mod:`.context`'s job (docs/agentsession-format.md "Context and the request
hash"); this module only puts an entry into words. Unknown entry and item
types are shown by their type and members rather than dropped, because the
format keeps unknown members and so must a reader.

Integrations keep a framework's own message shape in an *extension* entry; the
shapes agentstore's integrations write are described here too, each part as the
Responses item it corresponds to, so they read like the OpenAI Agents SDK's
items on every page. A Pydantic AI message (``pydantic_ai:message``: a
``ModelRequest`` or ``ModelResponse`` made of typed parts) is described part by
part — a system or user prompt or a text is a ``message`` with its role, a
``tool-call`` a ``tool call``, a ``tool-return`` a ``tool output``, ``thinking``
``reasoning``, a ``retry-prompt`` or ``retry-feedback`` a ``retry prompt`` (a
refused call's ``tool-return`` shows its validation errors) — and, when it has more
than one part, the entry's :class:`Described` lists them in ``parts``
(:func:`items_of` gives the items of any entry). :data:`HISTORY_TYPES` names
these entry types: what a framework's memory object loads and sends to its
model, shown as the conversation's input by the context view.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from agentstore.ids import short_id

__all__ = [
    "HISTORY_TYPES",
    "PYDANTIC_AI_MESSAGE",
    "Described",
    "describe",
    "item_text",
    "items_of",
    "searchable",
]

#: The entry type of one Pydantic AI message (``agentstore.integrations.pydantic_ai``):
#: an extension entry whose ``message`` is a ``ModelRequest``/``ModelResponse`` as
#: Pydantic AI's ``ModelMessagesTypeAdapter`` dumps it in JSON mode.
PYDANTIC_AI_MESSAGE = "pydantic_ai:message"
#: Extension entry types that hold a framework's message history: the entries on
#: the path that its memory object loads and hands to the model.
HISTORY_TYPES = frozenset({PYDANTIC_AI_MESSAGE})

#: Content part types whose ``text`` member is the readable text.
_TEXT_PARTS = frozenset({"input_text", "output_text", "text", "summary_text", "reasoning_text"})
#: Characters of a config's instructions shown in its one-line detail.
_INSTRUCTIONS_SHOWN = 80


@dataclass(frozen=True, slots=True, kw_only=True)
class Described:
    """One entry in words (every member ``""`` when it does not apply)."""

    type: str  # the entry type as written ("item", "config", …)
    kind: str  # what a person calls it ("message", "tool call", "config", …)
    role: str = ""  # a message's role
    text: str = ""  # the readable text: message, reasoning summary, tool output, summary
    tool: str = ""  # a tool call's function name
    arguments: str = ""  # a tool call's arguments, as written
    call_id: str = ""  # the call a call / output / decision / dispatch is about
    detail: str = ""  # one line of facts (model, tokens, verdict, settings changed …)
    target: str = ""  # the entry a label / decision / dispatch / link points at
    response: str = ""  # the response id an output item belongs to
    converges: int = 0  # how many convergence refs (``parents``) the entry has
    #: The items of an entry that carries several (a Pydantic AI message of
    #: more than one part), each in words; empty when the entry is one item.
    parts: tuple[Described, ...] = ()


def items_of(view: Described) -> tuple[Described, ...]:
    """The items an entry carries, in words: its ``parts``, or the entry itself."""
    return view.parts or (view,)


def _text_of_parts(parts: Any) -> str:
    if isinstance(parts, str):
        return parts
    if not isinstance(parts, list):
        return "" if parts is None else json.dumps(parts, ensure_ascii=False)
    texts: list[str] = []
    for part in parts:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict):
            kind = part.get("type")
            if kind in _TEXT_PARTS and isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif kind == "refusal":
                texts.append(f"[refusal] {part.get('refusal', '')}")
            elif isinstance(kind, str) and kind.startswith("input_"):
                texts.append(f"[{kind[6:]}]")  # input_image → [image], input_file → [file]
            elif kind:
                texts.append(f"[{kind}]")
    return "\n".join(texts)


def item_text(item: Any) -> str:
    """The readable text of an item (a message, reasoning, a call, an output …)."""
    if not isinstance(item, dict):
        return "" if item is None else str(item)
    kind = item.get("type")
    if kind == "message":
        return _text_of_parts(item.get("content"))
    if kind == "reasoning":
        summary = _text_of_parts(item.get("summary"))
        return summary or _text_of_parts(item.get("content"))
    if kind in ("function_call", "custom_tool_call"):
        args = item.get("arguments", item.get("input", ""))
        return f"{item.get('name', '')}({args if isinstance(args, str) else json.dumps(args)})"
    if kind in ("function_call_output", "custom_tool_call_output"):
        return _text_of_parts(item.get("output"))
    if isinstance(item.get("content"), list | str):
        return _text_of_parts(item.get("content"))
    rest = {k: v for k, v in item.items() if k not in ("type", "id", "status")}
    return json.dumps(rest, ensure_ascii=False, sort_keys=True) if rest else ""


#: Item types whose ``call_id`` a description shows (calls and their outputs).
_CALLS = frozenset(
    {"function_call", "custom_tool_call", "function_call_output", "custom_tool_call_output"}
)


def _item_of(data: dict[str, Any]) -> dict[str, Any]:
    item = data.get("item")
    return item if isinstance(item, dict) else {}


def _item_words(item: dict[str, Any]) -> tuple[str, str, str, str, str]:
    """``(kind, role, text, tool, arguments)`` of an item: what :func:`describe` and
    :func:`searchable` say of it (``""`` where a member does not apply)."""
    kind = str(item.get("type", ""))
    if kind == "message":
        return "message", str(item.get("role", "")), item_text(item), "", ""
    if kind == "reasoning":
        return "reasoning", "", item_text(item), "", ""
    if kind in ("function_call", "custom_tool_call"):
        args = item.get("arguments", item.get("input", ""))
        arguments = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
        return "tool call", "", "", str(item.get("name", "")), arguments
    if kind in ("function_call_output", "custom_tool_call_output"):
        return "tool output", "", item_text(item), "", ""
    return kind or "item", "", item_text(item), "", ""


def _item(data: dict[str, Any], converges: int) -> Described:
    item = _item_of(data)
    kind, role, text, tool, arguments = _item_words(item)
    response = data.get("response")
    # By the item's type: an unknown item type spelt "tool call" is no call.
    call_id = str(item.get("call_id", "")) if str(item.get("type", "")) in _CALLS else ""
    return Described(
        type="item",
        kind=kind,
        role=role,
        text=text,
        tool=tool,
        arguments=arguments,
        call_id=call_id,
        response=response if isinstance(response, str) else "",
        converges=converges,
    )


def _names(tools: Any) -> list[str]:
    if not isinstance(tools, list):
        return []
    return [str(t.get("name")) if isinstance(t, dict) else str(t) for t in tools]


def _config_detail(data: dict[str, Any]) -> str:
    facts: list[str] = []
    if data.get("replace"):
        facts.append("replaces all settings")
    if isinstance(data.get("model"), str) and data["model"]:
        facts.append(f"model {data['model']}")
    instructions = data.get("instructions")
    if isinstance(instructions, str) and instructions:
        cut = " ".join(instructions.split())
        if len(cut) > _INSTRUCTIONS_SHOWN:
            cut = cut[: _INSTRUCTIONS_SHOWN - 1] + "…"
        facts.append(f"instructions “{cut}”")
    elif isinstance(data.get("instructions_parts"), list):
        facts.append(f"instructions in {len(data['instructions_parts'])} part(s)")
    reasoning = data.get("reasoning")
    if isinstance(reasoning, dict) and reasoning.get("effort"):
        facts.append(f"reasoning {reasoning['effort']}")
    if added := _names(data.get("tools_added")):
        facts.append("+tools " + ", ".join(added))
    if removed := _names(data.get("tools_removed")):
        facts.append("−tools " + ", ".join(removed))
    if isinstance(data.get("extra"), dict) and data["extra"]:
        facts.append(
            "extra "
            + ", ".join(
                f"{k}={'(removed)' if v is None else json.dumps(v)}"
                for k, v in sorted(data["extra"].items())
            )
        )
    if isinstance(data.get("omit"), dict) and data["omit"]:
        facts.append("omit " + json.dumps(data["omit"], sort_keys=True))
    return " · ".join(facts) or "no change"


def _response_detail(data: dict[str, Any]) -> str:
    facts: list[str] = []
    for key in ("model", "status"):
        if isinstance(data.get(key), str) and data[key]:
            facts.append(data[key])
    usage = data.get("usage")
    if isinstance(usage, dict):
        total = usage.get("total_tokens")
        tokens_in, tokens_out = usage.get("input_tokens"), usage.get("output_tokens")
        if tokens_in is not None or tokens_out is not None:
            facts.append(f"{tokens_in or 0} in / {tokens_out or 0} out tokens")
        elif total is not None:
            facts.append(f"{total} tokens")
    if isinstance(data.get("latency_ms"), int | float):
        facts.append(f"{data['latency_ms']:g} ms")
    if isinstance(data.get("error"), dict | str) and data["error"]:
        facts.append(f"error {json.dumps(data['error'], ensure_ascii=False)}")
    return " · ".join(facts)


# -- Pydantic AI messages (pydantic_ai:message) ---------------------------------------

#: Pydantic AI user-content kinds → the Responses content part that reads the same.
_PYDANTIC_MEDIA = {
    "image-url": "input_image",
    "audio-url": "input_audio",
    "video-url": "input_video",
    "document-url": "input_file",
    "uploaded-file": "input_file",
}


def _pydantic_content(content: Any) -> Any:
    """A user prompt's content (text, or a list of texts and media) as Responses content."""
    if not isinstance(content, list):
        return content if isinstance(content, str) else _json_text(content)
    parts: list[dict[str, Any]] = []
    for piece in content:
        if isinstance(piece, str):
            parts.append({"type": "input_text", "text": piece})
        elif isinstance(piece, dict):
            kind = str(piece.get("kind", ""))
            if kind == "cache-point":
                continue  # a marker for the provider, not content
            if isinstance(piece.get("content"), str):  # text-content, structured text
                parts.append({"type": "input_text", "text": piece["content"]})
            elif kind == "binary":
                media = str(piece.get("media_type", ""))
                parts.append(
                    {"type": "input_image" if media.startswith("image/") else "input_file"}
                )
            else:
                parts.append({"type": _PYDANTIC_MEDIA.get(kind, kind or "input_file")})
    return parts


def _json_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return "" if value is None else json.dumps(value, ensure_ascii=False, sort_keys=True)


def _retry_text(content: Any) -> str:
    """A retry prompt's content: its text, or one line per validation error."""
    if not isinstance(content, list):
        return _json_text(content)
    lines = []
    for error in content:
        if isinstance(error, dict) and "msg" in error:
            where = ".".join(str(p) for p in error.get("loc") or ())
            lines.append(f"{where}: {error['msg']}" if where else str(error["msg"]))
        else:
            lines.append(_json_text(error))
    return "\n".join(lines)


def _pydantic_part(part: Any) -> Described:
    """One part of a Pydantic AI message, as the Responses item it corresponds to."""
    if not isinstance(part, dict):
        return Described(type=PYDANTIC_AI_MESSAGE, kind="part", text=_json_text(part))
    kind = str(part.get("part_kind", ""))
    item: dict[str, Any]
    if kind in ("system-prompt", "user-prompt"):
        role = "system" if kind == "system-prompt" else "user"
        item = {"type": "message", "role": role, "content": _pydantic_content(part.get("content"))}
    elif kind == "text":
        content = [{"type": "output_text", "text": _json_text(part.get("content"))}]
        item = {"type": "message", "role": "assistant", "content": content}
    elif kind == "thinking":
        summary = [{"type": "summary_text", "text": _json_text(part.get("content"))}]
        item = {"type": "reasoning", "summary": summary}
    elif kind in ("tool-call", "builtin-tool-call"):
        args = part.get("args")
        item = {
            "type": "function_call",
            "name": str(part.get("tool_name", "")),
            "arguments": args if isinstance(args, str) else _json_text(args or {}),
            "call_id": str(part.get("tool_call_id") or ""),
        }
    elif kind in ("tool-return", "builtin-tool-return"):
        outcome = part.get("outcome")
        # A refused call's return carries the validation errors: one line each.
        returned = part.get("content")
        output = _retry_text(returned) if outcome not in (None, "success") else _json_text(returned)
        item = {
            "type": "function_call_output",
            "call_id": str(part.get("tool_call_id") or ""),
            "output": output,
        }
    elif kind == "retry-feedback":
        # Pydantic AI 2's feedback on an unusable response (no tool call to answer).
        retry = part.get("retry")
        cause = retry.get("cause") if isinstance(retry, dict) else None
        return Described(
            type=PYDANTIC_AI_MESSAGE,
            kind="retry prompt",
            role="user",
            text=_retry_text(part.get("content")),
            detail=str(cause).replace("_", " ") if cause else "",
        )
    elif kind == "retry-prompt":  # before Pydantic AI 2: a retry of a call, or of a response
        tool = part.get("tool_name")
        return Described(
            type=PYDANTIC_AI_MESSAGE,
            kind="retry prompt",
            role="" if tool else "user",
            text=_retry_text(part.get("content")),
            call_id=str(part.get("tool_call_id") or "") if tool else "",
            detail=f"to tool {tool}" if tool else "",
        )
    elif kind == "file":
        media = part.get("content")
        media_type = media.get("media_type", "") if isinstance(media, dict) else ""
        return Described(
            type=PYDANTIC_AI_MESSAGE, kind="message", role="assistant", text=f"[file {media_type}]"
        )
    else:
        # A part this reader does not know: its kind and members, never dropped.
        rest = {k: v for k, v in part.items() if k not in ("part_kind", "timestamp")}
        content = rest.pop("content", None)
        text = content if isinstance(content, str) else _json_text(rest) if rest else ""
        return Described(type=PYDANTIC_AI_MESSAGE, kind=kind.replace("-", " ") or "part", text=text)
    words, role, text, tool, arguments = _item_words(item)
    detail = ""
    if kind.startswith("builtin-"):
        detail = "built-in tool (run by the provider)"
    elif kind == "tool-return" and part.get("outcome") not in (None, "success"):
        detail = f"outcome {part.get('outcome')}"
    return Described(
        type=PYDANTIC_AI_MESSAGE,
        kind=words,
        role=role,
        text=text,
        tool=tool,
        arguments=arguments,
        call_id=str(item.get("call_id", "")),
        detail=detail,
    )


def _pydantic_detail(message: dict[str, Any]) -> str:
    """One line of facts of a model response (model, tokens, finish) or request (instructions)."""
    facts: list[str] = []
    if message.get("kind") == "response":
        for key in ("model_name", "provider_name"):
            if isinstance(message.get(key), str) and message[key]:
                facts.append(message[key])
        usage = message.get("usage")
        if isinstance(usage, dict) and (usage.get("input_tokens") or usage.get("output_tokens")):
            tokens_in, tokens_out = usage.get("input_tokens") or 0, usage.get("output_tokens") or 0
            facts.append(f"{tokens_in} in / {tokens_out} out tokens")
        if isinstance(message.get("finish_reason"), str) and message["finish_reason"]:
            facts.append(f"finish {message['finish_reason']}")
    instructions = message.get("instructions")
    parts = message.get("parts")
    # Pydantic AI records the instructions on every request; they are news on
    # the one that carries the user's prompt (a tool's return repeats them).
    prompted = isinstance(parts, list) and any(
        isinstance(p, dict) and p.get("part_kind") == "user-prompt" for p in parts
    )
    if isinstance(instructions, str) and instructions and prompted:
        cut = " ".join(instructions.split())
        if len(cut) > _INSTRUCTIONS_SHOWN:
            cut = cut[: _INSTRUCTIONS_SHOWN - 1] + "…"
        facts.append(f"instructions “{cut}”")
    return " · ".join(facts)


def _pydantic_message(data: dict[str, Any], converges: int) -> Described:
    """A ``pydantic_ai:message`` entry: its one part, or a request/response with its parts."""
    message = data.get("message")
    message = message if isinstance(message, dict) else {}
    raw_parts = message.get("parts")
    parts = tuple(_pydantic_part(p) for p in (raw_parts if isinstance(raw_parts, list) else ()))
    detail = _pydantic_detail(message)
    response = message.get("kind") == "response"
    if len(parts) == 1:
        (one,) = parts
        facts = " · ".join(f for f in (one.detail, detail) if f)
        return Described(
            type=PYDANTIC_AI_MESSAGE,
            kind=one.kind,
            role=one.role,
            text=one.text,
            tool=one.tool,
            arguments=one.arguments,
            call_id=one.call_id,
            detail=facts,
            converges=converges,
        )
    roles = {p.role for p in parts if p.kind == "message"}
    if response:
        role = "assistant"
    elif "user" in roles:
        role = "user"
    else:
        role = "system" if roles == {"system"} else ""
    return Described(
        type=PYDANTIC_AI_MESSAGE,
        kind="model response" if response else "model request",
        role=role,
        # What search and one-line lists read: every part's words, in order.
        text="\n".join(p.text or (f"{p.tool}({p.arguments})" if p.tool else "") for p in parts),
        detail=detail,
        converges=converges,
        parts=parts,
    )


def describe(data: dict[str, Any]) -> Described:
    """Put one entry (its decoded JSON object) into words."""
    etype = str(data.get("type", ""))
    converges = len(data.get("parents") or ())
    if etype == PYDANTIC_AI_MESSAGE:
        return _pydantic_message(data, converges)
    target = str(data["target"]) if isinstance(data.get("target"), str) else ""
    call_id = str(data.get("call_id", "")) if data.get("call_id") else ""
    if etype == "item":
        return _item(data, converges)
    if etype == "config":
        return Described(
            type=etype, kind="config", detail=_config_detail(data), converges=converges
        )
    if etype == "response":
        rid = str(data.get("response_id", ""))
        return Described(
            type=etype,
            kind="response",
            detail=_response_detail(data),
            response=rid,
            converges=converges,
        )
    if etype in ("compaction", "branch_summary"):
        text = item_text(data.get("summary"))
        extra = ""
        if etype == "compaction":
            pinned = len(data.get("pinned") or ())
            extra = f"keeps from {short_id(str(data.get('first_kept') or ''))}" + (
                f" · {pinned} pinned" if pinned else ""
            )
        return Described(
            type=etype,
            kind=etype.replace("_", " "),
            text=text,
            detail=extra,
            target=str(data.get("first_kept", "")),
            converges=converges,
        )
    if etype == "label":
        value = data.get("label")
        shown = "(cleared)" if value is None else str(value)
        kind = "leaf mark" if value == "leaf" else "label"
        facts = [shown]
        for key in ("kind", "score"):
            if data.get(key) is not None:
                facts.append(f"{key} {data[key]}")
        return Described(
            type=etype, kind=kind, detail=" · ".join(facts), target=target, converges=converges
        )
    if etype == "decision":
        facts = [str(data.get("verdict", ""))]
        if data.get("by"):
            facts.append(f"by {data['by']}")
        if data.get("args") is not None:
            facts.append(f"args {json.dumps(data['args'], ensure_ascii=False)}")
        if data.get("reason"):
            facts.append(f"“{data['reason']}”")
        return Described(
            type=etype,
            kind="decision",
            detail=" · ".join(facts),
            call_id=call_id,
            target=target,
            text=item_text(data.get("answer")) if data.get("answer") is not None else "",
            converges=converges,
        )
    if etype == "dispatch":
        return Described(
            type=etype,
            kind="dispatch",
            detail=f"call {call_id} sent to its tool",
            call_id=call_id,
            target=target,
            converges=converges,
        )
    if etype == "info":
        members = [f"{k} {json.dumps(v, ensure_ascii=False)}" for k, v in sorted(data.items())]
        name = data.get("name")
        visible = [
            f
            for f in members
            if not f.startswith(
                ("id ", "parent ", "parents ", "ts ", "type ", "legacy_id ", "name ")
            )
        ]
        return Described(
            type=etype,
            kind="session info",
            text=str(name) if isinstance(name, str) else "",
            detail=" · ".join(visible),
            converges=converges,
        )
    if etype == "link":
        facts = [str(data.get("rel", ""))]
        if data.get("session"):
            facts.append(f"session {data['session']}")
        if call_id:
            facts.append(f"call {call_id}")
        return Described(
            type=etype,
            kind="link",
            detail=" · ".join(facts),
            call_id=call_id,
            target=target,
            converges=converges,
        )
    if etype == "run":
        facts = [str(data.get(k)) for k in ("phase", "run_id", "source", "ref") if data.get(k)]
        return Described(type=etype, kind="run", detail=" · ".join(facts), converges=converges)
    envelope = {"type", "id", "parent", "parents", "ts", "legacy_id"}
    rest = {k: v for k, v in data.items() if k not in envelope}
    return Described(
        type=etype,
        kind=etype or "entry",
        detail=json.dumps(rest, ensure_ascii=False, sort_keys=True)[:300] if rest else "",
        converges=converges,
    )


def searchable(data: dict[str, Any]) -> tuple[str, str, str, str, str]:
    """``(role, content, tool_name, summary, model)`` an entry projects for search and lists.

    The log store writes these into the entry row's projection columns (which
    the tree store fills from its own messages), so "the opening user message",
    text search and the entries list work the same for every session kind.
    """
    if data.get("type") == "item":
        # The log store projects every appended item: its words without the
        # rest of describe() (a Described, the members an item does not use).
        kind, role, text, tool, arguments = _item_words(_item_of(data))
        content = f"{tool}({arguments})" if kind == "tool call" else text
        return role[:64], content, tool[:255], "", ""
    view = describe(data)
    # A message — or an entry made of several items (its role is the speaker's).
    role = view.role if view.kind == "message" or view.parts else ""
    content = f"{view.tool}({view.arguments})" if view.kind == "tool call" else view.text
    summary = view.text if view.type in ("compaction", "branch_summary") else ""
    model = data.get("model") if view.type in ("config", "response") else ""
    return (
        role[:64],
        content if not summary else "",
        view.tool[:255],
        summary,
        model[:255] if isinstance(model, str) else "",
    )
