"""The raw SQL of the LangGraph checkpointer: ``put``, ``put_writes``, ``get``, ``copy_thread``.

Sent by :class:`agentstore.stores.checkpoints.CheckpointStore`
(``docs/integrations/langgraph.md``, "Performance")::

    from agentstore.sql import checkpoints as cp_sql

    cursor.execute(cp_sql.UPSERT_CHECKPOINT, params)       # agentstore.db's cursor

``INSERT … ON CONFLICT`` reads the same on SQLite (≥ 3.24) and PostgreSQL, so
every statement is one text for both. Statements whose text depends on a count
(rows in one INSERT, blobs in one read) are built by small cached functions,
once per shape.

Table and column names, and the ``ON CONFLICT`` targets (the models' unique
constraints), come from ``_meta`` (:mod:`agentstore.sql`);
``tests/stores/test_sql.py`` checks the INSERT column lists and table names
against the models.
"""

from __future__ import annotations

from functools import lru_cache

from django.db import models

from agentstore.models import Checkpoint, CheckpointBlob, CheckpointWrite
from agentstore.sql import columns, marks, names, timestamp_column

__all__ = [
    "BLOB",
    "CHECKPOINT",
    "COPY_THREAD",
    "GET_BY_ID",
    "GET_LATEST",
    "IMPORT_BLOB",
    "IMPORT_CHECKPOINT",
    "IMPORT_WRITE",
    "INSERT_BLOB",
    "INSERT_WRITE",
    "READ_COLUMNS",
    "READ_FIELDS",
    "SQLITE_GET_BY_ID",
    "SQLITE_GET_LATEST",
    "UPSERT_CHECKPOINT",
    "UPSERT_WRITE",
    "WRITE",
    "WRITE_FIELDS",
    "blobs_of",
    "many",
    "put",
]

CHECKPOINT = Checkpoint._meta.db_table
BLOB = CheckpointBlob._meta.db_table
WRITE = CheckpointWrite._meta.db_table


def _unique_columns(model: type[models.Model]) -> str:
    """The columns of the model's one unique constraint: its rows' key, the conflict target."""
    (unique,) = (c for c in model._meta.constraints if isinstance(c, models.UniqueConstraint))
    return names(model, *unique.fields)


def _replace(model: type[models.Model], *fields: str) -> str:
    """``column = excluded.column, …``: what an upsert overwrites."""
    return ", ".join(f"{c} = excluded.{c}" for c in names(model, *fields).split(", "))


#: Parameters: the Checkpoint columns in model order (session … created_at).
#: A checkpoint stored again under its id replaces its data and metadata, as
#: LangGraph's own savers do.
UPSERT_CHECKPOINT = (
    f"INSERT INTO {CHECKPOINT} ({columns(Checkpoint)}) VALUES ({marks(Checkpoint)}) "
    f"ON CONFLICT ({_unique_columns(Checkpoint)}) DO UPDATE SET "
    + _replace(Checkpoint, "type", "checkpoint", "metadata", "channel_versions", "run_id")
)
#: Parameters: the CheckpointBlob columns in model order. A version names one
#: value: one already stored is kept as is.
INSERT_BLOB = (
    f"INSERT INTO {BLOB} ({columns(CheckpointBlob)}) VALUES ({marks(CheckpointBlob)}) "
    f"ON CONFLICT ({_unique_columns(CheckpointBlob)}) DO NOTHING"
)
_INSERT_WRITE = (
    f"INSERT INTO {WRITE} ({columns(CheckpointWrite)}) VALUES ({marks(CheckpointWrite)}) "
    f"ON CONFLICT ({_unique_columns(CheckpointWrite)}) "
)
#: A task's regular write: stored once (a retried task re-saving it changes nothing).
INSERT_WRITE = _INSERT_WRITE + "DO NOTHING"
#: A special channel's write (error, interrupt, resume): the task's latest state wins.
UPSERT_WRITE = (
    _INSERT_WRITE
    + "DO UPDATE SET "
    + _replace(CheckpointWrite, "channel", "type", "blob", "task_path")
)

#: An imported thread's rows (``stores/checkpoint_rows.py``): plain INSERTs, so a
#: key repeated in the file is an error, never a silent merge. Parameters: the
#: model's columns in order.
IMPORT_CHECKPOINT = f"INSERT INTO {CHECKPOINT} ({columns(Checkpoint)}) VALUES ({marks(Checkpoint)})"
IMPORT_BLOB = f"INSERT INTO {BLOB} ({columns(CheckpointBlob)}) VALUES ({marks(CheckpointBlob)})"
IMPORT_WRITE = f"INSERT INTO {WRITE} ({columns(CheckpointWrite)}) VALUES ({marks(CheckpointWrite)})"

#: The fields a checkpoint is read with (``get`` here, ``list`` through the ORM),
#: in the order ``CheckpointStore`` unpacks them.
READ_FIELDS = (
    "checkpoint_id",
    "parent_checkpoint_id",
    "type",
    "checkpoint",
    "metadata",
    "channel_versions",
    "created_at",
    "inline",
)
READ_COLUMNS = names(Checkpoint, *READ_FIELDS)
#: The pending-write fields ``get`` reads beside the checkpoint, in that order.
WRITE_FIELDS = ("task_id", "task_path", "idx", "channel", "type", "blob")


def _get(where: str, vendor: str) -> str:
    """A checkpoint (``READ_COLUMNS``) joined with its pending writes (``WRITE_FIELDS``).

    One row per write, or one row with NULL write columns when it has none:
    a single statement, so a read whose channel values are all inline is one
    round trip on PostgreSQL (decision record 0069). On SQLite the timestamp is read
    as text (:func:`agentstore.sql.timestamp_column`: no converter per row).
    """
    c_session, c_ns, c_id = names(Checkpoint, "session", "checkpoint_ns", "checkpoint_id").split(
        ", "
    )
    w_session, w_ns, w_id = names(
        CheckpointWrite, "session", "checkpoint_ns", "checkpoint_id"
    ).split(", ")
    read = ", ".join(
        timestamp_column(f"c.{column}", vendor) if field == "created_at" else f"c.{column}"
        for field, column in zip(READ_FIELDS, READ_COLUMNS.split(", "), strict=True)
    )
    written = ", ".join(
        f"w.{column}" for column in names(CheckpointWrite, *WRITE_FIELDS).split(", ")
    )
    return (
        f"SELECT {read}, {written} FROM {CHECKPOINT} c LEFT JOIN {WRITE} w "
        f"ON w.{w_session} = c.{c_session} AND w.{w_ns} = c.{c_ns} AND w.{w_id} = c.{c_id} "
        f"WHERE c.{c_session} = %s AND c.{c_ns} = %s AND c.{c_id} = {where}"
    )


_SESSION, _NS, _ID = names(Checkpoint, "session", "checkpoint_ns", "checkpoint_id").split(", ")
# Not MAX(checkpoint_id): PostgreSQL's generic plan for a prepared MAX may
# aggregate the whole thread's index range (estimated as one row); ORDER BY …
# DESC LIMIT 1 is a backward index scan that stops at the first entry.
_LATEST = (
    f"(SELECT {_ID} FROM {CHECKPOINT} WHERE {_SESSION} = %s AND {_NS} = %s "
    f"ORDER BY {_ID} DESC LIMIT 1)"
)
#: The latest checkpoint of a namespace with its writes: the last entry of the
#: unique (session, ns, checkpoint_id) index, never the history. Parameters:
#: thread, namespace, thread, namespace.
GET_LATEST = _get(_LATEST, "postgresql")
#: One checkpoint by id with its writes. Parameters: thread, namespace, checkpoint id.
GET_BY_ID = _get("%s", "postgresql")
#: ``GET_LATEST`` and ``GET_BY_ID`` for SQLite (the timestamp as text).
SQLITE_GET_LATEST = _get(_LATEST, "sqlite")
SQLITE_GET_BY_ID = _get("%s", "sqlite")

# One exact lookup on the unique (session, ns, version, channel) index per pair,
# joined by UNION ALL: SQLite plans "(channel = ? AND version = ?) OR …" as a
# range over (session, ns) — every blob of the thread.
_BLOB_SELECT = (
    f"SELECT {names(CheckpointBlob, 'channel', 'version', 'type', 'blob')} FROM {BLOB} WHERE "
    + " AND ".join(
        f"{c} = %s"
        for c in names(CheckpointBlob, "session", "checkpoint_ns", "channel", "version").split(", ")
    )
)


def _copy(model: type[Checkpoint | CheckpointBlob | CheckpointWrite]) -> str:
    # INSERT … SELECT of every column but the primary key, with the session
    # replaced by the parameter; ON CONFLICT DO NOTHING keeps rows the target has.
    session = names(model, "session")
    select = ", ".join("%s" if c == session else c for c in columns(model).split(", "))
    table = model._meta.db_table
    return (
        f"INSERT INTO {table} ({columns(model)}) SELECT {select} "
        f"FROM {table} WHERE {session} = %s ON CONFLICT DO NOTHING"
    )


#: ``copy_thread``'s three statements; params of each: target thread, source thread.
COPY_THREAD = (_copy(Checkpoint), _copy(CheckpointBlob), _copy(CheckpointWrite))


@lru_cache(maxsize=64)
def blobs_of(pairs: int) -> str:
    """SELECT the blobs of ``pairs`` (channel, version) pairs: ``channel, version, type, blob``.

    One statement (one round trip on PostgreSQL). Parameters: (thread,
    namespace, channel, version) per pair.
    """
    return " UNION ALL ".join([_BLOB_SELECT] * pairs)


@lru_cache(maxsize=256)
def many(statement: str, rows: int) -> str:
    """``statement`` (an ``INSERT … VALUES (%s, …) …``) inserting ``rows`` rows at once."""
    head, _, tail = statement.partition(" VALUES (")
    row_marks, _, rest = tail.partition(") ")
    return f"{head} VALUES {', '.join([f'({row_marks})'] * rows)} {rest}"


@lru_cache(maxsize=64)
def put(blobs: int) -> str:
    """``put`` as one PostgreSQL statement: the blobs in a data-modifying CTE.

    Parameters: the ``blobs`` blob rows, then the checkpoint's. (SQLite has no
    data-modifying ``WITH``: there ``put`` is two statements in one transaction.)
    """
    if not blobs:
        return UPSERT_CHECKPOINT
    return f"WITH blobs AS ({many(INSERT_BLOB, blobs)}) {UPSERT_CHECKPOINT}"
