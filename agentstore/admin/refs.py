"""Admins of refs, the ref log and holds.

Refs have no foreign key on purpose (a ref outlives its session), so the list
says whether the target still exists — one ``EXISTS`` subquery per page, not a
query per row. Breaking a hold calls ``LogStore.break_lock``.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.admin.utils import quote
from django.db.models import Exists, OuterRef, QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _

from agentstore import exceptions
from agentstore.admin.mixins import ReadOnlyAdmin, confirm_page, confirmed
from agentstore.admin.sessions import break_lock, break_lock_consequences, hold_line
from agentstore.models import Holder, Ref, RefLog, Session

__all__ = ["HolderAdmin", "RefAdmin", "RefLogAdmin"]


@admin.register(Ref)
class RefAdmin(ReadOnlyAdmin):
    list_display = ("name", "target", "entry_id", "updated_at", "dangling")
    search_fields = ("^name", "=session_id")
    ordering = ("name",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Ref]:
        # A ref set to an earlier incarnation of a re-created session is dangling too.
        same = Session.objects.filter(pk=OuterRef("session_id"))
        refs: QuerySet[Ref] = (
            super()
            .get_queryset(request)
            .annotate(
                target_exists=Exists(same),
                target_same=Exists(same.filter(incarnation=OuterRef("target_incarnation"))),
            )
        )
        return refs

    @admin.display(description=_("session"), ordering="session_id")
    def target(self, obj: Ref) -> str:
        return format_html(
            '<a href="{}">{}</a>',
            reverse("admin:agentstore_session_change", args=[quote(obj.session_id)]),
            obj.session_id,
        )

    @admin.display(description=_("dangling"), boolean=True)
    def dangling(self, obj: Ref) -> bool:
        if not getattr(obj, "target_exists", True):
            return True
        return bool(obj.target_incarnation) and not getattr(obj, "target_same", True)


@admin.register(RefLog)
class RefLogAdmin(ReadOnlyAdmin):
    list_display = ("id", "name", "old_session", "new_session", "new_entry", "at", "reason")
    search_fields = ("^name",)
    ordering = ("-id",)


@admin.register(Holder)
class HolderAdmin(ReadOnlyAdmin):
    change_list_template = "admin/agentstore/holder/change_list.html"
    list_display = ("session", "pid", "host", "since", "heartbeat")
    list_select_related = ("session",)
    raw_id_fields = ("session",)
    search_fields = ("=session__id", "^host")
    ordering = ("-since",)
    actions = ("break_locks",)

    @admin.action(
        description=_("Break the selected locks (LogStore.break_lock)"), permissions=["operate"]
    )
    def break_locks(self, request: HttpRequest, queryset: QuerySet[Holder]) -> Any:
        if not confirmed(request):
            holds = list(queryset[:50])
            return confirm_page(
                self,
                request,
                title=f"Break {len(holds)} hold(s)?",
                consequences=break_lock_consequences(),
                items=[hold_line(h.session_id, h) for h in holds],
                hidden=[("action", "break_locks")]
                + [(ACTION_CHECKBOX_NAME, str(h.pk)) for h in holds],
                button="Yes, break these locks",
                cancel_url=request.get_full_path(),
            )
        for session_id in queryset.values_list("session_id", flat=True):
            try:
                self.report(request, break_lock(session_id))
            except exceptions.AgentStoreError as exc:
                self.report(
                    request, f"Could not break the lock of {session_id}: {exc}", messages.ERROR
                )
