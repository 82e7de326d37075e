"""Seeding: sessions, entries and queued tasks in bulk, for the demo, the benchmarks and tests.

    from agentstore.demo import seeding

    owner = seeding.session(cwd="/repo")                     # one tree session, its id
    ids = seeding.sessions(1000, cwd=lambda i: f"/repo/{i % 50}")
    seeding.entries(ids[0], [seeding.message(seq) for seq in range(1, 100_001)])
    seeding.queued_tasks(owner, 10_000, kind="bench")

The stores write one row per call, as an agent does; filling a database with
100,000 entries that way takes minutes. These helpers write set-based (one
``executemany`` per batch, in short write transactions), with the column lists
of ``agentstore.stores.sql`` — so a benchmark, a test that needs a big session,
and the demo all seed the same way, and none of them copies a column list.
Session rows still go through ``SessionStore`` (``create``/``create_many``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections

from agentstore.db import atomic_write
from agentstore.ids import new_id
from agentstore.models import Entry, Task, TaskEvent
from agentstore.stores import sql
from agentstore.stores.sessions import SessionStore

__all__ = ["BATCH", "entries", "message", "queued_tasks", "session", "sessions"]

#: Rows per write transaction (short enough to keep the write lock brief).
BATCH = 5_000

_START = datetime(2026, 1, 1, tzinfo=UTC)
_INSERT_ENTRY = f"INSERT INTO {sql.ENTRY} ({sql.columns(Entry)}) VALUES ({sql.marks(Entry)})"
_INSERT_TASK = f"INSERT INTO {sql.TASK} ({sql.columns(Task)}) VALUES ({sql.marks(Task)})"
_INSERT_EVENT = (
    f"INSERT INTO {sql.TASK_EVENT} ({sql.columns(TaskEvent)}) VALUES ({sql.marks(TaskEvent)})"
)


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
        def write() -> None:
            with connection.cursor() as cursor:
                cursor.executemany(_INSERT_ENTRY, batch)

        atomic_write(write, using=using)
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

        def write(tasks: list[list[Any]] = tasks, events: list[list[Any]] = events) -> None:
            with connection.cursor() as cursor:
                cursor.executemany(_INSERT_TASK, tasks)
                cursor.executemany(_INSERT_EVENT, events)

        atomic_write(write, using=using)
    return ids
