"""Admins of the entry table and message parts: big, append-only, read-only.

    /admin/agentstore/entry/?session__id__exact=<id>&seq__gte=100&seq__lte=400

Filtered to one session the list follows ``seq`` (the unique (session, seq)
index); otherwise newest rows first by primary key. No count, no facets.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import quote
from django.db.models import Q, QuerySet
from django.db.models.expressions import RawSQL
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _

from agentstore import ids
from agentstore.admin.mixins import ReadOnlyAdmin, choices_filter, clip
from agentstore.formats.agentsession.describe import Described, describe
from agentstore.models import Entry, MessagePart
from agentstore.search import match_sql
from agentstore.selectors.short_ids import mark_id_matches

__all__ = ["EntryAdmin", "MessagePartAdmin"]

#: Entries a text search lists at most (the newest matches).
SEARCH_LIMIT = 10_000

#: The tree entry types the type filter offers (others filter through the URL).
ENTRY_TYPES = (
    "message",
    "item",
    "config",
    "response",
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
    # What the entry says first; ids short (accepted back by the command line);
    # few enough columns to fit a 1366 px laptop.
    list_display = (
        "seq",
        "what",
        "preview",
        "session_link",
        "short_entry_id",
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
    search_help_text = _("An entry id, a session id, or words of the entries' text.")
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

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Entry], search_term: str
    ) -> tuple[QuerySet[Entry], bool]:
        # Exact ids, compared case-sensitively so the indexes answer (the
        # stock "=field" search is a case-insensitive LIKE: a scan of a big
        # table), listed first; and the entries' text through the search index
        # (agentstore.search), newest 10,000 matches — both, never one instead
        # of the other (a word can be an operation id and a word of a message).
        term = search_term.strip()
        if not term:
            return queryset, False
        by_id = Q(entry_id=term) | Q(session_id=term) | (Q(operation_id=term) & ~Q(operation_id=""))
        session = request.GET.get("session__id__exact", "")
        match = match_sql(queryset.db, term, session_id=session, limit=SEARCH_LIMIT)
        found = by_id if match is None else by_id | Q(pk__in=RawSQL(*match))
        return mark_id_matches(queryset.filter(found), by_id), False

    def get_ordering(self, request: HttpRequest) -> tuple[str, ...]:
        if "session__id__exact" in request.GET:
            return ("seq",)
        return ("-id",)

    @admin.display(description=_("session"), ordering="session_id")
    def session_link(self, obj: Entry) -> str:
        return format_html(
            '<a href="{}" title="{}"><code>{}</code></a>',
            reverse("admin:agentstore_session_change", args=[quote(obj.session_id)]),
            obj.session_id,
            ids.short_id(obj.session_id),
        )

    @admin.display(description=_("entry id"))
    def short_entry_id(self, obj: Entry) -> str:
        return format_html('<code title="{}">{}</code>', obj.entry_id, ids.short_id(obj.entry_id))

    @admin.display(description=_("type"), ordering="type")
    def what(self, obj: Entry) -> str:
        view = self._words(obj)
        kind = view.kind if view is not None else obj.type
        role = (view.role if view is not None else "") or obj.role
        flags = "" if obj.display else " (hidden)"
        if role:
            return format_html(
                '{} <span class="as-role role-{}">{}</span>{}', kind, role, role, flags
            )
        return f"{kind}{flags}"

    @admin.display(description=_("content"))
    def preview(self, obj: Entry) -> str:
        view = self._words(obj)
        if view is not None and not (obj.summary or obj.content):
            text = view.text or (f"{view.tool}({view.arguments})" if view.tool else view.detail)
            return clip(text, 90)
        return clip(obj.summary or obj.content, 90)

    @staticmethod
    def _words(obj: Entry) -> Described | None:
        """An agentsession entry in words (its id is a hash; tree entries return None)."""
        if not obj.entry_id.startswith("sha256:"):
            return None
        try:
            data = json.loads(obj.line)
        except ValueError:
            return None
        return describe(data) if isinstance(data, dict) else None

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
