"""Admin of running workers, with the depth of every queue above the list.

    /admin/agentstore/worker/       workers (id, host, pid, heartbeat, current task) and queues

Read-only: a worker row is written by the worker itself (``manage.py agentstore
worker``) and removed when it stops or, after a kill, by another worker's sweep.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import quote
from django.db.models import OuterRef, QuerySet, Subquery
from django.http import HttpRequest, HttpResponse
from django.urls import reverse
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _

from agentstore.admin.mixins import ReadOnlyAdmin
from agentstore.models import Task, Worker
from agentstore.models.tasks import LEASED_STATES
from agentstore.selectors.workers import queue_depths

__all__ = ["WorkerAdmin"]


@admin.register(Worker)
class WorkerAdmin(ReadOnlyAdmin):
    list_display = ["id", "host", "pid", "heartbeat_at", "tasks_done", "current_task", "queues"]
    search_fields = ["id", "host"]
    ordering = ["host", "pid", "id"]
    change_list_template = "admin/agentstore/worker/change_list.html"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Worker]:
        # The task each worker holds, in the page's one query (a worker's id is the
        # lease owner of its tasks); a batch worker shows its oldest claim.
        held = Task.objects.filter(lease_owner=OuterRef("id"), state__in=LEASED_STATES).order_by(
            "started_at", "id"
        )
        workers: QuerySet[Worker] = super().get_queryset(request)
        return workers.annotate(current_task_id=Subquery(held.values("id")[:1]))

    @admin.display(description=_("current task"))
    def current_task(self, obj: Worker) -> str:
        task_id = getattr(obj, "current_task_id", None)
        if not task_id:
            return "-"
        return format_html(
            '<a href="{}">{}</a>',
            reverse("admin:agentstore_task_change", args=[quote(task_id)]),
            task_id,
        )

    def changelist_view(
        self, request: HttpRequest, extra_context: dict[str, Any] | None = None
    ) -> HttpResponse:
        context = {**(extra_context or {}), "queue_depths": queue_depths()}
        return super().changelist_view(request, extra_context=context)
