"""Seeding: sessions, entries and queued tasks in bulk, for the demo, the benchmarks and tests.

    from agentstore.demo import seeding

    owner = seeding.session(cwd="/repo")                     # one tree session, its id
    ids = seeding.sessions(1000, cwd=lambda i: f"/repo/{i % 50}")
    seeding.entries(ids[0], [seeding.message(seq) for seq in range(1, 100_001)])
    seeding.queued_tasks(owner, 10_000, kind="bench")
    seeding.chain(owner, 100_000)                            # e1 ← e2 ← …, one INSERT … SELECT
    seeding.compact_every(owner, 1000, 500, 20)              # e500, e1500, …: compactions
    seeding.steps(loop_id, 100_000, content="…")             # a loop session's steps

The stores write one row per call, as an agent does; filling a database with
100,000 entries that way takes minutes. These helpers write set-based (one
``executemany`` per batch, in short write transactions), with the statements
of ``agentstore.sql.seeding`` and ``agentstore.sql.tasks`` — so a benchmark,
a test that needs a big session, and the demo all seed the same way, and none
of them writes SQL or copies a column list.
Session rows still go through ``SessionStore`` (``create``/``create_many``).

:func:`chain` and :func:`steps` go further: one recursive ``INSERT … SELECT``
generates the rows inside the database (100,000 entries in a second or two on
SQLite and PostgreSQL alike). Their column list is ``sql.columns`` too: the
columns they compute are named, every other one gets the model's default.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections, models

from agentstore import db, sql
from agentstore.db import SqlCursor
from agentstore.ids import new_id
from agentstore.models import Entry, Step, Task, TaskEvent
from agentstore.sql import seeding as seeding_sql
from agentstore.sql import tasks as task_sql
from agentstore.stores.sessions import SessionStore

__all__ = [
    "BATCH",
    "STAMP",
    "chain",
    "compact_every",
    "entries",
    "message",
    "queued_tasks",
    "session",
    "sessions",
    "steps",
]

#: Rows per write transaction (short enough to keep the write lock brief).
BATCH = 5_000

_START = datetime(2026, 1, 1, tzinfo=UTC)
#: The one timestamp of every row :func:`chain` and :func:`steps` write.
STAMP = _START


def session(kind: str = "tree", *, using: str = DEFAULT_DB_ALIAS, **fields: Any) -> str:
    """Create one session through ``SessionStore.create`` and return its id."""
    return SessionStore(using=using).create(kind, **fields).id


def sessions(
    count: int,
    *,
    kind: str = "tree",
    cwd: Callable[[int], str] | str = "/repo",
    name: Callable[[int], str] | str = "",
    start: datetime = _START,
    owner: Any = None,
    using: str = DEFAULT_DB_ALIAS,
) -> list[str]:
    """Create ``count`` sessions (one a minute from ``start``); return their ids in order."""

    def value(spec: Callable[[int], str] | str, i: int) -> str:
        return spec(i) if callable(spec) else spec

    rows = [
        {
            "id": new_id(),
            "cwd": value(cwd, i),
            "name": value(name, i),
            "owner": owner,
            "created_at": start + timedelta(minutes=i),
            "updated_at": start + timedelta(minutes=i, seconds=30),
        }
        for i in range(count)
    ]
    store = SessionStore(using=using)
    ids: list[str] = []
    for begin in range(0, len(rows), BATCH):
        ids += store.create_many(kind, rows[begin : begin + BATCH])
    return ids


def message(seq: int, *, parent: str | None = None, content: str = "") -> dict[str, Any]:
    """An entry row of a plain user/assistant message at ``seq`` (for :func:`entries`).

    Without ``parent`` the row continues the chain (:func:`entries` fills it in).
    """
    role = "user" if seq % 2 else "assistant"
    row: dict[str, Any] = {
        "seq": seq,
        "entry_id": new_id(),
        "type": "message",
        "role": role,
        "content": content or f"message {seq}",
        "model_facing": True,
        "created_at": _START + timedelta(seconds=seq),
    }
    if parent is not None:
        row["parent_id"] = parent
    return row


def entries(
    session_id: str, rows: Iterable[Mapping[str, Any]], *, using: str = DEFAULT_DB_ALIAS
) -> int:
    """Insert entry rows (columns by name; model defaults for the rest) into a session.

    ``seq`` and ``entry_id`` are required; ``parent_id`` defaults to the previous
    row's ``entry_id`` (a single chain) unless given (``None`` makes a root).
    Nothing is validated or derived: this is seeding, not appending.
    """
    connection = connections[using]
    adapt = connection.ops.adapt_datetimefield_value
    batch: list[list[Any]] = []
    count = 0
    previous: str | None = None

    def flush() -> None:
        def write(cursor: SqlCursor) -> None:
            cursor.executemany(seeding_sql.INSERT_ENTRY, batch)

        db.write(write, using=using)
        batch.clear()

    for row in rows:
        values = dict(row)
        values.setdefault("parent_id", previous)
        values["created_at"] = adapt(values.get("created_at", _START))
        batch.append(sql.row(Entry, session_id=session_id, **values))
        previous = str(values["entry_id"])
        count += 1
        if len(batch) >= BATCH:
            flush()
    if batch:
        flush()
    return count


def queued_tasks(
    owner_session_id: str,
    count: int,
    *,
    kind: str = "job",
    start: datetime | None = None,
    using: str = DEFAULT_DB_ALIAS,
) -> list[str]:
    """Queue ``count`` tasks of ``kind`` (each with its ``task_queued`` event); their ids.

    ``created_at`` grows by a microsecond per task, so claims take them in order.
    """
    connection = connections[using]
    adapt = connection.ops.adapt_datetimefield_value
    now = start or datetime.now(UTC)
    ids = [new_id() for _ in range(count)]
    for begin in range(0, count, BATCH):
        chunk = ids[begin : begin + BATCH]
        tasks = [
            sql.row(
                Task,
                id=task_id,
                kind=kind,
                state="queued",
                owner_session_id=owner_session_id,
                created_at=adapt(now + timedelta(microseconds=begin + n)),
                updated_at=adapt(now),
            )
            for n, task_id in enumerate(chunk)
        ]
        events = [
            sql.row(
                TaskEvent,
                task_id=task_id,
                sequence=1,
                event_id=new_id(),
                kind="task_queued",
                created_at=adapt(now),
            )
            for task_id in chunk
        ]

        def write(
            cursor: SqlCursor, tasks: list[list[Any]] = tasks, events: list[list[Any]] = events
        ) -> None:
            cursor.executemany(task_sql.INSERT_TASK, tasks)
            cursor.executemany(task_sql.INSERT_EVENT, events)

        db.write(write, using=using)
    return ids


def _generated(
    model: type[models.Model],
    count: int,
    computed: Mapping[str, str],
    values: Mapping[str, Any],
    using: str,
) -> None:
    """``count`` rows of ``model`` from one recursive ``INSERT … SELECT`` (``n.i`` = 1…count).

    ``computed`` maps a column to an SQL expression over ``n.i`` (no
    parameters); every other column takes ``values`` or the model's default,
    through :func:`sql.row`, so the statement names every column of ``_meta``.
    """
    statement = seeding_sql.generate(model, computed)
    given: dict[str, Any] = {**dict.fromkeys(computed), **values}
    defaults = sql.row(model, **given)
    # The statement's parameters: the count, then every column it does not compute.
    params: list[Any] = [count]
    for name, default in zip(sql.column_names(model), defaults, strict=True):
        if name not in computed:
            params.append(default)

    def write(cursor: SqlCursor) -> None:
        cursor.execute(statement, params)

    db.write(write, using=using)


def chain(
    session_id: str,
    depth: int,
    *,
    content: str = "hello",
    token_estimate: int = 1,
    using: str = DEFAULT_DB_ALIAS,
) -> None:
    """Append a ``depth``-long chain of messages ``e1 ← e2 ← …`` to an empty session.

    Entry ids are ``e<seq>``; odd entries are user messages, even ones the
    assistant's, all model-facing, shown and stamped :data:`STAMP` (so append
    order is ``seq``). One statement, set-based: for the bounded-work tests and
    the benchmarks that need a long session fast.
    """
    adapt = connections[using].ops.adapt_datetimefield_value
    _generated(
        Entry,
        depth,
        {
            "seq": "n.i",
            "entry_id": "'e' || CAST(n.i AS TEXT)",
            "parent_id": "CASE WHEN n.i = 1 THEN NULL ELSE 'e' || CAST(n.i - 1 AS TEXT) END",
            "role": "CASE WHEN n.i - 2 * (n.i / 2) = 1 THEN 'user' ELSE 'assistant' END",
        },
        {
            "session_id": session_id,
            "type": "message",
            "created_at": adapt(STAMP),
            "content": content,
            "token_estimate": token_estimate,
            "model_facing": True,
            "display": True,
        },
        using,
    )


def compact_every(
    session_id: str, every: int, offset: int, keep: int, *, using: str = DEFAULT_DB_ALIAS
) -> None:
    """Turn each :func:`chain` entry whose seq is ``offset`` modulo ``every`` into a compaction.

    Each keeps the ``keep`` entries before it (its first-kept entry is
    ``e<seq - keep>``), as one set-based ``UPDATE``.
    """

    def write(cursor: SqlCursor) -> None:
        cursor.execute(seeding_sql.COMPACT_EVERY, [False, keep, session_id, every, every, offset])

    db.write(write, using=using)


def steps(
    session_id: str,
    count: int,
    *,
    content: str = "",
    step_type: str = "assistant",
    using: str = DEFAULT_DB_ALIAS,
    **values: Any,
) -> None:
    """Append ``count`` steps (``step_index`` 1…count) to a loop session, set-based.

    ``values`` sets other columns of every step (``duration_ms=5``, …); the
    rest take the model's defaults.
    """
    adapt = connections[using].ops.adapt_datetimefield_value
    _generated(
        Step,
        count,
        {"step_index": "n.i"},
        {
            "session_id": session_id,
            "step_type": step_type,
            "content": content,
            "created_at": adapt(STAMP),
            **values,
        },
        using,
    )
