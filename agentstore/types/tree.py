"""Value objects of the tree store (librecode's session repository) and the documents.

    from agentstore.types import MessageEntity, MessagePartEntity, AppendCompactionInput

    msg = MessageEntity(role="user", content="compare these", parts=(
        MessagePartEntity(type="text", text="compare these"),
        MessagePartEntity(type="image", mime_type="image/png", data=png, width=10, height=20),
    ))

Reads return these frozen objects, never ORM rows, so a caller can keep them,
hash them and compare them (an idempotent replay compares equal to the original).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

__all__ = [
    "MESSAGE_ROLES",
    "AppendCompactionInput",
    "ContextUsageAnchorEntity",
    "DocumentEntity",
    "EntryEntity",
    "EntryTokenUsageEntity",
    "ImportedEntry",
    "ImportedSession",
    "MessageEntity",
    "MessagePartEntity",
    "SessionContextEntity",
    "SessionEntity",
    "SessionMessageEntity",
    "TreeNodeEntity",
    "TreeRowEntity",
]

#: Every message role the tree store knows (librecode's ``Role`` constants):
#: ``user``/``assistant`` are model-facing by default, ``toolResult`` output is
#: parsed into tool sections, ``custom`` comes from custom-message entries and
#: the two summaries are what contexts build from branch summaries and
#: compactions. The API accepts exactly these (docs/api.md "Strict input").
MESSAGE_ROLES: tuple[str, ...] = (
    "user",
    "assistant",
    "toolResult",
    "thinking",
    "custom",
    "bashExecution",
    "branchSummary",
    "compactionSummary",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionEntity:
    """A tree session: where an agent works (``cwd``) and its place among sessions."""

    id: str
    cwd: str
    created_at: datetime
    updated_at: datetime
    name: str = ""
    parent_session: str = ""
    #: The header line of the file the session was imported from ("" if none).
    header: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class MessagePartEntity:
    """One ordered part of a message: ``type`` is ``"text"`` or ``"image"``."""

    type: str
    text: str = ""
    mime_type: str = ""
    name: str = ""
    data: bytes = b""
    width: int = 0
    height: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageEntity:
    """A message as the model sees it. ``timestamp=None`` on append means "now"."""

    role: str
    content: str = ""
    provider: str = ""
    model: str = ""
    parts: tuple[MessagePartEntity, ...] = ()
    timestamp: datetime | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class EntryTokenUsageEntity:
    """Provider-reported token usage recorded on an assistant message."""

    context_window: int = 0
    context_tokens: int = 0
    input_tokens: int = 0
    output_tokens: int = 0

    def has_any(self) -> bool:
        return any(
            value > 0
            for value in (
                self.context_window,
                self.context_tokens,
                self.input_tokens,
                self.output_tokens,
            )
        )

    def as_dict(self) -> dict[str, int]:
        """The non-zero fields, as stored in an entry's ``usage`` data key."""
        values = {
            "context_window": self.context_window,
            "context_tokens": self.context_tokens,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
        }
        return {key: value for key, value in values.items() if value}


@dataclass(frozen=True, slots=True, kw_only=True)
class EntryEntity:
    """One node of a session's tree.

    ``message.role == ""`` means the entry carries no message. ``data_json`` is
    the entry's data object (caller keys preserved, derived metadata added);
    the other fields are its projections. ``seq`` is the append position.
    """

    id: str
    session_id: str
    type: str
    created_at: datetime
    parent_id: str | None = None
    message: MessageEntity = field(default_factory=lambda: MessageEntity(role=""))
    custom_type: str = ""
    data_json: str = "{}"
    summary: str = ""
    tool_name: str = ""
    tool_status: str = ""
    tool_args_json: str = ""
    token_estimate: int = 0
    model_facing: bool = False
    display: bool = True
    compaction_first_kept_entry_id: str = ""
    compaction_tokens_before: int = 0
    branch_from_entry_id: str = ""
    operation_id: str = ""
    seq: int = 0

    @property
    def data(self) -> dict[str, Any]:
        """``data_json`` decoded."""
        value = json.loads(self.data_json)
        return value if isinstance(value, dict) else {}


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionMessageEntity:
    """A message-carrying entry seen as a message (its ``id`` is the entry's id)."""

    id: str
    session_id: str
    entry_id: str
    sender: str
    role: str
    created_at: datetime
    content: str = ""
    provider: str = ""
    model: str = ""
    parts: tuple[MessagePartEntity, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class TreeNodeEntity:
    """An entry and its direct descendants, in append order."""

    entry: EntryEntity
    children: tuple[TreeNodeEntity, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class TreeRowEntity:
    """One entry of the tree listed flat, depth first: how deep it sits and how many children.

    ``TreeStore.tree_page`` lists the forest this way so a page is bounded and a
    100,000-deep chain needs no nesting (docs/tree-store.md, "Reading a big tree").
    """

    entry: EntryEntity
    depth: int
    child_count: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ContextUsageAnchorEntity:
    """The latest model response with known provider usage, and where it sits in the context."""

    entry_id: str
    message_index: int
    usage: EntryTokenUsageEntity
    provider: str = ""
    model: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionContextEntity:
    """What the model would see at an entry: messages plus the settings in force."""

    messages: tuple[MessageEntity, ...] = ()
    provider: str = ""
    model: str = ""
    thinking_level: str = ""
    usage_anchor: ContextUsageAnchorEntity | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class AppendCompactionInput:
    """A compaction to append. ``operation_id`` makes the append idempotent."""

    session_id: str
    summary: str
    operation_id: str
    parent_id: str | None = None
    first_kept_entry_id: str = ""
    tokens_before: int = 0
    details: dict[str, Any] | None = None
    from_hook: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class DocumentEntity:
    """A JSON value (any shape, kept as the exact text) under (namespace, key)."""

    namespace: str
    key: str
    value_json: str = "{}"
    updated_at: datetime | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class ImportedEntry:
    """An entry brought in from a file, keeping its id, parent and timestamp."""

    id: str
    type: str
    created_at: datetime
    parent_id: str | None = None
    message: MessageEntity | None = None
    custom_type: str = ""
    summary: str = ""
    data: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class ImportedSession:
    """A whole session brought in from a file (see ``TreeStore.import_session``)."""

    id: str
    cwd: str
    entries: tuple[ImportedEntry, ...] = ()
    name: str = ""
    parent_session: str = ""
    created_at: datetime | None = None
    header: str = ""
