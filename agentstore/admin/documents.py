"""Admin of the runtime documents (JSON values by namespace and key)."""

from __future__ import annotations

from django.contrib import admin
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _

from agentstore.admin.mixins import ReadOnlyAdmin, clip
from agentstore.models import Document
from agentstore.stores.documents import DocumentStore

__all__ = ["DocumentAdmin"]


@admin.register(Document)
class DocumentAdmin(ReadOnlyAdmin):
    list_display = ("namespace", "key", "value_preview", "updated_at")
    list_filter = ("namespace",)
    search_fields = ("^namespace", "^key")
    ordering = ("namespace", "key")
    actions = ("delete_through_store",)

    def get_readonly_fields(self, request: HttpRequest, obj: object = None) -> list[str]:
        return [*super().get_readonly_fields(request, obj), "pretty_value"]

    @admin.display(description=_("value"))
    def value_preview(self, obj: Document) -> str:
        return clip(obj.value_json, 80)

    @admin.display(description=_("value (JSON)"))
    def pretty_value(self, obj: Document) -> str:
        return format_html("<pre class='as-content'>{}</pre>", obj.value_json)

    @admin.action(
        description=_("Delete selected documents (through DocumentStore)"),
        permissions=["store_delete"],
    )
    def delete_through_store(self, request: HttpRequest, queryset: QuerySet[Document]) -> None:
        store = DocumentStore()
        keys = list(queryset.values_list("namespace", "key"))
        for namespace, key in keys:
            store.delete(namespace, key)
        self.report(request, f"Deleted {len(keys)} document(s).")
