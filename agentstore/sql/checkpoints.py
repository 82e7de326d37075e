"""The raw SQL of the LangGraph checkpoint store (``docs/integrations/langgraph.md``).

Sent by :class:`agentstore.stores.checkpoints.CheckpointStore`: ``put`` (the
channel blobs new in a checkpoint, then the checkpoint), ``put_writes``,
``get`` (one checkpoint, then its blobs and writes in one statement) and
``copy_thread``. ``INSERT … ON CONFLICT`` reads the same on SQLite (≥ 3.24)
and PostgreSQL, so the statements are module constants, not per backend.

Every INSERT names every column of ``_meta`` (:func:`agentstore.sql.columns`),
so the store builds its parameters with :func:`agentstore.sql.row` and a field
added to a model reaches the statement with its default. The conflict targets
are the models' unique constraints, named through :func:`agentstore.sql.names`.
"""

from __future__ import annotations

from functools import lru_cache

from agentstore.models import Checkpoint, CheckpointBlob, CheckpointWrite
from agentstore.sql import columns, marks, names

CHECKPOINT = Checkpoint._meta.db_table
BLOB = CheckpointBlob._meta.db_table
WRITE = CheckpointWrite._meta.db_table

_KEY = names(Checkpoint, "session", "checkpoint_ns", "checkpoint_id")
#: Store a checkpoint; stored again under its id it replaces the data and
#: metadata, as LangGraph's own savers do. Params: ``row(Checkpoint, …)``.
UPSERT_CHECKPOINT = (
    f"INSERT INTO {CHECKPOINT} ({columns(Checkpoint)}) VALUES ({marks(Checkpoint)}) "
    f"ON CONFLICT ({_KEY}) DO UPDATE SET "
    + ", ".join(
        f"{c} = excluded.{c}"
        for c in names(
            Checkpoint, "type", "checkpoint", "metadata", "channel_versions", "run_id"
        ).split(", ")
    )
)

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
)
READ_COLUMNS = names(Checkpoint, *READ_FIELDS)
_IN_PLACE = f"FROM {CHECKPOINT} WHERE {names(Checkpoint, 'session')} = %s AND checkpoint_ns = %s"
#: The latest checkpoint of a namespace: one seek on the unique index. Params: thread, ns.
GET_LATEST = f"SELECT {READ_COLUMNS} {_IN_PLACE} ORDER BY checkpoint_id DESC LIMIT 1"
#: One checkpoint by id. Params: thread, ns, checkpoint id.
GET_BY_ID = f"SELECT {READ_COLUMNS} {_IN_PLACE} AND checkpoint_id = %s"

#: A version names one value: a blob already stored is kept. Params: ``row(CheckpointBlob, …)``.
INSERT_BLOB = (
    f"INSERT INTO {BLOB} ({columns(CheckpointBlob)}) VALUES ({marks(CheckpointBlob)}) "
    f"ON CONFLICT ({names(CheckpointBlob, 'session', 'checkpoint_ns', 'channel', 'version')}) "
    "DO NOTHING"
)

_INSERT_WRITE = (
    f"INSERT INTO {WRITE} ({columns(CheckpointWrite)}) VALUES ({marks(CheckpointWrite)}) "
    f"ON CONFLICT ({names(CheckpointWrite, 'session', 'checkpoint_ns', 'checkpoint_id')}, "
    f"{names(CheckpointWrite, 'task_id', 'idx')}) "
)
#: A retried task re-saving its outputs changes nothing. Params: ``row(CheckpointWrite, …)``.
INSERT_WRITE = _INSERT_WRITE + "DO NOTHING"
#: LangGraph's special channels (error, interrupt, resume) hold the task's latest state.
UPSERT_WRITE = (
    _INSERT_WRITE
    + "DO UPDATE SET "
    + ", ".join(
        f"{c} = excluded.{c}"
        for c in names(CheckpointWrite, "channel", "type", "blob", "task_path").split(", ")
    )
)

# One exact lookup on the unique (session, ns, channel, version) index per pair,
# joined by UNION ALL: SQLite plans "(channel = ? AND version = ?) OR …" as a
# range over (session, ns) — every blob of the thread. The rows have the
# writes' shape (see values_of), with 0 first.
_BLOB_SELECT = (
    f"SELECT 0, {names(CheckpointBlob, 'channel', 'version')}, CAST(NULL AS INTEGER), NULL, "
    f"{names(CheckpointBlob, 'type', 'blob')} FROM {BLOB} "
    f"WHERE {names(CheckpointBlob, 'session')} = %s AND checkpoint_ns = %s "
    "AND channel = %s AND version = %s"
)
_WRITES_SELECT = (
    f"SELECT 1, {names(CheckpointWrite, 'task_id', 'task_path', 'idx', 'channel', 'type', 'blob')} "
    f"FROM {WRITE} WHERE {names(CheckpointWrite, 'session')} = %s AND checkpoint_ns = %s "
    "AND checkpoint_id = %s"
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
def values_of(pairs: int) -> str:
    """SELECT the blobs of ``pairs`` (channel, version) pairs and a checkpoint's writes.

    One statement (one round trip on PostgreSQL). Rows are
    ``(0, channel, version, NULL, NULL, type, blob)`` for a blob and
    ``(1, task_id, task_path, idx, channel, type, blob)`` for a write.
    Parameters: (thread, namespace, channel, version) per pair, then
    (thread, namespace, checkpoint id).
    """
    return " UNION ALL ".join([*[_BLOB_SELECT] * pairs, _WRITES_SELECT])


@lru_cache(maxsize=256)
def many(statement: str, rows: int) -> str:
    """``statement`` (an ``INSERT … VALUES (%s, …) …`` above) inserting ``rows`` rows at once."""
    head, _, tail = statement.partition(" VALUES (")
    row_marks, _, rest = tail.partition(") ")
    return f"{head} VALUES {', '.join([f'({row_marks})'] * rows)} {rest}"


def put(blobs: int) -> str:
    """``put`` as one PostgreSQL statement: the blobs in a data-modifying CTE.

    Parameters: the ``blobs`` blob rows, then the checkpoint's. (SQLite has no
    data-modifying CTEs; there ``put`` is two statements in one transaction.)
    """
    if not blobs:
        return UPSERT_CHECKPOINT
    return f"WITH blobs AS ({many(INSERT_BLOB, blobs)}) {UPSERT_CHECKPOINT}"
