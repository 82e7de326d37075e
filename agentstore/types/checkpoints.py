"""Value objects of the checkpoint store: LangGraph rows as bytes, strings and JSON.

    from agentstore.types.checkpoints import ChannelBlob, CheckpointRecord, PendingWriteRow

The :class:`~agentstore.stores.checkpoints.CheckpointStore` knows nothing about
LangGraph's classes: values arrive already serialized as a ``(type, bytes)`` pair
(``SerializerProtocol.dumps_typed``) and leave the same way, so the store runs
(and the admin reads threads) without LangGraph installed, and nothing is ever
re-encoded. ``agentstore.integrations.langgraph`` converts between these rows and
LangGraph's ``CheckpointTuple``.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

__all__ = [
    "BlobRow",
    "ChannelBlob",
    "CheckpointRecord",
    "CheckpointRow",
    "PendingWriteRow",
    "WriteRow",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class ChannelBlob:
    """One channel's serialized value at one version (``type="empty"``, ``blob=None``: cleared)."""

    channel: str
    version: str
    type: str
    blob: bytes | None


@dataclass(frozen=True, slots=True, kw_only=True)
class PendingWriteRow:
    """One write of a task in the super-step after a checkpoint."""

    task_id: str
    task_path: str = ""
    idx: int = 0
    channel: str
    type: str
    blob: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointRecord:
    """A stored checkpoint with the channel blobs it reads and its pending writes.

    ``blobs`` are those named by ``channel_versions`` that exist; ``writes`` are in
    LangGraph's ``writes_sort_key`` order (task path, task id, index).
    """

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_checkpoint_id: str | None
    type: str
    checkpoint: bytes
    metadata: dict[str, Any]
    channel_versions: dict[str, Any]
    created_at: datetime
    blobs: tuple[ChannelBlob, ...] = ()
    writes: tuple[PendingWriteRow, ...] = ()


# -- a thread's rows as stored, for export and import (docs/commands.md, "Files") --


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointRow:
    """One ``Checkpoint`` row of a thread exactly as stored (``inline`` still packed)."""

    checkpoint_ns: str = ""
    checkpoint_id: str
    parent_checkpoint_id: str | None = None
    type: str
    checkpoint: bytes
    metadata: dict[str, Any]
    channel_versions: dict[str, Any]
    run_id: str = ""
    inline: bytes = b""
    created_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class BlobRow:
    """One ``CheckpointBlob`` row of a thread (``blob=None``: the channel was cleared)."""

    checkpoint_ns: str = ""
    channel: str
    version: str
    type: str
    blob: bytes | None


@dataclass(frozen=True, slots=True, kw_only=True)
class WriteRow:
    """One ``CheckpointWrite`` row of a thread: a task's pending write after a checkpoint."""

    checkpoint_ns: str = ""
    checkpoint_id: str
    task_id: str
    task_path: str = ""
    idx: int = 0
    channel: str
    type: str
    blob: bytes
