"""Admins of the agent-loop tables: the step trace and the approvals (grants).

Revoking goes through ``LoopStore.revoke``, which forgets *every* approval of a
session — the store has no per-prompt revoke, so neither does the admin.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.helpers import ACTION_CHECKBOX_NAME
from django.contrib.admin.utils import quote
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _

from agentstore import ids
from agentstore.admin.mixins import EMPTY, ReadOnlyAdmin, clip, confirm_page, confirmed
from agentstore.admin.sessions import revoke_consequences
from agentstore.models import Grant, Step
from agentstore.stores.loop import LoopStore

__all__ = ["GrantAdmin", "StepAdmin"]


def session_link(session_id: str) -> str:
    return format_html(
        '<a href="{}" title="{}"><code>{}</code></a>',
        reverse("admin:agentstore_session_change", args=[quote(session_id)]),
        session_id,
        ids.short_id(session_id),
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
            return EMPTY
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
    def revoke_sessions(self, request: HttpRequest, queryset: QuerySet[Grant]) -> Any:
        store = LoopStore()
        sessions = sorted(set(queryset.values_list("session_id", flat=True)))
        if not confirmed(request):
            selected = list(queryset.values_list("pk", flat=True)[:1000])
            affected = Grant.objects.filter(session_id__in=sessions)
            return confirm_page(
                self,
                request,
                title=f"Revoke every grant of {len(sessions)} session(s)?",
                consequences=revoke_consequences(),
                items=[
                    f"{sid}: {clip(prompt, 100)}"
                    for sid, prompt in affected.order_by("session_id", "id").values_list(
                        "session_id", "prompt"
                    )[:50]
                ],
                hidden=[("action", "revoke_sessions")]
                + [(ACTION_CHECKBOX_NAME, str(pk)) for pk in selected],
                button="Yes, revoke them",
                cancel_url=request.get_full_path(),
            )
        removed = sum(store.revoke(session_id) for session_id in sessions)
        self.report(
            request, f"Revoked {removed} grant(s) of {len(sessions)} session(s) through LoopStore."
        )
