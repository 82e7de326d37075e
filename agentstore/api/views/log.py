"""agentsession log sessions and refs over HTTP (the LogStore).

    GET  /log-sessions                   your log sessions (session rows, paged like /sessions)
    POST /log-sessions                   create a session from a header (you own it)
    GET  /log-sessions/{id}              header, leaf, a page of entries (?after= ?cursor= ?limit=)
    POST /log-sessions/{id}/entries      append one entry (423 while another process holds it)
    GET  /log-sessions/{id}/export       the session as JSON Lines
    GET  /refs?prefix=&after=&limit=     refs whose session you can see (keyset pages by name)
    GET  /refs/{name}                    resolve a ref
    PUT  /refs/{name}                    compare-and-swap (409 ``ref_moved``, current target)
    GET  /ref-log/{name}?after=&limit=   the ref's updates, newest first, keyset pages (yours)

Each request uses a fresh ``LogStore`` and closes it, so the API process holds a
session only for the length of one append (the hold protocol then tells a
long-running writer elsewhere apart from us). A ref is visible when the session
it names is; a dangling ref (its session deleted) only to staff.

Both listings are one bounded read each: the store pages them in SQL (keyset:
the last name, or log position, seen; ``LIMIT`` one past the page) with the
visibility rule as part of the query, never filtering a whole list in Python
(docs/api.md, "Log sessions and refs"; decision record 0033).
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from django.db.models import QuerySet
from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from agentstore.api import log_serializers as g
from agentstore.api import serializers as s
from agentstore.api.pagination import (
    MAX_LOG_PAGE,
    CollectionPagination,
    KeysetQuery,
    SeqCursor,
    SessionPagination,
    keyset_page,
    keyset_response,
)
from agentstore.api.views.base import (
    AgentStoreAPIView,
    AgentStoreViewSet,
    errors,
    session_of_kind,
)
from agentstore.exceptions import NoRef, NoSession, RefMoved, RefNameError
from agentstore.models.sessions import SessionKind
from agentstore.routers import read_alias
from agentstore.selectors.sessions import is_staff, sessions_visible_to
from agentstore.stores import LogStore
from agentstore.stores.log_refs import check_name
from agentstore.stores.refs import MAX_POSITION
from agentstore.types.log import RefTarget

__all__ = ["LogSessionViewSet", "RefListView", "RefLogView", "RefView"]

_NAME = OpenApiParameter("name", str, OpenApiParameter.PATH, description="The ref's name.")


class LogSessionViewSet(AgentStoreViewSet):
    """agentsession sessions: exact JSON lines, hashed ids, holds."""

    serializer_class = g.LogSessionSerializer
    pagination_class = SessionPagination
    filter_backends: list[Any] = []

    @extend_schema(
        summary="Your log sessions, most recently updated first (the /sessions rows)",
        responses={200: s.SessionSerializer(many=True), **errors(400, 404)},
        tags=["log sessions"],
    )
    def list(self, request: Request) -> Response:
        # A row per session, not its entries: a listing never reads logs.
        found = (
            sessions_visible_to(request.user)
            .of_kind(SessionKind.LOG)
            .select_related("owner")
            .newest_first()
        )
        page = self.paginate_queryset(found)
        return self.get_paginated_response(s.SessionSerializer(page, many=True).data)

    @extend_schema(
        summary="Create a log session (you own it)",
        request=g.LogSessionCreateInput,
        responses={201: g.LogSessionSerializer, **errors(400, 409)},
        tags=["log sessions"],
    )
    def create(self, request: Request) -> Response:
        data = g.LogSessionCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        # A request is one write: it claims no hold (decision record 0091); a
        # session another writer holds still refuses it (423 session_locked).
        store = LogStore(holds=False)
        session = store.create(data.validated_data["header"], owner=request.user)
        return Response(g.LogSessionSerializer(session).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Read a log session: its header, leaf and one page of entries",
        description="Entries in append order, at most `limit` (default 100, at most 1000) "
        "after `after`; follow `next` (a `cursor`) for the rest.",
        parameters=[
            OpenApiParameter(
                "after", int, description="Entries after this position (tailing).", required=False
            ),
            OpenApiParameter(
                "cursor", str, description="The opaque cursor of a `next` link.", required=False
            ),
            OpenApiParameter(
                "limit",
                int,
                description=f"Page size (1–{MAX_LOG_PAGE}, default {SeqCursor.default_limit}).",
                required=False,
            ),
        ],
        responses={200: g.LogSessionPageSerializer, **errors(400, 404, 409)},
        tags=["log sessions"],
    )
    def retrieve(self, request: Request, pk: str) -> Response:
        session = self.session_or_404(None, SessionKind.LOG.value)
        cursor = SeqCursor(request)
        page = LogStore(read_only=True).read_page(
            session.id, after=cursor.after, limit=cursor.limit
        )
        last_seq = page.seqs[-1] if page.seqs else cursor.after
        body = SimpleNamespace(
            id=page.id,
            header=page.header,
            leaf=page.leaf,
            entries=page.entries,
            next=cursor.next_url(last_seq) if page.more else None,
            last_seq=last_seq,
        )
        return Response(g.LogSessionPageSerializer(body).data)

    @extend_schema(
        summary="Append an entry line",
        request=g.LogAppendInput,
        responses={201: g.LogAppendedSerializer, **errors(400, 404, 409, 423)},
        tags=["log sessions"],
    )
    @action(detail=True, methods=["post"])
    def entries(self, request: Request, pk: str) -> Response:
        session = self.session_or_404(None, SessionKind.LOG.value)
        data = g.LogAppendInput(data=request.data)
        data.is_valid(raise_exception=True)
        # One compare-and-set on the head the store reads (decision record 0091):
        # concurrent requests on one session are ordered, not refused, and a
        # session another writer holds answers 423 session_locked.
        entry_id = LogStore(holds=False).append(session.id, data.validated_data["entry"])
        return Response({"id": entry_id}, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Export the session as JSON Lines",
        responses={
            (200, "application/x-ndjson"): OpenApiResponse(OpenApiTypes.STR),
            **errors(404, 409),
        },
        tags=["log sessions"],
    )
    @action(detail=True, methods=["get"])
    def export(self, request: Request, pk: str) -> HttpResponse:
        session = self.session_or_404(None, SessionKind.LOG.value)
        # An export tolerates lag: the replica when there is one (agentstore/routers.py).
        text = LogStore(read_only=True, using=read_alias()).export_jsonl(session.id)
        response = HttpResponse(text, content_type="application/x-ndjson")
        response["Content-Disposition"] = f'attachment; filename="{session.id}.jsonl"'
        return response


class _RefBase(AgentStoreAPIView):
    pagination_class = CollectionPagination

    def visible_sessions(self) -> QuerySet[Any] | None:
        """The sessions the user may see, as a restriction for the store; ``None`` for staff.

        Staff see dangling refs too (``None``: no restriction at all).
        """
        if is_staff(self.request.user):
            return None
        return sessions_visible_to(self.request.user)

    def visible_ids(self, session_ids: set[str]) -> set[str]:
        if is_staff(self.request.user):
            return session_ids
        found = sessions_visible_to(self.request.user).filter(pk__in=session_ids)
        return set(found.values_list("pk", flat=True))

    def current(self, store: LogStore, name: str) -> RefTarget | None:
        """The ref's target if it exists and the user may see it, else ``None``."""
        # The name is checked as a name (400 ``ref_name`` on ``field: name``)
        # before it is used as the listing prefix below.
        check_name(name)
        # The exact name, when present, is the least name it prefixes: one row.
        for ref in store.list_refs(name, limit=1, sessions=self.visible_sessions()):
            if ref.name == name:
                target: RefTarget = ref.target
                return target
        return None


class _RefListQuery(KeysetQuery):
    prefix = serializers.CharField(required=False, allow_blank=True, default="", max_length=255)
    after = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        trim_whitespace=False,
        max_length=255,
        help_text="The last name seen: the page lists names after it (follow next).",
    )


class _RefLogQuery(KeysetQuery):
    after = serializers.IntegerField(
        required=False,
        min_value=0,
        max_value=MAX_POSITION,
        help_text="The position of the last row seen: the page lists older rows (follow next).",
    )


class RefListView(_RefBase):
    @extend_schema(
        summary="Refs by name prefix (those naming sessions you can see), in byte order",
        parameters=[_RefListQuery],
        responses={200: g.NamedRefSerializer(many=True), **errors(400, 404)},
        tags=["refs"],
    )
    def get(self, request: Request) -> Response:
        query = _RefListQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        prefix, after = query.validated_data["prefix"], query.validated_data["after"]
        limit = query.page_limit()
        store = LogStore(read_only=True)
        sessions = self.visible_sessions()
        # One more than the page tells whether a next page exists.
        refs = store.list_refs(prefix, after=after, limit=limit + 1, sessions=sessions)
        page, next_after = keyset_page(refs, limit, lambda ref: ref.name)
        return keyset_response(
            g.NamedRefSerializer(page, many=True).data,
            request,
            count=store.count_refs(prefix, sessions=sessions),
            next_after=next_after,
        )


class RefView(_RefBase):
    @extend_schema(
        summary="Resolve a ref (404 when missing, dangling or not yours)",
        parameters=[_NAME],
        responses={200: g.RefTargetSerializer, **errors(400, 404)},
        tags=["refs"],
    )
    def get(self, request: Request, name: str) -> Response:
        store = LogStore(read_only=True)
        target = store.resolve_ref(name)
        if target.session not in self.visible_ids({target.session}):
            raise NoRef(f"no such ref: {name}")
        return Response(g.RefTargetSerializer(target).data)

    @extend_schema(
        summary="Compare-and-swap a ref (409 ref_moved carries the current target)",
        parameters=[_NAME],
        request=g.RefUpdateInput,
        responses={200: g.RefTargetSerializer, 204: None, **errors(400, 404, 409)},
        tags=["refs"],
    )
    def put(self, request: Request, name: str) -> Response:
        data = g.RefUpdateInput(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        store = LogStore()
        existing = self.current(store, name)
        expected = RefTarget(**values["expected"]) if values["expected"] else None
        target = RefTarget(**values["next"]) if values["next"] else None
        if expected is not None and existing is None:
            # Someone else's ref is "not there" for this user.
            raise NoRef(f"no such ref: {name}")
        if target is not None:
            # A session you cannot see is "not there" (404 no_session); one of
            # another kind says so (409 wrong_session_kind): refs name log sessions.
            try:
                session_of_kind(request.user, target.session, SessionKind.LOG.value)
            except NoSession:
                raise NoSession(f"no such session: {target.session} (next.session)") from None
        try:
            store.update_ref(name, expected, target, values["reason"])
        except RefMoved as exc:
            current = exc.current
            hidden = current is not None and current.session not in self.visible_ids(
                {current.session}
            )
            if existing is None and expected is None and (current is None or hidden):
                # Creating a name someone else's ref holds: ref names are one
                # namespace, so the name cannot be had, but nothing says whose
                # it is or where it points — the same answer as a name that
                # clashes with a hidden ref (decision record 0049). Decided on the
                # ref as it is *now*: a ref created by a racing call of the
                # caller's own is the caller's to see, so that loser gets 409
                # ref_moved with it below.
                raise _unavailable(name) from None
            if hidden:
                # The ref moved to someone else's session in the meantime: say it
                # moved, but not where.
                raise RefMoved(f"ref {name} moved", name=name, current=None) from None
            raise
        except RefNameError as exc:
            if exc.conflicts_with and self.current(store, exc.conflicts_with) is None:
                raise _unavailable(name) from None
            raise
        finally:
            store.close()
        if target is None:
            return Response(status=status.HTTP_204_NO_CONTENT)
        return Response(g.RefTargetSerializer(target).data)


def _unavailable(name: str) -> RefNameError:
    return RefNameError(f"ref name {name!r} is not available", field="name")


class RefLogView(_RefBase):
    @extend_schema(
        summary="The ref's update log, newest first",
        parameters=[_NAME, _RefLogQuery],
        responses={200: g.RefLogSerializer(many=True), **errors(400, 404)},
        tags=["refs"],
    )
    def get(self, request: Request, name: str) -> Response:
        query = _RefLogQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        limit = query.page_limit()
        store = LogStore(read_only=True)
        sessions = self.visible_sessions()
        if sessions is not None and self.current(store, name) is None:
            raise NoRef(f"no such ref: {name}")
        # A name outlives its refs: a row is shown only when every session it
        # names is one the caller may see (the store filters in SQL).
        after = query.validated_data.get("after")
        rows = store.ref_log(name, after=after, limit=limit + 1, sessions=sessions)
        page, next_after = keyset_page(rows, limit, lambda row: row.position)
        return keyset_response(
            g.RefLogSerializer(page, many=True).data,
            request,
            count=store.count_ref_log(name, sessions=sessions),
            next_after=next_after,
        )
