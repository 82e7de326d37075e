"""Admins of durable tasks, their events, agent/tool details and workflows.

    /admin/agentstore/task/<id>/change/        state, lease, timeline, details, outcome
    /admin/agentstore/task/<id>/cancel/        POST: cancel through the repositories
    /admin/agentstore/task/recover-expired/    POST: recover every expired lease
    /admin/agentstore/workflowrun/<id>/change/ agent tasks by node key and invocation

Every operation calls the task repositories (fenced, conditional, one short
transaction each) and reports what actually changed: a cancel that lost a race
with a worker's finish says so rather than pretending.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.admin.utils import quote, unquote
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_POST

from agentstore import ids
from agentstore.admin.mixins import (
    EMPTY,
    ReadOnlyAdmin,
    clip,
    confirm_page,
    confirmed,
    stamp,
)
from agentstore.models import (
    AgentTask,
    FunctionTask,
    RunTask,
    Session,
    Task,
    TaskEvent,
    ToolTask,
    WorkflowAgentTask,
    WorkflowRun,
)
from agentstore.models.tasks import LEASED_STATES
from agentstore.selectors.admin_views import expired_leases
from agentstore.selectors.pictures import task_timeline, workflow_graph
from agentstore.selectors.tasks import function_call, workflow_link
from agentstore.stores.base import utc_now
from agentstore.tasks.agent import AgentTaskRepository
from agentstore.tasks.handlers import FUNCTION_KIND, handler_kinds
from agentstore.tasks.lifecycle.expired import crash_budget
from agentstore.tasks.recovery import Recovered, rescue_expired
from agentstore.tasks.repository import TaskRepository
from agentstore.tasks.tool import ToolTaskRepository
from agentstore.tasks.workflow import WorkflowRepository

__all__ = [
    "AgentTaskAdmin",
    "TaskAdmin",
    "TaskEventAdmin",
    "ToolTaskAdmin",
    "WorkflowAgentTaskAdmin",
    "WorkflowRunAdmin",
    "cancel_task",
    "recover_expired",
]

#: Events per page of a task's timeline (``TaskRepository.list_events`` pages).
TIMELINE_PAGE = 100
_CANCEL_PAYLOAD = '{"canceled_by":"admin"}'


def cancel_task(task_id: str, *, tasks: TaskRepository | None = None) -> str:
    """Cancel a task through its repository and describe the outcome.

    Tool tasks use ``ToolTaskRepository.cancel`` (canonical canceled outcome).
    Other kinds follow the same rule with the generic calls: a queued task is
    settled ``canceled`` (``finish`` without a lease), a running one asked to
    stop (``transition`` to ``canceling``, lease kept: its worker settles it).
    """
    tasks = tasks or TaskRepository()
    task = tasks.get(task_id)
    if task is None:
        return f"Task {task_id} no longer exists."
    before = task.state
    if task.kind == "tool":
        ToolTaskRepository(tasks=tasks).cancel(task.owner_session_id, task_id)
    else:
        tasks.cancel(task_id, _CANCEL_PAYLOAD)  # the one cancel policy (queued / running)
    after = tasks.get(task_id)
    state = after.state if after else "deleted"
    if state == before:
        return f"Task {task_id} is {state}: nothing to cancel."
    return f"Task {task_id}: {before} → {state}."


def recover_expired(
    kinds: Iterable[str], now: datetime, *, tasks: TaskRepository | None = None
) -> Recovered:
    """Rerun or settle the running/canceling tasks of ``kinds`` whose lease expired by ``now``.

    ``agentstore.tasks.recovery.rescue_expired``: the one recovery policy
    (docs/tasks.md, "Retries and recovery").
    """
    return rescue_expired(kinds, now=now, tasks=tasks)


def _last_traceback(tasks: TaskRepository, task_id: str) -> str:
    """The traceback in the task's latest event payload (``""`` when it has none)."""
    event = tasks.latest_event(task_id)
    if event is None:
        return ""
    try:
        payload = json.loads(event.event.payload_json)
    except ValueError:
        return ""
    found = payload.get("traceback") if isinstance(payload, dict) else None
    return found if isinstance(found, str) else ""


def _task_link(task_id: str | None) -> str:
    if not task_id:
        return EMPTY
    return format_html(
        '<a href="{}" title="{}"><code>{}</code></a>',
        reverse("admin:agentstore_task_change", args=[quote(task_id)]),
        task_id,
        ids.short_id(task_id),
    )


def _session_link(session_id: str, name: str = "") -> str:
    """A link to a session by its name (its short id when it has none)."""
    if not session_id:
        return EMPTY
    url = reverse("admin:agentstore_session_change", args=[quote(session_id)])
    if name:
        return format_html('<a href="{}" title="{}">{}</a>', url, session_id, clip(name, 40))
    return format_html(
        '<a href="{}" title="{}"><code>{}</code></a>', url, session_id, ids.short_id(session_id)
    )


#: The kinds agentstore itself makes (handler kinds are added at run time).
BUILT_IN_KINDS = ("agent", FUNCTION_KIND, "tool", "workflow")


class KindFilter(admin.SimpleListFilter):
    """Every kind a task of this project can have: the built-in ones and the handlers' kinds.

    Not the table's ``DISTINCT kind`` (a scan of the whole index on every
    changelist load); a kind nothing names still filters through the URL
    (``?kind__exact=…``) and is then listed too.
    """

    title = _("kind")
    parameter_name = "kind__exact"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        kinds = {*BUILT_IN_KINDS, *handler_kinds()}
        chosen = request.GET.get(self.parameter_name)
        if chosen:
            kinds.add(chosen)
        return [(kind, kind) for kind in sorted(kinds)]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        value = self.value()
        return queryset.filter(kind=value) if value else queryset


class LeaseFilter(admin.SimpleListFilter):
    title = _("lease")
    parameter_name = "lease"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        return [("expired", _("expired or missing")), ("live", _("live"))]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        now = utc_now()
        if self.value() == "expired":
            return queryset.filter(pk__in=expired_leases(now).values("pk"))
        if self.value() == "live":
            return queryset.filter(state__in=LEASED_STATES, lease_expires_at__gt=now)
        return queryset


@admin.register(Task)
class TaskAdmin(ReadOnlyAdmin):
    change_form_template = "admin/agentstore/task/change_form.html"
    change_list_template = "admin/agentstore/task/change_list.html"
    list_display = (
        "short_id",
        "what",
        "state_badge",
        "owner",
        "queue",
        "runs",
        "lease",
        "updated_at",
    )
    list_display_links = ("short_id",)
    # The detail row of each kind, one LEFT JOIN each on its primary key: the
    # "what" column names the function, agent, tool or workflow without a query per row.
    list_select_related = ("owner_session", "function", "agent", "tool", "workflow")
    list_filter = ("state", KindFilter, LeaseFilter)
    search_fields = ("=id", "=owner_session__id", "=lease_owner", "=parent_task__id")
    raw_id_fields = ("owner_session", "parent_task")
    ordering = ("-updated_at", "-id")
    actions = ("cancel_selected", "recover_selected_kinds")

    @admin.display(description=_("id"), ordering="id")
    def short_id(self, obj: Task) -> str:
        if not obj.parent_task_id:
            return format_html('<code title="{}">{}</code>', obj.id, ids.short_id(obj.id))
        return format_html(
            '<code title="{}">{}</code><br><span class="as-sub">↳ {}</span>',
            obj.id,
            ids.short_id(obj.id),
            ids.short_id(obj.parent_task_id),
        )

    @admin.display(description=_("what"), ordering="kind")
    def what(self, obj: Task) -> str:
        """The kind, and what the task runs: a function path, an agent, a tool, a workflow."""
        detail = ""
        if obj.kind == FUNCTION_KIND:
            call = getattr(obj, "function", None)
            detail = call.function if call is not None else ""
        elif obj.kind == "agent":
            agent = getattr(obj, "agent", None)
            detail = agent.agent_name if agent is not None else ""
        elif obj.kind == "tool":
            tool = getattr(obj, "tool", None)
            detail = tool.target_name if tool is not None else ""
        elif obj.kind == "workflow":
            run = getattr(obj, "workflow", None)
            detail = run.name if run is not None else ""
        if not detail:
            return format_html("{}", obj.kind)
        return format_html(
            '{}<br><code class="as-sub" title="{}">{}</code>', obj.kind, detail, clip(detail, 60)
        )

    @admin.display(description=_("queue"), ordering="queue_name")
    def queue(self, obj: Task) -> str:
        if not obj.priority:
            return format_html("{}", obj.queue_name)
        return format_html(
            '{}<br><span class="as-sub">{} {}</span>', obj.queue_name, _("priority"), obj.priority
        )

    @admin.display(description=_("runs"), ordering="attempts")
    def runs(self, obj: Task) -> str:
        """Runs so far against ``max_attempts``, and the crashes among them."""
        text = f"{obj.attempts - obj.crashes}/{obj.max_attempts}"
        if not obj.crashes:
            return text
        return format_html(
            '{}<br><span class="agentstore-expired">{} {}</span>', text, obj.crashes, _("crashed")
        )

    @admin.display(description=_("state"), ordering="state")
    def state_badge(self, obj: Task) -> str:
        return format_html(
            '<span class="agentstore-state state-{}">{}</span>', obj.state, obj.state
        )

    @admin.display(description=_("session"))
    def owner(self, obj: Task) -> str:
        # django.tasks functions have no owner session.
        if not obj.owner_session_id:
            return EMPTY
        session = obj.owner_session
        return _session_link(obj.owner_session_id, session.name if session else "")

    @admin.display(description=_("parent task"))
    def parent(self, obj: Task) -> str:
        return _task_link(obj.parent_task_id)

    @admin.display(description=_("lease"), ordering="lease_expires_at")
    def lease(self, obj: Task) -> str:
        if obj.state not in LEASED_STATES:
            return EMPTY
        owner = clip(obj.lease_owner or "", 24) or EMPTY
        if obj.lease_expires_at is None or obj.lease_expires_at <= utc_now():
            text = stamp(obj.lease_expires_at) if obj.lease_expires_at else "none"
            return format_html(
                '{}<br><span class="agentstore-expired">{} (expired)</span>', owner, text
            )
        return format_html("{}<br>{}", owner, stamp(obj.lease_expires_at))

    # -- actions ----------------------------------------------------------------------

    @admin.action(description=_("Cancel selected tasks"), permissions=["operate"])
    def cancel_selected(self, request: HttpRequest, queryset: QuerySet[Task]) -> None:
        tasks = TaskRepository()
        for task_id in queryset.values_list("id", flat=True):
            self.report(request, cancel_task(task_id, tasks=tasks), messages.INFO)

    @admin.action(
        description=_("Recover expired leases (every expired task of the selected kinds)"),
        permissions=["operate"],
    )
    def recover_selected_kinds(self, request: HttpRequest, queryset: QuerySet[Task]) -> Any:
        kinds = set(queryset.values_list("kind", flat=True))
        now = utc_now()
        if not confirmed(request):
            selected = list(queryset.values_list("pk", flat=True)[:1000])
            return self._confirm_recovery(
                request,
                now,
                kinds,
                hidden=[("action", "recover_selected_kinds")]
                + [(ACTION_CHECKBOX_NAME, str(pk)) for pk in selected],
            )
        self._report_recovery(request, recover_expired(kinds, now), kinds)
        return None

    def _confirm_recovery(
        self,
        request: HttpRequest,
        now: datetime,
        kinds: set[str],
        hidden: list[tuple[str, str]] | None = None,
    ) -> HttpResponse:
        """The confirmation page: which tasks recovery would interrupt, and what that means."""
        shown = 50
        expired = list(
            expired_leases(now)
            .filter(kind__in=kinds)
            .order_by("lease_expires_at", "id")
            .values_list("id", "kind", "state", "lease_owner", "lease_expires_at")[: shown + 1]
        )
        items = [
            f"{task_id} ({kind}, {state}): lease of {owner or 'nobody'} "
            f"expired {stamp(expires) if expires else '(no lease)'}"
            for task_id, kind, state, owner, expires in expired[:shown]
        ]
        names = ", ".join(sorted(kinds)) or "no kinds"
        return confirm_page(
            self,
            request,
            title=f"Recover expired leases ({names})?",
            consequences=[
                "A running task holds a lease that its worker renews. A lease past its expiry "
                "means the worker stopped renewing it: it crashed, hung or lost the database.",
                "A crash is not the task's failure: a django.tasks function (or any kind but "
                "agent, tool and workflow) goes back to its queue to run again, its retry "
                f"attempts untouched, until it has crashed {crash_budget()} time(s) "
                "(TASK_MAX_CRASHES); the crash past that fails it (error crashed). A task "
                "being canceled ends canceled.",
                "Agent, tool and workflow tasks are never run again: they end interrupted "
                "(error lease_expired), a tool task with its canonical interrupted outcome. "
                "If the old worker comes back, its writes are refused (the lease is fenced). "
                "Tasks with a live lease are not touched.",
                "Nothing to recover right now." if not items else "These tasks are affected:",
            ],
            items=items,
            more=1 if len(expired) > shown else 0,
            button=f"Yes, recover {'these' if items else 'any'} expired task(s)",
            cancel_url=reverse("admin:agentstore_task_changelist"),
            hidden=hidden,
        )

    def _report_recovery(self, request: HttpRequest, done: Recovered, kinds: Iterable[str]) -> None:
        names = ", ".join(sorted(kinds)) or "no kinds"
        requeued = [task_id for ids in done.requeued.values() for task_id in ids]
        settled = [task_id for ids in done.settled.values() for task_id in ids]
        if requeued:
            self.report(
                request,
                f"Queued {len(requeued)} crashed task(s) to run again: {', '.join(requeued)}.",
            )
        if settled:
            self.report(
                request,
                f"Recovered {len(settled)} expired task(s) ({names}): {', '.join(settled)}.",
            )
        if not (requeued or settled):
            self.report(request, f"No expired leases to recover ({names}).", messages.INFO)

    # -- pages ------------------------------------------------------------------------

    def get_urls(self) -> list[URLPattern]:
        return [
            path(
                "recover-expired/",
                self.admin_site.admin_view(require_POST(self.recover_view)),
                name="agentstore_task_recover_expired",
            ),
            path(
                "<path:object_id>/cancel/",
                self.admin_site.admin_view(require_POST(self.cancel_view)),
                name="agentstore_task_cancel",
            ),
            *super().get_urls(),
        ]

    def recover_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_operate_permission(request):
            raise Http404
        now = utc_now()
        kinds = set(expired_leases(now).values_list("kind", flat=True).distinct())
        if not confirmed(request):
            return self._confirm_recovery(request, now, kinds)
        self._report_recovery(request, recover_expired(kinds, now), kinds)
        return HttpResponseRedirect(reverse("admin:agentstore_task_changelist"))

    def cancel_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        if not self.has_operate_permission(request):
            raise Http404
        task_id = unquote(object_id)
        self.report(request, cancel_task(task_id), messages.INFO)
        return HttpResponseRedirect(reverse("admin:agentstore_task_change", args=[quote(task_id)]))

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        context = {**(extra_context or {}), "can_operate": self.has_operate_permission(request)}
        return super().changelist_view(request, context)

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        task_id = unquote(object_id)
        tasks = TaskRepository()
        task = tasks.get(task_id)
        context: dict[str, Any] = {**(extra_context or {}), "task": task}
        if task is not None:
            try:
                after = max(0, int(request.GET.get("after", "0")))
            except ValueError:
                after = 0
            events = tasks.list_events(task_id, after=after, limit=TIMELINE_PAGE + 1)
            now = utc_now()
            context.update(
                events=events[:TIMELINE_PAGE],
                next_after=events[TIMELINE_PAGE - 1].sequence
                if len(events) > TIMELINE_PAGE
                else None,
                after=after,
                lease_expired=task.state in LEASED_STATES
                and (task.lease_expires_at is None or task.lease_expires_at <= now),
                agent=AgentTaskRepository(tasks=tasks).get(task_id)
                if task.kind == "agent"
                else None,
                tool=ToolTaskRepository(tasks=tasks).get(task_id) if task.kind == "tool" else None,
                workflow=WorkflowRepository(tasks=tasks).get(task_id)
                if task.kind == "workflow"
                else None,
                # The last error's traceback (a failure or scheduled retry), where the
                # worker recorded one: what someone debugging a failed job opens this for.
                traceback=_last_traceback(tasks, task_id) if task.error_code else "",
                # A django.tasks call (no owner session): what runs, with which arguments.
                function=function_call(task_id) if task.kind == FUNCTION_KIND else None,
                workflow_link=workflow_link(task_id) if task.kind == "agent" else None,
                can_operate=self.has_operate_permission(request),
                cancellable=task.state in ("queued", "running"),
                timeline=task_timeline(task_id),
                # Ownerless work (django.tasks functions) has no session to name.
                owner_name=(
                    Session.objects.filter(pk=task.owner_session_id)
                    .values_list("name", flat=True)
                    .first()
                    if task.owner_session_id
                    else None
                )
                or "",
            )
        return super().change_view(request, object_id, form_url, context)


@admin.register(TaskEvent)
class TaskEventAdmin(ReadOnlyAdmin):
    list_display = ("id", "task_link", "sequence", "kind", "payload", "created_at")
    search_fields = ("=task__id", "=event_id", "=kind")
    raw_id_fields = ("task",)

    def get_ordering(self, request: HttpRequest) -> tuple[str, ...]:
        return ("sequence",) if "task__id__exact" in request.GET else ("-id",)

    @admin.display(description=_("task"))
    def task_link(self, obj: TaskEvent) -> str:
        return _task_link(obj.task_id)

    @admin.display(description=_("payload"))
    def payload(self, obj: TaskEvent) -> str:
        return clip(obj.payload_json, 80)


class _TaskDetailsAdmin(ReadOnlyAdmin):
    """Shared columns of the admins of a task's detail rows (agent, tool, function, workflow)."""

    list_select_related = ("task",)
    list_filter = ("task__state",)
    ordering = ("-task__updated_at", "-task__id")

    @admin.display(description=_("task"))
    def task_link(self, obj: Any) -> str:
        return _task_link(obj.task_id)

    @admin.display(description=_("state"), ordering="task__state")
    def state(self, obj: Any) -> str:
        return str(obj.task.state)


@admin.register(AgentTask)
class AgentTaskAdmin(_TaskDetailsAdmin):
    list_display = ("task_link", "agent_name", "state", "child", "model", "depth", "prompt_preview")
    search_fields = ("=task__id", "=child_session__id", "^agent_name")
    raw_id_fields = ("task", "child_session")

    @admin.display(description=_("child session"))
    def child(self, obj: AgentTask) -> str:
        return _session_link(obj.child_session_id)

    @admin.display(description=_("prompt"))
    def prompt_preview(self, obj: AgentTask) -> str:
        return clip(obj.prompt, 60)


@admin.register(ToolTask)
class ToolTaskAdmin(_TaskDetailsAdmin):
    list_display = ("task_link", "target_name", "state", "invocation_id", "owner", "outcome")
    search_fields = ("=task__id", "=owner_session__id", "=invocation_id")
    raw_id_fields = ("task", "owner_session")

    @admin.display(description=_("owner session"))
    def owner(self, obj: ToolTask) -> str:
        return _session_link(obj.owner_session_id)

    @admin.display(description=_("outcome"))
    def outcome(self, obj: ToolTask) -> str:
        return clip(obj.outcome_json or EMPTY, 60)


@admin.register(FunctionTask)
class FunctionTaskAdmin(_TaskDetailsAdmin):
    list_display = ("task_link", "function", "state", "backend", "arguments")
    search_fields = ("=task__id", "^function")
    raw_id_fields = ("task",)

    @admin.display(description=_("arguments"))
    def arguments(self, obj: FunctionTask) -> str:
        return clip(obj.arguments_json, 60)


@admin.register(RunTask)
class RunTaskAdmin(_TaskDetailsAdmin):
    """Runs: the runner, the session it continues, what went in and what came out."""

    list_display = ("task_link", "runner", "state", "session", "input", "output")
    list_select_related = ("task",)
    search_fields = ("=task__id", "=task__owner_session__id", "^runner")
    raw_id_fields = ("task",)

    @admin.display(description=_("session"))
    def session(self, obj: RunTask) -> str:
        return _session_link(obj.task.owner_session_id or "")

    @admin.display(description=_("input"))
    def input(self, obj: RunTask) -> str:  # noqa: A003 - the run's input
        return clip(obj.input_json, 60)

    @admin.display(description=_("output"))
    def output(self, obj: RunTask) -> str:
        return clip(obj.task.result or obj.task.error_message or EMPTY, 60)


@admin.register(WorkflowRun)
class WorkflowRunAdmin(_TaskDetailsAdmin):
    change_form_template = "admin/agentstore/workflowrun/change_form.html"
    list_display = ("task_link", "name", "state", "source_hash", "source_version")
    search_fields = ("=task__id", "^name", "=source_hash")
    raw_id_fields = ("task",)

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        workflows = WorkflowRepository()
        run = workflows.get(unquote(object_id))
        nodes: list[tuple[str, list[Any]]] = []
        if run is not None:
            details = workflows.list_agent_task_details([run.task.id])
            by_node: dict[str, list[Any]] = {}
            for detail in sorted(details, key=lambda d: (d.link.node_key, d.link.invocation_index)):
                by_node.setdefault(detail.link.node_key, []).append(detail)
            nodes = list(by_node.items())
        context = {
            **(extra_context or {}),
            "run": run,
            "nodes": nodes,
            "graph": workflow_graph(run.task.id, run.name, run.task.state) if run else None,
        }
        return super().change_view(request, object_id, form_url, context)


@admin.register(WorkflowAgentTask)
class WorkflowAgentTaskAdmin(ReadOnlyAdmin):
    list_display = ("id", "workflow_link", "sequence", "node_key", "invocation_index", "agent")
    search_fields = ("=workflow__task__id", "^node_key")
    raw_id_fields = ("workflow", "agent_task")
    ordering = ("-id",)

    @admin.display(description=_("workflow"))
    def workflow_link(self, obj: WorkflowAgentTask) -> str:
        return _task_link(obj.workflow_id)

    @admin.display(description=_("agent task"))
    def agent(self, obj: WorkflowAgentTask) -> str:
        return _task_link(obj.agent_task_id)
