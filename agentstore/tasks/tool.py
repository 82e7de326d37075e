"""Tool tasks: background tool invocations, idempotent on (owner session, invocation id).

A tool task is a generic task of kind ``tool`` plus the admitted invocation
(target, arguments, cwd, call ids, timeout, policy, definition) and, once it
settles, a canonical outcome::

    tools = ToolTaskRepository(tasks=tasks)
    task = tools.create(ToolTaskEntity(owner_session_id=sid, invocation_id="call-1",
                                       wrapper_call_id="w-1", target_name="read", cwd="/repo",
                                       arguments_json='{"path": "go.mod"}', timeout_seconds=30,
                                       definition_json="{}"))
    tools.create(same_invocation)          # returns the same task, unchanged

Rules worth knowing:

* **Idempotent admission.** A second ``create`` with the same (owner,
  invocation id) returns the original task without comparing anything else.
  Two concurrent duplicates race on the unique index; the loser looks the
  invocation up again and returns the winner's task.
* **Cancellation wins.** A task in ``canceling`` settles as ``canceled`` with
  the canonical canceled outcome whatever target its worker asks for (the
  worker's live lease is still required).
* **Outcome and terminal state are written together**, so "has an outcome" ⇔
  "settled through this repository" (``outcome_version`` is 1, else ``None``).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.db import IntegrityError
from django.db.models import QuerySet

from agentstore.db import SqlCursor
from agentstore.exceptions import AgentStoreError, NoSession, ValidationError
from agentstore.ids import new_id
from agentstore.models import Session, ToolTask
from agentstore.models.tasks import TOOL_ARGUMENTS_MAX_BYTES
from agentstore.sql import tasks as task_sql
from agentstore.stores.base import lookup, none, nothing
from agentstore.tasks._graph import SharesTasks
from agentstore.tasks.lifecycle.vocabulary import (
    QUEUED,
    RUNNING,
    clamp_limit,
    coded,
    require_states,
    task_from_model,
)
from agentstore.types.tasks import TaskEntity, TaskFinish, ToolTaskEntity
from agentstore.validation import (
    require_json,
    require_json_object,
    require_max_length,
    require_uuid7,
)

__all__ = [
    "CANCELED_OUTCOME",
    "LEASE_EXPIRED_OUTCOME",
    "OUTCOME_VERSION",
    "ToolTaskRepository",
]

TOOL_KIND = "tool"
#: Format version of ``outcome_json``.
OUTCOME_VERSION = 1
#: The canonical outcome of a canceled tool task (exact text).
CANCELED_OUTCOME = (
    '{"error":"task canceled","is_error":true,"result":{"content":[],"details":{}},'
    '"truncated":false}'
)
#: The canonical outcome of a tool task whose worker's lease expired (exact text).
LEASE_EXPIRED_OUTCOME = (
    '{"error":"task worker lease expired","is_error":true,'
    '"result":{"content":[],"details":{}},"truncated":false}'
)


def tool_from_model(row: ToolTask) -> ToolTaskEntity:
    """Build a :class:`ToolTaskEntity` from a ``ToolTask`` with its task loaded."""
    return ToolTaskEntity(
        task=task_from_model(row.task),
        wrapper_call_id=row.wrapper_call_id,
        owner_session_id=row.owner_session_id,
        invocation_id=row.invocation_id,
        cwd=row.cwd,
        parent_call_id=row.parent_call_id,
        initiating_entry_id=row.initiating_entry_id,
        policy_json=row.policy_json,
        definition_json=row.definition_json,
        arguments_json=row.arguments_json,
        target_name=row.target_name,
        source_sequence=row.source_sequence,
        timeout_seconds=row.timeout_seconds,
        outcome_version=row.outcome_version,
        outcome_json=row.outcome_json,
    )


class ToolTaskRepository(SharesTasks):
    """Persist tool tasks atomically with their generic lifecycle."""

    # -- admission ---------------------------------------------------------------

    @staticmethod
    def _prepare(candidate: ToolTaskEntity | None) -> ToolTaskEntity:
        if candidate is None:
            raise coded(
                ValidationError("tool task is required", field="tool_task"), "nil_tool_task"
            )
        required = (
            candidate.target_name,
            candidate.cwd,
            candidate.owner_session_id,
            candidate.invocation_id,
            candidate.wrapper_call_id,
        )
        if any(not value.strip() for value in required):
            raise ValidationError(
                "tool task target, cwd, owner, invocation, and wrapper call are required",
                field="tool_task",
            )
        owner = require_uuid7(candidate.owner_session_id, "tool_task.owner_session_id")
        for name in ("target_name", "invocation_id", "wrapper_call_id", "parent_call_id"):
            require_max_length(getattr(candidate, name), 255, f"tool_task.{name}")
        require_max_length(candidate.initiating_entry_id, 128, "tool_task.initiating_entry_id")
        if candidate.timeout_seconds <= 0:
            raise ValidationError(
                "tool task timeout must be positive", field="tool_task.timeout_seconds"
            )
        try:
            require_json_object(candidate.arguments_json, "tool_task.arguments_json")
            bounded = len(candidate.arguments_json.encode()) <= TOOL_ARGUMENTS_MAX_BYTES
        except ValidationError:
            bounded = False  # reported below with the documented message
        if not bounded:
            raise ValidationError(
                "tool task arguments must be a bounded JSON object",
                field="tool_task.arguments_json",
            )
        policy = candidate.policy_json or "{}"
        _require_object(policy, "tool task policy must be a JSON object", "tool_task.policy_json")
        _require_object(
            candidate.definition_json,
            "tool task definition must be a JSON object",
            "tool_task.definition_json",
        )
        parent = ""
        if candidate.task.parent_task_id.strip():
            parent = require_uuid7(candidate.task.parent_task_id, "task.parent_task_id")
        require_max_length(candidate.task.concurrency_key, 255, "task.concurrency_key")
        return ToolTaskEntity(
            task=TaskEntity(
                kind=TOOL_KIND,
                owner_session_id=owner,
                parent_task_id=parent,
                concurrency_key=candidate.task.concurrency_key,
            ),
            wrapper_call_id=candidate.wrapper_call_id,
            owner_session_id=owner,
            invocation_id=candidate.invocation_id,
            cwd=candidate.cwd,
            parent_call_id=candidate.parent_call_id,
            initiating_entry_id=candidate.initiating_entry_id,
            policy_json=policy,
            definition_json=candidate.definition_json,
            arguments_json=candidate.arguments_json,
            target_name=candidate.target_name,
            source_sequence=candidate.source_sequence,
            timeout_seconds=candidate.timeout_seconds,
        )

    def create(self, candidate: ToolTaskEntity | None) -> ToolTaskEntity:
        """Admit a tool invocation as a queued task, or return the one already admitted.

        Idempotent on (owner session, invocation id) only: a duplicate with
        other arguments returns the original unchanged. The caller's entity is
        not modified (an empty policy is stored as ``{}``).
        """
        return self.create_created(candidate)[0]

    def create_created(self, candidate: ToolTaskEntity | None) -> tuple[ToolTaskEntity, bool]:
        """:meth:`create`, and whether this call admitted the task (``False``: a replay).

        "Created" means this call's insert committed; a replay found before
        writing, or a concurrent duplicate that won the unique (owner,
        invocation) index, is ``False`` — so of racing identical calls exactly
        one is told "created" (the API's 201 vs 200, docs/api.md "Replays").
        """
        tool = self._prepare(candidate)
        existing = self.get_by_invocation(tool.owner_session_id, tool.invocation_id)
        if existing is not None:
            return existing, False
        task_id, event_id, now = new_id(), new_id(), self.now()
        try:
            self.write(lambda cursor: self._insert(cursor, tool, task_id, event_id, now), orm=True)
        except IntegrityError:
            # A concurrent duplicate won the unique (owner, invocation) index:
            # its task is the answer. Anything else was a real failure.
            existing = self.get_by_invocation(tool.owner_session_id, tool.invocation_id)
            if existing is not None:
                return existing, False
            raise
        created = self.get(task_id)
        assert created is not None
        return created, True

    def _insert(
        self, cursor: SqlCursor, tool: ToolTaskEntity, task_id: str, event_id: str, now: datetime
    ) -> None:
        if not Session.objects.using(self.using).filter(pk=tool.owner_session_id).exists():
            raise NoSession(
                f"create tool task: owner session {tool.owner_session_id} does not exist"
            )
        self.tasks.insert_task(cursor, tool.task, task_id, event_id, now)
        # The tool row repeats the task's owner from the same value: the
        # idempotency index (owner_session, invocation_id) lives on this table.
        ToolTask.objects.using(self.using).create(
            task_id=task_id,
            owner_session_id=tool.owner_session_id,
            target_name=tool.target_name,
            arguments_json=tool.arguments_json,
            cwd=tool.cwd,
            invocation_id=tool.invocation_id,
            wrapper_call_id=tool.wrapper_call_id,
            parent_call_id=tool.parent_call_id,
            source_sequence=tool.source_sequence,
            initiating_entry_id=tool.initiating_entry_id,
            timeout_seconds=tool.timeout_seconds,
            policy_json=tool.policy_json,
            definition_json=tool.definition_json,
        )

    # -- settlement --------------------------------------------------------------

    def finish(self, finish: TaskFinish | None, outcome_json: str) -> bool:
        """Settle the task and store its outcome atomically (cancellation wins; lease-fenced)."""
        clean = self.tasks.validated_finish(finish)
        require_json(outcome_json, "tool_task.outcome_json")
        event_id, now = new_id(), self.now()

        def settle(cursor: SqlCursor) -> bool:
            state = self.tasks.lock_task(cursor, clean.task_id)
            if state is None:
                return False
            effective, outcome = clean, outcome_json
            if state == "canceling" and clean.target_state != "canceled":
                # Cancellation was requested: whatever the worker finished
                # with, the task settles as canceled (still under its lease).
                effective = TaskFinish(
                    task_id=clean.task_id,
                    event_kind="task_canceled",
                    error_code="canceled",
                    error_message="task canceled",
                    payload_json='{"error_code":"canceled"}',
                    lease_owner=clean.lease_owner,
                    target_state="canceled",
                    from_states=("canceling",),
                )
                outcome = CANCELED_OUTCOME
            if not self.tasks.finish_row(cursor, effective, event_id, now):
                return False
            self._store_outcome(clean.task_id, outcome)
            return True

        return self.write(settle, orm=True)

    def _store_outcome(self, task_id: str, outcome: str) -> None:
        updated = (
            ToolTask.objects.using(self.using)
            .filter(pk=task_id)
            .update(outcome_version=OUTCOME_VERSION, outcome_json=outcome)
        )
        if updated != 1:
            # Rolls the terminal write back with it: state and outcome go together.
            raise AgentStoreError("tool task outcome row missing")

    def recover_expired(self, expires_before: datetime) -> list[str]:
        """Interrupt running/canceling tool tasks whose lease is absent or expired by then.

        Each gets the ``task_interrupted`` event and the lease-expired outcome;
        live leases are untouched. Returns the recovered ids (librecode returns
        nothing).
        """
        if expires_before is None:
            raise ValidationError("expires_before is required", field="expires_before")
        template = TaskFinish(
            event_kind="task_interrupted",
            error_code="lease_expired",
            error_message="task worker lease expired",
            payload_json='{"error_code":"lease_expired"}',
            target_state="interrupted",
        )
        return self.tasks.recover_kind(
            kind=TOOL_KIND,
            expires_before=expires_before,
            finish_template=template,
            after_each=lambda _cursor, task_id: self._store_outcome(task_id, LEASE_EXPIRED_OUTCOME),
        )

    def cancel(self, owner: str, task_id: str) -> ToolTaskEntity | None:
        """Request cancellation of the owner's tool task and return its fresh snapshot.

        queued → ``canceled`` with the canceled outcome; running → ``canceling``
        (event ``task_canceling``, lease kept, the worker settles it);
        canceling or terminal → no change. ``None`` when the task is missing,
        not a tool task, or owned by another session.
        """
        owner = require_uuid7(owner, "tool_task.owner_session_id")
        task_id = require_uuid7(task_id, "tool_task.task_id")
        event_id, now = new_id(), self.now()
        tasks = self.tasks

        def cancel_it(cursor: SqlCursor) -> bool:
            cursor.execute(task_sql.lock_tool_task(tasks.vendor), [task_id])
            row = cursor.fetchone()
            if row is None or row[1] != TOOL_KIND or row[2] != owner:
                return False
            state = row[0]
            if state == QUEUED:
                finish = TaskFinish(
                    task_id=task_id,
                    event_kind="task_canceled",
                    error_code="canceled",
                    error_message="task canceled",
                    payload_json='{"error_code":"canceled"}',
                    target_state="canceled",
                    from_states=(QUEUED,),
                )
                if tasks.finish_row(cursor, finish, event_id, now):
                    self._store_outcome(task_id, CANCELED_OUTCOME)
            elif state == RUNNING:
                tasks.transition_row(
                    cursor,
                    task_id,
                    (RUNNING,),
                    "canceling",
                    "task_canceling",
                    '{"canceled_by":"parent"}',
                    event_id,
                    now,
                )
            return True

        if not self.write(cancel_it, orm=True):
            return None
        return self.get_owned(owner, task_id)

    # -- reads -------------------------------------------------------------------

    def _rows(self) -> QuerySet[ToolTask]:
        return (
            ToolTask.objects.using(self.using).select_related("task").filter(task__kind=TOOL_KIND)
        )

    def get(self, task_id: str) -> ToolTaskEntity | None:
        """Return the tool task, or ``None``."""
        task_id = require_uuid7(task_id, "tool_task.task_id")
        row = self._rows().filter(task_id=task_id).first()
        return None if row is None else tool_from_model(row)

    def get_by_invocation(self, owner_session_id: str, invocation_id: str) -> ToolTaskEntity | None:
        """Return the tool task admitted for the owner's invocation id, or ``None``."""
        owner = require_uuid7(owner_session_id, "tool_task.owner_session_id")
        return self._by_invocation(owner, invocation_id)

    @lookup("invocation_id", missing=none)  # after the owner's check, as without it
    def _by_invocation(self, owner: str, invocation_id: str) -> ToolTaskEntity | None:
        row = self._rows().filter(owner_session_id=owner, invocation_id=invocation_id).first()
        return None if row is None else tool_from_model(row)

    def get_owned(self, owner: str, task_id: str) -> ToolTaskEntity | None:
        """Return the tool task only if ``owner`` owns it, else ``None``."""
        owner = require_uuid7(owner, "tool_task.owner_session_id")
        task_id = require_uuid7(task_id, "tool_task.task_id")
        row = self._rows().filter(task_id=task_id, owner_session_id=owner).first()
        return None if row is None else tool_from_model(row)

    @lookup("task_ids", missing=nothing)
    def list_by_ids(self, task_ids: Sequence[str]) -> list[ToolTaskEntity]:
        """Return the tool tasks among ``task_ids`` (no ordering guarantee)."""
        if not task_ids:
            return []
        return [tool_from_model(row) for row in self._rows().filter(task_id__in=list(task_ids))]

    def list_by_owner(
        self, owner: str, states: Sequence[str] = (), limit: int = 0
    ) -> list[ToolTaskEntity]:
        """Return the owner's tool tasks (optionally in ``states``), newest first; limit 1..100."""
        owner = require_uuid7(owner, "tool_task.owner_session_id")
        qs = self._rows().filter(owner_session_id=owner)
        if states:
            qs = qs.filter(task__state__in=require_states(states, "states"))
        rows = qs.order_by("-task__updated_at", "-task__id")[: clamp_limit(limit)]
        return [tool_from_model(row) for row in rows]


def _require_object(text: str, message: str, field: str) -> None:
    try:
        require_json_object(text, field)
    except ValidationError:
        raise ValidationError(message, field=field) from None
