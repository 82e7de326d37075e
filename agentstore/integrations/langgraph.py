"""A LangGraph checkpointer that keeps graph threads in the project's database.

    from agentstore.integrations.langgraph import AgentStoreSaver

    graph = builder.compile(checkpointer=AgentStoreSaver())
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
as given. agentstore itself pickles nothing. Small channel values (``None``,
booleans, numbers, short strings) ride in the checkpoint's own row, as
``PostgresSaver`` keeps primitives in its; larger ones are stored once per channel
version, so a long conversation does not rewrite unchanged channels at every step.

The savers of a process share one database connection per alias (see
:class:`agentstore.db.SharedConnection` for why), used by the calling thread for each call:
sync methods run on the caller's thread, and each async method runs the same
body once on a thread of the event loop's executor. The saver's writes never
join a transaction the caller has open. It passes LangGraph's conformance suite
(base and extended capabilities) on SQLite and PostgreSQL —
docs/integrations/langgraph.md has the details.

Every method checks its input by the rules the API applies (``agentstore.validation``)
before anything is read or written, and raises agentstore's ``ValidationError`` (a
``ValueError``; LangGraph defines no error type for a checkpointer's bad input):
a ``thread_id`` is a session id and follows the rule of every session id
(``require_name``: it is the session's id in the admin's and the API's URLs and
in export file names); a ``checkpoint_ns`` is text a column keeps
(``require_storable_text``: ``""`` is the root graph, and node names may hold
``/``); checkpoint, task and run ids are text within their columns' sizes;
metadata and channel versions are JSON values (``require_json_value``: depth,
finite numbers, no NUL or lone surrogate). What the database still refuses
reaches the caller as agentstore's errors, never raw (:mod:`.errors`).
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import itertools
import os
import random
import threading
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from datetime import datetime
from functools import partial
from typing import Any, ParamSpec, TypeVar

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
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.serde.types import TASKS

from agentstore import exceptions
from agentstore.db import SharedConnection
from agentstore.db.thread import async_twin
from agentstore.integrations.errors import database_errors, mapped
from agentstore.stores.checkpoints import CheckpointStore, pack_value
from agentstore.types.checkpoints import ChannelBlob, CheckpointRecord, PendingWriteRow
from agentstore.types.frozen import positional_builder, require_fields
from agentstore.validation import require_json_value, require_name, require_storable_text

__all__ = ["AgentStoreSaver", "close_connections"]


P = ParamSpec("P")
R = TypeVar("R")


def _settings(using: str) -> dict[str, Any]:
    """The database settings of ``using``, with prepared statements on PostgreSQL.

    Django binds parameters on the client and prepares nothing by default (so
    that transaction-mode poolers keep working), which makes PostgreSQL plan
    every statement afresh: planning was most of ``get_tuple``'s time (0.4 ms a
    statement, docs/integrations/langgraph.md, "Performance"). The savers send
    the same few statements thousands of times, so their connection binds on
    the server and prepares them, as ``PostgresSaver`` does — unless the
    database's ``OPTIONS`` set ``server_side_binding`` or ``prepare_threshold``
    themselves, which win (decision record 0010).
    """
    settings = connections.settings[using]
    options = dict(settings.get("OPTIONS") or {})
    if "postgresql" in settings["ENGINE"] and not (
        {"server_side_binding", "prepare_threshold"} & options.keys()
    ):
        # Imported here: it needs psycopg, which SQLite projects lack.
        from django.db.backends.postgresql.psycopg_any import is_psycopg3

        if is_psycopg3:
            options.update(server_side_binding=True, prepare_threshold=0)
    return {**settings, "OPTIONS": options}


_shared_connections: dict[str, SharedConnection] = {}
# This process's id: os.getpid() is a system call, and _shared runs at every
# saver call (decision record 0069). A forked child sets its own.
_pid = os.getpid()


def _forked() -> None:
    global _pid
    _pid = os.getpid()


os.register_at_fork(after_in_child=_forked)
_shared_lock = threading.Lock()


def _shared(using: str) -> SharedConnection:
    """The savers' connection for ``using`` in this process (created on first use).

    One :class:`~agentstore.db.SharedConnection` per process and alias, lent
    to the calling thread (LangGraph's executor threads are new at every
    ``invoke``; a connection each would never be closed).
    """
    shared = _shared_connections.get(using)
    # A forked child must not talk over its parent's socket or file handle.
    if shared is None or shared.pid != _pid:
        with _shared_lock:
            shared = _shared_connections.get(using)
            if shared is None or shared.pid != os.getpid():
                shared = _shared_connections[using] = SharedConnection(using, settings=_settings)
    return shared


#: Column sizes of what the saver stores (agentstore/models/checkpoints.py).
_CHECKPOINT_ID_CHARS = 64
_ID_CHARS = 255
# Thread ids and namespaces already checked, apart (the root namespace "" is
# valid, the thread id "" is not): LangGraph passes the same few at every call,
# and require_name walks the characters. Bounded, cleared when full.
_CHECKED_THREADS: set[str] = set()
_CHECKED_NAMESPACES: set[str] = set()
_CHECKED_KEPT = 4096


def _place(config: Any) -> tuple[str, str]:
    """``(thread_id, checkpoint_ns)`` of a config, checked (``ValidationError`` otherwise)."""
    configurable = config.get("configurable") if isinstance(config, dict) else None
    if not isinstance(configurable, dict):
        raise exceptions.ValidationError(
            "config must be a dict with a 'configurable' dict", field="config"
        )
    thread_id = configurable.get("thread_id")
    if thread_id is None:
        raise exceptions.ValidationError(
            "config['configurable']['thread_id'] is required", field="thread_id"
        )
    return _thread_id(thread_id), _namespace(configurable.get("checkpoint_ns", ""))


def _thread_id(thread_id: Any) -> str:
    """A thread id as the session id it is (``require_name``); ints and UUIDs as text."""
    if type(thread_id) is str:
        text = thread_id
    elif isinstance(thread_id, int | uuid.UUID) and not isinstance(thread_id, bool):
        text = str(thread_id)
    else:
        raise exceptions.ValidationError(
            f"thread_id must be a string, an integer or a UUID, not {type(thread_id).__name__}",
            field="thread_id",
        )
    if text not in _CHECKED_THREADS:
        require_name(text, "thread_id")
        _remember(_CHECKED_THREADS, text)
    return text


def _namespace(checkpoint_ns: Any) -> str:
    """A checkpoint namespace: text a column keeps (``require_storable_text``), ``""`` the root."""
    if checkpoint_ns is None:
        return ""
    if type(checkpoint_ns) is not str or checkpoint_ns not in _CHECKED_NAMESPACES:
        require_storable_text(checkpoint_ns, "checkpoint_ns")
        _remember(_CHECKED_NAMESPACES, checkpoint_ns)
    return checkpoint_ns  # type: ignore[no-any-return]


def _remember(checked: set[str], value: str) -> None:
    if len(checked) >= _CHECKED_KEPT:
        checked.clear()
    checked.add(value)


def _checkpoint_id(value: Any, field: str) -> str:
    return require_storable_text(value, field, _CHECKPOINT_ID_CHARS, blank=False)


def _optional_checkpoint_id(value: Any, field: str) -> str | None:
    return None if value is None or value == "" else _checkpoint_id(value, field)


class AgentStoreSaver(BaseCheckpointSaver[str]):
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
        # The store's hot paths (put, put_writes, get) work on the savers'
        # shared connection themselves; the rest of the saver borrows it.
        self.store = CheckpointStore(using=using, clock=clock, shared=partial(_shared, using))
        self.owner_id: int | None = getattr(owner, "pk", owner)

    # Every method below is the one body of a sync/async pair. The sync method
    # runs on the caller's thread with the savers' shared connection (_shared);
    # its async twin (``async_twin``, at the end) runs it once on a thread of the
    # event loop's executor.

    # -- reads ------------------------------------------------------------------------

    @mapped
    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        thread_id, checkpoint_ns = _place(config)
        record = self.store.get(
            thread_id,
            checkpoint_ns,
            _optional_checkpoint_id(get_checkpoint_id(config), "checkpoint_id"),
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
        for page in self._pages(config, filter, before, limit):
            yield from page

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        pages = self._pages(config, filter, before, limit)
        while (page := await asyncio.to_thread(next, pages, None)) is not None:
            for item in page:
                yield item

    def _pages(
        self,
        config: RunnableConfig | None,
        filter: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> Iterator[builtins.list[CheckpointTuple]]:
        """``list``'s checkpoints a page at a time, each read under the shared connection.

        The connection is released between pages: a long listing is never
        loaded whole, and a caller working through it does not hold the
        connection (``alist`` hops once a page).
        """
        configurable = (config or {}).get("configurable", {})
        if not isinstance(configurable, dict):
            raise exceptions.ValidationError(
                "config['configurable'] must be a dict", field="config"
            )
        thread_id = configurable.get("thread_id")
        namespace = configurable.get("checkpoint_ns")
        if filter is not None and not isinstance(filter, dict):
            raise exceptions.ValidationError("filter must be a dict", field="filter")
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool)):
            raise exceptions.ValidationError("limit must be an integer or None", field="limit")
        # (A generator function: its own body sends nothing until iterated.)
        records = self.store.list(
            None if thread_id is None else _thread_id(thread_id),
            None if namespace is None else _namespace(namespace),
            checkpoint_id=_optional_checkpoint_id(
                configurable.get("checkpoint_id"), "checkpoint_id"
            ),
            before=_optional_checkpoint_id(get_checkpoint_id(before), "before") if before else None,
            limit=limit,
            metadata=None if filter is None else require_json_value(filter, "filter"),
        )
        while True:
            with database_errors(), _shared(self.using).borrowed():
                page = [self._tuple(record) for record in itertools.islice(records, PAGE)]
            if page:
                yield page
            if len(page) < PAGE:
                return

    # -- writes -----------------------------------------------------------------------

    @mapped
    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        thread_id, checkpoint_ns = _place(config)
        configurable = config["configurable"]
        checkpoint_id = _checkpoint_id(checkpoint.get("id"), "checkpoint.id")
        parent_id = _optional_checkpoint_id(configurable.get("checkpoint_id"), "checkpoint_id")
        # Serialized before the connection is taken: the lock covers SQL only.
        # Small values ride in the checkpoint's row, every one the checkpoint
        # reads, and so does an "empty" mark for every channel it has a
        # version of but no value (a checkpoint's channel_values is the whole
        # state): reading it looks up only the larger values, stored once per
        # new version in the blob table (decision record 0067).
        values = checkpoint["channel_values"]
        versions = checkpoint["channel_versions"]
        serde = self.serde
        dumps = serde.dumps_typed
        # Packed pieces already made for (channel, type, value), when the
        # serializer's bytes depend on the value alone (_PIECES).
        memo = _PIECES if type(serde) is JsonPlusSerializer else None
        inline: builtins.list[bytes] = []
        blobs: builtins.list[ChannelBlob] = []
        for channel, value in values.items():
            kind = type(value)
            # Small: None, booleans, numbers and strings up to INLINE_CHARS —
            # what PostgresSaver keeps in its checkpoint row (it keeps strings
            # of any length). Rewritten with every checkpoint, so only what is
            # cheap to rewrite; exact types, so a subclass with its own
            # serialization takes the blob table.
            if (
                value is None
                or kind is int
                or kind is bool
                or (kind is str and len(value) <= INLINE_CHARS)
            ):
                key = (channel, kind, value)
                piece = None if memo is None else memo.get(key)
                if piece is None:
                    piece = pack_value(channel, *dumps(value))
                    if memo is not None:
                        if len(memo) >= _PIECES_KEPT:
                            memo.clear()
                        memo[key] = piece
                inline.append(piece)
            elif kind is float:
                # Never remembered: 0.0 and -0.0 are one dict key, two encodings.
                inline.append(pack_value(channel, *dumps(value)))
            elif channel in new_versions:
                type_, blob = dumps(value)
                version = str(new_versions[channel])
                if len(version) > _ID_CHARS:
                    raise exceptions.ValidationError(
                        f"the version of channel {channel!r} is longer than {_ID_CHARS} characters",
                        field="new_versions",
                    )
                blobs.append(ChannelBlob(channel=channel, version=version, type=type_, blob=blob))
        for channel in versions:
            if channel not in values:
                piece = _EMPTY.get(channel)
                if piece is None:
                    if len(_EMPTY) >= _PIECES_KEPT:
                        _EMPTY.clear()
                    piece = _EMPTY[channel] = pack_value(channel, "empty", None)
                inline.append(piece)
        # Without its values and versions: the versions are stored as JSON
        # (Checkpoint.channel_versions) and put back from there on reading.
        type_, data = dumps({**checkpoint, "channel_values": {}, "channel_versions": {}})
        metadata = get_serializable_checkpoint_metadata(config, metadata)
        # The API's rules for the two JSON columns, and the run id's column size.
        require_json_value(metadata, "metadata")
        require_json_value(versions, "checkpoint.channel_versions")
        run_id = metadata.get("run_id")
        if isinstance(run_id, str):
            require_storable_text(run_id, "metadata.run_id", _ID_CHARS)
        self.store.put(
            thread_id,
            checkpoint_ns,
            checkpoint_id,
            parent_id,
            type_,
            data,
            metadata,
            versions,
            blobs,
            inline=b"".join(inline),
            owner_id=self.owner_id,
        )
        return {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": checkpoint_ns,
                "checkpoint_id": checkpoint_id,
            }
        }

    @mapped
    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        thread_id, checkpoint_ns = _place(config)
        checkpoint_id = _checkpoint_id(config["configurable"].get("checkpoint_id"), "checkpoint_id")
        require_storable_text(task_id, "task_id", _ID_CHARS, blank=False)
        require_storable_text(task_path, "task_path")
        dumps = self.serde.dumps_typed
        index = WRITES_IDX_MAP.get
        rows: builtins.list[PendingWriteRow] = []
        # Special channels (error, interrupt, resume…) keep the latest value; a
        # regular write is stored once (a retried task changes nothing). One
        # loop for both: a comprehension and all()'s generator are frames.
        special = True
        for idx, (channel, value) in enumerate(writes):
            require_storable_text(channel, "writes[].channel")
            # Positional (types/frozen.py): task_id, task_path, idx, channel, type, blob.
            rows.append(_new_write(task_id, task_path, index(channel, idx), channel, *dumps(value)))
            special = special and channel in WRITES_IDX_MAP
        self.store.put_writes(
            thread_id,
            checkpoint_ns,
            checkpoint_id,
            rows,
            replace=special,
            owner_id=self.owner_id,
        )

    @mapped
    def delete_thread(self, thread_id: str) -> None:
        thread_id = _thread_id(thread_id)
        with _shared(self.using).borrowed(), contextlib.suppress(exceptions.NoSession):
            # LangGraph's contract: an unknown thread is nothing to delete.
            self.store.delete_thread(thread_id)

    @mapped
    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        ids = [
            require_storable_text(str(r), f"run_ids[{n}]", _ID_CHARS)
            for n, r in enumerate(_listed(run_ids, "run_ids"))
        ]
        with _shared(self.using).borrowed():
            self.store.delete_for_runs(ids)

    @mapped
    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        source, target = _thread_id(source_thread_id), _thread_id(target_thread_id)
        with _shared(self.using).borrowed():
            self.store.copy_thread(source, target)

    @mapped
    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        ids = [_thread_id(t) for t in _listed(thread_ids, "thread_ids")]
        with _shared(self.using).borrowed():
            self.store.prune(ids, strategy=strategy)

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

    # The async twins: the bodies above, each run once on a thread.
    aget_tuple = async_twin(get_tuple)
    aput = async_twin(put)
    aput_writes = async_twin(put_writes)
    adelete_thread = async_twin(delete_thread)
    adelete_for_runs = async_twin(delete_for_runs)
    acopy_thread = async_twin(copy_thread)
    aprune = async_twin(prune)

    # -- rows to LangGraph ----------------------------------------------------------------

    def _tuple(self, record: CheckpointRecord) -> CheckpointTuple:
        serde = self.serde
        loads = serde.loads_typed
        checkpoint: Checkpoint = loads((record.type, record.checkpoint))
        # Small immutable values already read, by their (type, bytes) (_VALUES).
        memo = _VALUES if type(serde) is JsonPlusSerializer else None
        values = {}
        for blob in record.blobs:
            if blob.type == "empty" or blob.blob is None:
                continue
            typed = (blob.type, blob.blob)
            value = _UNREAD if memo is None else memo.get(typed, _UNREAD)
            if value is _UNREAD:
                value = loads(typed)
                if memo is not None and type(value) in _IMMUTABLE and len(typed[1]) <= 512:
                    if len(memo) >= _PIECES_KEPT:
                        memo.clear()
                    memo[typed] = value
            values[blob.channel] = value
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
            pending_writes=[(w.task_id, w.channel, loads((w.type, w.blob))) for w in record.writes]
            if record.writes
            else [],
        )

    def _migrate_pending_sends(self, record: CheckpointRecord, checkpoint: Checkpoint) -> None:
        """Checkpoints before format v4 kept pending sends as writes of their parent."""
        assert record.parent_checkpoint_id is not None
        with _shared(self.using).borrowed():
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


def _listed(values: Any, field: str) -> builtins.list[Any]:
    """``values`` as a list; a string (one id, not a list of characters) is refused."""
    if isinstance(values, str | bytes) or not isinstance(values, Sequence | set | frozenset):
        raise exceptions.ValidationError(f"{field} must be a list of ids", field=field)
    return builtins.list(values)


#: Checkpoints ``list``/``alist`` read per page (per hop, for ``alist``).
PAGE = 50

require_fields(PendingWriteRow, ("task_id", "task_path", "idx", "channel", "type", "blob"))
_new_write = positional_builder(PendingWriteRow)

#: The longest string kept in the checkpoint's row rather than the blob table.
INLINE_CHARS = 256

# A checkpoint's small values, packed (stores/checkpoints.pack_value), by
# (channel, exact type, value): the same few values (None, a counter, a
# flag, a short string) are in checkpoint after checkpoint, and serializing
# and packing each one again was most of what ``put`` did in Python
# (decision record 0067). Only for LangGraph's own JsonPlusSerializer, whose bytes for
# these types depend on the value alone; another serde (an encrypting one
# draws a fresh nonce per call) is asked every time. Floats are never kept
# (0.0 and -0.0 are one key, two encodings). Bounded: cleared when full.
_PIECES: dict[tuple[str, type, Any], bytes] = {}
# The "empty" mark of a channel with a version but no value, packed, by channel.
_EMPTY: dict[str, bytes] = {}
_PIECES_KEPT = 4096
# The other way, for ``get_tuple``: values read back by their stored (type,
# bytes), kept only when immutable (None, booleans, numbers, strings — a
# caller may change a list it is handed) and small; JsonPlusSerializer only.
_VALUES: dict[tuple[str, bytes], Any] = {}
_IMMUTABLE = frozenset({type(None), bool, int, float, str})
_UNREAD = object()


def close_connections(using: str = DEFAULT_DB_ALIAS) -> None:
    """Close the savers' shared database connection for ``using``.

    The next call opens a new one. Call it where you would close Django's
    connections: at shutdown, at the end of a test. (A forked child opens its
    own on its first call, whatever the parent had open.)
    """
    shared = _shared_connections.get(using)
    if shared is not None and shared.pid == os.getpid():
        shared.close()
