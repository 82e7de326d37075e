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

Every database call, sync or async, runs on one worker thread per process and
database alias (see :func:`_worker` for why), so a process holds one connection
for its graphs however many threads LangGraph starts; the async methods await
that thread without blocking the event loop. The saver's writes therefore never
join a transaction the caller has open. It passes LangGraph's
conformance suite (base and extended capabilities) on SQLite and PostgreSQL —
docs/integrations/langgraph.md has the details.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any, TypeVar

from django.db import DEFAULT_DB_ALIAS, connections
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

__all__ = ["AgentstoreSaver", "close_connections"]


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

    def _get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        configurable = config["configurable"]
        record = self.store.get(
            str(configurable["thread_id"]),
            configurable.get("checkpoint_ns", ""),
            get_checkpoint_id(config),
        )
        return None if record is None else self._tuple(record)

    def _list(
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

    def _put(
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

    def _put_writes(
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

    def _delete_thread(self, thread_id: str) -> None:
        self.store.delete_thread(str(thread_id))

    def _delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self.store.delete_for_runs([str(r) for r in run_ids])

    def _copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self.store.copy_thread(str(source_thread_id), str(target_thread_id))

    def _prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
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

    # -- the public methods: every database call on the saver's worker thread -----------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._call(self._get_tuple, config, read=True)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        # The generator is advanced on the worker thread a page at a time, so its
        # queries run there too and a long listing is never loaded whole.
        pages = self._list(config, filter=filter, before=before, limit=limit)
        while True:
            page = self._call(_next_page, pages, read=True)
            yield from page
            if len(page) < PAGE:
                return

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self._call(self._put, config, checkpoint, metadata, new_versions)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._call(self._put_writes, config, writes, task_id, task_path)

    def delete_thread(self, thread_id: str) -> None:
        self._call(self._delete_thread, thread_id)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._call(self._delete_for_runs, run_ids)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._call(self._copy_thread, source_thread_id, target_thread_id)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self._call(self._prune, thread_ids, strategy=strategy)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self._acall(self._get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        pages = self._list(config, filter=filter, before=before, limit=limit)
        while True:
            page = await self._acall(_next_page, pages)
            for item in page:
                yield item
            if len(page) < PAGE:
                return

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await self._acall(self._put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await self._acall(self._put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await self._acall(self._delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await self._acall(self._delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self._acall(self._copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await self._acall(self._prune, thread_ids, strategy=strategy)

    def _call(self, fn: Callable[..., T], *args: Any, read: bool = False, **kwargs: Any) -> T:
        # Reads from the main thread use its own (long-lived, Django-managed)
        # connection: no handoff on get_state and the first read of invoke.
        # Writes always go to the worker, so they never join a caller's
        # transaction, whichever thread calls.
        if getattr(_local, "worker", False) or (
            read and threading.current_thread() is threading.main_thread()
        ):
            return fn(*args, **kwargs)
        return _worker(self.using).submit(fn, *args, **kwargs).result()

    async def _acall(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        future = _worker(self.using).submit(fn, *args, **kwargs)
        return await asyncio.wrap_future(future)

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


#: Checkpoints ``list``/``alist`` fetch per trip to the worker thread.
PAGE = 50

T = TypeVar("T")

_local = threading.local()
_workers: dict[str, ThreadPoolExecutor] = {}
_workers_lock = threading.Lock()


def _mark_worker() -> None:
    _local.worker = True


def _worker(using: str) -> ThreadPoolExecutor:
    """The one thread (per process and database alias) that runs the savers' queries.

    LangGraph calls a checkpointer from short-lived executor threads — a new
    set for every ``invoke`` — and Django opens one connection per thread, never
    closed by those threads: hundreds of connections per few hundred invocations
    (measured: 507 for 200 invokes). Running every call on one long-lived thread
    keeps one persistent connection per alias (``close_connections`` closes it).
    """
    worker = _workers.get(using)
    if worker is None:
        with _workers_lock:
            worker = _workers.get(using)
            if worker is None:
                worker = _workers[using] = ThreadPoolExecutor(
                    1, thread_name_prefix=f"agentstore-langgraph-{using}", initializer=_mark_worker
                )
    return worker


def close_connections(using: str = DEFAULT_DB_ALIAS) -> None:
    """Close the database connection of the savers' worker thread for ``using``.

    The next call opens a new one. Call it where you would close Django's
    connections: before forking, at shutdown, at the end of a test.
    """
    worker = _workers.get(using)
    if worker is not None:
        # Resolved on the worker: Django's connections are per thread.
        worker.submit(lambda: connections[using].close()).result()


def _next_page(iterator: Iterator[CheckpointTuple]) -> list[CheckpointTuple]:
    return list(itertools.islice(iterator, PAGE))
