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

from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.contrib import admin, messages
from django.core.exceptions import FieldDoesNotExist
from django.core.paginator import Paginator
from django.db.models import DateTimeField, Model, QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.utils import timezone
from django.utils.dateformat import format as date_format
from django.utils.functional import cached_property

from agentstore.routers import in_lag_tolerant_block, lag_tolerant, read_alias

if TYPE_CHECKING:
    from django_stubs_ext import StrOrPromise

__all__ = [
    "CONFIRM_FIELD",
    "EMPTY",
    "STAMP_FORMAT",
    "CappedCountPaginator",
    "ReadOnlyAdmin",
    "choices_filter",
    "clip",
    "confirm_page",
    "confirmed",
    "render_page",
    "stamp",
]

#: The one date format of every agentstore page (the templates use it too).
STAMP_FORMAT = "Y-m-d H:i:s"
#: The one "nothing here" mark of every agentstore page.
EMPTY = "—"


def stamp(value: datetime | None) -> str:
    """A time in the project's time zone as ``2026-05-31 09:00:00`` (:data:`EMPTY` for none)."""
    if value is None:
        return EMPTY
    return date_format(
        timezone.localtime(value) if timezone.is_aware(value) else value, STAMP_FORMAT
    )


def _stamp_column(model_admin: Any, name: str) -> Any:
    """A changelist column showing the datetime field ``name`` with :func:`stamp`."""
    field = model_admin.opts.get_field(name)

    def column(obj: Any) -> str:
        return stamp(getattr(obj, name))

    column.short_description = field.verbose_name  # type: ignore[attr-defined]
    column.admin_order_field = name  # type: ignore[attr-defined]
    column.__name__ = name
    return column


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
    empty_value_display = EMPTY

    class Media:
        # Changelists and detail pages share the custom pages' small stylesheet.
        css = {"all": ("agentstore/admin.css",)}

    def changelist_view(self, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
        """The changelist, its reads marked lag-tolerant (a replica may serve them).

        See agentstore/routers.py: with ``READ_REPLICA`` set, the list, its
        filters and its search read the replica; other admin pages, and every
        operation, stay on the primary.
        """
        with lag_tolerant():
            return super().changelist_view(request, extra_context)

    def get_queryset(self, request: HttpRequest) -> QuerySet[Any]:
        queryset: QuerySet[Any] = super().get_queryset(request)
        if in_lag_tolerant_block():
            # Pinned, because the page's rows are read while the response
            # renders, after the lag-tolerant block ended.
            queryset = queryset.using(read_alias(queryset.db))
        return queryset

    def get_list_display(self, request: HttpRequest) -> Any:
        """The columns, with every datetime field shown in the one :data:`STAMP_FORMAT`."""
        columns = []
        for name in super().get_list_display(request):
            if isinstance(name, str) and isinstance(self._field(name), DateTimeField):
                columns.append(_stamp_column(self, name))
            else:
                columns.append(name)
        return columns

    def _field(self, name: str) -> Any:
        try:
            return self.opts.get_field(name)
        except FieldDoesNotExist:  # a method or callable column, not a field
            return None

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


#: The POST field that says "yes, do it" on a confirmation page.
CONFIRM_FIELD = "confirm"


def confirmed(request: HttpRequest) -> bool:
    """Did the user confirm the operation on its confirmation page?"""
    return request.method == "POST" and request.POST.get(CONFIRM_FIELD) == "yes"


def confirm_page(
    model_admin: admin.ModelAdmin,  # type: ignore[type-arg]
    request: HttpRequest,
    *,
    title: str,
    consequences: list[str],
    items: list[str],
    button: str,
    cancel_url: str,
    hidden: list[tuple[str, str]] | None = None,
    more: int = 0,
    obj: Model | None = None,
) -> TemplateResponse:
    """The admin's intermediate page: what an operation will do, and a button to do it.

    The page posts back to the same URL with ``confirm=yes`` (and ``hidden``
    fields: an action's name and its selected ids), so the operation runs only
    after the user read what will happen. ``more`` counts affected items not
    listed.
    """
    return render_page(
        model_admin,
        request,
        "admin/agentstore/confirm.html",
        title=title,
        obj=obj,
        consequences=consequences,
        items=items,
        more=more,
        button=button,
        cancel_url=cancel_url,
        hidden=hidden or [],
        confirm_field=CONFIRM_FIELD,
    )
