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
from django.db.models import Q, QuerySet
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import URLPattern, path, reverse
from django.utils.html import format_html
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_POST

from agentstore import exceptions, ids
from agentstore.admin.mixins import (
    EMPTY,
    CappedCountPaginator,
    ReadOnlyAdmin,
    clip,
    confirm_page,
    confirmed,
    render_page,
    stamp,
)
from agentstore.models import Entry, Session
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
from agentstore.selectors.log_views import (
    entry_views,
    fork_base,
    log_context_view,
    log_labels,
    log_transcript,
    read_log,
    response_checks,
)
from agentstore.selectors.pictures import day_chart, step_timeline
from agentstore.selectors.sessions import (
    resolve_session,
    search_sessions,
    with_opening_message,
)
from agentstore.selectors.short_ids import mark_id_matches, resolve
from agentstore.selectors.usage import PERIODS, usage
from agentstore.stores.base import utc_now
from agentstore.stores.loop import LoopStore
from agentstore.stores.sessions import SessionStore
from agentstore.stores.tree import TreeStore

__all__ = [
    "SessionAdmin",
    "break_lock",
    "break_lock_consequences",
    "delete_session",
    "hold_line",
]

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


def break_lock_consequences() -> list[str]:
    """What breaking a hold does, in words (shown before the user confirms)."""
    return [
        "A hold says which process is writing a session. Breaking it removes the hold row: "
        "another process may then open the session and write.",
        "If the holding process is still alive, its next append fails with SessionLocked; "
        "it has to release the session and open it again. Nothing already written is changed.",
        "Break a hold only when its process is gone or stuck (the heartbeat is the time of "
        "its last append).",
    ]


def hold_line(session_id: str, holder: Any) -> str:
    """One line naming a hold: session, pid, host, since, last append."""
    return (
        f"{session_id}: pid {holder.pid} on {holder.host}, held since {stamp(holder.since)}, "
        f"last append {stamp(holder.heartbeat)}"
    )


def revoke_consequences() -> list[str]:
    """What revoking grants does, in words (shown before the user confirms)."""
    return [
        "A grant remembers that a person approved a prompt, so the agent does not ask again. "
        "Revoking deletes these approvals of the session (LoopStore.revoke: all of them; "
        "the store has no per-prompt revoke).",
        "The next time the agent needs one of these approvals, it asks again. "
        "Steps and the session itself are not changed.",
    ]


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
    # Names before ids, short ids (accepted back by the command line), and few
    # enough columns to fit a 1366 px laptop.
    list_display = (
        "title",
        "kind_name",
        "views",
        "where",
        "updated_at",
    )
    list_display_links = ("title",)
    list_filter = ("kind", TopLevelFilter)
    # Exact and prefix searches use the indexes; text goes through the search index.
    search_fields = ("=id", "^cwd", "=parent_session")
    search_help_text = _(
        "A session id or short id, a directory prefix, or words of the name or of any message."
    )
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

    def get_queryset(self, request: HttpRequest) -> QuerySet[Session]:
        # The opening user message stands in for a missing name (one indexed
        # subquery per listed row: (session, role) on the first seq).
        return with_opening_message(super().get_queryset(request))  # type: ignore[arg-type]

    def get_search_results(
        self, request: HttpRequest, queryset: QuerySet[Session], search_term: str
    ) -> tuple[QuerySet[Session], bool]:
        found_by_field, duplicates = super().get_search_results(request, queryset, search_term)
        if not search_term.strip():
            return found_by_field, duplicates
        # Names by substring, entry text (the opening message included) by the
        # search index — what the API's ?search= finds (search_sessions) —
        # whether or not the words also name a session: an id or a short id
        # copied from any page or command adds its session, listed first.
        found = found_by_field | search_sessions(queryset, search_term)  # type: ignore[arg-type]
        named = resolve_session(queryset, search_term)  # type: ignore[arg-type]
        if named is None:
            return found, duplicates
        return mark_id_matches(found | queryset.filter(pk=named), Q(pk=named)), duplicates

    @admin.display(description=_("id"), ordering="id")
    def short_id(self, obj: Session) -> str:
        return format_html('<code title="{}">{}</code>', obj.id, ids.short_id(obj.id))

    @admin.display(description=_("name or opening message · id, owner"), ordering="name")
    def title(self, obj: Session) -> str:
        opening = getattr(obj, "opening", None)
        if obj.name:
            name = format_html("{}", clip(obj.name, 60))
        elif opening:
            name = format_html("<em>“{}”</em>", clip(opening, 58))
        else:
            name = format_html("{}", _("(unnamed)"))
        owner = obj.owner.get_username() if obj.owner else ""
        return format_html(
            '{}<br><span class="as-sub"><code title="{}">{}</code>{}</span>',
            name,
            obj.id,
            ids.short_id(obj.id),
            f" · {owner}" if owner else "",
        )

    @admin.display(description=_("kind"), ordering="kind")
    def kind_name(self, obj: Session) -> str:
        return obj.kind

    @admin.display(description=_("directory / model"))
    def where(self, obj: Session) -> str:
        if obj.kind == SessionKind.LOOP:
            return clip(" · ".join(x for x in (obj.model, obj.status) if x) or EMPTY, 32)
        return clip(obj.cwd or EMPTY, 32)

    @admin.display(description=_("working-memory snapshot"))
    def data_size(self, obj: Session) -> str:
        return EMPTY if obj.data is None else f"{len(obj.data)} bytes"

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
                '<a href="{}">steps</a><br><a href="{}">grants</a>',
                reverse("admin:agentstore_session_steps", args=[key]),
                reverse("admin:agentstore_session_grants", args=[key]),
            )
        return format_html(
            '<a href="{}">tree</a><br><a href="{}">context</a>',
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
            path(
                "usage/",
                self.admin_site.admin_view(self.usage_view),
                name="agentstore_usage",
            ),
            view(self.tree_view, "tree", "tree"),
            view(self.context_view, "context", "context"),
            view(self.transcript_view, "transcript", "transcript"),
            view(self.steps_view, "steps", "steps"),
            view(self.grants_view, "grants", "grants"),
            view(self.checkpoints_view, "checkpoints", "checkpoints"),
            view(require_POST(self.break_lock_view), "break_lock", "break-lock"),
            *super().get_urls(),
        ]

    def usage_view(self, request: HttpRequest) -> HttpResponse:
        """Tokens and cost per model per day, sessions and tasks per day, task outcomes."""
        if not self.has_view_permission(request):
            raise Http404
        try:
            days = int(request.GET.get("days", "7"))
        except ValueError:
            days = 7
        days = days if days in PERIODS else 7
        report = usage(utc_now(), days)
        tokens: dict[Any, dict[str, int]] = {}
        for row in report.tokens:
            tokens.setdefault(row.day, {})[row.model] = row.tokens_in + row.tokens_out
        return render_page(
            self,
            request,
            "admin/agentstore/usage.html",
            title=f"Usage of the last {days} day(s)",
            report=report,
            days=days,
            periods=PERIODS,
            token_chart=day_chart(report.days, tokens),
            session_chart=day_chart(report.days, report.sessions),
            task_chart=day_chart(report.days, {d: {"tasks": n} for d, n in report.tasks.items()}),
        )

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
        base = ("", 0)
        if overview is not None and overview.kind == SessionKind.LOG:
            header = Session.objects.filter(pk=overview.id).values_list("header", flat=True)
            base = fork_base(overview.id, header.first() or "")
        context = {
            **(extra_context or {}),
            "overview": overview,
            "fork_base": base[0],
            "fork_base_seq": base[1],
            "can_operate": self.has_operate_permission(request),
        }
        return super().change_view(request, object_id, form_url, context)

    def tree_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        session = self._session(request, object_id)
        if session.kind in (SessionKind.LOOP, SessionKind.GRAPH):
            raise Http404("only tree and log sessions have an entry tree")
        # A big session is drawn one window of entries at a time (?before=seq).
        tree = session_tree(session.pk, before=_positive(request.GET.get("before")))
        rows = tree_rows(tree)
        words: dict[int, Any] = {}
        checks: dict[str, str] = {}
        labels: dict[str, str] = {}
        base_seq = 0
        if session.kind == SessionKind.LOG:
            labels = log_labels(session.pk)
            _base, base_seq = fork_base(session.pk, session.header)
            # The rows the tree chose to draw, put into words from their lines.
            words = entry_views(session.pk, [r.node.pk for r in rows if r.node is not None])
            responses = [
                r.node.id
                for r in rows
                if r.kind == "node" and r.node is not None and r.node.type == "response"
            ]
            if responses:
                checks = response_checks(read_log(session.pk), responses)
        return render_page(
            self,
            request,
            "admin/agentstore/session/tree.html",
            title=f"Tree of {session}",
            obj=session,
            tree=tree,
            rows=rows,
            words=words,
            checks=checks,
            labels=labels,
            base_seq=base_seq,
            # Reversed once here, not once per drawn entry (10,000 reverses cost ~0.3 s).
            entries_url=reverse("admin:agentstore_entry_changelist"),
            context_url=reverse("admin:agentstore_session_context", args=[quote(session.pk)]),
            context_word=_("context"),
            entry_word=_("entry"),
        )

    def context_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        session = self._session(request, object_id)
        if session.kind in (SessionKind.LOOP, SessionKind.GRAPH):
            raise Http404("only tree and log sessions have an entry context")
        if session.kind == SessionKind.LOG:
            return self._log_context_view(request, session)
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

    def _log_context_view(self, request: HttpRequest, session: Session) -> HttpResponse:
        """The agentsession context: the format's own rules (``Session.context_at``)."""
        text = request.GET.get("entry", "").strip()
        view = None
        error = ""
        try:
            entry_id = (
                resolve(Entry.objects.filter(session_id=session.pk), "entry_id", text, what="entry")
                if text
                else ""
            )
            if text and entry_id is None:
                raise exceptions.NoEntry(f"no entry {text!r} in this session")
            view = log_context_view(session.pk, entry_id or "")
        except (
            exceptions.NoEntry,
            exceptions.ValidationError,
            exceptions.BadID,
            exceptions.TooLarge,
        ) as exc:
            error = str(exc)
        lines = Paginator(view.lines if view else (), PAGE_SIZE).get_page(request.GET.get("page"))
        return render_page(
            self,
            request,
            "admin/agentstore/session/log_context.html",
            title=f"Context of {session}",
            obj=session,
            view=view,
            lines=lines,
            left_out=view.left_out[:PAGE_SIZE] if view else (),
            entry_id=view.entry_id if view else text,
            error=error,
        )

    def transcript_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        session = self._session(request, object_id)
        if session.kind in (SessionKind.LOOP, SessionKind.GRAPH):
            raise Http404("only tree and log sessions have a transcript")
        if session.kind == SessionKind.LOG:
            return render_page(
                self,
                request,
                "admin/agentstore/session/log_transcript.html",
                title=f"Transcript of {session}",
                obj=session,
                page=log_transcript(session.pk, request.GET.get("page"), PAGE_SIZE),
            )
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
        if session.kind != SessionKind.LOOP:
            raise Http404("only loop sessions have steps")
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
            timeline=step_timeline(session.pk),
        )

    def grants_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        session = self._session(request, object_id)
        if session.kind != SessionKind.LOOP:
            raise Http404("only loop sessions have grants")
        store = LoopStore()
        if request.method == "POST":
            if not self.has_operate_permission(request):
                raise Http404
            if not confirmed(request):
                grants = store.grants(session.pk)
                return confirm_page(
                    self,
                    request,
                    title=f"Revoke every grant of {session}?",
                    consequences=revoke_consequences(),
                    items=[clip(prompt, 120) for prompt in grants[:50]],
                    more=max(0, len(grants) - 50),
                    button=f"Yes, revoke {len(grants)} grant(s)",
                    cancel_url=request.path,
                    obj=session,
                )
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
            metadata_json=json.dumps(detail.metadata, sort_keys=True, indent=1, default=str)[:2000]
            if detail
            else "",
        )

    def break_lock_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        session = self._session(request, object_id)
        if not self.has_operate_permission(request):
            raise Http404
        back = reverse("admin:agentstore_session_change", args=[quote(session.pk)])
        holder = hold_of(session.pk)
        if holder is not None and not confirmed(request):
            return confirm_page(
                self,
                request,
                title=f"Break the hold on {session}?",
                consequences=break_lock_consequences(),
                items=[hold_line(session.pk, holder)],
                button="Yes, break the lock",
                cancel_url=back,
                obj=session,
            )
        try:
            self.report(request, break_lock(session.pk))
        except exceptions.AgentStoreError as exc:
            self.report(request, f"Could not break the lock: {exc}", messages.ERROR)
        return HttpResponseRedirect(
            reverse("admin:agentstore_session_change", args=[quote(session.pk)])
        )
