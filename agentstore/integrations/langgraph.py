"""A LangGraph checkpointer that keeps graph threads in the project's database.

    from agentstore.integrations.langgraph import AgentstoreSaver

    graph = builder.compile(checkpointer=AgentstoreSaver())
    graph.invoke({"messages": [...]}, {"configurable": {"thread_id": "support-42"}})
    await graph.ainvoke(..., config)            # the async methods work too

Install with ``pip install "agentstore[langgraph]"``. Each LangGraph thread is an
agentstore session of kind ``graph`` (its id is the ``thread_id``), so threads are
owned, listed (``manage.py agentstore ls --kind graph``, the API), pruned and
deleted like other sessions, and the admin draws a thread's checkpoint tree with
its forks, the state at any checkpoint, pending writes and open interrupts.

The saver is a thin adapter: it serializes with the saver's ``serde`` (LangGraph's
``JsonPlusSerializer`` unless you pass another) and hands ``(type, bytes)`` rows to
:class:`~agentstore.stores.checkpoints.CheckpointStore`, which stores them exactly
as given. agentstore itself pickles nothing. Channel values are stored once per
channel version (like LangGraph's ``PostgresSaver``), so a long conversation does
not rewrite unchanged channels at every step.

Async methods run the sync ones through ``asgiref.sync.sync_to_async`` (thread
sensitive, as Django requires for its connections). It passes LangGraph's
conformance suite (base and extended capabilities) on SQLite and PostgreSQL —
docs/integrations/langgraph.md has the details.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from datetime import datetime
from typing import Any

from asgiref.sync import sync_to_async
from django.db import DEFAULT_DB_ALIAS
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.types import TASKS

from agentstore.stores.checkpoints import CheckpointStore
from agentstore.types.checkpoints import ChannelBlob, CheckpointRecord, PendingWriteRow

__all__ = ["AgentstoreSaver"]


class AgentstoreSaver(BaseCheckpointSaver[str]):
    """LangGraph ``BaseCheckpointSaver`` on agentstore's tables, sync and async.

    ``using`` picks the Django database alias; ``owner`` (a user or user id) owns
    the thread sessions this saver creates; ``serde`` replaces LangGraph's default
    serializer (for example an ``EncryptedSerializer``).
    """

    def __init__(
        self,
        *,
        using: str = DEFAULT_DB_ALIAS,
        owner: Any = None,
        serde: SerializerProtocol | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        super().__init__(serde=serde)
        self.using = using
        self.store = CheckpointStore(using=using, clock=clock)
        self.owner_id: int | None = getattr(owner, "pk", owner)

    # -- reads ------------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        configurable = config["configurable"]
        record = self.store.get(
            str(configurable["thread_id"]),
            configurable.get("checkpoint_ns", ""),
            get_checkpoint_id(config),
        )
        return None if record is None else self._tuple(record)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        configurable = (config or {}).get("configurable", {})
        thread_id = configurable.get("thread_id")
        records = self.store.list(
            None if thread_id is None else str(thread_id),
            configurable.get("checkpoint_ns"),
            checkpoint_id=configurable.get("checkpoint_id"),
            before=get_checkpoint_id(before) if before else None,
            limit=limit,
            metadata=filter,
        )
        for record in records:
            yield self._tuple(record)

    # -- writes -----------------------------------------------------------------------

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        configurable = config["configurable"]
        thread_id = str(configurable["thread_id"])
        checkpoint_ns = configurable.get("checkpoint_ns", "")
        values = checkpoint["channel_values"]
        blobs = [
            ChannelBlob(channel=channel, version=str(version), type=type_, blob=blob)
            for channel, version in new_versions.items()
            for type_, blob in [
                self.serde.dumps_typed(values[channel]) if channel in values else ("empty", None)
            ]
        ]
        stripped = {**checkpoint, "channel_values": {}}
        type_, data = self.serde.dumps_typed(stripped)
        self.store.put(
            thread_id,
            checkpoint_ns,
            checkpoint["id"],
            configurable.get("checkpoint_id"),
            type_,
            data,
            get_serializable_checkpoint_metadata(config, metadata),
            dict(checkpoint["channel_versions"]),
            blobs,
            owner_id=self.owner_id,
        )
        return {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": checkpoint_ns,
                "checkpoint_id": checkpoint["id"],
            }
        }

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        configurable = config["configurable"]
        rows = [
            PendingWriteRow(
                task_id=task_id,
                task_path=task_path,
                idx=WRITES_IDX_MAP.get(channel, idx),
                channel=channel,
                type=type_,
                blob=blob,
            )
            for idx, (channel, value) in enumerate(writes)
            for type_, blob in [self.serde.dumps_typed(value)]
        ]
        self.store.put_writes(
            str(configurable["thread_id"]),
            configurable.get("checkpoint_ns", ""),
            configurable["checkpoint_id"],
            rows,
            # Special channels (error, interrupt, resume…) keep the latest value;
            # a regular write is stored once (a retried task changes nothing).
            replace=all(channel in WRITES_IDX_MAP for channel, _ in writes),
            owner_id=self.owner_id,
        )

    def delete_thread(self, thread_id: str) -> None:
        self.store.delete_thread(str(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self.store.delete_for_runs([str(r) for r in run_ids])

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self.store.copy_thread(str(source_thread_id), str(target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self.store.prune([str(t) for t in thread_ids], strategy=strategy)

    def get_next_version(self, current: str | int | None, channel: None) -> str:
        """A version that sorts after ``current`` and is unique to this write.

        The random suffix matters: blobs are keyed by (channel, version), and a
        fork (``update_state`` on an old checkpoint) numbers its versions from the
        old checkpoint's — without the suffix they would collide with the values
        of the branch it forked from. Same scheme as LangGraph's PostgresSaver.
        """
        if current is None:
            number = 0
        elif isinstance(current, int):
            number = current
        else:
            number = int(str(current).split(".")[0])
        return f"{number + 1:032}.{random.random():016}"

    # -- async: the sync methods in Django's thread-sensitive executor -------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await sync_to_async(self.get_tuple)(config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        # The iterator runs in the executor one page at a time, so a long listing
        # neither blocks the event loop nor loads the whole thread first.
        iterator = self.list(config, filter=filter, before=before, limit=limit)
        done = object()
        while True:
            items = await sync_to_async(_next_page)(iterator, done)
            for item in items:
                if item is done:
                    return
                yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await sync_to_async(self.put)(config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await sync_to_async(self.put_writes)(config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await sync_to_async(self.delete_thread)(thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await sync_to_async(self.delete_for_runs)(run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await sync_to_async(self.copy_thread)(source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await sync_to_async(self.prune)(thread_ids, strategy=strategy)

    # -- rows to LangGraph ----------------------------------------------------------------

    def _tuple(self, record: CheckpointRecord) -> CheckpointTuple:
        checkpoint: Checkpoint = self.serde.loads_typed((record.type, record.checkpoint))
        values = {
            blob.channel: self.serde.loads_typed((blob.type, blob.blob))
            for blob in record.blobs
            if blob.type != "empty" and blob.blob is not None
        }
        checkpoint["channel_values"] = values
        checkpoint["channel_versions"] = dict(record.channel_versions)
        if checkpoint.get("v", 4) < 4 and record.parent_checkpoint_id:
            self._migrate_pending_sends(record, checkpoint)
        thread = {"thread_id": record.thread_id, "checkpoint_ns": record.checkpoint_ns}
        return CheckpointTuple(
            config={"configurable": {**thread, "checkpoint_id": record.checkpoint_id}},
            checkpoint=checkpoint,
            metadata=record.metadata,  # type: ignore[arg-type]
            parent_config=(
                {"configurable": {**thread, "checkpoint_id": record.parent_checkpoint_id}}
                if record.parent_checkpoint_id
                else None
            ),
            pending_writes=[
                (w.task_id, w.channel, self.serde.loads_typed((w.type, w.blob)))
                for w in record.writes
            ],
        )

    def _migrate_pending_sends(self, record: CheckpointRecord, checkpoint: Checkpoint) -> None:
        """Checkpoints before format v4 kept pending sends as writes of their parent."""
        assert record.parent_checkpoint_id is not None
        sends = self.store.writes_of(
            record.thread_id, record.checkpoint_ns, record.parent_checkpoint_id, TASKS
        )
        if not sends:
            return
        checkpoint["channel_values"][TASKS] = [
            self.serde.loads_typed((w.type, w.blob)) for w in sends
        ]
        versions = checkpoint["channel_versions"]
        versions[TASKS] = max(versions.values()) if versions else self.get_next_version(None, None)


#: Checkpoints ``alist`` fetches per trip to the executor.
ASYNC_PAGE = 50


def _next_page(iterator: Iterator[CheckpointTuple], done: object) -> list[Any]:
    page: list[Any] = []
    for item in iterator:
        page.append(item)
        if len(page) == ASYNC_PAGE:
            return page
    page.append(done)
    return page
