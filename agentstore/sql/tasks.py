"""The raw SQL of the task tables: tasks, task events, function tasks, workflow runs.

Sent by :class:`agentstore.tasks.repository.TaskRepository` and the composite
repositories built on it (``docs/tasks.md``, "Composite repositories"). Every
statement is a state change guarded in its WHERE clause and judged by its row
count, or a pick that feeds one; the state machine itself is described in
``models/tasks.py``. Statements that depend on the backend (row locks) or on a
list's length are built by small cached functions, once per shape.

Names come from ``_meta`` (:mod:`agentstore.sql`); ``tests/stores/test_sql.py``
checks the INSERT column lists and table names against the models.
"""

from __future__ import annotations

from functools import lru_cache

from agentstore.models import FunctionTask, Session, Task, TaskEvent
from agentstore.sql import (
    SESSION,
    TASK,
    TASK_EVENT,
    WORKFLOW_RUN,
    column_names,
    columns,
    for_update,
    marks,
    names,
    placeholders,
    skip_locked,
)

#: Every Task column in model order: what a claim RETURNs and ``_row_values`` reads.
TASK_FIELDS: tuple[str, ...] = tuple(column_names(Task))
#: The datetime columns among :data:`TASK_FIELDS` (SQLite's raw cursor returns them as text).
DATETIME_FIELDS: tuple[str, ...] = tuple(
    str(f.column) for f in Task._meta.concrete_fields if f.get_internal_type() == "DateTimeField"
)
#: Every TaskEvent column in model order (task_id, sequence, event_id, kind, payload_json,
#: created_at).
EVENT_FIELDS: tuple[str, ...] = tuple(column_names(TaskEvent))
#: Tasks settled or requeued per write transaction (keeps each transaction short).
BATCH = 100

# Appends the next event of one task. The caller holds the task's write slot
# (SQLite) or row lock (PostgreSQL), so max + 1 cannot race.
# Parameters: task_id, event_id, kind, payload_json, created_at, task_id.
INSERT_NEXT_EVENT = (
    f"INSERT INTO {TASK_EVENT} ({columns(TaskEvent)}) "
    f"SELECT %s, COALESCE(MAX(sequence), 0) + 1, %s, %s, %s, %s FROM {TASK_EVENT} "
    "WHERE task_id = %s"
)
INSERT_EVENT = f"INSERT INTO {TASK_EVENT} ({columns(TaskEvent)}) VALUES ({marks(TaskEvent)})"
NEXT_SEQUENCE = f"SELECT COALESCE(MAX(sequence), 0) + 1 FROM {TASK_EVENT} WHERE task_id = %s"
INSERT_TASK = f"INSERT INTO {TASK} ({columns(Task)}) VALUES ({marks(Task)})"
SESSION_EXISTS = f"SELECT 1 FROM {SESSION} WHERE {names(Session, 'id')} = %s"
TASK_EXISTS = f"SELECT 1 FROM {TASK} WHERE id = %s"

_CLAIM_SET = (
    "state = 'running', started_at = COALESCE(started_at, %s), "
    "finished_at = NULL, result = '', error_code = '', error_message = '', "
    "lease_owner = %s, lease_expires_at = %s, updated_at = %s, attempts = attempts + 1"
)
#: Claim one named task from ``state``; params: at, owner, expires, at, task_id, state.
CLAIM = f"UPDATE {TASK} SET {_CLAIM_SET} WHERE id = %s AND state = %s"
# The claim of the pick: one statement. The subquery picks, the outer guard
# (state = 'queued') still decides (on PostgreSQL the pick skips locked rows),
# and RETURNING hands back the claimed rows as they are now, so no re-read.
_CLAIM_PICKED = (
    f"UPDATE {TASK} SET {_CLAIM_SET} WHERE {{picked}} AND state = 'queued' RETURNING {{fields}}"
)

#: A worker's retry: back to queued until run_after, fenced on the live lease.
RETRY = (
    f"UPDATE {TASK} SET state = 'queued', run_after = %s, lease_owner = NULL, "
    "lease_expires_at = NULL, error_code = %s, error_message = %s, updated_at = %s "
    "WHERE id = %s AND state = 'running' AND lease_owner = %s AND lease_expires_at > %s"
)
#: A claim given back unrun (a stopping worker, a handler that postponed it): the
#: attempt is not counted. Params: run_after (NULL: unchanged), at, task_id, owner, at.
RELEASE = (
    f"UPDATE {TASK} SET state = 'queued', lease_owner = NULL, "
    "lease_expires_at = NULL, attempts = attempts - 1, "
    "run_after = COALESCE(%s, run_after), updated_at = %s "
    "WHERE id = %s AND state = 'running' AND lease_owner = %s AND lease_expires_at > %s "
    "AND attempts > 0"
)
#: Requeue one expired running task with crash budget left: the crash is counted
#: (not the attempt) and the dead worker stays fenced out. Params: error_message,
#: at, task_id, owner, before, max_crashes.
REQUEUE_EXPIRED = (
    f"UPDATE {TASK} SET state = 'queued', lease_owner = NULL, "
    "lease_expires_at = NULL, error_code = 'lease_expired', "
    "error_message = %s, crashes = crashes + 1, updated_at = %s "
    "WHERE id = %s AND state = 'running' AND lease_owner = %s AND lease_expires_at <= %s "
    "AND crashes < %s"
)
# Recovery leaves ``result`` alone (a worker may have stored partial output). A
# task whose lease had an owner lost its worker: that is a crash, counted; one
# that never had a lease (moved to running by a transition) did not crash.
_RECOVER_ONE = (
    f"UPDATE {TASK} SET state = %s, error_code = %s, error_message = %s, "
    "finished_at = %s, lease_owner = NULL, lease_expires_at = NULL, updated_at = %s{crash} "
    "WHERE id = %s AND state IN ('running', 'canceling') "
    "AND (lease_expires_at IS NULL OR lease_expires_at <= %s)"
)
RECOVER_ONE_UNOWNED = _RECOVER_ONE.format(crash="") + " AND lease_owner IS NULL"
RECOVER_ONE_OWNED = _RECOVER_ONE.format(crash=", crashes = crashes + 1") + " AND lease_owner = %s"

INSERT_FUNCTION = (
    f"INSERT INTO {FunctionTask._meta.db_table} ({columns(FunctionTask)}) "
    f"VALUES ({marks(FunctionTask)})"
)
#: The call columns of a function task, in the order ``SELECT_FUNCTION`` and
#: ``functions_of`` return them (after the task id).
CALL_FIELDS: tuple[str, ...] = ("function", "backend", "arguments_json")
SELECT_FUNCTION = (
    f"SELECT {names(FunctionTask, *CALL_FIELDS)} "
    f"FROM {FunctionTask._meta.db_table} WHERE task_id = %s"
)


@lru_cache(maxsize=8)
def functions_of(count: int) -> str:
    """The calls of ``count`` function tasks at once: task_id, then :data:`CALL_FIELDS`."""
    return (
        f"SELECT {names(FunctionTask, 'task', *CALL_FIELDS)} "
        f"FROM {FunctionTask._meta.db_table} WHERE task_id IN ({placeholders(count)})"
    )


def picked(pick: str, vendor: str) -> str:
    """``id`` is one of the ids ``pick`` selects, the pick evaluated exactly once.

    PostgreSQL may run an ``IN (subquery)`` once per outer row, and a LIMITed
    ``FOR UPDATE SKIP LOCKED`` pick then returns a different row each time —
    one claim took several tasks. ``ARRAY(subquery)`` is an init plan: one run.
    SQLite evaluates an uncorrelated ``IN`` subquery once.
    """
    return f"id IN ({pick})" if vendor == "sqlite" else f"id = ANY(ARRAY({pick}))"


@lru_cache(maxsize=8)
def enqueue_pg(detail: str, notify: bool) -> str:
    """``TaskRepository.enqueue`` on PostgreSQL as one statement (docs/tasks.md, "Performance").

    The task, its ``task_queued`` event and the ``detail`` INSERT (one row that
    names the task; ``""``: none) as data-modifying CTEs, then the queue's
    ``pg_notify`` (``notify``) — sent in autocommit, one round trip where
    BEGIN, four statements and COMMIT took six. Params: :data:`INSERT_TASK`'s,
    :data:`INSERT_EVENT`'s, ``detail``'s, then channel and payload.
    """
    parts = [f"t AS ({INSERT_TASK})", f"e AS ({INSERT_EVENT})"]
    if detail:
        parts.append(f"d AS ({detail})")
    tail = "SELECT pg_notify(%s, %s)" if notify else "SELECT 1"
    return f"WITH {', '.join(parts)} {tail}"


@lru_cache(maxsize=4)
def lock_task(vendor: str) -> str:
    """The task's state, row-locked on PostgreSQL; param: task_id."""
    return f"SELECT state FROM {TASK} WHERE id = %s{for_update(vendor)}"


@lru_cache(maxsize=4)
def lock_tool_task(vendor: str) -> str:
    """State, kind and owner of a task, row-locked on PostgreSQL (a tool task's cancel)."""
    return (
        f"SELECT {names(Task, 'state', 'kind', 'owner_session')} FROM {TASK} "
        f"WHERE id = %s{for_update(vendor)}"
    )


@lru_cache(maxsize=4)
def lock_workflow_owner(vendor: str) -> str:
    """A workflow run's owner session, its task row locked on PostgreSQL (serialises sequences)."""
    return (
        f"SELECT t.owner_session_id FROM {TASK} t "
        f"JOIN {WORKFLOW_RUN} w ON w.task_id = t.id "
        f"WHERE t.id = %s{for_update(vendor, of='t')}"
    )


@lru_cache(maxsize=4)
def running_fence(vendor: str) -> str:
    """The lease fence and the highest event sequence in one statement.

    Params: task_id, task_id, owner, at. On PostgreSQL the row lock serialises
    us against finish, recovery and other appenders.
    """
    return (
        f"SELECT (SELECT COALESCE(MAX(sequence), 0) FROM {TASK_EVENT} WHERE task_id = %s) "
        f"FROM {TASK} WHERE id = %s AND state IN ('running', 'canceling') "
        f"AND lease_owner = %s AND lease_expires_at > %s{for_update(vendor)}"
    )


@lru_cache(maxsize=32)
def finish(states: int, owned: bool) -> str:
    """The guarded terminal UPDATE of ``finish_row``, built once per shape.

    The fence: no owner → the task must hold no lease; an owner → that
    owner's lease must still be live.
    """
    fence = " AND lease_owner IS NULL"
    if owned:
        fence = " AND lease_owner = %s AND lease_expires_at > %s"
    return (
        f"UPDATE {TASK} SET state = %s, result = %s, error_code = %s, "
        "error_message = %s, finished_at = %s, lease_owner = NULL, "
        "lease_expires_at = NULL, updated_at = %s "
        f"WHERE id = %s AND state IN ({placeholders(states)}){fence}"
    )


@lru_cache(maxsize=64)
def transition(sets: tuple[str, ...], states: int, fence: str) -> str:
    """A guarded state change: ``sets`` assignments, ``states`` allowed sources, then ``fence``."""
    allowed = placeholders(states)
    return f"UPDATE {TASK} SET {', '.join(sets)} WHERE id = %s AND state IN ({allowed}){fence}"


def _ready_filter(queues: int, kinds: int) -> str:
    """What a worker may claim (queued, its queues and kinds, due); params: *queues, *kinds, at."""
    kind_filter = f" AND kind IN ({placeholders(kinds)})" if kinds else ""
    return (
        f"state = 'queued' AND queue_name IN ({placeholders(queues)}){kind_filter} "
        "AND (run_after IS NULL OR run_after <= %s)"
    )


@lru_cache(maxsize=64)
def claim_ready(queues: int, kinds: int, limit: int, vendor: str, fair: bool = False) -> str:
    """``finish_and_claim``'s pick-and-claim, built once per shape.

    Params: at, owner, expires, at, *queues, *kinds, at — then, ``fair``, the
    fair share's: workers, workers, *queues, *kinds, at, ``limit`` × workers.

    ``fair`` claims at most ceil(ready / workers) of the ``limit``: the count
    stops at ``limit`` × workers ready tasks (enough to know the share is the
    whole ``limit``), so it reads at most that many index entries. A claim
    of a worker's default size then never takes work an idle worker could
    start (docs/tasks.md, "Running tasks").
    """
    ready = _ready_filter(queues, kinds)
    size = str(limit)
    if fair:
        size = (
            "(SELECT (COUNT(*) + %s - 1) / %s FROM "
            f"(SELECT 1 FROM {TASK} WHERE {ready} LIMIT %s) AS fair)"
        )
    pick = (
        f"SELECT id FROM {TASK} WHERE {ready} "
        f"ORDER BY priority DESC, created_at, id LIMIT {size}{skip_locked(vendor)}"
    )
    return _CLAIM_PICKED.format(picked=picked(pick, vendor), fields=", ".join(TASK_FIELDS))


@lru_cache(maxsize=64)
def ready(queues: int, kinds: int) -> str:
    """The lock-free "is anything ready?" look of an idle worker."""
    return f"SELECT 1 FROM {TASK} WHERE {_ready_filter(queues, kinds)} LIMIT 1"


@lru_cache(maxsize=4)
def claim_next(vendor: str) -> str:
    """``claim_next_queued``: the oldest queued task of a kind, picked and claimed at once."""
    pick = (
        f"SELECT id FROM {TASK} WHERE kind = %s AND state = 'queued' "
        f"ORDER BY created_at, id LIMIT 1{skip_locked(vendor)}"
    )
    return _CLAIM_PICKED.format(picked=picked(pick, vendor), fields="id")


@lru_cache(maxsize=4)
def expired_of_kind(vendor: str) -> str:
    """A batch of leased tasks of a kind whose lease expired; params: kind, before.

    Returns id, lease owner, crashes so far and state.

    SKIP LOCKED: a row locked right now belongs to a worker that is settling
    it; the next sweep will see the outcome.
    """
    return (
        f"SELECT id, lease_owner, crashes, state FROM {TASK} WHERE kind = %s "
        "AND state IN ('running', 'canceling') "
        "AND (lease_expires_at IS NULL OR lease_expires_at <= %s) "
        f"ORDER BY created_at, id LIMIT {BATCH}{skip_locked(vendor)}"
    )


@lru_cache(maxsize=16)
def expired_requeueable(kinds: int, vendor: str) -> str:
    """A batch of running tasks whose lease expired with crash budget left.

    Params: before, max_crashes, *kinds. Returns id, lease owner, crashes so far.
    """
    kind_filter = f" AND kind IN ({placeholders(kinds)})" if kinds else ""
    return (
        f"SELECT id, lease_owner, crashes FROM {TASK} WHERE state = 'running' "
        f"AND lease_expires_at <= %s AND crashes < %s{kind_filter} "
        f"ORDER BY lease_expires_at, id LIMIT {BATCH}{skip_locked(vendor)}"
    )


@lru_cache(maxsize=8)
def renew_many(count: int) -> str:
    """Extend ``count`` live leases of one owner; returns the ids still held.

    The one renewal statement: a single renewal is ``count=1`` (decision record 0043).

    Params: expires, at, *ids, owner, at.
    """
    return (
        f"UPDATE {TASK} SET lease_expires_at = %s, updated_at = %s "
        f"WHERE id IN ({placeholders(count)}) AND state IN ('running', 'canceling') "
        "AND lease_owner = %s AND lease_expires_at > %s RETURNING id"
    )


# The next event of the task a CTE named ``{source}`` returned (one row per task).
# Inside one statement every part reads the statement's snapshot, so this
# MAX + 1 can miss an event another transaction committed after the snapshot
# was taken: the insert then collides on UNIQUE(task, sequence) and the whole
# statement fails — nothing is written, and the caller falls back to
# statement-per-step (TaskRepository.finish_and_claim).
NEXT_EVENT_OF = (
    f"(SELECT COALESCE(MAX(sequence), 0) + 1 FROM {TASK_EVENT} WHERE task_id = {{source}}.id)"
)


@lru_cache(maxsize=64)
def finish_and_claim_pg(
    finishes: tuple[tuple[int, bool], ...],
    queues: int,
    kinds: int,
    limit: int,
    calls: bool,
    fair: bool = False,
) -> str:
    """``finish_and_claim`` on PostgreSQL as one statement (docs/tasks.md, "Performance").

    Data-modifying CTEs: each finish is :func:`finish`'s guarded UPDATE and
    its event; then the claim and its ``task_started`` events. Sent in
    autocommit it is its own transaction: one round trip and one commit per
    task, where BEGIN, five statements and COMMIT took seven. ``finishes`` is
    the shape of each finish (``from_states`` count, owned). The result has
    one row per claimed task (or one all-NULL row): the finish flags, then
    :data:`TASK_FIELDS`, then — ``calls`` — the claimed task's function call
    (:data:`CALL_FIELDS`, NULL for other kinds), so the worker needs no second
    round trip to learn what to run.
    """
    event_columns = columns(TaskEvent)
    parts = []
    for n, (states, owned) in enumerate(finishes):
        parts.append(f"f{n} AS ({finish(states, owned)} RETURNING id)")
        parts.append(
            f"e{n} AS (INSERT INTO {TASK_EVENT} ({event_columns}) "
            f"SELECT f{n}.id, {NEXT_EVENT_OF.format(source=f'f{n}')}, %s, %s, %s, %s "
            f"FROM f{n})"
        )
    parts.append(f"c AS ({claim_ready(queues, kinds, limit, 'postgresql', fair)})")
    # Event ids in claim order (priority, age, id): the n-th claimed task takes the n-th id.
    parts.append(
        f"s AS (INSERT INTO {TASK_EVENT} ({event_columns}) "
        f"SELECT n.id, {NEXT_EVENT_OF.format(source='n')}, (%s::varchar[])[n.rn], %s, "
        "'{\"worker_id\": ' || %s || ', \"attempt\": ' || n.attempts || '}', %s "
        "FROM (SELECT id, attempts, "
        "row_number() OVER (ORDER BY priority DESC, created_at, id) AS rn FROM c) AS n)"
    )
    flags = ", ".join(f"(SELECT COUNT(*) FROM f{n})" for n in range(len(finishes)))
    flags = f"ARRAY[{flags}]::int[]" if finishes else "'{}'::int[]"
    fields = ", ".join(f"c.{name}" for name in TASK_FIELDS)
    join = ""
    if calls:
        fields += ", " + names(FunctionTask, *CALL_FIELDS, prefix="fn.")
        task_column = names(FunctionTask, "task", prefix="fn.")
        join = f" LEFT JOIN {FunctionTask._meta.db_table} fn ON {task_column} = c.id"
    return (
        f"WITH {', '.join(parts)} "
        f"SELECT {flags}, {fields} FROM (SELECT 1) AS one LEFT JOIN c ON TRUE{join}"
    )
