"""Admins of the entry table and message parts: big, append-only, read-only.

    /admin/agentstore/entry/?session__id__exact=<id>&seq__gte=100&seq__lte=400

Filtered to one session the list follows ``seq`` (the unique (session, seq)
index); otherwise newest rows first by primary key. No count, no facets.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import quote
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _

from agentstore.admin.mixins import ReadOnlyAdmin, choices_filter, clip
from agentstore.models import Entry, MessagePart

__all__ = ["EntryAdmin", "MessagePartAdmin"]

#: The tree entry types the type filter offers (others filter through the URL).
ENTRY_TYPES = (
    "message",
    "custom_message",
    "custom",
    "model_change",
    "thinking_level_change",
    "compaction",
    "branch_summary",
    "label",
    "session_info",
)


@admin.register(Entry)
class EntryAdmin(ReadOnlyAdmin):
    list_display = (
        "seq",
        "session_link",
        "short_entry_id",
        "type",
        "role",
        "preview",
        "display",
        "model_facing",
        "created_at",
    )
    list_display_links = ("seq",)
    list_filter = (
        choices_filter("type", _("type"), ENTRY_TYPES),
        choices_filter("role", _("role"), ("user", "assistant", "toolResult", "custom")),
        "display",
        "model_facing",
    )
    search_fields = ("=entry_id", "=session__id", "=operation_id")
    raw_id_fields = ("session",)
    fieldsets = (
        (None, {"fields": ("session", "seq", "entry_id", "parent_id", "type", "created_at")}),
        (
            _("Message"),
            {"fields": ("role", "content", "provider", "model", "custom_type", "summary")},
        ),
        (
            _("Metadata"),
            {
                "fields": (
                    "model_facing",
                    "display",
                    "tool_name",
                    "tool_status",
                    "tool_args_json",
                    "token_estimate",
                    "compaction_first_kept_entry_id",
                    "compaction_tokens_before",
                    "branch_from_entry_id",
                    "operation_id",
                    "part_count",
                )
            },
        ),
        (_("JSON"), {"fields": ("pretty_line",)}),
    )

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [*super().get_readonly_fields(request, obj), "pretty_line"]

    def get_ordering(self, request: HttpRequest) -> tuple[str, ...]:
        if "session__id__exact" in request.GET:
            return ("seq",)
        return ("-id",)

    @admin.display(description=_("session"), ordering="session_id")
    def session_link(self, obj: Entry) -> str:
        return format_html(
            '<a href="{}">{}</a>',
            reverse("admin:agentstore_session_change", args=[quote(obj.session_id)]),
            clip(obj.session_id, 14),
        )

    @admin.display(description=_("entry id"))
    def short_entry_id(self, obj: Entry) -> str:
        return clip(obj.entry_id, 18)

    @admin.display(description=_("content"))
    def preview(self, obj: Entry) -> str:
        return clip(obj.summary or obj.content, 70)

    @admin.display(description=_("JSON"))
    def pretty_line(self, obj: Entry) -> str:
        return format_html("<pre class='as-content'>{}</pre>", obj.line)


@admin.register(MessagePart)
class MessagePartAdmin(ReadOnlyAdmin):
    list_display = ("id", "entry", "sequence", "type", "mime_type", "name", "size", "text_preview")
    list_filter = ("type",)
    raw_id_fields = ("entry",)
    list_select_related = ("entry",)
    ordering = ("-id",)
    exclude = ("data",)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        fields = [f for f in super().get_readonly_fields(request, obj) if f != "data"]
        return [*fields, "size"]

    @admin.display(description=_("bytes"))
    def size(self, obj: MessagePart) -> int:
        return len(obj.data or b"")

    @admin.display(description=_("text"))
    def text_preview(self, obj: MessagePart) -> str:
        return clip(obj.text, 60)
