"""Claiming tasks: a lease on one by id, on the oldest of a kind, or on a worker's ready batch.

A claim moves a task to ``running`` under a lease (an owner string and an
expiry) and appends its start event, in one write transaction whose guarded
UPDATE decides who wins::

    claim = TaskClaim(task_id=tid, lease_owner="worker-1",
                      lease_expires_at=now + ttl, event_kind="task_started")
    if tasks.claim_queued(claim): ...                   # ours until the lease expires
    tid = tasks.claim_next_queued("tool", "worker-1", now + ttl)     # the oldest, or None
    batch = tasks.claim_ready(["default"], [], "worker-1", now + ttl, limit=8)
    flags, batch = tasks.finish_and_claim(done, ["default"], [], "worker-1", now + ttl)

``claim_ready`` is the worker loop's pick: queued, in one of its queues, of one
of its kinds, ``run_after`` absent or past, highest priority then oldest; each
claim counts an attempt. ``finish_and_claim`` settles the tasks the worker just
ran (``settling.py``'s ``finish_many``, each fenced on its own lease) and claims
the next in the same transaction: one commit on the busiest path of a queue of
short tasks. On PostgreSQL that is one statement in autocommit, re-run step by
step when a concurrent event append makes it refuse, and every pick skips rows
other claimers hold, so workers do not queue behind one another.
``claim_interrupted`` resumes an interrupted task under a new lease (a workflow
after its worker went away).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import IntegrityError

from agentstore import db, sql
from agentstore.db import SqlCursor
from agentstore.exceptions import ValidationError
from agentstore.ids import new_id
from agentstore.sql import tasks as task_sql
from agentstore.tasks.lifecycle.settling import TaskSettling
from agentstore.tasks.lifecycle.vocabulary import (
    QUEUED,
    RECOVERY_BATCH,
    TASK_FIELDS,
    coded,
    task_from_values,
)
from agentstore.types.tasks import TaskClaim, TaskEntity, TaskFinish
from agentstore.validation import require_aware, require_max_length, require_text

__all__ = ["TaskClaims"]


class TaskClaims(TaskSettling):
    """Every way to take a lease on a task (``finish_and_claim`` settles first)."""

    def claim_queued(self, claim: TaskClaim | None) -> bool:
        """Move a queued task to running under ``claim``'s lease; ``False`` if it was not queued.

        The expiry may already be past (the lease is then dead on arrival).
        """
        return self._claim(claim, QUEUED)

    def claim_interrupted(self, claim: TaskClaim | None) -> bool:
        """Resume an interrupted task as running under a new lease (e.g. ``task_resumed``)."""
        return self._claim(claim, "interrupted")

    def _claim(self, claim: TaskClaim | None, source: str) -> bool:
        if claim is None:
            raise coded(ValidationError("task claim is required", field="claim"), "nil_task_claim")
        if not claim.lease_owner.strip() or claim.lease_expires_at is None:
            raise ValidationError(
                "task claim requires an owner and expiry",
                field="claim.lease_owner" if claim.lease_expires_at else "claim.lease_expires_at",
            )
        require_max_length(claim.lease_owner, 255, "claim.lease_owner")
        require_text(claim.event_kind, "event.kind")
        expires = self._db_time(require_aware(claim.lease_expires_at, "claim.lease_expires_at"))
        event_id, at = new_id(), self._db_time(self.now())

        def claim_it(cursor: SqlCursor) -> bool:
            cursor.execute(
                task_sql.CLAIM, [at, claim.lease_owner, expires, at, claim.task_id, source]
            )
            if cursor.rowcount != 1:
                return False
            self._append_next_event(cursor, claim.task_id, event_id, claim.event_kind, "{}", at)
            return True

        return self.write(claim_it)

    def claim_next_queued(
        self,
        kind: str,
        lease_owner: str,
        lease_expires_at: datetime,
        event_kind: str = "task_started",
    ) -> str | None:
        """Claim the oldest queued task of ``kind``; return its id, or ``None`` when none is queued.

        Not in librecode: the pick-and-claim a worker loop needs, in one write
        transaction, so workers do not all race for the same oldest task. On
        PostgreSQL the pick skips rows other claimers have locked.
        """
        require_text(kind, "task.kind")
        return self._claim_next(kind, lease_owner, lease_expires_at, event_kind)

    def _claim_next(
        self, kind: str, lease_owner: str, lease_expires_at: datetime, event_kind: str
    ) -> str | None:
        if not lease_owner.strip() or lease_expires_at is None:
            raise ValidationError("task claim requires an owner and expiry", field="lease_owner")
        require_text(event_kind, "event.kind")
        expires = self._db_time(require_aware(lease_expires_at, "lease_expires_at"))
        event_id, at = new_id(), self._db_time(self.now())
        claim = task_sql.claim_next(self.vendor)

        def claim_it(cursor: SqlCursor) -> str | None:
            # Pick and claim in one statement; the guard in it still decides.
            cursor.execute(claim, [at, lease_owner, expires, at, kind])
            row = cursor.fetchone()
            if row is None:
                return None
            task_id = str(row[0])
            self._append_next_event(cursor, task_id, event_id, event_kind, "{}", at)
            return task_id

        return self.write(claim_it)

    def claim_ready(
        self,
        queues: Sequence[str],
        kinds: Sequence[str],
        lease_owner: str,
        lease_expires_at: datetime,
        limit: int = 1,
        event_kind: str = "task_started",
    ) -> list[TaskEntity]:
        """Claim up to ``limit`` ready tasks for ``lease_owner``; return them as claimed.

        Ready: queued, in one of ``queues``, of one of ``kinds`` (empty: any
        kind), and ``run_after`` absent or past. Highest priority first, then
        oldest. Each claim counts an attempt and appends ``event_kind`` with
        ``{"worker_id": …, "attempt": n}``. On PostgreSQL the pick skips rows
        other claimers hold, so workers do not queue behind one another.
        """
        return self.finish_and_claim(
            (), queues, kinds, lease_owner, lease_expires_at, limit, event_kind
        )[1]

    def finish_and_claim(
        self,
        finishes: Sequence[TaskFinish],
        queues: Sequence[str],
        kinds: Sequence[str],
        lease_owner: str,
        lease_expires_at: datetime,
        limit: int = 1,
        event_kind: str = "task_started",
        look_first: bool = True,
        calls: dict[str, tuple[str, str, str]] | None = None,
        workers: int = 0,
    ) -> tuple[list[bool], list[TaskEntity]]:
        """:meth:`finish_many` then :meth:`claim_ready`, in one write transaction.

        A worker settles the task it just ran and claims its next one for the
        price of one commit (the busiest path of a queue of short tasks). One
        flag per finish, each fenced on its own lease, and the claimed tasks.
        ``look_first`` checks for a ready task without the write lock first (an
        idle poll then costs one read); a busy worker passes ``False``.
        ``calls``, when given, receives the function call (``function``,
        ``backend``, ``arguments_json``) of each claimed ``function`` task by
        id, read with the claim: the worker then needs no read of its own
        before it runs the task (decision record 0046). ``workers`` > 0 claims a fair
        share: at most ceil(ready / ``workers``) of ``limit`` (decision record 0046).
        """
        if not queues:
            raise ValidationError("claim requires at least one queue", field="queues")
        clean = [self.validated_finish(finish) for finish in finishes]
        finish_ids = [new_id() for _ in clean]
        if not lease_owner.strip() or lease_expires_at is None:
            raise ValidationError("task claim requires an owner and expiry", field="lease_owner")
        require_max_length(lease_owner, 255, "lease_owner")
        require_text(event_kind, "event.kind")
        expires = self._db_time(require_aware(lease_expires_at, "lease_expires_at"))
        limit = max(1, min(limit, RECOVERY_BATCH))
        now = self.now()
        at = self._db_time(now)
        event_ids = [new_id() for _ in range(limit)]
        fair = workers > 0 and limit > 1
        claim = task_sql.claim_ready(len(queues), len(kinds), limit, self.vendor, fair)
        claim_params = [at, lease_owner, expires, at, *queues, *kinds, at]
        if fair:
            claim_params += [workers, workers, *queues, *kinds, at, limit * workers]
        owner_json = json.dumps(lease_owner)

        def claim_them(cursor: SqlCursor) -> tuple[list[bool], list[TaskEntity]]:
            flags = [
                self.finish_row(cursor, finish, finish_id, now)
                for finish, finish_id in zip(clean, finish_ids, strict=True)
            ]
            # Pick and claim in one statement (docs/tasks.md, "Performance").
            cursor.execute(claim, claim_params)
            rows = [self._row_values(row) for row in cursor.fetchall()]
            if not rows:
                return flags, []
            if len(rows) > limit:  # never: the pick runs once (sql.tasks.picked)
                raise AssertionError(f"claimed {len(rows)} tasks, asked for {limit}")
            # RETURNING keeps no order: put the batch back in claim order.
            rows.sort(key=lambda row: (-row["priority"], row["created_at"], row["id"]))
            cursor.executemany(
                task_sql.INSERT_NEXT_EVENT,
                [
                    (
                        row["id"],
                        event_id,
                        event_kind,
                        f'{{"worker_id": {owner_json}, "attempt": {row["attempts"]}}}',
                        at,
                        row["id"],
                    )
                    for row, event_id in zip(rows, event_ids, strict=False)
                ],
            )
            if calls is not None:
                cursor.execute(task_sql.functions_of(len(rows)), [row["id"] for row in rows])
                calls.update(
                    (str(r[0]), (str(r[1]), str(r[2]), str(r[3]))) for r in cursor.fetchall()
                )
            return flags, [task_from_values(row) for row in rows]

        if self.vendor == "postgresql":
            done = self._finish_and_claim_pg(
                clean,
                finish_ids,
                queues,
                kinds,
                limit,
                claim_params,
                event_ids,
                event_kind,
                owner_json,
                now,
                calls,
                fair,
            )
            if done is not None:
                return done
            # A concurrent event append raced the one statement: step by step.
        # An idle worker polls often: look without the write lock first (hand-written,
        # like the claim: the ORM would cost more than the query). On PostgreSQL
        # the one-statement claim above is already that cheap when nothing is ready.
        if look_first and self.vendor != "postgresql":
            with db.cursor(self.using) as cursor:
                cursor.execute(task_sql.ready(len(queues), len(kinds)), [*queues, *kinds, at])
                ready = cursor.fetchone() is not None
            if not ready:
                return (self.finish_many(clean) if clean else []), []
        return self.write(claim_them)

    def _finish_and_claim_pg(
        self,
        finishes: Sequence[TaskFinish],
        finish_ids: Sequence[str],
        queues: Sequence[str],
        kinds: Sequence[str],
        limit: int,
        claim_params: list[Any],
        event_ids: list[str],
        event_kind: str,
        owner_json: str,
        now: datetime,
        calls: dict[str, tuple[str, str, str]] | None,
        fair: bool = False,
    ) -> tuple[list[bool], list[TaskEntity]] | None:
        """:meth:`finish_and_claim` as one statement; ``None`` when it must be re-run in steps.

        Outside a transaction the statement is its own (autocommit): one round
        trip, one commit. Inside one (a test case) it runs in a savepoint (``write``
        refuses a caller's transaction outside tests, as everywhere). The
        one refusal is the event-sequence collision :data:`agentstore.sql.tasks.NEXT_EVENT_OF`
        describes; every fence is the same guarded UPDATE as the stepwise path.
        """
        at = self._db_time(now)
        statement = task_sql.finish_and_claim_pg(
            tuple((len(f.from_states), bool(f.lease_owner)) for f in finishes),
            len(queues),
            len(kinds),
            limit,
            calls is not None,
            fair,
        )
        params: list[Any] = []
        for finish, finish_id in zip(finishes, finish_ids, strict=True):
            params += self._finish_params(finish, at)
            params += [finish_id, finish.event_kind, finish.payload_json, at]
        params += claim_params
        params += [event_ids, event_kind, owner_json, at]

        def run(cursor: SqlCursor) -> list[Any]:
            cursor.execute(statement, params)
            return list(cursor.fetchall())

        try:
            # Planned once per connection. In a caller's transaction, write()
            # nests a savepoint: a refused statement rolls back to it and the
            # fallback can still run.
            rows = self.write(run, single=True, prepare=True)
        except IntegrityError:
            return None
        flags = [bool(n) for n in rows[0][0]]
        width = 1 + len(TASK_FIELDS)
        claimed = [self._row_values(row[1:width]) for row in rows if row[1] is not None]
        if calls is not None:
            calls.update(
                (str(row[1]), (str(row[width]), str(row[width + 1]), str(row[width + 2])))
                for row in rows
                if row[1] is not None and row[width] is not None
            )
        if len(claimed) > limit:  # never: the pick runs once (agentstore.sql.tasks.picked)
            raise AssertionError(f"claimed {len(claimed)} tasks, asked for {limit}")
        claimed.sort(key=lambda row: (-row["priority"], row["created_at"], row["id"]))
        return flags, [task_from_values(row) for row in claimed]

    def _row_values(self, row: Sequence[Any]) -> dict[str, Any]:
        """A raw ``SELECT`` of :data:`TASK_FIELDS` as ``values()`` would return it."""
        values = dict(zip(TASK_FIELDS, row, strict=True))
        for name in task_sql.DATETIME_FIELDS:
            # SQLite's own cursor may hand back the stored text, Django's a naive
            # UTC datetime: the one timestamp path (agentstore/sql) reads both.
            value = values[name]
            values[name] = None if value is None else sql.utc(value)
        return values
