"""A LangGraph thread's rows, whole: read them out in pages, write them into another database.

``manage.py agentstore export``/``import`` move a ``graph`` session (a LangGraph
thread) between databases — from SQLite to PostgreSQL, say — with every row as
stored: checkpoints (their packed ``inline`` values and metadata included),
channel blobs and pending writes::

    from agentstore.stores.checkpoint_rows import export_thread, import_thread

    rows = export_thread("thread-1", using="old")    # SessionRow, then the rows, paged
    session = next(rows)
    import_thread(session, rows, using="default")   # one transaction, in batches

Values stay opaque bytes (no LangGraph import, nothing re-encoded), rows keep
their insertion order (the admin draws a thread in ``Checkpoint.id`` order, and
follow pages by it), and memory is one page or one batch of rows whatever the
thread's length. The session row is written by
:class:`~agentstore.stores.sessions.SessionStore` (the one writer of session
rows); the statements are :mod:`agentstore.sql.checkpoints`' plain INSERTs, so
a key repeated in a file is an error rather than a merge. This is not
``CheckpointStore.copy_thread`` (one database, rows copied by the server).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any

from django.db import DEFAULT_DB_ALIAS

from agentstore import sql
from agentstore.db import read_snapshot
from agentstore.exceptions import NoSession, ValidationError
from agentstore.models import Checkpoint, CheckpointBlob, CheckpointWrite
from agentstore.models.sessions import SessionKind
from agentstore.sql import checkpoints as checkpoint_sql
from agentstore.stores.sessions import RowWriter, SessionStore
from agentstore.types.checkpoints import BlobRow, CheckpointRow, WriteRow
from agentstore.types.sessions import SessionRow
from agentstore.validation import (
    json_problem,
    require_aware,
    require_int,
    require_storable_text,
)

__all__ = ["EXPORT_PAGE", "export_thread", "import_thread"]

GRAPH = SessionKind.GRAPH.value

#: Rows of one table an export reads per query.
EXPORT_PAGE = 500

#: ``CheckpointWrite.idx`` is a 32-bit integer; LangGraph's special channels use
#: negative slots.
_INT32 = 2**31

_CHECKPOINT_FIELDS = (
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
)
_BLOB_FIELDS = ("checkpoint_ns", "channel", "version", "type", "blob")
_WRITE_FIELDS = (
    "checkpoint_ns",
    "checkpoint_id",
    "task_id",
    "task_path",
    "idx",
    "channel",
    "type",
    "blob",
)


def export_thread(
    thread_id: str, *, using: str = DEFAULT_DB_ALIAS, page: int = EXPORT_PAGE
) -> Iterator[SessionRow | CheckpointRow | BlobRow | WriteRow]:
    """The thread's session row, then its checkpoints, blobs and writes, each in insertion order.

    Read ``page`` rows per query (keyset pages on the primary key) inside one
    read snapshot. ``NoSession`` (at the first ``next``) when there is no
    ``graph`` session of that id. Close the iterator if you stop early.
    """
    with read_snapshot(using):
        row = SessionStore(using=using).export_row(thread_id)
        if row is None or row.kind != GRAPH:
            raise NoSession(f"no such graph thread: {thread_id}")
        yield row
        for values in _pages(Checkpoint, thread_id, _CHECKPOINT_FIELDS, using, page):
            (ns, cid, parent, type_, data, metadata, versions, run_id, inline, at) = values
            yield CheckpointRow(
                checkpoint_ns=ns,
                checkpoint_id=cid,
                parent_checkpoint_id=parent,
                type=type_,
                checkpoint=bytes(data),
                metadata=metadata,
                channel_versions=versions,
                run_id=run_id,
                inline=bytes(inline),
                created_at=sql.utc(at),
            )
        for ns, channel, version, type_, blob in _pages(
            CheckpointBlob, thread_id, _BLOB_FIELDS, using, page
        ):
            yield BlobRow(
                checkpoint_ns=ns,
                channel=channel,
                version=version,
                type=type_,
                blob=None if blob is None else bytes(blob),
            )
        for ns, cid, task_id, task_path, idx, channel, type_, blob in _pages(
            CheckpointWrite, thread_id, _WRITE_FIELDS, using, page
        ):
            yield WriteRow(
                checkpoint_ns=ns,
                checkpoint_id=cid,
                task_id=task_id,
                task_path=task_path,
                idx=idx,
                channel=channel,
                type=type_,
                blob=bytes(blob),
            )


def _pages(
    model: type[Checkpoint | CheckpointBlob | CheckpointWrite],
    thread_id: str,
    fields: Sequence[str],
    using: str,
    page: int,
) -> Iterator[Sequence[Any]]:
    """``fields`` of the thread's rows of ``model`` by primary key, ``page`` per query."""
    rows = model.objects.using(using).filter(session_id=thread_id)
    after = 0
    while True:
        found = list(rows.filter(pk__gt=after).order_by("pk").values_list("pk", *fields)[:page])
        for values in found:
            yield values[1:]
        if len(found) < page:
            return
        after = found[-1][0]


def import_thread(
    session: SessionRow,
    rows: Iterable[CheckpointRow | BlobRow | WriteRow],
    *,
    using: str = DEFAULT_DB_ALIAS,
    owner: Any = None,
) -> dict[str, int]:
    """Store a thread moved from another database, every row as given, in one transaction.

    ``rows`` is consumed as it comes and written in batches
    (:meth:`SessionStore.import_rows`): a bad row anywhere, or a key repeated,
    stores nothing. Returns ``{"checkpoint": n, "blob": m, "write": k}``.
    ``SessionExists`` when the id is taken.
    """
    if isinstance(session, SessionRow) and session.kind != GRAPH:
        raise ValidationError("session.kind must be graph", field="session.kind")
    sid = session.id if isinstance(session, SessionRow) else ""
    metadata_field = Checkpoint._meta.get_field("metadata")
    versions_field = Checkpoint._meta.get_field("channel_versions")

    def checkpoint_params(row: CheckpointRow, connection: Any) -> Sequence[Any]:
        metadata = _object(row.metadata, "checkpoint.metadata")
        versions = _object(row.channel_versions, "checkpoint.channel_versions")
        parent = row.parent_checkpoint_id
        return sql.row(
            Checkpoint,
            session_id=sid,
            checkpoint_ns=_text(row.checkpoint_ns, "checkpoint.checkpoint_ns"),
            checkpoint_id=_key(row.checkpoint_id, "checkpoint.checkpoint_id", 64),
            parent_checkpoint_id=None
            if parent is None
            else _key(parent, "checkpoint.parent_checkpoint_id", 64),
            type=_text(row.type, "checkpoint.type", 64),
            checkpoint=_bytes(row.checkpoint, "checkpoint.checkpoint"),
            # The ORM's own adaptation of a JSON column (text on SQLite, Jsonb on
            # PostgreSQL), so an imported row reads back as a saved one.
            metadata=metadata_field.get_db_prep_save(metadata, connection),
            channel_versions=versions_field.get_db_prep_save(versions, connection),
            run_id=_text(row.run_id, "checkpoint.run_id", 255),
            inline=_bytes(row.inline, "checkpoint.inline"),
            created_at=sql.adapt_datetime(connection, _stamp(row.created_at)),
        )

    def blob_params(row: BlobRow, connection: Any) -> Sequence[Any]:
        return sql.row(
            CheckpointBlob,
            session_id=sid,
            checkpoint_ns=_text(row.checkpoint_ns, "blob.checkpoint_ns"),
            channel=_text(row.channel, "blob.channel"),
            version=_text(row.version, "blob.version", 255),
            type=_text(row.type, "blob.type", 64),
            blob=None if row.blob is None else _bytes(row.blob, "blob.blob"),
        )

    def write_params(row: WriteRow, connection: Any) -> Sequence[Any]:
        return sql.row(
            CheckpointWrite,
            session_id=sid,
            checkpoint_ns=_text(row.checkpoint_ns, "write.checkpoint_ns"),
            checkpoint_id=_key(row.checkpoint_id, "write.checkpoint_id", 64),
            task_id=_text(row.task_id, "write.task_id", 255),
            task_path=_text(row.task_path, "write.task_path"),
            idx=require_int(row.idx, "write.idx", -_INT32, _INT32 - 1),
            channel=_text(row.channel, "write.channel"),
            type=_text(row.type, "write.type", 64),
            blob=_bytes(row.blob, "write.blob"),
        )

    return SessionStore(using=using).import_rows(
        session,
        rows,
        {
            CheckpointRow: RowWriter(
                "checkpoint", checkpoint_sql.IMPORT_CHECKPOINT, checkpoint_params
            ),
            BlobRow: RowWriter("blob", checkpoint_sql.IMPORT_BLOB, blob_params),
            WriteRow: RowWriter("write", checkpoint_sql.IMPORT_WRITE, write_params),
        },
        owner=owner,
    )


def _text(value: Any, field: str, max_length: int | None = None) -> str:
    return require_storable_text(value, field, max_length)


def _key(value: Any, field: str, max_length: int) -> str:
    """A checkpoint id: stored text, not empty (LangGraph's ids are UUIDs)."""
    text = require_storable_text(value, field, max_length)
    if not text:
        raise ValidationError(f"{field} must not be empty", field=field)
    return text


def _bytes(value: Any, field: str) -> bytes:
    if not isinstance(value, bytes):
        raise ValidationError(f"{field} must be bytes", field=field)
    return value


def _object(value: Any, field: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValidationError(f"{field} must be a JSON object", field=field)
    problem = json_problem(value)
    if problem:
        raise ValidationError(f"{field} {problem}", field=field)
    return value


def _stamp(value: Any) -> datetime:
    if not isinstance(value, datetime):
        raise ValidationError(
            "checkpoint.created_at must be a datetime", field="checkpoint.created_at"
        )
    return require_aware(value, "checkpoint.created_at")
