"""CheckpointStore: LangGraph threads, checkpoints, channel blobs and pending writes.

    from agentstore.stores.checkpoints import CheckpointStore

    store = CheckpointStore()                                   # using="default", clock=None
    store.put("thread-1", "", checkpoint_id, None, "msgpack", data, {"step": 0},
              {"messages": "…01.0.42"}, [ChannelBlob(...)])
    record = store.get("thread-1", "")                          # the latest, or None
    for record in store.list("thread-1", "", before=cid, limit=20): ...

This is the storage half of ``agentstore.integrations.langgraph.AgentStoreSaver``:
rows in, rows out, every value an opaque ``(type, bytes)`` pair, so it needs no
LangGraph import and the admin, the API and ``manage.py agentstore`` read and
delete threads with it whether LangGraph is installed or not.

A thread is a :class:`~agentstore.models.Session` of kind ``graph`` whose id is the
``thread_id``. :func:`touch_thread` creates it on the first ``put`` and moves its
``updated_at`` on later ones, :func:`delete_thread_rows` removes it with every row
it owns; both through :class:`~agentstore.stores.sessions.SessionStore`, the one
writer of session rows.

Cost (docs/integrations/langgraph.md, "Performance"): ``put`` is one or two
statements in one short write transaction (the checkpoint row, which carries the
small values inline, and the new larger blobs), ``get`` of the latest checkpoint
one statement (``ORDER BY checkpoint_id DESC LIMIT 1`` on the unique
``(session, checkpoint_ns, checkpoint_id)`` index, joined with its writes) plus
one of exact ``(channel, version)`` lookups for values not inline — neither
reads the thread's history, so both cost the same at 10 or 100,000 checkpoints.
``list`` pages with ``checkpoint_id < before`` and ``LIMIT`` in SQL.
"""

from __future__ import annotations

import builtins
import contextlib
import functools
import itertools
import json
import struct
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from functools import partial
from typing import Any, Concatenate, ParamSpec, TypeVar

from django.db import DEFAULT_DB_ALIAS, IntegrityError, connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Max, Q
from django.db.models.fields.json import KeyTransform
from django.utils import timezone

from agentstore import db, sql
from agentstore.db import SharedConnection, SqlCursor
from agentstore.exceptions import NoSession, ValidationError
from agentstore.formats.json_encoder import make_encoder
from agentstore.models import Checkpoint, CheckpointBlob, CheckpointWrite, Session
from agentstore.models.sessions import SessionKind
from agentstore.sql import checkpoints as checkpoint_sql
from agentstore.stores.base import false, lookup, none, nothing, zero
from agentstore.stores.sessions import SessionStore
from agentstore.types.checkpoints import ChannelBlob, CheckpointRecord, PendingWriteRow
from agentstore.types.frozen import positional_builder, require_fields

__all__ = [
    "PRUNE_STRATEGIES",
    "CheckpointStore",
    "delete_thread_rows",
    "pack_inline",
    "pack_value",
    "pack_values",
    "touch_thread",
    "unpack_inline",
]

GRAPH = SessionKind.GRAPH.value

#: What ``prune`` accepts (LangGraph's ``BaseCheckpointSaver.prune`` strategies).
PRUNE_STRATEGIES = ("keep_latest", "delete")

#: Seconds between two moves of a thread session's ``updated_at`` by ``put``.
TOUCH_EVERY = 1.0
# (database alias, thread id) -> when this process last touched the thread.
_touched: dict[tuple[str, str], float] = {}

#: The most pending writes ``put_writes`` sends as one multi-row INSERT on SQLite
#: (10 parameters a row, well under SQLite's variable limit); more go by executemany.
_ONE_STATEMENT_ROWS = 50

#: Rows ``list`` reads per SQL page when a metadata filter must be checked in Python.
LIST_PAGE = 100

# Metadata keys a DeltaChannel leaves behind: keep_latest would cut the write
# history such a channel is rebuilt from, so those threads are refused (as
# LangGraph's PostgresSaver refuses them).
_DELTA_KEYS = ("counters_since_delta_snapshot", "delta_writes_versioned")


def touch_thread(
    cursor: SqlCursor, thread_id: str, now: datetime, *, owner_id: int | None = None
) -> None:
    """Create the ``graph`` session of ``thread_id``, or move its ``updated_at`` to ``now``.

    Call inside the write transaction of the rows being added. The row is
    written by :meth:`SessionStore.create_or_touch` (the one owner of session
    rows, docs/development.md): one statement either way, the owner set only on
    creation, and :class:`~agentstore.exceptions.WrongSessionKind` when the id
    belongs to a session of another kind, so a checkpoint is never grafted onto
    a tree or loop session.
    """
    if not thread_id:
        raise ValidationError("thread_id must not be empty", field="thread_id")
    SessionStore(using=cursor.db.alias).create_or_touch(
        cursor, GRAPH, thread_id, stamp=now, owner_id=owner_id
    )


def delete_thread_rows(thread_id: str, *, using: str = DEFAULT_DB_ALIAS) -> None:
    """Delete a thread with its checkpoints, blobs and writes (``NoSession`` if there is none).

    ``SessionStore.delete`` owns session deletion: the checkpoint tables cascade
    from the session row (Django deletes those rows with one DELETE per table,
    without loading them: they have no dependants). An id of another kind is
    ``WrongSessionKind``.
    """
    SessionStore(using=using).delete(thread_id, GRAPH)


P = ParamSpec("P")
R = TypeVar("R")


def _on_connection(
    method: Callable[Concatenate[CheckpointStore, BaseDatabaseWrapper, P], R],
) -> Callable[Concatenate[CheckpointStore, P], R]:
    """A hot path run with its connection object: the store's shared one, or the thread's.

    With a :class:`~agentstore.db.SharedConnection` the method runs holding
    its lock, on that object directly — no ``connections[alias]`` and no
    lending on the way (decision record 0068); what must go through
    ``connections[alias]`` (the thread's touch, the ORM) borrows it
    (:meth:`CheckpointStore._lent`).
    """

    @functools.wraps(method)
    def run(self: CheckpointStore, /, *args: P.args, **kwargs: P.kwargs) -> R:
        if self.shared is None:
            return method(self, connections[self.using], *args, **kwargs)
        shared = self.shared()
        with shared.lock:
            return method(self, shared.ready(), *args, **kwargs)

    return run


class CheckpointStore:
    """LangGraph checkpoint rows in the project's database (see the module docstring).

    ``shared`` (the LangGraph savers') gives the
    :class:`~agentstore.db.SharedConnection` the store works on from any
    thread; without it, the calling thread's ``connections[using]``.
    """

    def __init__(
        self,
        *,
        using: str = DEFAULT_DB_ALIAS,
        clock: Callable[[], datetime] | None = None,
        shared: Callable[[], SharedConnection] | None = None,
    ) -> None:
        self.using = using
        self.clock = clock or timezone.now
        self.shared = shared

    def _lent(self) -> contextlib.AbstractContextManager[Any]:
        """Make the store's connection this thread's ``connections[using]`` for a block."""
        return contextlib.nullcontext() if self.shared is None else self.shared().borrowed()

    # -- writes -----------------------------------------------------------------------

    @_on_connection
    def put(
        self,
        connection: BaseDatabaseWrapper,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        parent_checkpoint_id: str | None,
        type: str,
        checkpoint: bytes,
        metadata: Mapping[str, Any],
        channel_versions: Mapping[str, Any],
        blobs: Sequence[ChannelBlob] = (),
        *,
        inline: Sequence[ChannelBlob] | bytes = (),
        owner_id: int | None = None,
    ) -> None:
        """Store one checkpoint and the channel blobs new in it (one transaction).

        A blob whose ``(channel, version)`` is already stored is kept as is (a
        version names one value); a checkpoint stored again under its id replaces
        its data and metadata, as LangGraph's own savers do. ``inline`` values
        are kept in the checkpoint's own row instead (``Checkpoint.inline``):
        the caller passes there every small value the checkpoint reads, new or
        not, and those channels are never looked up in the blob table when this
        checkpoint is read (decision record 0067) — as blobs, or already packed by
        :func:`pack_values`.
        """
        if not checkpoint_id:
            raise ValidationError("checkpoint_id must not be empty", field="checkpoint_id")
        now = self.clock()
        run_id = metadata.get("run_id")
        sqlite = connection.vendor == "sqlite"
        # Positional, in the model's column order (checked at import by
        # sql.require_columns below), without sql.row's keyword mapping: this
        # runs three times an invoke (decision record 0036).
        params = [
            thread_id,
            checkpoint_ns,
            checkpoint_id,
            parent_checkpoint_id,
            type,
            checkpoint,
            # JSON text on SQLite without _json_param's call (two a put).
            _encode_json(metadata if metadata.__class__ is dict else dict(metadata))
            if sqlite
            else _json_param(metadata, connection),
            _encode_json(
                channel_versions if channel_versions.__class__ is dict else dict(channel_versions)
            )
            if sqlite
            else _json_param(channel_versions, connection),
            run_id if isinstance(run_id, str) else "",
            inline if isinstance(inline, bytes) else pack_inline(inline),
            sql.adapt_datetime(connection, now),
        ]
        # (A comprehension is a frame of its own: built only when there are blobs.)
        blob_params = (
            [[thread_id, checkpoint_ns, b.channel, str(b.version), b.type, b.blob] for b in blobs]
            if blobs
            else []
        )

        if not sqlite:
            # PostgreSQL: the blobs and the checkpoint's row in one statement.
            def write(cursor: SqlCursor, touch: bool) -> None:
                if touch:
                    touch_thread(cursor, thread_id, now, owner_id=owner_id)
                cursor.execute(
                    checkpoint_sql.put(len(blob_params)),
                    [*itertools.chain(*blob_params), *params],
                )

        else:

            def write(cursor: SqlCursor, touch: bool) -> None:
                if touch:
                    touch_thread(cursor, thread_id, now, owner_id=owner_id)
                if blob_params:
                    cursor.executemany(checkpoint_sql.INSERT_BLOB, blob_params)
                cursor.execute(checkpoint_sql.UPSERT_CHECKPOINT, params)

        # The thread's updated_at moves at most once a second per process: the
        # UPDATE rewrites four session indexes, and listing or pruning by age
        # needs no finer clock. The foreign key still proves the thread exists
        # (and a thread deleted meanwhile is re-created, as on a first put).
        place = (self.using, thread_id)
        touch = _touched.get(place, -TOUCH_EVERY) <= time.monotonic() - TOUCH_EVERY
        # Without new blobs (most puts) the checkpoint's row is the one statement.
        self._commit(connection, write, single=not (sqlite and blob_params), touch=touch)
        if touch:
            if len(_touched) > 10_000:
                _touched.clear()
            _touched[place] = time.monotonic()

    @_on_connection
    def put_writes(
        self,
        connection: BaseDatabaseWrapper,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        writes: Sequence[PendingWriteRow],
        *,
        replace: bool = False,
        owner_id: int | None = None,
    ) -> None:
        """Store a task's pending writes after a checkpoint.

        ``replace=False`` keeps a write already stored at the same
        ``(task_id, idx)`` (a retried task re-saving its outputs changes nothing);
        ``replace=True`` overwrites it (LangGraph's special channels — error,
        interrupt, resume — hold the task's latest state).
        """
        if not writes:
            return
        if replace:
            # One row per (task_id, idx), the last one: a single INSERT … DO
            # UPDATE may not change a row twice (executemany would keep the last).
            writes = builtins.list({(w.task_id, w.idx): w for w in writes}.values())
        # Positional, in the model's column order (sql.require_columns below;
        # decision record 0036).
        rows: builtins.list[builtins.list[Any]] = [
            [
                thread_id,
                checkpoint_ns,
                checkpoint_id,
                w.task_id,
                w.task_path,
                w.idx,
                w.channel,
                w.type,
                w.blob,
            ]
            for w in writes
        ]
        statement = checkpoint_sql.UPSERT_WRITE if replace else checkpoint_sql.INSERT_WRITE

        # One multi-row INSERT — a single statement, its own transaction — unless
        # SQLite's variable limit needs executemany (then one transaction).
        single = connection.vendor == "postgresql" or len(rows) <= _ONE_STATEMENT_ROWS

        def write(cursor: SqlCursor, touch: bool) -> None:
            if touch:
                # The clock is read only here: nearly every put_writes never touches.
                touch_thread(cursor, thread_id, self.clock(), owner_id=owner_id)
            if single:
                cursor.execute(checkpoint_sql.many(statement, len(rows)), [*itertools.chain(*rows)])
            else:
                cursor.executemany(statement, rows)

        # Writes follow their checkpoint's put, which touched the thread; a run
        # saves a step's writes in the background, so they can commit before
        # the checkpoint that creates the thread's session: then _commit does.
        self._commit(connection, write, single=single, touch=False)

    def _commit(
        self,
        connection: BaseDatabaseWrapper,
        write: Callable[[SqlCursor, bool], None],
        *,
        single: bool,
        touch: bool,
    ) -> None:
        """Run ``write(cursor, touch)`` as one write transaction, touching the thread if it must.

        ``single``: without the touch (nearly every call) ``write`` sends one
        statement, which autocommit makes its own transaction — on PostgreSQL
        one round trip where ``BEGIN`` … ``COMMIT`` take three. When the
        thread's session is missing (a first write, or the thread was deleted
        meanwhile), the foreign key fails and the write runs again with the touch.
        """
        try:
            self._write(connection, lambda cursor: write(cursor, touch), single and not touch)
        except IntegrityError:
            if touch:
                raise
            self._write(connection, lambda cursor: write(cursor, True), False)

    def _write(
        self, connection: BaseDatabaseWrapper, body: Callable[[SqlCursor], None], single: bool
    ) -> None:
        """``db.write`` on the store's connection object (lent where Django must open it)."""
        if single or connection.vendor == "sqlite":
            db.write(body, using=self.using, connection=connection, single=single)
        else:
            with self._lent():
                db.write(body, using=self.using, connection=connection)

    def delete_thread(self, thread_id: str) -> None:
        """Delete a thread and everything stored for it (``delete_thread_rows``).

        ``NoSession`` when there is no such thread, as every store's delete.
        """
        delete_thread_rows(thread_id, using=self.using)

    @lookup("run_ids", missing=zero)
    def delete_for_runs(self, run_ids: Sequence[str]) -> int:
        """Delete the checkpoints (and their writes) that the given runs saved.

        Returns how many checkpoints went. Blobs stay until the thread is pruned or
        deleted: other checkpoints may read the same versions.
        """
        ids = [r for r in run_ids if r]
        if not ids:
            return 0

        def delete(cursor: SqlCursor) -> int:
            doomed = list(
                Checkpoint.objects.using(self.using)
                .filter(run_id__in=ids)
                .values_list("session_id", "checkpoint_ns", "checkpoint_id")
            )
            by_place: dict[tuple[str, str], list[str]] = defaultdict(list)
            for session_id, ns, cid in doomed:
                by_place[(session_id, ns)].append(cid)
            for (session_id, ns), cids in by_place.items():
                CheckpointWrite.objects.using(self.using).filter(
                    session_id=session_id, checkpoint_ns=ns, checkpoint_id__in=cids
                ).delete()
            Checkpoint.objects.using(self.using).filter(run_id__in=ids).delete()
            return len(doomed)

        return db.write(delete, using=self.using, orm=True)

    @lookup("source_thread_id", missing=false)
    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> bool:
        """Copy every checkpoint, blob and write of a thread to another thread.

        Ids, parents and values are kept, so the copy is the same tree. The target's
        session is created (owned like the source) if needed; rows it already has
        under the same keys are kept. Returns ``False`` (and creates nothing) when
        the source thread has no checkpoints.
        """
        now = self.clock()

        def copy(cursor: SqlCursor) -> bool:
            source = (
                Session.objects.using(self.using)
                .filter(pk=source_thread_id, kind=GRAPH)
                .values_list("owner_id", flat=True)
            )
            if (
                not source.exists()
                or not Checkpoint.objects.using(self.using)
                .filter(session_id=source_thread_id)
                .exists()
            ):
                return False
            touch_thread(cursor, target_thread_id, now, owner_id=source.first())
            for statement in checkpoint_sql.COPY_THREAD:
                cursor.execute(statement, [target_thread_id, source_thread_id])
            return True

        return db.write(copy, using=self.using, orm=True)

    @lookup("thread_ids", missing=none)
    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Prune threads: ``"keep_latest"`` keeps the latest checkpoint of each namespace.

        ``"delete"`` deletes the threads. ``"keep_latest"`` runs one transaction per
        thread: the kept checkpoints' writes stay, their parent links are cleared
        (the parents are gone), blobs no kept checkpoint reads are freed, and the
        namespace of a subgraph call started from a deleted root checkpoint goes
        whole. Threads whose graph uses a DeltaChannel are refused
        (``NotImplementedError``): their state is rebuilt from the history this
        would delete.
        """
        if strategy not in PRUNE_STRATEGIES:
            raise ValidationError(
                f"unknown prune strategy {strategy!r} (one of {', '.join(PRUNE_STRATEGIES)})",
                field="strategy",
            )
        for thread_id in thread_ids:
            if strategy == "delete":
                with contextlib.suppress(NoSession):  # LangGraph's prune: gone is pruned
                    self.delete_thread(thread_id)
            else:
                db.write(partial(self._keep_latest, thread_id), using=self.using, orm=True)

    def _keep_latest(self, thread_id: str, cursor: SqlCursor) -> None:
        checkpoints = Checkpoint.objects.using(self.using).filter(session_id=thread_id)
        delta = Q()
        for key in _DELTA_KEYS:
            delta |= Q(metadata__has_key=key)
        if checkpoints.filter(delta).exists():
            raise NotImplementedError(
                f"keep_latest can't prune thread {thread_id!r}: it uses a DeltaChannel"
            )
        heads = dict(
            checkpoints.values_list("checkpoint_ns")
            .annotate(latest=Max("checkpoint_id"))
            .order_by()
        )
        root_head = heads.get("")
        kept = {
            (row.checkpoint_ns, row.checkpoint_id): row
            for row in checkpoints.filter(
                _any_of([Q(checkpoint_ns=ns, checkpoint_id=cid) for ns, cid in heads.items()])
            ).only("checkpoint_ns", "checkpoint_id", "metadata", "channel_versions")
        }
        for ns, head in heads.items():
            row = kept[(ns, head)]
            parents = row.metadata.get("parents") if isinstance(row.metadata, dict) else None
            root = parents.get("") if isinstance(parents, dict) else None
            call = (
                ":" in ns
                and isinstance(root, str)
                and root != root_head
                and checkpoints.filter(checkpoint_ns="", checkpoint_id=root).exists()
            )
            writes = CheckpointWrite.objects.using(self.using).filter(
                session_id=thread_id, checkpoint_ns=ns
            )
            blobs = CheckpointBlob.objects.using(self.using).filter(
                session_id=thread_id, checkpoint_ns=ns
            )
            in_ns = checkpoints.filter(checkpoint_ns=ns)
            if call:
                # A subgraph call belongs to the root checkpoint it started from;
                # that one is being deleted, so the call's namespace goes whole.
                for rows in (writes, blobs, in_ns):
                    rows.delete()
                continue
            writes.exclude(checkpoint_id=head).delete()
            in_ns.exclude(checkpoint_id=head).delete()
            in_ns.update(parent_checkpoint_id=None)
            versions = row.channel_versions if isinstance(row.channel_versions, dict) else {}
            read = _any_of([Q(channel=ch, version=str(v)) for ch, v in versions.items()])
            blobs.exclude(read).delete()

    # -- reads ------------------------------------------------------------------------

    @_on_connection
    @lookup("thread_id", "checkpoint_ns", "checkpoint_id", missing=none)
    def get(
        self,
        connection: BaseDatabaseWrapper,
        thread_id: str,
        checkpoint_ns: str = "",
        checkpoint_id: str | None = None,
    ) -> CheckpointRecord | None:
        """The checkpoint ``checkpoint_id`` of the namespace, or its latest; ``None`` if absent."""
        with db.cursor_on(connection) as cursor:
            return _read(cursor, connection.vendor, thread_id, checkpoint_ns, checkpoint_id)

    @lookup("thread_id", "checkpoint_ns", "checkpoint_id", "before", missing=lambda a: iter(()))
    def list(
        self,
        thread_id: str | None = None,
        checkpoint_ns: str | None = None,
        *,
        checkpoint_id: str | None = None,
        before: str | None = None,
        limit: int | None = None,
        metadata: Mapping[str, Any] | None = None,
    ) -> Iterator[CheckpointRecord]:
        """Checkpoints newest first (by checkpoint id), paged in SQL.

        ``thread_id``/``checkpoint_ns`` ``None`` mean every thread/namespace;
        ``before`` keeps ids below it; ``metadata`` keeps checkpoints whose
        metadata has every given key with an equal value (strings, numbers,
        booleans and null compare in SQL; a list or object value is compared in
        Python on SQL pages).
        """
        if limit is not None and limit <= 0:
            return
        rows = Checkpoint.objects.using(self.using)
        if thread_id is not None:
            rows = rows.filter(session_id=thread_id)
        if checkpoint_ns is not None:
            rows = rows.filter(checkpoint_ns=checkpoint_ns)
        if checkpoint_id:
            rows = rows.filter(checkpoint_id=checkpoint_id)
        in_python: dict[str, Any] = {}
        for n, (key, value) in enumerate((metadata or {}).items()):
            if value is None or isinstance(value, str | int | float | bool):
                alias = f"_meta_{n}"
                rows = rows.alias(**{alias: KeyTransform(key, "metadata")}).filter(**{alias: value})
            else:
                in_python[key] = value
        rows = rows.order_by("-checkpoint_id", "-session_id", "-checkpoint_ns")
        fields = ("session_id", "checkpoint_ns", *checkpoint_sql.READ_FIELDS)
        page_size = limit if limit is not None and not in_python else LIST_PAGE
        if limit is not None and not in_python:
            page_size = min(limit, LIST_PAGE * 10)
        remaining = limit
        # Keyset paging. Within one namespace of one thread ids are unique, so
        # "checkpoint_id < last" continues; across threads or namespaces (copies
        # share ids) the key is (checkpoint_id, thread, namespace).
        one_place = thread_id is not None and checkpoint_ns is not None
        after: Q | None = Q(checkpoint_id__lt=before) if before is not None else None
        while True:
            page_rows = rows if after is None else rows.filter(after)
            page = list(page_rows.values_list(*fields)[:page_size])
            if not page:
                return
            records = [
                _record(r[0], r[1], r[2:])
                for r in page
                if all(r[6].get(k) == v for k, v in in_python.items())
            ]
            for record in self._hydrate(records):
                yield record
                if remaining is not None:
                    remaining -= 1
                    if remaining == 0:
                        return
            if len(page) < page_size:
                return
            sid, ns, cid = page[-1][0], page[-1][1], page[-1][2]
            after = Q(checkpoint_id__lt=cid)
            if not one_place:
                after |= Q(checkpoint_id=cid, session_id__lt=sid) | Q(
                    checkpoint_id=cid, session_id=sid, checkpoint_ns__lt=ns
                )
            if before is not None:
                after &= Q(checkpoint_id__lt=before)

    @lookup("thread_id", "checkpoint_ns", "checkpoint_id", "channel", missing=nothing)
    def writes_of(
        self, thread_id: str, checkpoint_ns: str, checkpoint_id: str, channel: str | None = None
    ) -> builtins.list[PendingWriteRow]:
        """The pending writes after one checkpoint (optionally of one channel), sorted."""
        rows = CheckpointWrite.objects.using(self.using).filter(
            session_id=thread_id, checkpoint_ns=checkpoint_ns, checkpoint_id=checkpoint_id
        )
        if channel is not None:
            rows = rows.filter(channel=channel)
        return _sorted_writes(
            _write(*r)
            for r in rows.values_list("task_id", "task_path", "idx", "channel", "type", "blob")
        )

    def _hydrate(self, records: builtins.list[CheckpointRecord]) -> builtins.list[CheckpointRecord]:
        """Attach the blobs each record reads and its pending writes (two queries a place)."""
        if not records:
            return records
        by_place: dict[tuple[str, str], builtins.list[CheckpointRecord]] = defaultdict(list)
        for record in records:
            by_place[(record.thread_id, record.checkpoint_ns)].append(record)
        blobs: dict[tuple[str, str, str, str], ChannelBlob] = {}
        writes: dict[tuple[str, str, str], builtins.list[PendingWriteRow]] = defaultdict(list)
        for (thread_id, ns), group in by_place.items():
            # The values each record does not carry inline (``_record``).
            wanted = [
                (ch, v)
                for r in group
                for inline in [{b.channel for b in r.blobs}]
                for ch, v in r.channel_versions.items()
                if ch not in inline
            ]
            channels = {ch for ch, _ in wanted}
            versions = {str(v) for _, v in wanted}
            if channels:
                # channel IN (…) AND version IN (…) is a handful of seeks on the
                # unique (session, ns, channel, version) index, never a scan.
                for channel, version, type_, blob in (
                    CheckpointBlob.objects.using(self.using)
                    .filter(
                        session_id=thread_id,
                        checkpoint_ns=ns,
                        channel__in=sorted(channels),
                        version__in=sorted(versions),
                    )
                    .values_list("channel", "version", "type", "blob")
                ):
                    blobs[(thread_id, ns, channel, version)] = _blob(channel, version, type_, blob)
            for row in (
                CheckpointWrite.objects.using(self.using)
                .filter(
                    session_id=thread_id,
                    checkpoint_ns=ns,
                    checkpoint_id__in=sorted({r.checkpoint_id for r in group}),
                )
                .values_list(
                    "checkpoint_id", "task_id", "task_path", "idx", "channel", "type", "blob"
                )
            ):
                writes[(thread_id, ns, row[0])].append(_write(*row[1:]))
        hydrated = []
        for r in records:
            inline = {b.channel for b in r.blobs}
            read = (
                *r.blobs,
                *(
                    found
                    for ch, v in r.channel_versions.items()
                    if ch not in inline
                    and (found := blobs.get((r.thread_id, r.checkpoint_ns, ch, str(v)))) is not None
                ),
            )
            hydrated.append(
                replace(
                    r,
                    blobs=read,
                    writes=tuple(
                        _sorted_writes(
                            writes.get((r.thread_id, r.checkpoint_ns, r.checkpoint_id), [])
                        )
                    ),
                )
            )
        return hydrated


def _read(
    cursor: SqlCursor,
    vendor: str,
    thread_id: str,
    checkpoint_ns: str,
    checkpoint_id: str | None,
) -> CheckpointRecord | None:
    """``CheckpointStore.get`` on ``cursor``."""
    sqlite = vendor == "sqlite"
    if checkpoint_id:
        by_id = checkpoint_sql.SQLITE_GET_BY_ID if sqlite else checkpoint_sql.GET_BY_ID
        cursor.execute(by_id, [thread_id, checkpoint_ns, checkpoint_id])
    else:
        latest = checkpoint_sql.SQLITE_GET_LATEST if sqlite else checkpoint_sql.GET_LATEST
        cursor.execute(latest, [thread_id, checkpoint_ns, thread_id, checkpoint_ns])
    # The checkpoint once per pending write (or once, with NULL write columns).
    rows = cursor.fetchall()
    if not rows:
        return None
    row = rows[0]
    versions = _json(row[5])
    inline = unpack_inline(row[7], versions) if row[7] else ()
    writes = (
        ()
        if row[_WRITE_AT] is None  # no pending write: the one row's write columns are NULL
        else _sorted_writes(_write(*r[_WRITE_AT:]) for r in rows)
    )
    # The blobs it reads that are not inline: one statement of exact lookups
    # on the unique index, never the history — and none when all are inline.
    # (Loops, not comprehensions: each of those is a frame, decision record 0069.)
    kept = set()
    for blob in inline:
        kept.add(blob.channel)
    wanted = []
    for ch, v in versions.items():
        if ch not in kept:
            wanted.append((ch, str(v)))
    wanted.sort()
    blobs: builtins.list[ChannelBlob] = []
    if wanted:
        cursor.execute(
            checkpoint_sql.blobs_of(len(wanted)),
            [x for ch, v in wanted for x in (thread_id, checkpoint_ns, ch, v)],
        )
        blobs = [_blob(*r) for r in cursor.fetchall()]
    return _record(thread_id, checkpoint_ns, row, versions, (*inline, *blobs), tuple(writes))


#: Where a ``get`` row's write columns start (after ``READ_FIELDS``).
_WRITE_AT = len(checkpoint_sql.READ_FIELDS)

# put and put_writes build their parameters positionally, get its value objects
# positionally (types/frozen.py): the orders are pinned here, at import.
sql.require_columns(
    Checkpoint,
    (
        "session_id",
        "checkpoint_ns",
        "checkpoint_id",
        "parent_checkpoint_id",
        "type",
        "checkpoint",
        "metadata",
        "channel_versions",
        "run_id",
        "inline",
        "created_at",
    ),
)
sql.require_columns(
    CheckpointBlob, ("session_id", "checkpoint_ns", "channel", "version", "type", "blob")
)
sql.require_columns(
    CheckpointWrite,
    (
        "session_id",
        "checkpoint_ns",
        "checkpoint_id",
        "task_id",
        "task_path",
        "idx",
        "channel",
        "type",
        "blob",
    ),
)
require_fields(ChannelBlob, ("channel", "version", "type", "blob"))
require_fields(PendingWriteRow, ("task_id", "task_path", "idx", "channel", "type", "blob"))
require_fields(
    CheckpointRecord,
    (
        "thread_id",
        "checkpoint_ns",
        "checkpoint_id",
        "parent_checkpoint_id",
        "type",
        "checkpoint",
        "metadata",
        "channel_versions",
        "created_at",
        "blobs",
        "writes",
    ),
)
_new_blob = positional_builder(ChannelBlob)
_new_write = positional_builder(PendingWriteRow)
_new_record = positional_builder(CheckpointRecord)


def _blob(channel: str, version: str, type: str, blob: Any) -> ChannelBlob:
    """A blob row (``channel, version, type, blob``) as read by any cursor."""
    return _new_blob(channel, version, type, None if blob is None else bytes(blob))


def _write(
    task_id: str, task_path: str, idx: int, channel: str, type: str, blob: Any
) -> PendingWriteRow:
    """A write row (``task_id, task_path, idx, channel, type, blob``) as read by any cursor."""
    return _new_write(task_id, task_path, idx, channel, type, bytes(blob))


def _sorted_writes(writes: Any) -> builtins.list[PendingWriteRow]:
    # LangGraph's writes_sort_key: (task_path, task_id, idx), compared in Python so
    # the order is code-point order on every backend and collation.
    return sorted(writes, key=lambda w: (w.task_path, w.task_id, w.idx))


def _any_of(conditions: builtins.list[Q]) -> Q:
    combined = Q(pk__in=[])
    for condition in conditions:
        combined |= condition
    return combined


def _json_param(value: Mapping[str, Any], connection: BaseDatabaseWrapper) -> Any:
    """``value`` adapted for a JSON column of the connection's backend (as the ORM would).

    What ``JSONField.get_db_prep_save`` ends in (the checkpoint's JSON fields
    have no encoder), without the field's layers around it: text on SQLite
    (``json.dumps`` with its defaults, as Django's ``adapt_json_value``), a
    ``Jsonb`` on PostgreSQL.
    """
    if connection.vendor == "sqlite":
        return _encode_json(value if type(value) is dict else dict(value))
    return connection.ops.adapt_json_value(dict(value), None)


#: ``json.dumps(value)`` with its defaults — what Django's ``adapt_json_value``
#: writes — for the dicts of ``put``, without ``json.dumps``'s layers around the
#: C encoder (decision record 0069; :mod:`agentstore.formats.json_encoder`).
_encode_json: Callable[[Any], str] = make_encoder()


def _record(
    thread_id: str,
    checkpoint_ns: str,
    row: Sequence[Any],
    channel_versions: dict[str, Any] | None = None,
    blobs: tuple[ChannelBlob, ...] | None = None,
    writes: tuple[PendingWriteRow, ...] = (),
) -> CheckpointRecord:
    """A row of ``checkpoint_sql.READ_FIELDS`` as a record.

    Read by a raw cursor (``get``) or the ORM (``list``): JSON may be text or
    decoded, the timestamp text or a datetime. Without ``blobs``, the record's
    blobs are the row's inline values (``list`` adds the table's later).
    """
    if channel_versions is None:
        channel_versions = _json(row[5])
    if blobs is None:
        blobs = unpack_inline(row[7], channel_versions) if row[7] else ()
    return _new_record(
        thread_id,
        checkpoint_ns,
        row[0],
        row[1],
        row[2],
        bytes(row[3]),
        _json(row[4]),
        channel_versions,
        # SQLite hands raw cursors the stored text: the one timestamp path (agentstore/sql).
        sql.utc(row[6]),
        blobs,
        writes,
    )


# One inline value: the lengths of its channel (UTF-8), type (UTF-8) and value
# (-1 for None: a cleared channel), then the three.
_INLINE_HEAD = struct.Struct(">IIi")


def pack_inline(blobs: Sequence[ChannelBlob]) -> bytes:
    """``Checkpoint.inline``: a checkpoint's small ``(channel, type, bytes)`` values, packed.

    Opaque bytes like the values themselves (no JSON: values are binary), read
    back by :func:`unpack_inline`. Versions are not packed: they are the
    checkpoint's ``channel_versions``.
    """
    return pack_values([(b.channel, b.type, b.blob) for b in blobs])


def pack_values(values: Iterable[tuple[str, str, bytes | None]]) -> bytes:
    """:func:`pack_inline` of ``(channel, type, bytes)`` triples (``None``: a cleared channel).

    What ``CheckpointStore.put`` takes as ``inline`` already packed: the
    LangGraph saver packs a checkpoint's small values as it serializes them,
    without a :class:`ChannelBlob` per value (decision record 0036).
    """
    return b"".join([pack_value(channel, type_, value) for channel, type_, value in values])


def pack_value(channel: str, type_: str, value: bytes | None) -> bytes:
    """One value of :func:`pack_values`: ``pack_values`` is these, concatenated.

    So a caller that meets the same value again can keep its packed bytes
    (the LangGraph saver does, decision record 0067).
    """
    name, kind = channel.encode(), type_.encode()
    head = _INLINE_HEAD.pack(len(name), len(kind), -1 if value is None else len(value))
    return b"".join((head, name, kind, value or b""))


def unpack_inline(data: Any, versions: Mapping[str, Any]) -> tuple[ChannelBlob, ...]:
    """The values :func:`pack_inline` packed, each at its version in ``versions``."""
    key = data if type(data) is bytes else None
    triples = None if key is None else _UNPACKED.get(key)
    if triples is None:
        triples = _unpack(data)
        if key is not None and len(key) <= _UNPACKED_BYTES:
            if len(_UNPACKED) >= _UNPACKED_KEPT:
                _UNPACKED.clear()
            _UNPACKED[key] = triples
    get = versions.get
    return tuple([_new_blob(ch, str(get(ch, "")), type_, value) for ch, type_, value in triples])


def _unpack(data: Any) -> tuple[tuple[str, str, bytes | None], ...]:
    """The ``(channel, type, bytes)`` triples of a packed ``inline``."""
    view = memoryview(data)
    triples = []
    at, size, head = 0, len(view), _INLINE_HEAD.size
    while at < size:
        n_channel, n_type, n_value = _INLINE_HEAD.unpack_from(view, at)
        at += head
        channel = str(view[at : at + n_channel], "utf-8")
        at += n_channel
        type_ = str(view[at : at + n_type], "utf-8")
        at += n_type
        value = None if n_value < 0 else bytes(view[at : at + n_value])
        at += max(n_value, 0)
        triples.append((channel, type_, value))
    return tuple(triples)


# Packed ``inline`` columns already unpacked, by their bytes: ``get`` of the
# latest checkpoint reads what the last ``put`` wrote, and a thread's small
# values repeat from one checkpoint to the next (decision record 0067). The triples
# are immutable; the versions are applied at each read. Bounded, small only.
_UNPACKED: dict[bytes, tuple[tuple[str, str, bytes | None], ...]] = {}
_UNPACKED_KEPT = 1024
_UNPACKED_BYTES = 4096


def _json(value: Any) -> dict[str, Any]:
    # Django's backends hand JSON columns to raw cursors as text; decode here as
    # JSONField.from_db_value would.
    if type(value) is str and value[:1] == "{":
        # The stored text of an object (what JSONEncoder writes): the decoder's
        # scan without json.loads' and decode()'s layers around it — two a
        # get (decision record 0036). The column's JSON_VALID check means nothing
        # trails the object; anything else takes json.loads below.
        decoded = _scan_json(value)[0]
    else:
        decoded = json.loads(value) if isinstance(value, str | bytes) else value
    return decoded if isinstance(decoded, dict) else {}


_scan_json = json.JSONDecoder().raw_decode
