"""The read-only base of every agentstore admin, and the helpers its custom pages share.

    @admin.register(Step)
    class StepAdmin(ReadOnlyAdmin):
        list_display = ("session_id", "step_index", "step_type")

agentstore's tables are written by agents through the stores, never by hand:
the admin is for *looking*. So nothing can be added or changed, and the
built-in bulk delete is off — a row deleted behind a store's back could break
what the store guarantees (a loop session's grants must go with it, a held
session's holder must be told). Deletes and other operations are admin actions
that call the stores; they are allowed to users who hold the model's
``delete``/``change`` permission (``has_store_delete_permission``,
``has_operate_permission``).

Big tables never pay for an unbounded ``COUNT(*)``: no full result count, no
facet counts, no ``date_hierarchy``, and the paginator counts at most
``CappedCountPaginator.cap + 1`` rows (``SELECT COUNT(*) FROM (… LIMIT n)``), so
a million-row entry table costs the same to list as a thousand-row one. Past
the cap the list says "10001" and deeper pages are reached by filtering.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.core.paginator import Paginator
from django.db.models import Model
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.utils.functional import cached_property

if TYPE_CHECKING:
    from django_stubs_ext import StrOrPromise

__all__ = ["CappedCountPaginator", "ReadOnlyAdmin", "choices_filter", "clip", "render_page"]


def choices_filter(
    field: str, title: StrOrPromise, values: tuple[str, ...]
) -> type[admin.SimpleListFilter]:
    """A list filter over a fixed set of values.

    Django's default filter on a plain ``CharField`` asks the database for its
    ``DISTINCT`` values on every changelist load — a full scan of a big table.
    Any other value still filters through the URL (``?type__exact=…``).
    """

    class ChoicesFilter(admin.SimpleListFilter):
        parameter_name = f"{field}__exact"

        def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
            return [(value, value) for value in values]

        def queryset(self, request: HttpRequest, queryset: Any) -> Any:
            value = self.value()
            return queryset.filter(**{field: value}) if value else queryset

    ChoicesFilter.title = title
    return ChoicesFilter


class CappedCountPaginator(Paginator):  # type: ignore[type-arg]
    """A paginator whose count stops at ``cap + 1`` (a bounded ``COUNT`` over a ``LIMIT``)."""

    cap = 10_000

    @cached_property
    def count(self) -> int:
        limited: Any = self.object_list[: self.cap + 1]
        return int(limited.count())


class ReadOnlyAdmin(admin.ModelAdmin):  # type: ignore[type-arg]
    """Read-only, count-free inspection admin (the django-tasks-db pattern)."""

    show_full_result_count = False
    show_facets = admin.ShowFacets.NEVER
    paginator = CappedCountPaginator
    list_per_page = 50
    actions_on_bottom = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_store_delete_permission(self, request: HttpRequest) -> bool:
        """May the user delete through the store (the model's ``delete`` permission)?"""
        return request.user.has_perm(f"{self.opts.app_label}.delete_{self.opts.model_name}")

    def has_operate_permission(self, request: HttpRequest) -> bool:
        """May the user run operations (break lock, cancel, revoke: ``change`` permission)?"""
        return request.user.has_perm(f"{self.opts.app_label}.change_{self.opts.model_name}")

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [f.name for f in self.opts.fields] + list(super().get_readonly_fields(request, obj))

    def report(self, request: HttpRequest, message: str, level: int = messages.SUCCESS) -> None:
        """Tell the user what an operation did (``message_user`` with a level)."""
        self.message_user(request, message, level)


def render_page(
    model_admin: admin.ModelAdmin,  # type: ignore[type-arg]
    request: HttpRequest,
    template: str,
    *,
    title: str,
    obj: Model | None = None,
    **context: Any,
) -> TemplateResponse:
    """Render a custom inspection page inside the admin's chrome (sidebar, breadcrumbs)."""
    page = {
        **model_admin.admin_site.each_context(request),
        "opts": model_admin.opts,
        "title": title,
        "original": obj,
        **context,
    }
    return TemplateResponse(request, template, page)


def clip(text: str, length: int = 80) -> str:
    """One line of at most ``length`` characters (for changelist columns)."""
    line = " ".join(text.split())
    return line if len(line) <= length else line[: length - 1] + "…"
