"""Runs over HTTP: start one on your session (or a new one), read it, list a session's.

    POST /runs                 start a run: {"runner": "support", "input": "hello",
                               "session_id": null | "<yours>", "overrides": {...},
                               "if_busy": "enqueue" | "reject" | "interrupt"}
    GET  /runs[?session=<id>]  runs of your sessions (of one), newest first (paged)
    GET  /runs/{id}            one run: state, output once succeeded, error once failed
    POST /runs/{id}/cancel     queued: canceled; running: stops at its next step (409 if over)
    GET  /runs/runners         the runners a run may name

A run is visible exactly when its session is; someone else's run is
``no_run`` (404), like a random id. A run started without ``session_id``
creates the session, owned by the caller, before the answer (201) — follow it
at ``/sessions/{session_id}/follow`` while a worker runs it; ``session_id``
must name one of the caller's sessions. An unknown
runner is a 400 naming the runners there are.
"""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from agentstore.api import run_serializers as r
from agentstore.api.exceptions import error_response
from agentstore.api.pagination import TaskPagination
from agentstore.api.views.base import AgentStoreViewSet, errors
from agentstore.exceptions import NoRun, TaskConflict
from agentstore.runs import RUN_KIND, RunRepository, runner_names
from agentstore.selectors.tasks import tasks_visible_to, visible_task

__all__ = ["RunViewSet"]

_SESSION = OpenApiParameter(
    "session", str, required=False, description="Only the runs of this session (yours)."
)


@extend_schema_view(
    list=extend_schema(
        summary="Runs of the sessions you can see, newest first",
        parameters=[_SESSION],
        responses={200: r.RunSerializer(many=True), **errors(400, 404)},
        tags=["runs"],
    ),
)
class RunViewSet(AgentStoreViewSet):
    """Durable runs: one agent turn on one session, executed by the worker."""

    serializer_class = r.RunSerializer
    pagination_class = TaskPagination

    @extend_schema(
        summary="Start a run (queued for a worker)",
        request=r.RunStartInput,
        responses={201: r.RunSerializer, **errors(400, 404, 409)},
        tags=["runs"],
    )
    def create(self, request: Request) -> Response:
        data = r.RunStartInput(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        session_id = values["session_id"] or ""
        if session_id:
            # One of the caller's sessions (any, for staff); a stranger's id is
            # "not there" like a random one. The API creates sessions only under
            # new ids: one under a caller-chosen id would tell who got a 201
            # that the id was free.
            session_id = self.named_session_or_404(session_id, "session_id").id
        run = RunRepository().start(
            values["runner"],
            values["input"],
            session_id=session_id,
            owner=request.user,
            overrides=values["overrides"],
            queue=values["queue"],
            priority=values["priority"],
            max_attempts=values["max_attempts"],
            if_busy=values["if_busy"],
        )
        return Response(r.RunSerializer(run).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Read a run", responses={200: r.RunSerializer, **errors(404)}, tags=["runs"]
    )
    def retrieve(self, request: Request, pk: str) -> Response:
        run = RunRepository().get(pk) if visible_task(request.user, pk) is not None else None
        if run is None:
            raise NoRun(f"{NoRun.default_message}: {pk}")
        return Response(r.RunSerializer(run).data)

    @extend_schema(
        summary="Cancel a queued run, or ask a running one to stop at its next step",
        request=None,
        responses={200: r.RunSerializer, **errors(404, 409)},
        tags=["runs"],
    )
    @action(detail=True, methods=["post"], pagination_class=None, filter_backends=[])
    def cancel(self, request: Request, pk: str) -> Response:
        if visible_task(request.user, pk) is None:
            raise NoRun(f"{NoRun.default_message}: {pk}")
        runs = RunRepository()
        run = runs.cancel(pk, by=f"api:{request.user.pk}")
        if run is None:
            raise NoRun(f"{NoRun.default_message}: {pk}")
        if run.state not in ("canceled", "canceling"):
            details = {"run": r.RunSerializer(run).data}
            return error_response(
                status.HTTP_409_CONFLICT,
                TaskConflict.code,
                f"run {pk} is {run.state}: it can no longer be canceled",
                details,
            )
        return Response(r.RunSerializer(run).data)

    def list(self, request: Request) -> Response:  # noqa: A003
        found = tasks_visible_to(request.user).filter(kind=RUN_KIND).newest_first()
        session = request.query_params.get("session", "")
        if session:
            found = found.filter(owner_session_id=self.named_session_or_404(session, "session").id)
        page = self.paginate_queryset(found.values_list("id", flat=True)) or []
        runs = RunRepository().get_many(list(page))
        return self.get_paginated_response(r.RunSerializer(runs, many=True).data)

    @extend_schema(
        summary="The runners a run may name",
        responses={200: {"type": "array", "items": {"type": "string"}}, **errors()},
        tags=["runs"],
    )
    @action(detail=False, methods=["get"], pagination_class=None, filter_backends=[])
    def runners(self, request: Request) -> Response:
        return Response(runner_names())
