"""Context building: what a model would be sent at an entry of a tree session.

See docs/tree-store.md, "Context building".

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
from datetime import datetime
from typing import Any, Protocol

from agentstore.exceptions import ValidationError
from agentstore.types.tree import (
    ContextUsageAnchorEntity,
    EntryTokenUsageEntity,
    MessageEntity,
    SessionContextEntity,
)

__all__ = [
    "NO_SETTINGS",
    "ContextEntry",
    "Settings",
    "apply_settings",
    "build_context",
    "entries_needing_parts",
]

#: The settings a context carries: (provider, model, thinking level).
Settings = tuple[str, str, str]
NO_SETTINGS: Settings = ("", "", "")


class SettingsEntry(Protocol):
    """What a settings change is read from (an ``EntryEntity`` or a ``ContextEntry``)."""

    @property
    def type(self) -> str: ...
    @property
    def data(self) -> dict[str, Any]: ...
    @property
    def message(self) -> MessageEntity: ...


class ContextEntry(Protocol):
    """What context building reads of an entry (``ContextEntry`` has it all)."""

    @property
    def id(self) -> str: ...
    @property
    def type(self) -> str: ...
    @property
    def model_facing(self) -> bool: ...
    @property
    def summary(self) -> str: ...
    @property
    def compaction_first_kept_entry_id(self) -> str: ...
    @property
    def created_at(self) -> datetime: ...
    @property
    def data_json(self) -> str: ...
    @property
    def data(self) -> dict[str, Any]: ...
    @property
    def message(self) -> MessageEntity: ...


_MESSAGE_TYPES = ("message", "custom_message")


def _usage(entry: ContextEntry) -> EntryTokenUsageEntity | None:
    if '"usage"' not in entry.data_json:
        return None  # most messages: skip decoding the JSON
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


def _summary_message(role: str, entry: ContextEntry) -> MessageEntity:
    return MessageEntity(role=role, content=entry.summary, timestamp=entry.created_at)


def _last_compaction(branch: Sequence[ContextEntry]) -> int:
    for index in range(len(branch) - 1, -1, -1):
        if branch[index].type == "compaction":
            return index
    return -1


def entries_needing_parts(branch: Sequence[ContextEntry]) -> set[str]:
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


def apply_settings(entry: SettingsEntry, settings: Settings) -> Settings:
    """The settings in force after ``entry``, given ``settings`` in force before it."""
    return _settings(entry, *settings)


def _settings(
    entry: SettingsEntry, provider: str, model: str, thinking_level: str
) -> tuple[str, str, str]:
    """Apply a model or thinking-level change to the settings in force."""
    if entry.type == "model_change":
        change = entry.message
        return change.provider, change.model, thinking_level
    if entry.type == "thinking_level_change":
        level = entry.data.get("thinking_level")
        return provider, model, level if isinstance(level, str) else ""
    return provider, model, thinking_level


def _compacted(branch: Sequence[ContextEntry], position: int) -> list[MessageEntity]:
    """The messages a compaction at ``position`` leaves: its summary and the retained tail."""
    compaction = branch[position]
    messages = [_summary_message("compactionSummary", compaction)]
    first_kept = compaction.compaction_first_kept_entry_id
    start = next((i for i in range(position) if first_kept and branch[i].id == first_kept), None)
    if start is None:
        return messages
    for kept in branch[start:position]:
        # Only messages and branch summaries; earlier compactions, settings
        # changes and labels are skipped, and the usage anchor is not restored.
        if kept.type in _MESSAGE_TYPES and kept.model_facing:
            messages.append(kept.message)
        elif kept.type == "branch_summary":
            messages.append(_summary_message("branchSummary", kept))
    return messages


def build_context(
    branch: Sequence[ContextEntry], settings: Settings = NO_SETTINGS
) -> SessionContextEntity:
    """Rebuild the context at the last entry of ``branch`` (root first).

    ``settings``: those in force above the branch's first entry, when
    ``branch`` is the lower part of a longer one (the store reads only the
    kept context and the settings recorded on its compaction). Replaying a
    settings change that ``settings`` already reflects changes nothing: each
    change only overwrites the fields it sets.
    """
    provider, model, thinking_level = settings
    anchor: ContextUsageAnchorEntity | None = None
    messages: list[MessageEntity] = []
    last = _last_compaction(branch)
    if last >= 0:
        # Everything before the last compaction is replaced by it except the
        # settings, so only those are replayed there (no messages are built).
        for entry in branch[:last]:
            provider, model, thinking_level = _settings(entry, provider, model, thinking_level)
        messages = _compacted(branch, last)

    for entry in branch[last + 1 :]:
        kind = entry.type
        if kind in _MESSAGE_TYPES:
            if not entry.model_facing:
                continue
            message = entry.message
            messages.append(message)
            if kind == "message" and message.role == "assistant":
                usage = _usage(entry)
                if usage is not None:
                    anchor = ContextUsageAnchorEntity(
                        entry_id=entry.id,
                        message_index=len(messages) - 1,
                        usage=usage,
                        provider=message.provider,
                        model=message.model,
                    )
        elif kind == "branch_summary":
            messages.append(_summary_message("branchSummary", entry))
        else:
            # Settings changes; custom, label, session_info and unknown types
            # contribute nothing.
            provider, model, thinking_level = _settings(entry, provider, model, thinking_level)

    return SessionContextEntity(
        messages=tuple(messages),
        provider=provider,
        model=model,
        thinking_level=thinking_level,
        usage_anchor=anchor,
    )
