"""What a lease holder does with its lease short of finishing: renew it, release it, retry later.

A worker keeps the leases of the tasks it runs alive, and gives back a task it
will not finish now::

    kept = tasks.renew_leases(held_ids, "worker-1", now + ttl)    # the ids still ours
    tasks.release(task_id, "worker-1")        # stopping: back to its queue, attempt not spent
    tasks.retry(task_id, "worker-1", now + backoff, error_code="timeout")    # again later

Each is fenced on the live lease in the same statement (the owner, and
``lease_expires_at > now``): an expired lease cannot be revived, and a worker
whose lease expired or was taken changes nothing — the method returns
``False`` (or leaves the id out). Renewal appends no event and bumps
``updated_at``; ``release`` appends ``task_released`` and ``retry`` its
``event_kind`` (``task_retry_scheduled``), in the same write transaction.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime

from agentstore.db import SqlCursor
from agentstore.exceptions import ValidationError
from agentstore.ids import new_id
from agentstore.sql import tasks as task_sql
from agentstore.stores.base import false, lookup
from agentstore.tasks.lifecycle.rows import TaskRows
from agentstore.tasks.lifecycle.vocabulary import require_event
from agentstore.validation import require_aware

__all__ = ["TaskLeases"]


class TaskLeases(TaskRows):
    """Renewing, releasing and rescheduling a held task, fenced on its live lease."""

    def renew_lease(
        self, task_id: str, lease_owner: str, lease_expires_at: datetime | None
    ) -> bool:
        """Set a new expiry while ``lease_owner`` still holds a live lease; no event.

        An expired lease cannot be revived. Renewal bumps ``updated_at``.
        :meth:`renew_leases` of one id: one statement serves both (decision record 0043).
        """
        return bool(self.renew_leases([task_id], lease_owner, lease_expires_at))

    def renew_leases(
        self, task_ids: Sequence[str], lease_owner: str, lease_expires_at: datetime | None
    ) -> list[str]:
        """:meth:`renew_lease` for several tasks in one write; return the ids still held."""
        if not task_ids:
            return []
        if not (lease_owner or "").strip() or lease_expires_at is None:
            raise ValidationError("lease renewal requires an owner and expiry", field="lease_owner")
        expires = self._db_time(require_aware(lease_expires_at, "lease_expires_at"))
        at = self._db_time(self.now())

        ids = list(dict.fromkeys(task_ids))
        # One statement for every held lease (a worker holds at most a batch).
        statement = task_sql.renew_many(len(ids))

        def renew(cursor: SqlCursor) -> list[str]:
            cursor.execute(statement, [expires, at, *ids, lease_owner, at])
            kept = {str(row[0]) for row in cursor.fetchall()}
            return [task_id for task_id in ids if task_id in kept]

        return self.write(renew)

    def retry(
        self,
        task_id: str,
        lease_owner: str,
        run_after: datetime,
        *,
        error_code: str = "",
        error_message: str = "",
        event_kind: str = "task_retry_scheduled",
        payload_json: str = "{}",
    ) -> bool:
        """Put a running task back in its queue until ``run_after``; fenced on the live lease.

        The lease is released and the error kept on the task (a later claim
        clears it); ``False`` when ``lease_owner`` no longer holds the task.
        """
        require_event(event_kind, payload_json)
        when = self._db_time(require_aware(run_after, "run_after"))
        event_id, at = new_id(), self._db_time(self.now())

        def retry_it(cursor: SqlCursor) -> bool:
            cursor.execute(
                task_sql.RETRY, [when, error_code, error_message, at, task_id, lease_owner, at]
            )
            if cursor.rowcount != 1:
                return False
            self._append_next_event(cursor, task_id, event_id, event_kind, payload_json, at)
            return True

        return self.write(retry_it)

    @lookup("task_id", "lease_owner", missing=false)
    def release(
        self,
        task_id: str,
        lease_owner: str,
        *,
        run_after: datetime | None = None,
        reason: str = "",
    ) -> bool:
        """Give a claimed task back to its queue unrun; fenced on the lease.

        A stopping worker does, and so does a handler that cannot start yet
        (:class:`~agentstore.tasks.handlers.Postpone`): then not before
        ``run_after``. The claim's attempt is not counted; event
        ``task_released`` (with ``reason`` when given).
        """
        when = None if run_after is None else self._db_time(require_aware(run_after, "run_after"))
        event_id, at = new_id(), self._db_time(self.now())
        payload = json.dumps(
            {"worker_id": lease_owner, **({"reason": reason[:1000]} if reason else {})}
        )

        def release_it(cursor: SqlCursor) -> bool:
            cursor.execute(task_sql.RELEASE, [when, at, task_id, lease_owner, at])
            if cursor.rowcount != 1:
                return False
            self._append_next_event(cursor, task_id, event_id, "task_released", payload, at)
            return True

        return self.write(release_it)
