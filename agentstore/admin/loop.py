"""Admins of the agent-loop tables: the step trace and the approvals (grants).

Revoking goes through ``LoopStore.revoke``, which forgets *every* approval of a
session — the store has no per-prompt revoke, so neither does the admin.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import quote
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _

from agentstore.admin.mixins import ReadOnlyAdmin, clip
from agentstore.models import Grant, Step
from agentstore.stores.loop import LoopStore

__all__ = ["GrantAdmin", "StepAdmin"]


def session_link(session_id: str) -> str:
    return format_html(
        '<a href="{}">{}</a>',
        reverse("admin:agentstore_session_change", args=[quote(session_id)]),
        clip(session_id, 24),
    )


@admin.register(Step)
class StepAdmin(ReadOnlyAdmin):
    list_display = (
        "id",
        "session_id",
        "step_index",
        "step_type",
        "preview",
        "prompt_tokens",
        "completion_tokens",
        "duration_ms",
        "created_at",
    )
    search_fields = ("=session__id", "=step_type")
    raw_id_fields = ("session",)
    exclude = ("tool_args",)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        fields = [f for f in super().get_readonly_fields(request, obj) if f != "tool_args"]
        return [*fields, "tool_arguments"]

    def get_ordering(self, request: HttpRequest) -> tuple[str, ...]:
        return ("id",) if "session__id__exact" in request.GET else ("-id",)

    @admin.display(description=_("content"))
    def preview(self, obj: Step) -> str:
        return clip(obj.content, 70)

    @admin.display(description=_("tool arguments"))
    def tool_arguments(self, obj: Step) -> str:
        if obj.tool_args is None:
            return "—"
        return format_html(
            "<pre class='as-content'>{}</pre>", bytes(obj.tool_args).decode("utf-8", "replace")
        )


@admin.register(Grant)
class GrantAdmin(ReadOnlyAdmin):
    list_display = ("id", "session", "prompt_preview", "granted_at")
    search_fields = ("=session_id",)
    ordering = ("-granted_at", "-id")
    actions = ("revoke_sessions",)

    @admin.display(description=_("session"), ordering="session_id")
    def session(self, obj: Grant) -> str:
        return session_link(obj.session_id)

    @admin.display(description=_("prompt"))
    def prompt_preview(self, obj: Grant) -> str:
        return clip(obj.prompt, 90)

    @admin.action(
        description=_("Revoke every grant of the selected grants' sessions"),
        permissions=["operate"],
    )
    def revoke_sessions(self, request: HttpRequest, queryset: QuerySet[Grant]) -> None:
        store = LoopStore()
        sessions = sorted(set(queryset.values_list("session_id", flat=True)))
        removed = sum(store.revoke(session_id) for session_id in sessions)
        self.report(
            request, f"Revoked {removed} grant(s) of {len(sessions)} session(s) through LoopStore."
        )
