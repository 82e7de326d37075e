"""Read helpers for LangGraph threads (``graph`` sessions): the admin's thread page and the CLI.

    from agentstore.selectors.checkpoints import thread_view, checkpoint_detail

    view = thread_view(thread_id, checkpoint_ns="", limit=300)   # tree rows, newest window
    detail = checkpoint_detail(thread_id, "", checkpoint_id)      # state, writes, interrupts

Every read is bounded: the tree shows the newest ``limit`` checkpoints of one
namespace (older ones are one "older" link away, paged by the insertion id), and
values are cut to :data:`PREVIEW_CHARS`. Values are decoded by
``agentstore.formats.langgraph_values`` — LangGraph's MessagePack and JSON read
as data, whether LangGraph is installed or not, never constructing the classes a
value names and never unpickling — and shown as indented JSON-like text; a list
of LangChain messages (a ``MessagesState``'s ``messages``) is also put into words
by the format's describer, like every conversation the admin shows.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import DEFAULT_DB_ALIAS
from django.db.models import Count

from agentstore.formats.agentsession.describe import Described, describe
from agentstore.formats.langgraph_values import NotDecoded, decode, message_items, show
from agentstore.models import Checkpoint, CheckpointWrite
from agentstore.stores.checkpoints import CheckpointStore

__all__ = [
    "PREVIEW_CHARS",
    "CheckpointDetail",
    "CheckpointNode",
    "ThreadView",
    "ValueView",
    "checkpoint_detail",
    "thread_view",
]

#: Characters of a decoded value shown on the thread page.
PREVIEW_CHARS = 4000
#: Messages of one value put into words (the newest; the preview has the rest).
MESSAGES_SHOWN = 200
#: Checkpoints drawn per tree page.
TREE_PAGE = 300

INTERRUPT = "__interrupt__"
ERROR = "__error__"


@dataclass(slots=True, kw_only=True)
class CheckpointNode:
    pk: int
    checkpoint_id: str
    parent_checkpoint_id: str | None
    step: Any
    source: str
    created_at: datetime
    writes: int
    interrupts: int
    errors: int
    depth: int = 0
    children: list[CheckpointNode] = field(default_factory=list)
    orphan: bool = False
    is_latest: bool = False
    branch_start: bool = False  # the first checkpoint of one branch of a fork

    @property
    def is_fork(self) -> bool:
        return len(self.children) > 1


@dataclass(frozen=True, slots=True, kw_only=True)
class ThreadView:
    thread_id: str
    checkpoint_ns: str
    namespaces: tuple[tuple[str, int], ...]  # (namespace, checkpoints), root first
    rows: tuple[CheckpointNode, ...]  # depth-first, forks indented
    total: int
    forks: int
    latest_id: str
    older_than: int | None  # the pk to page from when older checkpoints exist


@dataclass(frozen=True, slots=True, kw_only=True)
class ValueView:
    name: str
    type: str
    size: int
    preview: str  # the value as indented JSON-like text (or why it is not decoded)
    version: str = ""
    task_id: str = ""
    node: str = ""
    idx: int = 0
    #: A value made of LangChain messages, item by item in words (else empty).
    messages: tuple[Described, ...] = ()
    #: Messages of the value not put into words (beyond MESSAGES_SHOWN).
    messages_left_out: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointDetail:
    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_checkpoint_id: str | None
    created_at: datetime
    metadata: dict[str, Any]
    channels: tuple[ValueView, ...]
    writes: tuple[ValueView, ...]
    interrupts: tuple[ValueView, ...]
    open_interrupts: bool  # interrupts on the namespace's latest checkpoint: still waiting


def thread_view(
    thread_id: str,
    checkpoint_ns: str = "",
    *,
    older_than: int | None = None,
    limit: int = TREE_PAGE,
    using: str = DEFAULT_DB_ALIAS,
) -> ThreadView:
    """The checkpoint tree of one namespace: the newest ``limit`` checkpoints, nested."""
    checkpoints = Checkpoint.objects.using(using).filter(session_id=thread_id)
    namespaces = tuple(
        sorted(
            checkpoints.values_list("checkpoint_ns").annotate(n=Count("id")).order_by(),
            key=lambda item: (item[0] != "", item[0]),
        )
    )
    window = checkpoints.filter(checkpoint_ns=checkpoint_ns)
    if older_than is not None:
        window = window.filter(pk__lt=older_than)
    rows = list(
        window.order_by("-pk").values_list(
            "pk", "checkpoint_id", "parent_checkpoint_id", "metadata", "created_at"
        )[: limit + 1]
    )
    more = len(rows) > limit
    rows = rows[:limit][::-1]
    counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    if rows:
        for cid, channel, n in (
            CheckpointWrite.objects.using(using)
            .filter(
                session_id=thread_id,
                checkpoint_ns=checkpoint_ns,
                checkpoint_id__in=[r[1] for r in rows],
            )
            .values_list("checkpoint_id", "channel")
            .annotate(n=Count("id"))
            .order_by()
        ):
            counts[cid]["all"] += n
            counts[cid][channel] += n
    nodes: dict[str, CheckpointNode] = {}
    for pk, cid, parent, metadata, created_at in rows:
        meta = metadata if isinstance(metadata, dict) else {}
        nodes[cid] = CheckpointNode(
            pk=pk,
            checkpoint_id=cid,
            parent_checkpoint_id=parent,
            step=meta.get("step", ""),
            source=str(meta.get("source", "")),
            created_at=created_at,
            writes=counts[cid]["all"],
            interrupts=counts[cid][INTERRUPT],
            errors=counts[cid][ERROR],
        )
    roots: list[CheckpointNode] = []
    for node in nodes.values():  # insertion order: parents before children
        parent_node = nodes.get(node.parent_checkpoint_id or "")
        if parent_node is None or parent_node is node:
            # A parent outside the window (older, pruned or deleted) starts a root.
            node.orphan = node.parent_checkpoint_id is not None
            roots.append(node)
        else:
            parent_node.children.append(node)
    latest = max(nodes) if nodes else ""
    if latest:
        nodes[latest].is_latest = True
    # Depth-first, iteratively (a thread can be 100,000 checkpoints deep): a
    # chain stays in one column, each branch of a fork is indented once more.
    ordered: list[CheckpointNode] = []
    stack = [(root, 0) for root in reversed(roots)]
    while stack:
        node, depth = stack.pop()
        node.depth = depth
        ordered.append(node)
        fork = len(node.children) > 1
        for child in reversed(node.children):
            child.branch_start = fork
            stack.append((child, depth + 1 if fork else depth))
    return ThreadView(
        thread_id=thread_id,
        checkpoint_ns=checkpoint_ns,
        namespaces=namespaces,
        rows=tuple(ordered),
        total=next((n for ns, n in namespaces if ns == checkpoint_ns), 0),
        forks=sum(1 for n in ordered if n.is_fork),
        latest_id=latest,
        older_than=rows[0][0] if more and rows else None,
    )


def checkpoint_detail(
    thread_id: str,
    checkpoint_ns: str = "",
    checkpoint_id: str | None = None,
    *,
    using: str = DEFAULT_DB_ALIAS,
) -> CheckpointDetail | None:
    """One checkpoint (the namespace's latest by default): channel values, writes, interrupts."""
    store = CheckpointStore(using=using)
    record = store.get(thread_id, checkpoint_ns, checkpoint_id)
    if record is None:
        return None
    latest = store.get(thread_id, checkpoint_ns) if checkpoint_id else record
    channels = tuple(
        _value_view(
            blob.type,
            blob.blob,
            name=blob.channel,
            version=blob.version,
            type=blob.type,
            size=len(blob.blob or b""),
        )
        for blob in sorted(record.blobs, key=lambda b: b.channel)
        if blob.type != "empty"
    )
    writes = tuple(
        _value_view(
            w.type,
            w.blob,
            name=w.channel,
            type=w.type,
            size=len(w.blob),
            task_id=w.task_id,
            node=_node_of(w.task_path),
            idx=w.idx,
        )
        for w in record.writes
    )
    return CheckpointDetail(
        thread_id=thread_id,
        checkpoint_ns=checkpoint_ns,
        checkpoint_id=record.checkpoint_id,
        parent_checkpoint_id=record.parent_checkpoint_id,
        created_at=record.created_at,
        metadata=record.metadata,
        channels=channels,
        writes=writes,
        interrupts=tuple(w for w in writes if w.name == INTERRUPT),
        open_interrupts=latest is not None and latest.checkpoint_id == record.checkpoint_id,
    )


def _node_of(task_path: str) -> str:
    # LangGraph's task path reads "('~__pregel_pull', 'node')" for a node's task.
    parts = [p.strip(" '\"()") for p in task_path.split(",")]
    named = [p for p in parts if p and not p.startswith("~")]
    return named[0] if named else ""


def _value_view(type_: str, blob: bytes | None, **facts: Any) -> ValueView:
    """One stored value, decoded as data (never constructed) and put into words."""
    if blob is None:
        return ValueView(preview="", **facts)
    try:
        value = decode(type_, blob)
    except NotDecoded as exc:  # shown, not fatal: pickle, another serializer, damage
        return ValueView(preview=f"<{type_}, {len(blob)} bytes: not decoded ({exc})>", **facts)
    items = message_items(value)
    views = tuple(describe({"type": "item", "item": item}) for item in items or ())
    return ValueView(
        preview=show(value, PREVIEW_CHARS),
        messages=views[-MESSAGES_SHOWN:],
        messages_left_out=max(0, len(views) - MESSAGES_SHOWN),
        **facts,
    )
