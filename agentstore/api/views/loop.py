"""Loop sessions over HTTP: step traces, approvals (grants), finalize and the snapshot.

    GET  /sessions/{id}/steps            steps in insertion order (cursor pages)
    POST /sessions/{id}/steps            append a step
    GET  /sessions/{id}/steps/last?n=50  the newest n steps, oldest first
    GET  /sessions/{id}/grants           approvals, oldest first (paged)
    POST /sessions/{id}/grants           approve a prompt (201; 200 when approved already)
    POST /sessions/{id}/grants/check     was this exact prompt approved?
    DELETE /sessions/{id}/grants         forget every approval (revoke)
    POST /sessions/{id}/finalize         record a finished run's summary
    GET|PUT /sessions/{id}/snapshot      the working-memory snapshot (JSON)

Steps and snapshots belong to loop sessions (create one with
``POST /sessions {"kind": "loop"}``); on a session of another kind every
action here answers 409 ``wrong_session_kind``.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from agentstore.api import serializers as s
from agentstore.api.pagination import CollectionPagination, StepCursorPagination, page_response
from agentstore.api.views.base import AgentStoreViewSetMixin, errors
from agentstore.models import Step
from agentstore.models.sessions import SessionKind
from agentstore.selectors.grants import grants_of
from agentstore.stores import LoopStore

__all__ = ["LoopActions"]


class LoopActions(AgentStoreViewSetMixin):
    """The loop-store actions of the session viewset."""

    paginate_queryset: Any
    get_paginated_response: Any

    @extend_schema(
        methods=["GET"],
        summary="A loop session's steps in insertion order",
        responses={200: s.StepSerializer(many=True), **errors(400, 404, 409)},
        tags=["steps"],
    )
    @extend_schema(
        methods=["POST"],
        summary="Append a step to a loop session",
        request=s.StepInput,
        responses={201: s.StepSerializer, **errors(400, 404, 409)},
        tags=["steps"],
    )
    @action(
        detail=True,
        methods=["get", "post"],
        pagination_class=StepCursorPagination,
        filter_backends=[],
    )
    def steps(self, request: Request, pk: str) -> Response:
        session = self.session_or_404(None, SessionKind.LOOP.value)
        if request.method == "POST":
            data = s.StepInput(data=request.data)
            data.is_valid(raise_exception=True)
            store = LoopStore()
            step = data.step(session.id)
            if step.created_at is None:
                # Stamped here so the response shows the time the store records.
                step = replace(step, created_at=store.now())
            store.append(step)
            return Response(s.StepSerializer(step).data, status=status.HTTP_201_CREATED)
        page = self.paginate_queryset(Step.objects.filter(session_id=session.id))
        return self.get_paginated_response(s.StepSerializer(page, many=True).data)  # type: ignore[no-any-return]

    @extend_schema(
        summary="The newest n steps, oldest first",
        parameters=[s.LastNQuery],
        responses={200: s.StepSerializer(many=True), **errors(400, 404, 409)},
        tags=["steps"],
    )
    @action(
        detail=True,
        methods=["get"],
        url_path="steps/last",
        url_name="steps-last",
        pagination_class=None,
        filter_backends=[],
    )
    def steps_last(self, request: Request, pk: str) -> Response:
        session = self.session_or_404(None, SessionKind.LOOP.value)
        query = s.LastNQuery(data=request.query_params)
        query.is_valid(raise_exception=True)
        found = LoopStore().last_n(session.id, query.validated_data["n"])
        return Response(s.StepSerializer(found, many=True).data)

    @extend_schema(
        methods=["GET"],
        summary="The session's approvals, oldest grant first (paged)",
        responses={200: s.GrantSerializer(many=True), **errors(400, 404, 409)},
        tags=["grants"],
    )
    @extend_schema(
        methods=["POST"],
        summary="Approve a prompt (201; 200 with the stored grant when approved already)",
        request=s.GrantInput,
        responses={
            201: s.GrantSerializer,
            200: s.GrantSerializer,
            **errors(400, 404, 409),
        },
        tags=["grants"],
    )
    @extend_schema(
        methods=["DELETE"],
        summary="Forget every approval of the session",
        responses={200: s.RevokeSerializer, **errors(404, 409)},
        tags=["grants"],
    )
    @action(
        detail=True,
        methods=["get", "post", "delete"],
        pagination_class=CollectionPagination,
        filter_backends=[],
    )
    def grants(self, request: Request, pk: str) -> Response:
        session = self.session_or_404(None, SessionKind.LOOP.value)
        store = LoopStore()
        if request.method == "DELETE":
            return Response({"revoked": store.revoke(session.id)})
        if request.method == "POST":
            data = s.GrantInput(data=request.data)
            data.is_valid(raise_exception=True)
            # 201 for a new approval, 200 with the stored grant when the prompt
            # was approved already (a replay, decision record 0080); either way the
            # grant is refreshed. The store decides inside its transaction.
            grant, created = store.grant_created(session.id, data.validated_data["prompt"])
            code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
            return Response(s.GrantSerializer(grant).data, status=code)
        # Every collection is a page in one envelope (docs/api.md, "Lists").
        return page_response(grants_of(session.id), request, self, s.GrantSerializer)

    @extend_schema(
        summary="Was exactly this prompt approved?",
        request=s.GrantInput,
        responses={200: s.GrantCheckSerializer, **errors(400, 404, 409)},
        tags=["grants"],
    )
    @action(
        detail=True,
        methods=["post"],
        url_path="grants/check",
        url_name="grants-check",
        pagination_class=None,
        filter_backends=[],
    )
    def grants_check(self, request: Request, pk: str) -> Response:
        session = self.session_or_404(None, SessionKind.LOOP.value)
        data = s.GrantInput(data=request.data)
        data.is_valid(raise_exception=True)
        granted = LoopStore().is_granted(session.id, data.validated_data["prompt"])
        return Response({"granted": granted})

    @extend_schema(
        summary="Record the summary of the run that just ended (the last run wins)",
        request=s.FinalizeInput,
        responses={200: s.SessionSerializer, **errors(400, 404, 409)},
        tags=["steps"],
    )
    @action(detail=True, methods=["post"], pagination_class=None, filter_backends=[])
    def finalize(self, request: Request, pk: str) -> Response:
        session = self.session_or_404(None, SessionKind.LOOP.value)
        data = s.FinalizeInput(data=request.data)
        data.is_valid(raise_exception=True)
        LoopStore().finalize(session.id, data.summary())
        refreshed = type(session).objects.select_related("owner").get(pk=session.id)
        return Response(s.SessionSerializer(refreshed).data)

    @extend_schema(
        methods=["GET"],
        summary="The loop session's working-memory snapshot",
        responses={200: s.SnapshotSerializer, **errors(404, 409)},
        tags=["steps"],
    )
    @extend_schema(
        methods=["PUT"],
        summary="Replace the working-memory snapshot",
        request=s.SnapshotSerializer,
        responses={200: s.SnapshotSerializer, **errors(400, 404, 409)},
        tags=["steps"],
    )
    @action(detail=True, methods=["get", "put"], pagination_class=None, filter_backends=[])
    def snapshot(self, request: Request, pk: str) -> Response:
        session = self.session_or_404(None, SessionKind.LOOP.value)
        store = LoopStore()
        if request.method == "PUT":
            data = s.SnapshotSerializer(data=request.data)
            data.is_valid(raise_exception=True)
            value = data.validated_data["data"]
            raw = None if value is None else json.dumps(value, separators=(",", ":")).encode()
            store.update_data(session.id, raw)
            return Response({"data": value})
        snapshot = store.get(session.id).data
        return Response({"data": None if snapshot is None else json.loads(snapshot)})
