"""Documents in any namespace (staff only): ``/documents`` and ``/documents/{namespace}/{key}``.

Documents have no owner, so only staff may reach an arbitrary namespace; users
keep documents *attached to a session* under ``/sessions/{id}/documents/{key}``,
which the session's visibility protects.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from agentstore.api import serializers as s
from agentstore.api.pagination import CollectionPagination, page_response
from agentstore.api.permissions import STAFF_PERMISSIONS
from agentstore.api.views.base import AgentStoreAPIView, errors
from agentstore.api.views.session_extras import document_response
from agentstore.selectors.documents import documents_in

__all__ = ["DocumentListView", "DocumentView"]


class _NamespaceQuery(serializers.Serializer[Any]):
    namespace = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=255, help_text="Only this one."
    )


class DocumentListView(AgentStoreAPIView):
    """Every document, by namespace then key (staff), paged like every collection."""

    permission_classes = STAFF_PERMISSIONS
    pagination_class = CollectionPagination

    @extend_schema(
        summary="Documents of every namespace, or of ?namespace= (staff)",
        parameters=[_NamespaceQuery],
        responses={200: s.DocumentSerializer(many=True), **errors(400, 403, 404)},
        tags=["documents"],
    )
    def get(self, request: Request) -> Response:
        query = _NamespaceQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        found = documents_in(query.validated_data["namespace"])
        return page_response(found, request, self, s.DocumentSerializer)


_PATH = [
    OpenApiParameter("namespace", str, OpenApiParameter.PATH),
    OpenApiParameter("key", str, OpenApiParameter.PATH),
]


class DocumentView(AgentStoreAPIView):
    """One document by (namespace, key)."""

    permission_classes = STAFF_PERMISSIONS

    @extend_schema(
        summary="Read a document (staff)",
        parameters=_PATH,
        responses={200: s.DocumentSerializer, **errors(400, 403, 404)},
        tags=["documents"],
    )
    def get(self, request: Request, namespace: str, key: str) -> Response:
        return document_response(request, namespace, key)

    @extend_schema(
        summary="Store or replace a document (staff)",
        parameters=_PATH,
        request=s.DocumentPutInput,
        responses={200: s.DocumentSerializer, **errors(400, 403)},
        tags=["documents"],
    )
    def put(self, request: Request, namespace: str, key: str) -> Response:
        return document_response(request, namespace, key)

    @extend_schema(
        summary="Delete a document (staff)",
        parameters=_PATH,
        responses={204: None, **errors(400, 403, 404)},
        tags=["documents"],
    )
    def delete(self, request: Request, namespace: str, key: str) -> Response:
        return document_response(request, namespace, key)
