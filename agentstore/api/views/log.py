"""agentsession log sessions and refs over HTTP (the LogStore).

    GET  /log-sessions                   your log sessions (session rows, paged like /sessions)
    POST /log-sessions                   create a session from a header (you own it)
    GET  /log-sessions/{id}              header, leaf and entries
    POST /log-sessions/{id}/entries      append one entry (423 while another process holds it)
    GET  /log-sessions/{id}/export       the session as JSON Lines
    GET  /refs?prefix=                   refs whose session you can see (paged)
    GET  /refs/{name}                    resolve a ref
    PUT  /refs/{name}                    compare-and-swap (409 ``ref_moved``, current target)
    GET  /ref-log/{name}                 the ref's update log, newest first, paged (rows you see)

Each request uses a fresh ``LogStore`` and closes it, so the API process holds a
session only for the length of one append (the hold protocol then tells a
long-running writer elsewhere apart from us). A ref is visible when the session
it names is; a dangling ref (its session deleted) only to staff.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agentstore.api import log_serializers as g
from agentstore.api import serializers as s
from agentstore.api.exceptions import exception_handler
from agentstore.api.pagination import CollectionPagination, SessionPagination, page_response
from agentstore.api.parsers import PARSER_CLASSES
from agentstore.api.views.base import AgentstoreViewSet, errors, session_of_kind
from agentstore.exceptions import NoRef, NoSession, RefMoved, RefNameError
from agentstore.models.sessions import SessionKind
from agentstore.routers import read_alias
from agentstore.selectors.sessions import is_staff, sessions_visible_to
from agentstore.stores import LogStore
from agentstore.stores.log_refs import check_name
from agentstore.types.log import RefTarget

__all__ = ["LogSessionViewSet", "RefListView", "RefLogView", "RefView"]

_NAME = OpenApiParameter("name", str, OpenApiParameter.PATH, description="The ref's name.")


class LogSessionViewSet(AgentstoreViewSet):
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
        store = LogStore()
        try:
            session = store.create(data.validated_data["header"], owner=request.user)
        finally:
            store.close()
        return Response(g.LogSessionSerializer(session).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Read a log session",
        responses={200: g.LogSessionSerializer, **errors(404, 409)},
        tags=["log sessions"],
    )
    def retrieve(self, request: Request, pk: str) -> Response:
        session = self.session_or_404(None, SessionKind.LOG.value)
        return Response(g.LogSessionSerializer(LogStore(read_only=True).read(session.id)).data)

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
        store = LogStore()
        try:
            entry_id = store.append(session.id, data.validated_data["entry"])
        finally:
            store.close()
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


class _RefBase(APIView):
    parser_classes = PARSER_CLASSES
    pagination_class = CollectionPagination

    def page(self, items: list[Any], serializer: type[Any]) -> Response:
        """One page of ``items`` in the collection envelope (``count``, ``next``, …)."""
        return page_response(items, self.request, self, serializer)

    def get_exception_handler(self) -> Callable[[Exception, dict[str, Any]], Response | None]:
        return exception_handler

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
        for ref in store.list_refs(name):
            target: RefTarget = ref.target
            if ref.name == name and target.session in self.visible_ids({target.session}):
                return target
        return None


class _PrefixQuery(serializers.Serializer[Any]):
    prefix = serializers.CharField(required=False, allow_blank=True, default="", max_length=255)


class RefListView(_RefBase):
    @extend_schema(
        summary="Refs by name prefix (those naming sessions you can see)",
        parameters=[_PrefixQuery],
        responses={200: g.NamedRefSerializer(many=True), **errors(400, 404)},
        tags=["refs"],
    )
    def get(self, request: Request) -> Response:
        query = _PrefixQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        refs = LogStore(read_only=True).list_refs(query.validated_data["prefix"])
        visible = self.visible_ids({ref.target.session for ref in refs})
        shown = [ref for ref in refs if ref.target.session in visible]
        return self.page(shown, g.NamedRefSerializer)


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
            if existing is None and expected is None:
                # Creating a name someone else's ref holds: ref names are one
                # namespace, so the name cannot be had, but nothing says whose
                # it is or where it points — the same answer as a name that
                # clashes with a hidden ref (docs/decisions.md "Isolation: a name held
                # by a hidden ref").
                raise _unavailable(name) from None
            if current is not None and current.session not in self.visible_ids({current.session}):
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
        parameters=[_NAME],
        responses={200: g.RefLogSerializer(many=True), **errors(400, 404)},
        tags=["refs"],
    )
    def get(self, request: Request, name: str) -> Response:
        store = LogStore(read_only=True)
        if is_staff(request.user):
            return self.page(store.ref_log(name), g.RefLogSerializer)
        if self.current(store, name) is None:
            raise NoRef(f"no such ref: {name}")
        # A name outlives its refs: a deleted ref's history (its sessions, its
        # reasons) belongs to whoever held it, so a row is shown only when every
        # session it names is one the caller may see.
        rows = store.ref_log(name)
        named = {t.session for r in rows for t in (r.old, r.new) if t is not None and t.session}
        visible = self.visible_ids(named)
        shown = [
            r
            for r in rows
            if all(t is None or not t.session or t.session in visible for t in (r.old, r.new))
        ]
        return self.page(shown, g.RefLogSerializer)
