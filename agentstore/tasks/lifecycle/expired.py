"""Leases that expired: the repository's half of recovery (queue the task again, or settle it).

A worker that dies leaves its tasks ``running`` or ``canceling`` under a lease
nobody renews. Once the lease has expired, these methods deal with them in
batches of :data:`RECOVERY_BATCH`, each batch one short write transaction::

    requeued = tasks.requeue_expired(now, ["function"])     # queued again, crash counted
    settled = tasks.recover_expired(TaskRecovery(kind="agent", expires_before=now,
                                                 target_state="interrupted", ...))
    requeued, settled = tasks.rescue_kind(kind="function", expires_before=now,
                                          finish_template=failed, max_crashes=crash_budget())

*Which* kinds are rerun and how the rest are settled is policy, decided once
in ``agentstore.tasks.recovery`` (the entry point of the admin, the API, the
command and the worker's sweep); here are the guarded statements. A requeue
counts a crash, not an attempt (a crash is not the task's failure), and
appends ``task_lease_expired`` naming the lost worker. A settle keeps the
task's ``result`` (a worker may have stored partial output), and its UPDATE
re-checks that the lease is still the expired one it selected, so a task
renewed in between is left alone. ``recover_kind`` belongs to the composite
repositories' internal API: ``ToolTaskRepository.recover_expired`` writes each
task's outcome row in its ``after_each``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import datetime
from functools import partial
from typing import Any, NamedTuple

from django.core.exceptions import ImproperlyConfigured

from agentstore.conf import agentstore_settings
from agentstore.db import SqlCursor
from agentstore.exceptions import TaskCrashed, ValidationError
from agentstore.ids import new_id
from agentstore.sql import tasks as task_sql
from agentstore.stores.base import lookup
from agentstore.tasks.lifecycle.rows import TaskRows
from agentstore.tasks.lifecycle.vocabulary import (
    LEASED,
    RECOVERY_BATCH,
    RUNNING,
    TERMINAL,
    coded,
    require_event,
)
from agentstore.types.tasks import TaskFinish, TaskRecovery
from agentstore.validation import require_aware, require_text

__all__ = ["CRASH_CLASS_PATH", "Crash", "ExpiredLeases", "crash_budget", "crash_error"]


class Crash(NamedTuple):
    """A leased task whose worker went away, as recovery found it (``rescue_kind``)."""

    task_id: str
    state: str
    #: The lease owner that went away.
    worker_id: str
    #: The task's crashes, this one included.
    crashes: int


def crash_budget() -> int:
    """``AGENTSTORE["TASK_MAX_CRASHES"]``: how many crashes a task survives (0: none)."""
    value = agentstore_settings.TASK_MAX_CRASHES
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ImproperlyConfigured(
            f"AGENTSTORE['TASK_MAX_CRASHES'] must be an integer ≥ 0, not {value!r}"
        )
    return value


#: ``exception_class_path`` of a crash in a failure event (docs/tasks.md, "Retries and recovery").
CRASH_CLASS_PATH = f"{TaskCrashed.__module__}.{TaskCrashed.__qualname__}"


def crash_error(message: str) -> dict[str, str]:
    """The ``exception_class_path``/``traceback`` pair of an event that records a crash.

    The framework's ``TaskResult.errors`` reads these from failure events, so a
    crash is listed beside the task's own exceptions; a crash has no Python
    traceback, only what happened.
    """
    return {
        "exception_class_path": CRASH_CLASS_PATH,
        "traceback": f"{CRASH_CLASS_PATH}: {message}\n",
    }


class ExpiredLeases(TaskRows):
    """Requeueing and settling leased tasks whose worker went away."""

    def recover_kind(
        self,
        *,
        kind: str,
        expires_before: datetime,
        finish_template: TaskFinish,
        after_each: Callable[[SqlCursor, str], None] | None = None,
    ) -> list[str]:
        """Settle expired leased tasks of ``kind`` in batches; return their ids in order."""
        return self.rescue_kind(
            kind=kind,
            expires_before=expires_before,
            finish_template=finish_template,
            after_each=after_each,
        )[1]

    @lookup("kind", missing=lambda arguments: ([], []))
    def rescue_kind(
        self,
        *,
        kind: str,
        expires_before: datetime,
        finish_template: TaskFinish,
        after_each: Callable[[SqlCursor, str], None] | None = None,
        max_crashes: int | None = None,
        crashed: Callable[[Crash, TaskFinish], TaskFinish] | None = None,
    ) -> tuple[list[str], list[str]]:
        """:meth:`recover_kind`, rerunning crashes within a budget: (requeued, settled) ids.

        With ``max_crashes``, a running task whose worker went away is queued
        again while its crashes so far are fewer (as :meth:`requeue_expired`),
        decided row by row in the same transaction that settles the rest, so a
        task is never settled for want of a budget it still has. ``crashed``
        rewrites the finish of a settled task whose worker went away, knowing
        the crash (its count includes this one): how the budget's end is named.
        """
        requeued: list[str] = []
        settled: list[str] = []
        select = task_sql.expired_of_kind(self.vendor)
        while True:
            event_ids = [new_id() for _ in range(RECOVERY_BATCH)]
            selected, again, done = self.write(
                partial(
                    self._recover_batch,
                    select,
                    kind,
                    expires_before,
                    finish_template,
                    after_each,
                    max_crashes,
                    crashed,
                    event_ids,
                    self.now(),
                ),
                orm=True,
            )
            requeued += again
            settled += done
            if selected < RECOVERY_BATCH or not (again or done):
                return requeued, settled

    def _recover_batch(
        self,
        select: str,
        kind: str,
        expires_before: datetime,
        finish_template: TaskFinish,
        after_each: Callable[[SqlCursor, str], None] | None,
        max_crashes: int | None,
        crashed: Callable[[Crash, TaskFinish], TaskFinish] | None,
        event_ids: list[str],
        now: datetime,
        cursor: SqlCursor,
    ) -> tuple[int, list[str], list[str]]:
        """One batch of :meth:`rescue_kind` (one write transaction): selected, requeued, settled."""
        before = self._db_time(expires_before)
        cursor.execute(select, [kind, before])
        candidates = cursor.fetchall()
        requeued: list[str] = []
        settled: list[str] = []
        at = self._db_time(now)
        for (task_id, owner, crashes, state), event_id in zip(candidates, event_ids, strict=False):
            # Only a running task that had a worker crashed; one being canceled is settled.
            budget = max_crashes if owner is not None and state == RUNNING else None
            if (
                budget is not None
                and crashes < budget
                and self._requeue_row(cursor, task_id, owner, crashes, budget, before, event_id, at)
            ):
                requeued.append(task_id)
                continue
            # Recovery keeps the task's result and has no lease to fence on.
            finish = replace(
                finish_template, task_id=task_id, from_states=LEASED, result="", lease_owner=""
            )
            if crashed is not None and owner is not None:
                finish = crashed(Crash(task_id, state, str(owner), int(crashes) + 1), finish)
            if self._finish_keeping_result(cursor, finish, event_id, now, expires_before, owner):
                if after_each is not None:
                    after_each(cursor, task_id)
                settled.append(task_id)
        return len(candidates), requeued, settled

    def _finish_keeping_result(
        self,
        cursor: SqlCursor,
        finish: TaskFinish,
        event_id: str,
        now: datetime,
        expires_before: datetime,
        owner: str | None,
    ) -> bool:
        # Recovery leaves ``result`` alone (a worker may have stored partial output).
        at = self._db_time(now)
        params: list[Any] = [
            finish.target_state,
            finish.error_code,
            finish.error_message,
            at,
            at,
            finish.task_id,
            self._db_time(expires_before),
        ]
        if owner is None:
            statement = task_sql.RECOVER_ONE_UNOWNED
        else:
            statement = task_sql.RECOVER_ONE_OWNED
            params.append(owner)
        cursor.execute(statement, params)
        if cursor.rowcount != 1:
            return False
        self._append_next_event(
            cursor, finish.task_id, event_id, finish.event_kind, finish.payload_json, at
        )
        return True

    def recover_expired(self, recovery: TaskRecovery | None) -> list[str]:
        """Settle running/canceling tasks of one kind whose lease is absent or expired.

        ``expires_before`` is inclusive. Runs in batches of 100, each one short
        write transaction; returns the recovered ids in ``created_at, id``
        order. ``result`` is left as the worker last wrote it.
        """
        if recovery is None:
            raise coded(
                ValidationError("task recovery is required", field="recovery"), "nil_task_recovery"
            )
        if str(recovery.target_state) not in TERMINAL:
            raise ValidationError(
                "task recovery requires a terminal target", field="recovery.target_state"
            )
        require_text(recovery.kind, "recovery.kind")
        if recovery.expires_before is None:
            raise ValidationError(
                "recovery.expires_before is required", field="recovery.expires_before"
            )
        expires_before = require_aware(recovery.expires_before, "recovery.expires_before")
        require_event(recovery.event_kind, recovery.payload_json)
        template = TaskFinish(
            event_kind=recovery.event_kind,
            error_code=recovery.error_code,
            error_message=recovery.error_message,
            payload_json=recovery.payload_json,
            target_state=str(recovery.target_state),
        )
        return self.recover_kind(
            kind=recovery.kind, expires_before=expires_before, finish_template=template
        )

    def requeue_expired(
        self,
        expires_before: datetime,
        kinds: Sequence[str] = (),
        *,
        max_crashes: int | None = None,
    ) -> list[str]:
        """Queue again running tasks whose lease expired and that have crash budget left.

        At-least-once delivery for work whose worker died: each such task goes
        back to ``queued`` with its crash counted (``crashes`` + 1; its retry
        attempts are not spent: a crash is not the task's failure), event
        ``task_lease_expired`` naming the lost worker, and the dead worker's
        late writes stay fenced out because it no longer holds the lease. A
        task is requeued while its crashes so far are fewer than
        ``max_crashes`` (default: ``AGENTSTORE["TASK_MAX_CRASHES"]``); the rest
        are left for :meth:`recover_expired`. ``kinds`` empty means every kind
        (``agentstore.tasks.recovery`` names the kinds that are rerun).
        Returns the requeued ids.
        """
        before = self._db_time(require_aware(expires_before, "expires_before"))
        budget = crash_budget() if max_crashes is None else max_crashes
        select = task_sql.expired_requeueable(len(kinds), self.vendor)
        requeued: list[str] = []
        while True:
            event_ids = [new_id() for _ in range(RECOVERY_BATCH)]
            at = self._db_time(self.now())
            selected, changed = self.write(
                partial(
                    self._requeue_batch,
                    select,
                    [before, budget, *kinds],
                    before,
                    budget,
                    event_ids,
                    at,
                ),
            )
            requeued += changed
            if selected < RECOVERY_BATCH or not changed:
                return requeued

    def _requeue_batch(
        self,
        select: str,
        params: list[Any],
        before: Any,
        budget: int,
        event_ids: list[str],
        at: Any,
        cursor: SqlCursor,
    ) -> tuple[int, list[str]]:
        """One batch of :meth:`requeue_expired` (one write transaction): selected count, ids."""
        cursor.execute(select, params)
        candidates = cursor.fetchall()
        return len(candidates), [
            str(task_id)
            for (task_id, owner, crashes), event_id in zip(candidates, event_ids, strict=False)
            if self._requeue_row(cursor, task_id, owner, crashes, budget, before, event_id, at)
        ]

    def _requeue_row(
        self,
        cursor: SqlCursor,
        task_id: str,
        owner: str,
        crashes: int,
        budget: int,
        before: Any,
        event_id: str,
        at: Any,
    ) -> bool:
        """Queue one crashed task again, its crash counted; event ``task_lease_expired``."""
        count = int(crashes) + 1
        message = (
            f"the worker running the task went away (lease expired): crash {count} "
            f"of {budget} allowed, queued to run again"
        )
        cursor.execute(task_sql.REQUEUE_EXPIRED, [message, at, task_id, owner, before, budget])
        if cursor.rowcount != 1:
            return False
        payload = {
            "worker_id": owner,
            "error_code": "lease_expired",
            "crashes": count,
            "max_crashes": budget,
            **crash_error(message),
        }
        self._append_next_event(
            cursor, task_id, event_id, "task_lease_expired", json.dumps(payload), at
        )
        return True
