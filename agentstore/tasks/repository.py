"""The generic durable task lifecycle: create, claim with a lease, heartbeat, finish, recover.

A task is work an agent spawned that must survive a crash. A worker claims a
queued task with a *lease* (an owner string and an expiry), renews the lease
while it works, appends progress events, and finishes the task; a recovery
sweep settles tasks whose worker went away::

    tasks = TaskRepository()
    task = tasks.create(TaskEntity(kind="tool", owner_session_id=sid))
    claim = TaskClaim(task_id=task.id, lease_owner="worker-1",
                      lease_expires_at=now + timedelta(seconds=30), event_kind="task_started")
    if tasks.claim_queued(claim):
        tasks.append_running_event(task.id, "worker-1", "progress", '{"percent": 50}')
        tasks.finish(TaskFinish(task_id=task.id, lease_owner="worker-1",
                                from_states=["running", "canceling"], target_state="succeeded",
                                event_kind="task_succeeded", payload_json="{}"))

How exclusivity works (read this before changing anything)
---------------------------------------------------------
Every conditional change is **one short write transaction**: a guarded
``UPDATE … WHERE id = … AND state IN (…) AND <lease fence>``, its row count, and
the event in the same transaction. A row count of 0 means "nothing changed" and
the method returns ``False`` — the caller lost a race, the lease expired or was
taken, or the task does not exist. The UPDATE *is* the fence: a worker whose
lease expired or was taken can write nothing, because every write it makes
(``renew_lease``, ``append_running_events``, owner ``finish``) re-checks owner
and liveness (``lease_expires_at > now``) in the same statement or transaction.

Event sequences are task-local (1..n, ``task_queued`` is 1) and computed as
``max(sequence) + 1`` inside the write transaction. On SQLite the transaction
holds the database's write lock from ``BEGIN IMMEDIATE`` (behind agentstore's
writer queue), so nobody else can append in between. On PostgreSQL the
transaction is a plain ``atomic()``: every path that appends an event first
locks the task row (the guarded UPDATE does; the unguarded paths use
``SELECT … FOR UPDATE``), so appends to one task are serialised by that row
lock and never compute the same ``max + 1``. ``UNIQUE(task, sequence)`` is only
the last line of defence. ``FOR UPDATE`` never decides *who wins*; the
conditional UPDATE and its row count do.

The hot paths (claims, renewals, running events, finish, recovery) are
hand-written SQL on agentstore.db's cursor: the ORM would cost several
times the transaction itself. Datetimes pass through the backend's own
adapter, so rows written here read back through the ORM unchanged (SQLite
stores fixed-width UTC text, which compares correctly as text). Ids and "now"
are made before the transaction because a busy SQLite write may be re-run.

Where each part lives
---------------------
``TaskRepository`` is one class made of parts, each a module of
``agentstore.tasks.lifecycle`` named for what it holds (one body per
behaviour: a part calls another's methods on ``self``, it never repeats them)::

    rows.py        TaskRows: vendor, datetimes, validation, and the pieces that run
                   inside a caller's transaction (insert_task, finish_row,
                   transition_row, lock_task): the composite repositories' API
    reads.py       get and the listings
    creation.py    create, enqueue (+ DetailInsert, a kind's detail row)
    events.py      append_event, append_running_events, latest_event, list_events
    settling.py    transition, finish, finish_many
    claims.py      claim_queued/_interrupted/_next_queued, claim_ready, finish_and_claim
    leases.py      renew_lease(s), release, retry
    expired.py     requeue_expired, recover_expired, rescue_kind, recover_kind
    vocabulary.py  states, page sizes, rows as entities, input checks

A new behaviour goes to the part it belongs to, not to this module; a part
that needs another's method inherits from it (``TaskClaims`` settles through
``TaskSettling``), so the type checker sees every call.
"""

from __future__ import annotations

from agentstore.tasks.lifecycle.claims import TaskClaims
from agentstore.tasks.lifecycle.creation import DetailInsert, TaskCreation
from agentstore.tasks.lifecycle.events import TaskEvents
from agentstore.tasks.lifecycle.expired import ExpiredLeases
from agentstore.tasks.lifecycle.leases import TaskLeases

# DetailInsert is the type of enqueue's ``detail``: importable from here as before.
__all__ = ["DetailInsert", "TaskRepository"]


class TaskRepository(TaskCreation, TaskClaims, TaskLeases, TaskEvents, ExpiredLeases):
    """Generic task lifecycle and ordered task events (shared by the composite repositories)."""
