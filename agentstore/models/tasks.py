"""Durable tasks with worker leases, their event logs, and the agent/tool details.

A :class:`Task` is work an agent spawned that must survive a crash. Its state
moves queued → running (→ canceling) → succeeded/failed/canceled/interrupted,
but the database holds no transition graph: every conditional change names the
states it may start from and is a guarded UPDATE with a row count (see the task
repositories). A worker owns a running task through a *lease*
(``lease_owner``, ``lease_expires_at``); every write it makes is fenced on both,
so a worker whose lease expired or was taken writes nothing::

    Task.objects.recoverable("tool", now)      # running/canceling, lease gone

Each task has a contiguous event log (:class:`TaskEvent`, ``sequence`` 1..n,
starting with ``task_queued``). Kind-specific details sit in one-to-one tables:
:class:`AgentTask` (a subagent running in its own child session) and
:class:`ToolTask` (a background tool invocation, idempotent on
(owner session, invocation id)); workflows are in ``workflows.py``.

Everything a task owns cascades when the task goes; tasks cascade when their
owner session goes, and so does the agent task of a deleted *child* session.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

if TYPE_CHECKING:
    from typing import Self


class TaskState(models.TextChoices):
    QUEUED = "queued", _("queued")
    RUNNING = "running", _("running")
    CANCELING = "canceling", _("canceling")
    SUCCEEDED = "succeeded", _("succeeded")
    FAILED = "failed", _("failed")
    CANCELED = "canceled", _("canceled")
    INTERRUPTED = "interrupted", _("interrupted")


#: States a task never leaves on its own; ``interrupted`` can still be resumed.
TERMINAL_STATES = frozenset(
    {TaskState.SUCCEEDED, TaskState.FAILED, TaskState.CANCELED, TaskState.INTERRUPTED}
)
#: States in which a worker holds (or should hold) a lease.
LEASED_STATES = frozenset({TaskState.RUNNING, TaskState.CANCELING})
#: States that count as "still going" for listings of active work.
ACTIVE_STATES = frozenset({TaskState.QUEUED, TaskState.RUNNING, TaskState.CANCELING})


class TaskQuerySet(models.QuerySet["Task"]):
    def owned_by_session(self, session_id: str) -> Self:
        return self.filter(owner_session_id=session_id)

    def active(self) -> Self:
        return self.filter(state__in=ACTIVE_STATES)

    def live_lease(self, owner: str, now: datetime) -> Self:
        """Tasks whose lease ``owner`` holds and has not expired at ``now``."""
        return self.filter(state__in=LEASED_STATES, lease_owner=owner, lease_expires_at__gt=now)

    def recoverable(self, kind: str, expires_before: datetime) -> Self:
        """Running/canceling tasks of ``kind`` with no lease or one expired by then."""
        return self.filter(kind=kind, state__in=LEASED_STATES).filter(
            Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lte=expires_before)
        )

    def newest_first(self) -> Self:
        return self.order_by("-updated_at", "-id")


class Task(models.Model):
    id = models.CharField(_("id"), max_length=36, primary_key=True)
    kind = models.CharField(_("kind"), max_length=64)
    state = models.CharField(_("state"), max_length=16, choices=TaskState.choices)
    parent_task = models.ForeignKey(
        "self",
        verbose_name=_("parent task"),
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="child_tasks",
        # agentstore_task_parent covers lookups by parent (docs/tasks.md, "Performance").
        db_index=False,
    )
    # NULL for work no agent session owns: django.tasks functions enqueued
    # through AgentStoreBackend (docs/tasks.md "Running tasks").
    owner_session = models.ForeignKey(
        "agentstore.Session",
        verbose_name=_("owner session"),
        on_delete=models.CASCADE,
        null=True,
        blank=True,
        related_name="owned_tasks",
        # agentstore_task_owner covers lookups by owner (docs/tasks.md, "Performance").
        db_index=False,
    )
    concurrency_key = models.CharField(_("concurrency key"), max_length=255, default="", blank=True)
    result = models.TextField(_("result"), default="", blank=True)
    error_code = models.CharField(_("error code"), max_length=255, default="", blank=True)
    error_message = models.TextField(_("error message"), default="", blank=True)
    created_at = models.DateTimeField(_("created at"))
    started_at = models.DateTimeField(_("started at"), null=True, blank=True)
    finished_at = models.DateTimeField(_("finished at"), null=True, blank=True)
    updated_at = models.DateTimeField(_("updated at"))
    # NULL is "no lease" (fences compare with IS NULL); "" is refused by a CHECK.
    lease_owner = models.CharField(  # noqa: DJ001
        _("lease owner"), max_length=255, null=True, blank=True
    )
    lease_expires_at = models.DateTimeField(_("lease expires at"), null=True, blank=True)
    # What a worker (agentstore.tasks.worker) picks by: the queue it serves,
    # highest priority first, nothing before run_after (NULL: at once).
    queue_name = models.CharField(_("queue"), max_length=64, default="default")
    priority = models.SmallIntegerField(_("priority"), default=0)
    run_after = models.DateTimeField(_("run after"), null=True, blank=True)
    # Runs so far (each claim counts one, a release gives it back). A run ends
    # in a failure, which spends the retry budget (the task fails once
    # attempts - crashes reaches max_attempts), or in a crash: the worker went
    # away and its lease expired. A crash is not the task's failure, so it is
    # counted apart in ``crashes`` and spends the crash budget instead
    # (AGENTSTORE["TASK_MAX_CRASHES"]; docs/tasks.md, "Retries and recovery").
    attempts = models.PositiveIntegerField(_("attempts"), default=0)
    max_attempts = models.PositiveIntegerField(_("max attempts"), default=1)
    crashes = models.PositiveIntegerField(_("crashes"), default=0)

    objects = TaskQuerySet.as_manager()

    class Meta:
        verbose_name = _("task")
        verbose_name_plural = _("tasks")
        # Every claim, renewal and finish rewrites the entries of the indexes that
        # hold a column it changes (state, updated_at, lease_*): an index is here
        # only because a query uses it, and the owner/parent listings index only
        # rows that have an owner/parent, so ownerless work (django.tasks
        # functions) does not pay for them (docs/tasks.md, "Performance").
        indexes = [
            models.Index(
                fields=["kind", "state", "created_at", "id"], name="agentstore_task_queue"
            ),
            models.Index(
                fields=["owner_session", "-updated_at", "-id"],
                name="agentstore_task_owner",
                condition=Q(owner_session__isnull=False),
            ),
            models.Index(
                fields=["owner_session", "state", "-updated_at", "-id"],
                name="agentstore_task_owner_state",
                condition=Q(owner_session__isnull=False),
            ),
            models.Index(
                fields=["parent_task", "-updated_at", "-id"],
                name="agentstore_task_parent",
                condition=Q(parent_task__isnull=False),
            ),
            # The worker's pick: queued rows only, in claim order.
            models.Index(
                fields=["queue_name", "-priority", "created_at", "id"],
                name="agentstore_task_ready",
                condition=Q(state="queued"),
            ),
            # Held leases only, by expiry: the sweeper's and the requeue's scan of expired
            # leases, the live-lease listings. A claim adds one entry and the finish
            # removes it (a full index over every state moved the row twice per task).
            # The condition is "has a lease" rather than "state IN (running,
            # canceling)": any comparison on lease_expires_at implies it, so the
            # planners use the index whatever order an IN list comes in. A leased
            # task without an expiry (recovery's other case) is found through
            # agentstore_task_queue (kind, state) instead (docs/tasks.md, "Performance").
            models.Index(
                fields=["lease_expires_at", "id"],
                name="agentstore_task_leases",
                condition=Q(lease_expires_at__isnull=False),
            ),
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(state__in=TaskState.values), name="agentstore_task_state_valid"
            ),
            models.CheckConstraint(condition=~Q(kind=""), name="agentstore_task_kind_not_empty"),
            # An empty lease owner is stored as NULL, so "no lease" has one spelling.
            models.CheckConstraint(
                condition=Q(lease_owner__isnull=True) | ~Q(lease_owner=""),
                name="agentstore_task_lease_owner_not_empty",
            ),
            models.CheckConstraint(
                condition=Q(priority__gte=-100, priority__lte=100),
                name="agentstore_task_priority_range",
            ),
            models.CheckConstraint(
                condition=Q(max_attempts__gte=1), name="agentstore_task_max_attempts_positive"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} task {self.id} ({self.state})"


class TaskEvent(models.Model):
    """One event of a task's log; ``sequence`` is task-local and contiguous from 1."""

    # No index of its own: UNIQUE(task, sequence) serves every lookup by task.
    task = models.ForeignKey(
        Task,
        verbose_name=_("task"),
        on_delete=models.CASCADE,
        related_name="events",
        db_index=False,
    )
    sequence = models.PositiveIntegerField(_("sequence"))
    event_id = models.CharField(_("event id"), max_length=36, unique=True)
    kind = models.CharField(_("kind"), max_length=64)
    payload_json = models.TextField(_("payload (JSON)"), default="{}")
    created_at = models.DateTimeField(_("created at"))

    class Meta:
        verbose_name = _("task event")
        verbose_name_plural = _("task events")
        constraints = [
            models.UniqueConstraint(fields=["task", "sequence"], name="agentstore_taskevent_seq"),
            models.CheckConstraint(
                condition=Q(sequence__gte=1), name="agentstore_taskevent_seq_positive"
            ),
            models.CheckConstraint(
                condition=~Q(kind=""), name="agentstore_taskevent_kind_not_empty"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} #{self.sequence}"


class AgentTask(models.Model):
    """A subagent: a task of kind ``agent`` running in its own child session."""

    task = models.OneToOneField(
        Task,
        verbose_name=_("task"),
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="agent",
    )
    # One agent task per child session; deleting the child removes the agent task.
    child_session = models.OneToOneField(
        "agentstore.Session",
        verbose_name=_("child session"),
        on_delete=models.CASCADE,
        related_name="agent_task",
    )
    agent_name = models.CharField(_("agent name"), max_length=255)
    prompt = models.TextField(_("prompt"))
    model = models.CharField(_("model"), max_length=255, default="", blank=True)
    provider = models.CharField(_("provider"), max_length=255, default="", blank=True)
    policy_json = models.TextField(_("policy (JSON)"), default="{}")
    usage_json = models.TextField(_("usage (JSON)"), default="{}")
    depth = models.PositiveIntegerField(_("depth"))

    class Meta:
        verbose_name = _("agent task")
        verbose_name_plural = _("agent tasks")
        constraints = [
            models.CheckConstraint(
                condition=~Q(agent_name=""), name="agentstore_agenttask_name_not_empty"
            ),
            models.CheckConstraint(
                condition=~Q(prompt=""), name="agentstore_agenttask_prompt_not_empty"
            ),
            models.CheckConstraint(
                condition=Q(depth__gte=1), name="agentstore_agenttask_depth_positive"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.agent_name} ({self.task_id})"


class FunctionTask(models.Model):
    """A ``django.tasks`` function call: a task of kind ``function``.

    Written by :class:`agentstore.tasks.backends.AgentStoreBackend`;
    ``function`` is the task's module path (``app.tasks.send_mail``), imported
    again by the worker. The return value is the task's ``result`` (JSON).
    """

    task = models.OneToOneField(
        Task,
        verbose_name=_("task"),
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="function",
    )
    function = models.CharField(_("function"), max_length=255)
    backend = models.CharField(_("backend alias"), max_length=64, default="default")
    # {"args": [...], "kwargs": {...}}
    arguments_json = models.TextField(_("arguments (JSON)"), default="{}")

    class Meta:
        verbose_name = _("function task")
        verbose_name_plural = _("function tasks")
        constraints = [
            models.CheckConstraint(
                condition=~Q(function=""), name="agentstore_functiontask_function_not_empty"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.function} ({self.task_id})"


class Worker(models.Model):
    """A running ``manage.py agentstore worker`` loop, for people watching the queue.

    The row is a notice board, not a lock: exclusivity is each task's lease,
    whose owner is this ``id``. Workers upsert their row on start, bump
    ``heartbeat_at`` with every lease renewal tick, and delete it on a clean
    stop; a sweep deletes rows past ``expires_at`` (a killed worker's).
    """

    id = models.CharField(_("id"), max_length=128, primary_key=True)
    host = models.CharField(_("host"), max_length=255)
    pid = models.PositiveIntegerField(_("pid"))
    queues = models.CharField(_("queues"), max_length=1024, default="", blank=True)
    started_at = models.DateTimeField(_("started at"))
    heartbeat_at = models.DateTimeField(_("heartbeat at"))
    # heartbeat + 3 of this worker's leases: past it, any worker's sweep removes the row
    # (workers may run with different leases, so each says when it counts as gone).
    expires_at = models.DateTimeField(_("expires at"))
    tasks_done = models.PositiveIntegerField(_("tasks done"), default=0)

    class Meta:
        verbose_name = _("worker")
        verbose_name_plural = _("workers")
        ordering = ["host", "pid", "id"]

    def __str__(self) -> str:
        return f"{self.id} on {self.host} (pid {self.pid})"


#: Bound of a tool task's arguments JSON (bytes; docs/tasks.md, the validation table).
TOOL_ARGUMENTS_MAX_BYTES = 256 * 1024


class ToolTask(models.Model):
    """A background tool invocation: a task of kind ``tool``.

    ``owner_session`` repeats the task's owner so the idempotency key
    (owner session, invocation id) can be one unique index; the repository
    writes both from one value in one transaction. ``outcome_version`` and
    ``outcome_json`` are NULL until the task settles, and are set together.
    """

    task = models.OneToOneField(
        Task,
        verbose_name=_("task"),
        on_delete=models.CASCADE,
        primary_key=True,
        related_name="tool",
    )
    owner_session = models.ForeignKey(
        "agentstore.Session",
        verbose_name=_("owner session"),
        on_delete=models.CASCADE,
        related_name="tool_tasks",
    )
    target_name = models.CharField(_("target"), max_length=255)
    arguments_json = models.TextField(_("arguments (JSON)"))
    cwd = models.TextField(_("working directory"))
    invocation_id = models.CharField(_("invocation id"), max_length=255)
    wrapper_call_id = models.CharField(_("wrapper call id"), max_length=255)
    parent_call_id = models.CharField(_("parent call id"), max_length=255, default="", blank=True)
    source_sequence = models.BigIntegerField(_("source sequence"), default=0)
    initiating_entry_id = models.CharField(
        _("initiating entry id"), max_length=128, default="", blank=True
    )
    timeout_seconds = models.PositiveIntegerField(_("timeout (s)"))
    policy_json = models.TextField(_("policy (JSON)"), default="{}")
    definition_json = models.TextField(_("definition (JSON)"))
    outcome_version = models.PositiveSmallIntegerField(_("outcome version"), null=True, blank=True)
    # NULL until the task settles through the repository.
    outcome_json = models.TextField(_("outcome (JSON)"), null=True, blank=True)  # noqa: DJ001

    class Meta:
        verbose_name = _("tool task")
        verbose_name_plural = _("tool tasks")
        indexes = [
            models.Index(
                fields=["owner_session", "target_name", "task"], name="agentstore_tooltask_target"
            ),
        ]
        constraints = [
            models.UniqueConstraint(
                fields=["owner_session", "invocation_id"], name="agentstore_tooltask_invocation"
            ),
            models.CheckConstraint(
                condition=~Q(target_name="")
                & ~Q(cwd="")
                & ~Q(invocation_id="")
                & ~Q(wrapper_call_id=""),
                name="agentstore_tooltask_required_not_empty",
            ),
            models.CheckConstraint(
                condition=Q(timeout_seconds__gt=0), name="agentstore_tooltask_timeout_positive"
            ),
            models.CheckConstraint(
                condition=Q(outcome_version__isnull=True, outcome_json__isnull=True)
                # Spelled out: a NULL version would make "> 0" unknown, and a CHECK
                # that evaluates to unknown passes.
                | Q(
                    outcome_version__isnull=False, outcome_version__gt=0, outcome_json__isnull=False
                ),
                name="agentstore_tooltask_outcome_together",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.target_name} ({self.invocation_id})"


__all__ = [
    "ACTIVE_STATES",
    "TOOL_ARGUMENTS_MAX_BYTES",
    "LEASED_STATES",
    "TERMINAL_STATES",
    "AgentTask",
    "FunctionTask",
    "Task",
    "TaskEvent",
    "TaskState",
    "ToolTask",
    "Worker",
]
