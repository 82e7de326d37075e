"""Recovering expired leases: the one entry point the admin, the API and the command call.

A worker that dies leaves its task ``running`` (or ``canceling``) with a lease
that nobody renews. Recovery settles every such task whose lease expired::

    from agentstore.tasks.recovery import recover_expired_leases

    recovered = recover_expired_leases()            # {kind: [task ids]}, every kind
    recovered = recover_expired_leases(["tool"])    # one kind

The policy lives here once, because each kind has its own rule: a *tool* task
must end with its canonical outcome (``ToolTaskRepository.recover_expired``
writes the lease-expired outcome in the same transaction — the tool-task rule
in ``models/tasks.py``), every other kind is settled by
``TaskRepository.recover_expired`` with the event and error below. Three
surfaces used to spell this out separately and the API's copy sent tool tasks
down the generic path, leaving them ``interrupted`` with a NULL outcome
(``docs/tasks.md``, "Recovery").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime

from agentstore.exceptions import ValidationError
from agentstore.models import Task
from agentstore.tasks.repository import LEASED, TERMINAL, TaskRepository
from agentstore.tasks.tool import TOOL_KIND, ToolTaskRepository
from agentstore.types.tasks import TaskRecovery

__all__ = ["FAILED", "LEASE_EXPIRED", "RecoveryPolicy", "recover_expired_leases"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RecoveryPolicy:
    """How a recovered task of a generic kind is settled (tool tasks have their own rule)."""

    target_state: str = "interrupted"
    event_kind: str = "task_interrupted"
    error_code: str = "lease_expired"
    error_message: str = "task worker lease expired"
    payload_json: str = '{"error_code":"lease_expired"}'


#: The default: ``interrupted``, event ``task_interrupted``, error ``lease_expired``.
LEASE_EXPIRED = RecoveryPolicy()
#: A function task whose worker died is ``failed`` (django.tasks has no "interrupted").
FAILED = RecoveryPolicy(target_state="failed", event_kind="task_failed")


def recover_expired_leases(
    kinds: Iterable[str] | None = None,
    *,
    now: datetime | None = None,
    policy: RecoveryPolicy = LEASE_EXPIRED,
    policies: Mapping[str, RecoveryPolicy] | None = None,
    tasks: TaskRepository | None = None,
) -> dict[str, list[str]]:
    """Settle the leased tasks of ``kinds`` (``None``: every kind) whose lease expired by ``now``.

    Returns the recovered ids by kind, kinds in name order (each list in
    ``created_at, id`` order). ``policy`` applies to generic kinds, ``policies``
    overrides it per kind (the worker settles function tasks ``failed``); tool tasks
    are always settled ``interrupted`` with the lease-expired outcome, so a
    policy with another target is refused for them (``ValidationError``).
    """
    tasks = tasks or TaskRepository()
    when = now if now is not None else tasks.now()
    chosen_policies = {**(policies or {})}
    for rule in (policy, *chosen_policies.values()):
        if rule.target_state not in TERMINAL:
            raise ValidationError(
                "recovery needs a terminal target state", field="recovery.target_state"
            )
    if kinds is None:
        chosen = set(
            Task.objects.using(tasks.using)
            .filter(state__in=LEASED)
            .values_list("kind", flat=True)
            .distinct()
        )
    else:
        chosen = {str(kind) for kind in kinds}
    tool_policy = chosen_policies.get(TOOL_KIND, policy)
    if TOOL_KIND in chosen and tool_policy.target_state != LEASE_EXPIRED.target_state:
        raise ValidationError(
            "tool tasks are recovered as interrupted with the lease-expired outcome",
            field="recovery.target_state",
        )
    recovered: dict[str, list[str]] = {}
    for kind in sorted(chosen):
        if kind == TOOL_KIND:
            recovered[kind] = ToolTaskRepository(tasks=tasks).recover_expired(when)
            continue
        rule = chosen_policies.get(kind, policy)
        recovered[kind] = tasks.recover_expired(
            TaskRecovery(
                kind=kind,
                expires_before=when,
                target_state=rule.target_state,
                event_kind=rule.event_kind,
                error_code=rule.error_code,
                error_message=rule.error_message,
                payload_json=rule.payload_json,
            )
        )
    return recovered
