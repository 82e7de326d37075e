"""Session-bound extras: the hold (who writes it), attached documents, live follow.

    GET    /sessions/{id}/hold                 who holds the session for writing
    DELETE /sessions/{id}/hold                 break the hold (staff only)
    GET    /sessions/{id}/documents            the documents attached to it (paged)
    GET|PUT|DELETE /sessions/{id}/documents/{key}   a JSON document attached to the session
    GET    /sessions/{id}/follow               Server-Sent Events of what is appended (any kind)

Documents attached to a session live in the DocumentStore under the namespace
``session:{id}``, so they share the session's visibility; the top-level
``/documents`` resource (any namespace) is for staff.
"""

from __future__ import annotations

from typing import Any

from django.core.handlers.asgi import ASGIRequest
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from agentstore.api import serializers as s
from agentstore.api.exceptions import error_response
from agentstore.api.pagination import MAX_POSITION, page_response
from agentstore.api.sse import (
    FollowLimitReached,
    FollowNegotiation,
    FollowResponse,
    FollowStream,
    take_follow_slot,
)
from agentstore.api.views.base import AgentStoreViewSetMixin, errors
from agentstore.exceptions import NoDocument
from agentstore.models.sessions import SessionKind
from agentstore.selectors.documents import documents_in
from agentstore.selectors.follow import EVENTS
from agentstore.selectors.holds import break_hold, hold_of
from agentstore.stores import DocumentStore
from agentstore.types.tree import DocumentEntity

__all__ = ["SessionExtrasActions", "session_namespace"]

_KEY = OpenApiParameter("key", str, OpenApiParameter.PATH, description="The document's key.")
_LAST_EVENT_ID = OpenApiParameter(
    "Last-Event-ID",
    str,
    OpenApiParameter.HEADER,
    required=False,
    description="Resume after this position (sent by EventSource on reconnect).",
)
_AFTER = OpenApiParameter(
    "after",
    int,
    required=False,
    description="Start after this position (default 0: from the start).",
)


def session_namespace(session_id: str) -> str:
    """The DocumentStore namespace of documents attached to a session."""
    return f"session:{session_id}"


class _FollowQuery(serializers.Serializer[Any]):
    after = serializers.IntegerField(required=False, min_value=0, max_value=MAX_POSITION)
    last_event_id = serializers.IntegerField(required=False, min_value=0, max_value=MAX_POSITION)


class SessionExtrasActions(AgentStoreViewSetMixin):
    """Hold, attached documents and follow actions of the session viewset."""

    @extend_schema(
        methods=["GET"],
        summary="Who holds the session for writing",
        responses={200: s.HoldSerializer, **errors(404)},
        tags=["holds"],
    )
    @extend_schema(
        methods=["DELETE"],
        summary="Break the session's hold (staff only)",
        responses={200: s.BreakHoldSerializer, **errors(403, 404)},
        tags=["holds"],
    )
    @action(detail=True, methods=["get", "delete"], pagination_class=None, filter_backends=[])
    def hold(self, request: Request, pk: str) -> Response:
        session = self.session_or_404()
        if request.method == "DELETE":
            if not request.user.is_staff:
                self.permission_denied(request, "Only staff may break a hold.")
            return Response({"broken": break_hold(session.id)})
        info = hold_of(session.id)
        if info is None:
            return Response(
                {"held": False, "pid": None, "host": None, "since": None, "heartbeat": None}
            )
        return Response(
            s.HoldSerializer(
                {
                    "held": True,
                    "pid": info.pid,
                    "host": info.host,
                    "since": info.since,
                    "heartbeat": info.heartbeat,
                }
            ).data
        )

    @extend_schema(
        summary="The documents attached to the session, by key (paged)",
        responses={200: s.DocumentSerializer(many=True), **errors(404)},
        tags=["documents"],
    )
    @action(
        detail=True,
        methods=["get"],
        url_path="documents",
        url_name="documents",
        filter_backends=[],
    )
    def documents(self, request: Request, pk: str) -> Response:
        session = self.session_or_404()
        found = documents_in(session_namespace(session.id))
        return page_response(found, request, self, s.DocumentSerializer)

    @extend_schema(
        methods=["GET"],
        summary="Read a document attached to the session",
        parameters=[_KEY],
        responses={200: s.DocumentSerializer, **errors(400, 404)},
        tags=["documents"],
    )
    @extend_schema(
        methods=["PUT"],
        summary="Store or replace a document attached to the session",
        parameters=[_KEY],
        request=s.DocumentPutInput,
        responses={200: s.DocumentSerializer, **errors(400, 404)},
        tags=["documents"],
    )
    @extend_schema(
        methods=["DELETE"],
        summary="Delete a document attached to the session",
        parameters=[_KEY],
        responses={204: None, **errors(400, 404)},
        tags=["documents"],
    )
    @action(
        detail=True,
        methods=["get", "put", "delete"],
        url_path=r"documents/(?P<key>[^/]+)",
        url_name="document",
        pagination_class=None,
        filter_backends=[],
    )
    def document(self, request: Request, pk: str, key: str) -> Response:
        session = self.session_or_404()
        return document_response(request, session_namespace(session.id), key)

    @extend_schema(
        summary="Follow what is appended to a session of any kind, as Server-Sent Events",
        parameters=[_AFTER, _LAST_EVENT_ID],
        responses={
            (200, "text/event-stream"): OpenApiResponse(
                OpenApiTypes.STR,
                description="`id: <position>` / `event: <kind>` / `data: <JSON>` events: "
                "`entry` (tree sessions, id = seq), `step` (loop sessions, id = the "
                "step's position), `line` (log sessions, id = seq, the exact line) and "
                "`checkpoint` (graph threads, id = the checkpoint's position); "
                "`: keep-alive` comments, `event: deleted` when the session goes, and "
                "`event: reconnect` (with `id: <last position>`) when the stream reaches "
                "`FOLLOW_MAX_SECONDS`: reconnect with `Last-Event-ID`. Errors before the "
                "stream starts are `application/json` in the error shape.",
            ),
            **errors(400, 404, 409, 429, 503),
        },
        tags=["entries"],
    )
    @action(
        detail=True,
        methods=["get"],
        pagination_class=None,
        filter_backends=[],
        renderer_classes=[JSONRenderer],
        content_negotiation_class=FollowNegotiation,
    )
    def follow(self, request: Request, pk: str) -> StreamingHttpResponse | Response:
        # Every kind the model allows is followable (EVENTS); a kind added later
        # without a follow reader is refused before the stream, by the one
        # wrong-kind error every session-bound action raises (decision record 0053),
        # naming the followable kinds in the model's order like the others do.
        session = self.session_or_404(None, *(k for k in SessionKind.values if k in EVENTS))
        raw: dict[str, Any] = {}
        if "after" in request.query_params:
            raw["after"] = request.query_params["after"]
        if request.headers.get("Last-Event-ID"):
            raw["last_event_id"] = request.headers["Last-Event-ID"]
        query = _FollowQuery(data=raw)
        query.is_valid(raise_exception=True)
        values = query.validated_data
        # Last-Event-ID wins: it is what a reconnecting EventSource sends, and it
        # is newer than the ?after= of the URL it reconnects to.
        after = values.get("last_event_id", values.get("after", 0))
        try:
            slot = take_follow_slot(str(request.user.pk))
        except FollowLimitReached as exc:
            return error_response(
                exc.status,
                exc.code,
                exc.message,
                {"limit": exc.limit},
                headers={"Retry-After": "5"},
            )
        stream = FollowStream(session.id, after, kind=session.kind, slot=slot)
        content: Any = stream.__aiter__() if _is_asgi(request) else iter(stream)
        response = FollowResponse(content, slot, content_type="text/event-stream")
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"
        return response


def _is_asgi(request: Request) -> bool:
    return isinstance(request._request, ASGIRequest)


def document_response(request: Request, namespace: str, key: str) -> Response:
    """GET/PUT/DELETE one document through the DocumentStore."""
    store = DocumentStore()
    if request.method == "PUT":
        data = s.DocumentPutInput(data=request.data)
        data.is_valid(raise_exception=True)
        stored = store.put(
            DocumentEntity(namespace=namespace, key=key, value_json=data.value_json())
        )
        return Response(s.DocumentSerializer(stored).data)
    found = store.get(namespace, key)
    if found is None:
        raise NoDocument(f"no such document: {key!r} in namespace {namespace!r}")
    if request.method == "DELETE":
        store.delete(namespace, key)
        return Response(status=status.HTTP_204_NO_CONTENT)
    return Response(s.DocumentSerializer(found).data)
