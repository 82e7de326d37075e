"""Sessions and their entry trees: list, create, read, delete, rename, entries, appends.

    GET    /sessions                          list (filters: kind cwd parent owner current search)
    POST   /sessions                          create a tree (or loop) session you own
    GET    /sessions/{id}                     one session
    DELETE /sessions/{id}                     delete it with its entries and tasks
    POST   /sessions/{id}/rename              record a session_info entry and rename
    GET    /sessions/{id}/entries             entries by seq (?after= / ?cursor= / ?limit=)
    GET    /sessions/{id}/entries/{entry_id}  one entry (DELETE: the entry and its subtree)
    GET    /sessions/{id}/tree | branch | messages | transcript   (paged)
    GET    /sessions/{id}/context             (bounded: MAX_CONTEXT_BRANCH)
    POST   /sessions/{id}/append/{kind}       message, custom, custom-message, model-change,
                                              thinking-level-change, branch-summary, label,
                                              session-info, compaction

Every action resolves the session through ``session_or_404`` first (owner
scoping), then makes exactly one store call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.utils.urls import replace_query_param

from agentstore.api import serializers as s
from agentstore.api.filters import SessionFilter
from agentstore.api.pagination import MAX_ENTRY_PAGE, EntryCursor, SeqCursor, SessionPagination
from agentstore.api.views.base import ENTRY_ID, AgentStoreViewSet, errors
from agentstore.api.views.loop import LoopActions
from agentstore.api.views.session_extras import SessionExtrasActions
from agentstore.conf import agentstore_settings
from agentstore.exceptions import NoEntry, NoSession, TooLarge
from agentstore.models.sessions import SessionKind, SessionQuerySet
from agentstore.selectors.sessions import sessions_visible_to
from agentstore.stores import SessionStore, TreeStore
from agentstore.types.tree import SessionContextEntity

__all__ = ["SessionViewSet"]

F = TypeVar("F", bound=Callable[..., Any])

_AFTER = OpenApiParameter(
    "after", int, description="Return entries with seq greater than this (tailing).", required=False
)
_CURSOR = OpenApiParameter(
    "cursor", str, description="The opaque cursor of a `next` link.", required=False
)
_LIMIT = OpenApiParameter("limit", int, description="Page size (1–1000, default 100).")
_PAGE_LIMIT = OpenApiParameter(
    "limit", int, description=f"Page size (1–{MAX_ENTRY_PAGE}, default 100).", required=False
)
_AT = OpenApiParameter(
    "entry_id",
    str,
    description="The entry to read up to (default: the most recent leaf).",
    required=False,
)


#: The session kinds an action takes: appends write tree sessions; entry reads
#: also serve log sessions, whose agentsession lines are entries too.
_TREE = (SessionKind.TREE.value,)
_ENTRIES = (SessionKind.TREE.value, SessionKind.LOG.value)


class _EntryQuery(serializers.Serializer[Any]):
    entry_id = serializers.CharField(required=False, allow_blank=True, default="", max_length=128)


class _BranchQuery(_EntryQuery):
    limit = serializers.IntegerField(
        required=False, default=100, min_value=1, max_value=MAX_ENTRY_PAGE
    )


def require_context_size(store: TreeStore, session_id: str, leaf_id: str) -> None:
    """Refuse (``TooLarge``) to build a context reading more than ``MAX_CONTEXT_BRANCH`` entries.

    What a context reads is the branch from the latest compaction's first-kept
    entry (the root without one) to the leaf, so a long compacted session is
    served (docs/api.md). The count stops one past the bound, so asking costs
    at most that many rows.
    """
    bound = int(agentstore_settings.MAX_CONTEXT_BRANCH)
    if bound > 0 and store.context_length(session_id, leaf_id, at_most=bound) > bound:
        raise TooLarge(
            f"the context at entry {leaf_id!r} reads more than MAX_CONTEXT_BRANCH={bound} "
            "entries (the branch since its latest compaction's kept entry); "
            f"read it in pages with /sessions/{session_id}/branch?entry_id={leaf_id}"
            f"&limit={MAX_ENTRY_PAGE}",
            limit=bound,
        )


def _entry_query(request: Request) -> str:
    query = _EntryQuery(data=request.query_params)
    query.is_valid(raise_exception=True)
    return str(query.validated_data["entry_id"])


def _appended(entry: Any, *, created: bool = True) -> Response:
    code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
    return Response(s.EntrySerializer(entry).data, status=code)


def _append_schema(request: type[serializers.Serializer[Any]], summary: str) -> Callable[[F], F]:
    return extend_schema(
        summary=summary,
        request=request,
        responses={201: s.EntrySerializer, **errors(400, 404, 409)},
        tags=["entries"],
    )


@extend_schema_view(
    list=extend_schema(
        summary="List sessions you can see",
        responses={200: s.SessionSerializer(many=True), **errors(400, 404)},
        tags=["sessions"],
    ),
    retrieve=extend_schema(
        summary="Read a session", responses={200: s.SessionSerializer, **errors(404)}
    ),
    destroy=extend_schema(
        summary="Delete a session with its entries, steps and tasks",
        responses={204: None, **errors(404)},
    ),
)
class SessionViewSet(
    LoopActions,
    SessionExtrasActions,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    AgentStoreViewSet,
):
    """Agent sessions (tree, loop and log kinds), owner-scoped; staff see all."""

    serializer_class = s.SessionSerializer
    filter_backends = [DjangoFilterBackend]
    filterset_class = SessionFilter
    pagination_class = SessionPagination

    def get_queryset(self) -> SessionQuerySet:
        return sessions_visible_to(self.request.user).select_related("owner").newest_first()

    def get_object(self) -> Any:
        # No list filters on detail routes: only visibility decides.
        self.session_or_404()
        return self.get_queryset().get(pk=self.kwargs["pk"])

    @extend_schema(
        summary="Create a session you own",
        request=s.SessionCreateInput,
        responses={201: s.SessionSerializer, **errors(400, 404)},
        tags=["sessions"],
    )
    def create(self, request: Request) -> Response:
        data = s.SessionCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        if values["parent_session"]:
            # Same rule as a task's parent: someone else's session is "not
            # there" (404), or B's session would show as A's child.
            self.named_session_or_404(values["parent_session"], "parent_session")
        if values["kind"] == SessionKind.LOOP:
            session_id = (
                SessionStore()
                .create(
                    SessionKind.LOOP,
                    owner=request.user,
                    model=values["model"],
                    system_prompt=values["system_prompt"],
                    cwd=values["cwd"],
                    name=values["name"],
                )
                .id
            )
        else:
            session_id = (
                TreeStore()
                .create_session(
                    values["cwd"], values["name"], values["parent_session"], owner=request.user
                )
                .id
            )
        # Committed already: a session deleted in between is gone (404), not a 500.
        session = self.get_queryset().filter(pk=session_id).first()
        if session is None:
            raise NoSession(f"no such session: {session_id}")
        return Response(s.SessionSerializer(session).data, status=status.HTTP_201_CREATED)

    def destroy(self, request: Request, pk: str) -> Response:
        session = self.session_or_404()
        SessionStore().delete(session.id, session.kind)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(
        summary="Rename a session (records a session_info entry)",
        request=s.RenameInput,
        responses={201: s.EntrySerializer, **errors(400, 404, 409)},
        tags=["sessions"],
    )
    @action(detail=True, methods=["post"], pagination_class=None, filter_backends=[])
    def rename(self, request: Request, pk: str) -> Response:
        session = self.session_or_404(None, *_TREE)
        data = s.RenameInput(data=request.data)
        data.is_valid(raise_exception=True)
        store = TreeStore()
        parent = data.validated_data["parent_id"]
        if parent is None and "parent_id" not in request.data:
            latest = store.branch(session.id, "", 1)
            parent = latest[-1].id if latest else None
        return _appended(store.append_session_info(session.id, parent, data.validated_data["name"]))

    # -- reading the tree -------------------------------------------------------------

    @extend_schema(
        summary="Entries in append (seq) order, one page at a time",
        operation_id="sessions_entries_list",
        parameters=[_AFTER, _CURSOR, _LIMIT],
        responses={200: s.EntryPageSerializer, **errors(400, 404, 409)},
        tags=["entries"],
    )
    @action(detail=True, methods=["get"], pagination_class=None, filter_backends=[])
    def entries(self, request: Request, pk: str) -> Response:
        session = self.session_or_404(None, *_ENTRIES)
        cursor = SeqCursor(request)
        found = TreeStore().entries_after(session.id, cursor.after, cursor.limit + 1)
        rows, next_url = cursor.page(found, lambda entry: entry.seq)
        return Response(
            {
                "next": next_url,
                "last_seq": rows[-1].seq if rows else cursor.after,
                "results": s.EntrySerializer(rows, many=True).data,
            }
        )

    @extend_schema(
        methods=["GET"],
        summary="Read one entry",
        operation_id="sessions_entry_retrieve",
        parameters=[ENTRY_ID],
        responses={200: s.EntrySerializer, **errors(404, 409)},
        tags=["entries"],
    )
    @extend_schema(
        methods=["DELETE"],
        summary="Delete an entry and all its descendants",
        operation_id="sessions_entry_destroy",
        parameters=[ENTRY_ID],
        responses={204: None, **errors(404, 409)},
        tags=["entries"],
    )
    @action(
        detail=True,
        methods=["get", "delete"],
        url_path=r"entries/(?P<entry_id>[^/]+)",
        url_name="entry",
        pagination_class=None,
        filter_backends=[],
    )
    def entry(self, request: Request, pk: str, entry_id: str) -> Response:
        # Reading an entry works on every kind that has entries; deleting a
        # subtree only on a tree (a log session's entries are a hash chain).
        session = self.session_or_404(None, *(_TREE if request.method == "DELETE" else _ENTRIES))
        store = TreeStore()
        found = store.entry(session.id, entry_id)
        if found is None:
            raise NoEntry(f'entry "{entry_id}" not found in session "{session.id}"')
        if request.method == "DELETE":
            store.delete_entry_branch(session.id, entry_id)
            return Response(status=status.HTTP_204_NO_CONTENT)
        return Response(s.EntrySerializer(found).data)

    @extend_schema(
        summary="The session's entry forest, depth first, one page at a time",
        description="Each row is an entry with its `depth` (0: a root) and `child_count`, in "
        "depth-first order (siblings in append order): nest them by `entry.parent_id`. Page "
        "with the `next` link.",
        parameters=[_CURSOR, _PAGE_LIMIT],
        responses={200: s.TreePageSerializer, **errors(400, 404, 409)},
        tags=["entries"],
    )
    @action(detail=True, methods=["get"], pagination_class=None, filter_backends=[])
    def tree(self, request: Request, pk: str) -> Response:
        session = self.session_or_404(None, *_ENTRIES)
        cursor = EntryCursor(request)
        found = TreeStore().tree_page(
            session.id, cursor.after, cursor.limit + 1, after_depth=cursor.depth
        )
        rows, next_url = cursor.page(found, lambda row: row.entry.id, lambda row: row.depth)
        return Response({"next": next_url, "results": s.TreeRowSerializer(rows, many=True).data})

    @extend_schema(
        summary="The path from the root to an entry, one page at a time (entry end first)",
        description="`results` are the last `limit` entries of the path root → `entry_id`, "
        "root-first. When the path goes on above them, `next` asks for the part that ends at "
        "the first result's parent: prepend each further page.",
        parameters=[_AT, _PAGE_LIMIT],
        responses={200: s.BranchPageSerializer, **errors(400, 404, 409)},
        tags=["entries"],
    )
    @action(detail=True, methods=["get"], pagination_class=None, filter_backends=[])
    def branch(self, request: Request, pk: str) -> Response:
        session = self.session_or_404(None, *_ENTRIES)
        query = _BranchQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        limit = query.validated_data["limit"]
        entries = TreeStore().branch(session.id, query.validated_data["entry_id"], limit)
        next_url = None
        if entries and entries[0].parent_id is not None:
            url = request.build_absolute_uri()
            next_url = replace_query_param(url, "entry_id", entries[0].parent_id)
        return Response({"next": next_url, "results": s.EntrySerializer(entries, many=True).data})

    @extend_schema(
        summary="What the model would see at an entry",
        description="Built for branches of at most `MAX_CONTEXT_BRANCH` entries (default "
        "2,000); a longer branch answers 400 `too_large`: read it with `/branch` pages.",
        parameters=[_AT],
        responses={200: s.ContextSerializer, **errors(400, 404, 409)},
        tags=["entries"],
    )
    @action(detail=True, methods=["get"], pagination_class=None, filter_backends=[])
    def context(self, request: Request, pk: str) -> Response:
        session = self.session_or_404(None, *_ENTRIES)
        store = TreeStore()
        leaf = _entry_query(request)
        if not leaf:
            latest = store.branch(session.id, "", 1)
            if not latest:
                return Response(s.ContextSerializer(SessionContextEntity()).data)
            leaf = latest[-1].id
        require_context_size(store, session.id, leaf)
        return Response(s.ContextSerializer(store.build_context(session.id, leaf)).data)

    @extend_schema(
        summary="Every message of the session, all branches, in append order, paged",
        parameters=[_CURSOR, _PAGE_LIMIT],
        responses={200: s.MessagePageSerializer, **errors(400, 404, 409)},
        tags=["entries"],
    )
    @action(detail=True, methods=["get"], pagination_class=None, filter_backends=[])
    def messages(self, request: Request, pk: str) -> Response:
        return self._message_page(request, displayed_only=False)

    @extend_schema(
        summary="The displayed messages of the session, in append order, paged",
        parameters=[_CURSOR, _PAGE_LIMIT],
        responses={200: s.MessagePageSerializer, **errors(400, 404, 409)},
        tags=["entries"],
    )
    @action(detail=True, methods=["get"], pagination_class=None, filter_backends=[])
    def transcript(self, request: Request, pk: str) -> Response:
        return self._message_page(request, displayed_only=True)

    def _message_page(self, request: Request, *, displayed_only: bool) -> Response:
        session = self.session_or_404(None, *_ENTRIES)
        cursor = EntryCursor(request)
        found = TreeStore().messages_page(
            session.id, cursor.after, cursor.limit + 1, displayed_only=displayed_only
        )
        rows, next_url = cursor.page(found, lambda message: message.entry_id)
        return Response(
            {"next": next_url, "results": s.SessionMessageSerializer(rows, many=True).data}
        )

    # -- appends ------------------------------------------------------------------------

    @_append_schema(s.AppendMessageInput, "Append a message")
    @action(
        detail=True,
        methods=["post"],
        url_path="append/message",
        url_name="append-message",
        pagination_class=None,
        filter_backends=[],
    )
    def append_message(self, request: Request, pk: str) -> Response:
        session = self.session_or_404(None, *_TREE)
        data = s.AppendMessageInput(data=request.data)
        data.is_valid(raise_exception=True)
        return _appended(TreeStore().append_message(session.id, **data.store_kwargs()))

    @_append_schema(s.AppendCustomInput, "Append extension state (not sent to a model)")
    @action(
        detail=True,
        methods=["post"],
        url_path="append/custom",
        url_name="append-custom",
        pagination_class=None,
        filter_backends=[],
    )
    def append_custom(self, request: Request, pk: str) -> Response:
        session = self.session_or_404(None, *_TREE)
        data = s.AppendCustomInput(data=request.data)
        data.is_valid(raise_exception=True)
        return _appended(TreeStore().append_custom_entry(session.id, *data.store_args()))

    @_append_schema(s.AppendCustomMessageInput, "Append extension context for the model")
    @action(
        detail=True,
        methods=["post"],
        url_path="append/custom-message",
        url_name="append-custom-message",
        pagination_class=None,
        filter_backends=[],
    )
    def append_custom_message(self, request: Request, pk: str) -> Response:
        session = self.session_or_404(None, *_TREE)
        data = s.AppendCustomMessageInput(data=request.data)
        data.is_valid(raise_exception=True)
        return _appended(TreeStore().append_custom_message(session.id, *data.store_args()))

    @_append_schema(s.AppendModelChangeInput, "Record a provider/model switch")
    @action(
        detail=True,
        methods=["post"],
        url_path="append/model-change",
        url_name="append-model-change",
        pagination_class=None,
        filter_backends=[],
    )
    def append_model_change(self, request: Request, pk: str) -> Response:
        session = self.session_or_404(None, *_TREE)
        data = s.AppendModelChangeInput(data=request.data)
        data.is_valid(raise_exception=True)
        return _appended(TreeStore().append_model_change(session.id, *data.store_args()))

    @_append_schema(s.AppendThinkingLevelChangeInput, "Record a thinking level switch")
    @action(
        detail=True,
        methods=["post"],
        url_path="append/thinking-level-change",
        url_name="append-thinking-level-change",
        pagination_class=None,
        filter_backends=[],
    )
    def append_thinking_level_change(self, request: Request, pk: str) -> Response:
        session = self.session_or_404(None, *_TREE)
        data = s.AppendThinkingLevelChangeInput(data=request.data)
        data.is_valid(raise_exception=True)
        return _appended(TreeStore().append_thinking_level_change(session.id, *data.store_args()))

    @_append_schema(s.AppendBranchSummaryInput, "Record a summary of an abandoned branch")
    @action(
        detail=True,
        methods=["post"],
        url_path="append/branch-summary",
        url_name="append-branch-summary",
        pagination_class=None,
        filter_backends=[],
    )
    def append_branch_summary(self, request: Request, pk: str) -> Response:
        session = self.session_or_404(None, *_TREE)
        data = s.AppendBranchSummaryInput(data=request.data)
        data.is_valid(raise_exception=True)
        return _appended(TreeStore().append_branch_summary(session.id, *data.store_args()))

    @_append_schema(s.AppendLabelInput, "Set or clear the label of an entry")
    @action(
        detail=True,
        methods=["post"],
        url_path="append/label",
        url_name="append-label",
        pagination_class=None,
        filter_backends=[],
    )
    def append_label(self, request: Request, pk: str) -> Response:
        session = self.session_or_404(None, *_TREE)
        data = s.AppendLabelInput(data=request.data)
        data.is_valid(raise_exception=True)
        return _appended(TreeStore().append_label_change(session.id, *data.store_args()))

    @_append_schema(s.AppendSessionInfoInput, "Record the session's name (and rename it)")
    @action(
        detail=True,
        methods=["post"],
        url_path="append/session-info",
        url_name="append-session-info",
        pagination_class=None,
        filter_backends=[],
    )
    def append_session_info(self, request: Request, pk: str) -> Response:
        session = self.session_or_404(None, *_TREE)
        data = s.AppendSessionInfoInput(data=request.data)
        data.is_valid(raise_exception=True)
        return _appended(TreeStore().append_session_info(session.id, *data.store_args()))

    @extend_schema(
        summary="Append a compaction (idempotent by operation_id; a lost race answers 409)",
        description="201 with the entry when this call wrote it; a replay of the same "
        "`operation_id` on the same parent answers 200 with the stored entry.",
        request=s.AppendCompactionInputSerializer,
        responses={
            201: s.EntrySerializer,
            200: s.EntrySerializer,
            **errors(400, 404, 409),
        },
        tags=["entries"],
    )
    @action(
        detail=True,
        methods=["post"],
        url_path="append/compaction",
        url_name="append-compaction",
        pagination_class=None,
        filter_backends=[],
    )
    def append_compaction(self, request: Request, pk: str) -> Response:
        session = self.session_or_404(None, *_TREE)
        data = s.AppendCompactionInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        entry, created = TreeStore().append_compaction_created(data.compaction(session.id))
        # One rule for idempotent creates (decision record 0080): 201 when this call
        # wrote it, 200 with the stored entry when it was a replay.
        return _appended(entry, created=created)
