"""Changing a task's state: a named transition, or the terminal finish fenced on its lease.

No transition graph: the caller names the states it moves the task from, and
the guarded UPDATE's row count says whether it did (``False``: the task was in
another state, its lease was not the caller's, or it does not exist)::

    tasks.transition(task_id, ["running"], "canceling", "task_canceling")
    tasks.finish(TaskFinish(task_id=task_id, lease_owner="worker-1",
                            from_states=["running", "canceling"], target_state="succeeded",
                            event_kind="task_succeeded", payload_json="{}"))
    flags = tasks.finish_many([first, second])     # one commit, one flag per finish

A terminal state is reached by ``finish`` — the lease owner's, while its lease
is live, or nobody's when the task holds no lease — or by recovery once the
lease expired (``expired.py``); ``transition`` never settles leased work. Each
call is one short write transaction around the pieces in ``rows.py``
(``transition_row``, ``finish_row``), which the composite repositories use
inside their own transactions.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentstore.db import SqlCursor
from agentstore.exceptions import ValidationError
from agentstore.ids import new_id
from agentstore.tasks.lifecycle.rows import TaskRows
from agentstore.tasks.lifecycle.vocabulary import require_event, require_states
from agentstore.types.tasks import TaskFinish
from agentstore.validation import require_max_length

__all__ = ["TaskSettling"]


class TaskSettling(TaskRows):
    """State changes: ``transition`` and the lease-fenced ``finish``."""

    def transition(
        self,
        task_id: str,
        from_states: Sequence[str],
        target_state: str,
        kind: str,
        payload_json: str = "",
        lease_owner: str = "",
    ) -> bool:
        """Move the task from one of ``from_states`` to ``target_state`` and append ``kind``.

        No transition graph: the caller names the allowed sources. The lease
        fences it like :meth:`renew_lease` and :meth:`finish`: with
        ``lease_owner``, that owner's lease must be live; without, a terminal
        target needs a task without a lease (leased work is settled by its
        owner's :meth:`finish` or by recovery) and any other target but
        ``canceling`` (a request the lease holder answers) needs no *live* lease.
        Moving to ``queued`` clears the lease. ``""`` payload means ``{}``.
        """
        states = require_states(from_states, "from_states")
        if not states:
            raise ValidationError("task transition requires a source state", field="from_states")
        target = require_states([target_state], "target_state")[0]
        payload = payload_json or "{}"
        require_event(kind, payload)
        require_max_length(lease_owner, 255, "lease_owner")
        event_id, now = new_id(), self.now()
        return self.write(
            lambda cursor: self.transition_row(
                cursor,
                task_id,
                states,
                target,
                kind,
                payload,
                event_id,
                now,
                lease_owner=lease_owner,
            )
        )

    def cancel(self, task_id: str, payload_json: str = "{}") -> str:
        """Cancel a queued task, or ask a running one to stop; the state it is in now.

        ``"canceled"``, ``"canceling"`` (its worker answers), or ``""`` when it
        can no longer be canceled (:meth:`cancel_row`, in one transaction).
        """
        require_event("task_canceled", payload_json)
        event_id, now = new_id(), self.now()
        return self.write(
            lambda cursor: self.cancel_row(cursor, task_id, payload_json, event_id, now)
        )

    def finish(self, finish: TaskFinish | None) -> bool:
        """Settle the task in a terminal state, fenced on its lease; ``False`` if unchanged."""
        clean = self.validated_finish(finish)
        event_id, now = new_id(), self.now()
        # "Now" adapted outside the writer queue: finish_row's own adaptation
        # of the same "now" is then a cache hit.
        self._db_time(now)
        return self.write(lambda cursor: self.finish_row(cursor, clean, event_id, now))

    def finish_many(self, finishes: Sequence[TaskFinish]) -> list[bool]:
        """:meth:`finish` for several tasks in one write transaction; one flag per finish.

        Each is fenced on its own lease exactly as :meth:`finish`; a worker
        settling a batch of short tasks pays one commit instead of one each.
        """
        clean = [self.validated_finish(finish) for finish in finishes]
        if not clean:
            return []
        event_ids, now = [new_id() for _ in clean], self.now()

        def finish_them(cursor: SqlCursor) -> list[bool]:
            return [
                self.finish_row(cursor, finish, event_id, now)
                for finish, event_id in zip(clean, event_ids, strict=True)
            ]

        return self.write(finish_them)
