"""Context building: what a model would be sent at an entry of a tree session (spec §4).

    context = build_context(branch)          # branch: root → leaf, hydrated entries

Walking the branch from the root:

* a model-facing message (or custom message) is appended; an assistant message
  whose data carries provider usage becomes the **usage anchor** (where in the
  context the provider last reported token counts);
* a branch summary is always appended, as a ``branchSummary`` message;
* model and thinking-level changes set the provider/model/thinking level;
* a **compaction** replaces everything before it with its summary
  (``compactionSummary``) followed by the *retained tail* — the entries from its
  first-kept entry up to the compaction, messages and branch summaries only —
  and clears the usage anchor (it described the prompt before compaction).
  Settings changed before the compaction stay in force.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentstore.exceptions import ValidationError
from agentstore.types.tree import (
    ContextUsageAnchorEntity,
    EntryEntity,
    EntryTokenUsageEntity,
    MessageEntity,
    SessionContextEntity,
)

__all__ = ["build_context", "entries_needing_parts"]

_MESSAGE_TYPES = ("message", "custom_message")


def _usage(entry: EntryEntity) -> EntryTokenUsageEntity | None:
    raw = entry.data.get("usage")
    if not isinstance(raw, dict):
        return None
    try:
        usage = EntryTokenUsageEntity(
            context_window=int(raw.get("context_window") or 0),
            context_tokens=int(raw.get("context_tokens") or 0),
            input_tokens=int(raw.get("input_tokens") or 0),
            output_tokens=int(raw.get("output_tokens") or 0),
        )
    except (TypeError, ValueError):
        raise ValidationError(
            f"entry {entry.id} has an unreadable usage object", field="data_json.usage"
        ) from None
    return usage if usage.has_any() else None


def _summary_message(role: str, entry: EntryEntity) -> MessageEntity:
    return MessageEntity(role=role, content=entry.summary, timestamp=entry.created_at)


def _last_compaction(branch: Sequence[EntryEntity]) -> int:
    for index in range(len(branch) - 1, -1, -1):
        if branch[index].type == "compaction":
            return index
    return -1


def entries_needing_parts(branch: Sequence[EntryEntity]) -> set[str]:
    """Ids of the branch entries whose message parts the context will include."""
    wanted: set[str] = set()
    start = 0
    compaction = _last_compaction(branch)
    if compaction >= 0:
        start = compaction + 1
        first_kept = branch[compaction].compaction_first_kept_entry_id
        for index in range(compaction):
            if first_kept and branch[index].id == first_kept:
                wanted.update(
                    e.id
                    for e in branch[index:compaction]
                    if e.type in _MESSAGE_TYPES and e.model_facing
                )
                break
    wanted.update(e.id for e in branch[start:] if e.type in _MESSAGE_TYPES and e.model_facing)
    return wanted


def build_context(branch: Sequence[EntryEntity]) -> SessionContextEntity:
    """Rebuild the context at the last entry of ``branch`` (root first)."""
    messages: list[MessageEntity] = []
    provider = model = thinking_level = ""
    anchor: ContextUsageAnchorEntity | None = None
    positions = {entry.id: index for index, entry in enumerate(branch)}

    for position, entry in enumerate(branch):
        kind = entry.type
        if kind in _MESSAGE_TYPES:
            if not entry.model_facing:
                continue
            messages.append(entry.message)
            if kind == "message" and entry.message.role == "assistant":
                usage = _usage(entry)
                if usage is not None:
                    anchor = ContextUsageAnchorEntity(
                        entry_id=entry.id,
                        message_index=len(messages) - 1,
                        usage=usage,
                        provider=entry.message.provider,
                        model=entry.message.model,
                    )
        elif kind == "branch_summary":
            messages.append(_summary_message("branchSummary", entry))
        elif kind == "model_change":
            provider, model = entry.message.provider, entry.message.model
        elif kind == "thinking_level_change":
            level = entry.data.get("thinking_level")
            thinking_level = level if isinstance(level, str) else ""
        elif kind == "compaction":
            messages = [_summary_message("compactionSummary", entry)]
            anchor = None
            first_kept = entry.compaction_first_kept_entry_id
            start = positions.get(first_kept) if first_kept else None
            if start is not None and start < position:
                for kept in branch[start:position]:
                    if kept.type in _MESSAGE_TYPES and kept.model_facing:
                        messages.append(kept.message)
                    elif kept.type == "branch_summary":
                        messages.append(_summary_message("branchSummary", kept))
        # custom, label, session_info and unknown types contribute nothing.

    return SessionContextEntity(
        messages=tuple(messages),
        provider=provider,
        model=model,
        thinking_level=thinking_level,
        usage_anchor=anchor,
    )
