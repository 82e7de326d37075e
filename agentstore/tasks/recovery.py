"""Recovering expired leases: the one policy of the admin, the API, the command and the worker.

A worker that dies (SIGKILL, OOM, a lost host) leaves its tasks ``running`` (or
``canceling``) under a lease that nobody renews. Recovery deals with every such
task whose lease expired::

    from agentstore.tasks.recovery import recover_expired_leases, rescue_expired

    recovered = recover_expired_leases()            # {kind: [task ids]}, every kind
    recovered = recover_expired_leases(["tool"])    # one kind
    report = rescue_expired(["function"])           # .requeued / .settled, by kind

What happens depends on the kind, and is decided here once
(docs/tasks.md, "Retries and recovery"):

* **A crash is not the task's failure.** A task of a kind the worker reruns —
  ``function`` (``django.tasks``) and every kind that is not ``agent``,
  ``tool`` or ``workflow`` — goes back to its queue (event
  ``task_lease_expired``) with its crash counted and its retry attempts
  untouched, while its crashes so far are fewer than
  ``AGENTSTORE["TASK_MAX_CRASHES"]`` (default 3): at least once, as Oban's
  Lifeline "rescues orphaned jobs" and Procrastinate "retries stalled jobs".
  The crash past the budget fails it (error ``crashed``, "… went away N
  times"), so a task that kills its worker does not loop forever. A
  ``canceling`` task whose worker went away is settled ``canceled``: its
  cancel was asked, and rerunning it would not honour that.
* **agent, tool and workflow tasks are never rerun** (librecode's contract):
  they end ``interrupted`` for their owner to decide — a tool task with its
  canonical lease-expired outcome in the same transaction
  (``ToolTaskRepository.recover_expired``); a workflow resumes with
  ``claim_interrupted``. Their crash is still counted.

A caller may instead name the ``policy`` (or ``policies`` by kind) that settles
the expired tasks: then nothing of those kinds is rerun, they are settled as
told — the API's ``recover-expired`` is librecode's RecoverExpired, whose body
names the target state. Tool tasks only accept the lease-expired rule. Three
surfaces used to spell this out separately, and the API's copy sent tool tasks
down the generic path, leaving them ``interrupted`` with a NULL outcome.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime

from agentstore.exceptions import ValidationError
from agentstore.models import Task
from agentstore.tasks.lifecycle.expired import Crash, crash_budget, crash_error
from agentstore.tasks.lifecycle.vocabulary import LEASED, TERMINAL
from agentstore.tasks.repository import TaskRepository
from agentstore.tasks.tool import TOOL_KIND, ToolTaskRepository
from agentstore.types.tasks import TaskFinish

__all__ = [
    "CRASHED",
    "FAILED",
    "LEASE_EXPIRED",
    "NOT_RERUN",
    "Recovered",
    "RecoveryPolicy",
    "policy_of",
    "recover_expired_leases",
    "rescue_expired",
    "reruns",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class RecoveryPolicy:
    """How a recovered task that is not rerun is settled (tool tasks have their own rule)."""

    target_state: str = "interrupted"
    event_kind: str = "task_interrupted"
    error_code: str = "lease_expired"
    error_message: str = "task worker lease expired"
    payload_json: str = '{"error_code":"lease_expired"}'


#: agent, tool and workflow tasks: ``interrupted``, event ``task_interrupted``, error
#: ``lease_expired`` (librecode's RecoverExpired; the owner decides what next).
LEASE_EXPIRED = RecoveryPolicy()
#: A task ``failed`` with the lease-expired error (a caller's explicit choice).
FAILED = RecoveryPolicy(target_state="failed", event_kind="task_failed")
#: A rerun kind past its crash budget: ``failed``, error ``crashed``. The message and
#: payload name the count (see :func:`_name_the_crash`).
CRASHED = RecoveryPolicy(
    target_state="failed",
    event_kind="task_failed",
    error_code="crashed",
    error_message="the worker running the task went away (lease expired)",
    payload_json='{"error_code":"crashed"}',
)
#: Kinds whose crash is settled, never rerun: librecode's agent, tool and workflow tasks.
NOT_RERUN = frozenset({"agent", TOOL_KIND, "workflow"})


def reruns(kind: str) -> bool:
    """Is a task of ``kind`` whose worker went away queued again (within the crash budget)?"""
    return kind not in NOT_RERUN


def policy_of(kind: str) -> RecoveryPolicy:
    """How recovery settles a task of ``kind`` that it does not rerun, unless told otherwise."""
    return LEASE_EXPIRED if kind in NOT_RERUN else CRASHED


@dataclass(frozen=True, slots=True)
class Recovered:
    """What one recovery did, by kind (kinds in name order, ids in creation order)."""

    #: Queued again: their worker went away and they had crash budget left.
    requeued: dict[str, list[str]] = field(default_factory=dict)
    #: Settled by their kind's policy (failed, canceled, interrupted).
    settled: dict[str, list[str]] = field(default_factory=dict)

    def by_kind(self) -> dict[str, list[str]]:
        """Every recovered id (requeued, then settled) by kind."""
        kinds = sorted(set(self.requeued) | set(self.settled))
        return {k: [*self.requeued.get(k, []), *self.settled.get(k, [])] for k in kinds}


def recover_expired_leases(
    kinds: Iterable[str] | None = None,
    *,
    now: datetime | None = None,
    policy: RecoveryPolicy | None = None,
    policies: Mapping[str, RecoveryPolicy] | None = None,
    tasks: TaskRepository | None = None,
) -> dict[str, list[str]]:
    """:func:`rescue_expired`, as every id it recovered (requeued or settled) by kind."""
    return rescue_expired(kinds, now=now, policy=policy, policies=policies, tasks=tasks).by_kind()


def rescue_expired(
    kinds: Iterable[str] | None = None,
    *,
    now: datetime | None = None,
    policy: RecoveryPolicy | None = None,
    policies: Mapping[str, RecoveryPolicy] | None = None,
    tasks: TaskRepository | None = None,
) -> Recovered:
    """Rerun or settle the leased tasks of ``kinds`` (``None``: every kind) expired by ``now``.

    Tasks of a kind that :func:`reruns` go back to their queue while their
    crash budget lasts and the rest are settled by the kind's own policy
    (:func:`policy_of`) — unless the caller names one (``policies[kind]``, else
    ``policy``): then every expired task of the kind is settled with it, none
    rerun. Tool tasks are always
    settled ``interrupted`` with the lease-expired outcome, so a policy with
    another target is refused for them (``ValidationError``), as is a
    non-terminal target.
    """
    tasks = tasks or TaskRepository()
    when = now if now is not None else tasks.now()
    chosen_policies = dict(policies or {})
    for rule in (policy, *chosen_policies.values()):
        if rule is not None and rule.target_state not in TERMINAL:
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
    tool_policy = chosen_policies.get(TOOL_KIND, policy or LEASE_EXPIRED)
    if TOOL_KIND in chosen and tool_policy.target_state != LEASE_EXPIRED.target_state:
        raise ValidationError(
            "tool tasks are recovered as interrupted with the lease-expired outcome",
            field="recovery.target_state",
        )
    budget = crash_budget()
    outcome = Recovered()
    for kind in sorted(chosen):
        if kind == TOOL_KIND:
            outcome.settled[kind] = ToolTaskRepository(tasks=tasks).recover_expired(when)
            continue
        # A policy the caller names settles the kind as told (the API's
        # recover-expired is librecode's RecoverExpired: "settle with this target");
        # without one the kind's own rule applies, reruns included.
        told = chosen_policies.get(kind) or policy
        rule = told or policy_of(kind)
        template = TaskFinish(
            target_state=rule.target_state,
            event_kind=rule.event_kind,
            error_code=rule.error_code,
            error_message=rule.error_message,
            payload_json=rule.payload_json,
        )
        requeued, settled = tasks.rescue_kind(
            kind=kind,
            expires_before=when,
            finish_template=template,
            max_crashes=budget if told is None and reruns(kind) else None,
            crashed=(lambda crash, finish: _name_the_crash(crash, finish, budget))
            if rule is CRASHED
            else None,
        )
        if requeued:
            outcome.requeued[kind] = requeued
        outcome.settled[kind] = settled
    return outcome


def _name_the_crash(crash: Crash, finish: TaskFinish, budget: int) -> TaskFinish:
    """The finish of a rerun kind's task whose worker went away and that is not run again."""
    if crash.state == "canceling":
        # Its cancel was asked; the worker died before answering it.
        message = "canceled: the worker running the task went away before it stopped"
        return replace(
            finish,
            target_state="canceled",
            event_kind="task_canceled",
            error_code="canceled",
            error_message=message,
            payload_json=json.dumps({"error_code": "canceled", "worker_id": crash.worker_id}),
        )
    times = "once" if crash.crashes == 1 else f"{crash.crashes} times"
    message = (
        f"the worker running the task went away {times} (lease expired); "
        f"TASK_MAX_CRASHES is {budget}, so it is not run again"
    )
    payload = {
        "error_code": "crashed",
        "worker_id": crash.worker_id,
        "crashes": crash.crashes,
        "max_crashes": budget,
        **crash_error(message),
    }
    return replace(finish, error_message=message, payload_json=json.dumps(payload))
