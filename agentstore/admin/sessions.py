"""The session admin: the changelist, the session page and its inspection views.

    /admin/agentstore/session/                      changelist (no COUNT, no facets)
    /admin/agentstore/session/<id>/change/          header facts, hold, refs, children, tasks
    /admin/agentstore/session/<id>/tree/?before=    the entry tree, a window of entries
    /admin/agentstore/session/<id>/context/?entry=  what the model would see there, and why
    /admin/agentstore/session/<id>/transcript/?after=  displayed messages, a page (TreeStore)
    /admin/agentstore/session/<id>/steps/           the loop step trace (LoopStore)
    /admin/agentstore/session/<id>/grants/          approvals, with "revoke" (LoopStore)
    /admin/agentstore/session/<id>/checkpoints/     a LangGraph thread: checkpoint tree,
                                                    state, pending writes, interrupts
    /admin/agentstore/session/<id>/break-lock/      POST: break the hold (SessionStore.break_hold)

Deleting goes through the store that owns the session's kind (``TreeStore``,
``LoopStore``, ``LogStore``), so what each store promises on delete — grants
purged with a loop session, the agent task of a child session removed — holds.
"""

from __future__ import annotations

import json
from typing import Any

from django.contrib import admin, messages
from django.contrib.admin.utils import quote, unquote
from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_POST

from agentstore import exceptions
from agentstore.admin.mixins import CappedCountPaginator, ReadOnlyAdmin, clip, render_page
from agentstore.models import Session
from agentstore.models.sessions import SessionKind
from agentstore.selectors.admin_views import (
    context_view,
    session_overview,
    session_tree,
    steps_of,
    tree_rows,
)
from agentstore.selectors.checkpoints import checkpoint_detail, thread_view
from agentstore.selectors.holds import break_hold, hold_of
from agentstore.stores.loop import LoopStore
from agentstore.stores.sessions import SessionStore
from agentstore.stores.tree import TreeStore

__all__ = ["SessionAdmin", "break_lock", "delete_session"]

#: Messages or steps per page of the transcript and step views.
PAGE_SIZE = 200


def delete_session(session_id: str, kind: str) -> None:
    """Delete a session of ``kind`` with its kind's cascade (``SessionStore.delete``)."""
    SessionStore().delete(session_id, kind)


def _positive(value: str | None) -> int:
    """A positive integer query value, or 0 (absent or not a positive integer)."""
    try:
        number = int(value or 0)
    except ValueError:
        return 0
    return max(number, 0)


def break_lock(session_id: str) -> str:
    """Break the session's hold (``selectors.holds.break_hold``: ``SessionStore.break_hold``).

    Returns what happened, naming the process that lost its hold.
    """
    holder = hold_of(session_id)
    if holder is None or not break_hold(session_id):
        return f"Session {session_id} was not held: nothing to break."
    return (
        f"Broke the hold of pid {holder.pid} on {holder.host} on session {session_id}. "
        "Its next append fails with SessionLocked until it releases and re-opens."
    )


class TopLevelFilter(admin.SimpleListFilter):
    title = _("place")
    parameter_name = "top"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, Any]]:
        return [("yes", _("top-level")), ("no", _("child sessions"))]

    def queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> QuerySet[Any]:
        if self.value() == "yes":
            return queryset.filter(parent_session="")
        if self.value() == "no":
            return queryset.exclude(parent_session="")
        return queryset


@admin.register(Session)
class SessionAdmin(ReadOnlyAdmin):
    change_form_template = "admin/agentstore/session/change_form.html"
    list_display = (
        "short_id",
        "kind",
        "title",
        "cwd",
        "owner",
        "model",
        "status",
        "updated_at",
        "views",
    )
    list_display_links = ("short_id",)
    list_filter = ("kind", TopLevelFilter)
    # Prefix and exact searches use the indexes; a %…% scan of a million rows would not.
    search_fields = ("=id", "^name", "^cwd", "=parent_session")
    list_select_related = ("owner",)
    raw_id_fields = ("owner",)
    ordering = ("-updated_at", "-id")
    actions = ("delete_through_store",)
    fieldsets = (
        (None, {"fields": ("id", "kind", "name", "cwd", "owner", "parent_session")}),
        (_("Times"), {"fields": ("created_at", "updated_at", "incarnation")}),
        (
            _("Agent loop"),
            {
                "classes": ("collapse",),
                "fields": (
                    "model",
                    "status",
                    "message_id",
                    "prompt_tokens",
                    "completion_tokens",
                    "step_count",
                    "duration_ms",
                    "data_bytes_carried",
                    "data_size",
                    "system_prompt",
                ),
            },
        ),
        (
            _("agentsession log"),
            {"classes": ("collapse",), "fields": ("header", "superseded_by")},
        ),
    )

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> list[str]:
        return [*super().get_readonly_fields(request, obj), "data_size"]

    @admin.display(description=_("id"), ordering="id")
    def short_id(self, obj: Session) -> str:
        return clip(obj.id, 24)

    @admin.display(description=_("name"), ordering="name")
    def title(self, obj: Session) -> str:
        return clip(obj.name, 40)

    @admin.display(description=_("working-memory snapshot"))
    def data_size(self, obj: Session) -> str:
        return "—" if obj.data is None else f"{len(obj.data)} bytes"

    @admin.display(description=_("inspect"))
    def views(self, obj: Session) -> str:
        key = quote(obj.pk)
        if obj.kind == SessionKind.GRAPH:
            return format_html(
                '<a href="{}">checkpoints</a>',
                reverse("admin:agentstore_session_checkpoints", args=[key]),
            )
        if obj.kind == SessionKind.LOOP:
            return format_html(
                '<a href="{}">steps</a> · <a href="{}">grants</a>',
                reverse("admin:agentstore_session_steps", args=[key]),
                reverse("admin:agentstore_session_grants", args=[key]),
            )
        return format_html(
            '<a href="{}">tree</a> · <a href="{}">context</a>',
            reverse("admin:agentstore_session_tree", args=[key]),
            reverse("admin:agentstore_session_context", args=[key]),
        )

    @admin.action(
        description=_("Delete selected sessions (through their store)"),
        permissions=["store_delete"],
    )
    def delete_through_store(self, request: HttpRequest, queryset: QuerySet[Session]) -> None:
        deleted, failed = 0, []
        for session_id, kind in queryset.values_list("id", "kind"):
            try:
                delete_session(session_id, kind)
            except exceptions.AgentStoreError as exc:
                failed.append(f"{session_id}: {exc}")
            else:
                deleted += 1
        if deleted:
            self.report(request, f"Deleted {deleted} session(s) through their stores.")
        for line in failed:
            self.report(request, f"Not deleted — {line}", messages.ERROR)

    # -- custom views -----------------------------------------------------------------

    def get_urls(self) -> list[URLPattern]:
        def view(fn: Any, name: str, route: str) -> URLPattern:
            return path(  # type: ignore[no-any-return]
                f"<path:object_id>/{route}/",
                self.admin_site.admin_view(fn),
                name=f"agentstore_session_{name}",
            )

        return [
            view(self.tree_view, "tree", "tree"),
            view(self.context_view, "context", "context"),
            view(self.transcript_view, "transcript", "transcript"),
            view(self.steps_view, "steps", "steps"),
            view(self.grants_view, "grants", "grants"),
            view(self.checkpoints_view, "checkpoints", "checkpoints"),
            view(require_POST(self.break_lock_view), "break_lock", "break-lock"),
            *super().get_urls(),
        ]

    def _session(self, request: HttpRequest, object_id: str) -> Session:
        if not self.has_view_permission(request):
            raise Http404
        session: Session | None = self.get_object(request, unquote(object_id))
        if session is None:
            raise Http404(f"no session {unquote(object_id)!r}")
        return session

    def change_view(
        self,
        request: HttpRequest,
        object_id: str,
        form_url: str = "",
        extra_context: dict[str, Any] | None = None,
    ) -> HttpResponse:
        overview = session_overview(unquote(object_id))
        context = {
            **(extra_context or {}),
            "overview": overview,
            "can_operate": self.has_operate_permission(request),
        }
        return super().change_view(request, object_id, form_url, context)

    def tree_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        session = self._session(request, object_id)
        # A big session is drawn one window of entries at a time (?before=seq).
        tree = session_tree(session.pk, before=_positive(request.GET.get("before")))
        return render_page(
            self,
            request,
            "admin/agentstore/session/tree.html",
            title=f"Tree of {session}",
            obj=session,
            tree=tree,
            rows=tree_rows(tree),
            # Reversed once here, not once per drawn entry (10,000 reverses cost ~0.3 s).
            entries_url=reverse("admin:agentstore_entry_changelist"),
            context_url=reverse("admin:agentstore_session_context", args=[quote(session.pk)]),
            context_word=_("context"),
            entry_word=_("entry"),
        )

    def context_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        session = self._session(request, object_id)
        entry_id = request.GET.get("entry", "").strip()
        view = None
        error = ""
        try:
            view = context_view(session.pk, entry_id)
        except (exceptions.NoEntry, exceptions.ValidationError, exceptions.TooLarge) as exc:
            error = str(exc)
        # A context without compaction can hold every message of a 10,000-entry
        # branch: the explanation table is paged, the "left out" list capped.
        lines = Paginator(view.lines if view else (), PAGE_SIZE).get_page(request.GET.get("page"))
        return render_page(
            self,
            request,
            "admin/agentstore/session/context.html",
            title=f"Context of {session}",
            obj=session,
            view=view,
            lines=lines,
            left_out=view.left_out[:PAGE_SIZE] if view else (),
            entry_id=view.entry_id if view else entry_id,
            error=error,
        )

    def transcript_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        session = self._session(request, object_id)
        # Paged after the last message seen (?after=<entry id>): one index range
        # per page, where a page number would read every message before it.
        after = request.GET.get("after", "").strip()
        error = ""
        try:
            found = TreeStore().messages_page(session.pk, after, PAGE_SIZE + 1, displayed_only=True)
        except exceptions.NoEntry as exc:
            found, error = [], str(exc)
        return render_page(
            self,
            request,
            "admin/agentstore/session/transcript.html",
            title=f"Transcript of {session}",
            obj=session,
            messages_page=found[:PAGE_SIZE],
            next_after=found[PAGE_SIZE - 1].entry_id if len(found) > PAGE_SIZE else "",
            after=after,
            error=error,
        )

    def steps_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        session = self._session(request, object_id)
        page = CappedCountPaginator(steps_of(session.pk), PAGE_SIZE).get_page(
            request.GET.get("page")
        )
        return render_page(
            self,
            request,
            "admin/agentstore/session/steps.html",
            title=f"Steps of {session}",
            obj=session,
            page=page,
        )

    def grants_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        session = self._session(request, object_id)
        store = LoopStore()
        if request.method == "POST":
            if not self.has_operate_permission(request):
                raise Http404
            removed = store.revoke(session.pk)
            self.report(request, f"Revoked {removed} grant(s) of session {session.pk}.")
            return HttpResponseRedirect(request.path)
        return render_page(
            self,
            request,
            "admin/agentstore/session/grants.html",
            title=f"Grants of {session}",
            obj=session,
            grants=store.grants(session.pk),
            can_operate=self.has_operate_permission(request),
        )

    def checkpoints_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        session = self._session(request, object_id)
        ns = request.GET.get("ns", "")
        older = request.GET.get("older_than", "")
        view = thread_view(session.pk, ns, older_than=int(older) if older.isdigit() else None)
        detail = checkpoint_detail(session.pk, ns, request.GET.get("checkpoint") or None)
        return render_page(
            self,
            request,
            "admin/agentstore/session/checkpoints.html",
            title=f"Checkpoints of {session}",
            obj=session,
            view=view,
            detail=detail,
            metadata_json=json.dumps(detail.metadata, sort_keys=True, default=str)[:2000]
            if detail
            else "",
        )

    def break_lock_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        session = self._session(request, object_id)
        if not self.has_operate_permission(request):
            raise Http404
        try:
            self.report(request, break_lock(session.pk))
        except exceptions.AgentStoreError as exc:
            self.report(request, f"Could not break the lock: {exc}", messages.ERROR)
        return HttpResponseRedirect(
            reverse("admin:agentstore_session_change", args=[quote(session.pk)])
        )
