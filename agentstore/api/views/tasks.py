"""Durable tasks over HTTP: listing, the worker lifecycle, events, tool/agent tasks, workflows.

    GET  /tasks                       tasks of your sessions (filters: kind state session …)
    POST /tasks                       queue a task owned by one of your sessions
    GET  /tasks/{id}                  one task
    GET  /tasks/{id}/events           its event log (?after= / ?cursor= / ?limit=)
    POST /tasks/{id}/events           append running events (fenced on the lease)
    POST /tasks/{id}/claim            claim a queued (or resume an interrupted) task
    POST /tasks/{id}/renew-lease      extend a live lease
    POST /tasks/{id}/finish           settle it (fenced on the lease)
    POST /tasks/{id}/cancel           cancel: queued → canceled, running → canceling
    POST /tasks/{id}/transition       a named-source state change
    POST /tasks/claim-next            claim the oldest queued task of a kind (staff)
    POST /tasks/recover-expired       settle tasks whose worker went away (staff)

A lifecycle call the repository refuses (not queued, lease lost or expired,
wrong state) answers **409** ``task_conflict`` with the task as it is now in
``details.task``, so a worker can tell "someone else has it" from "it is done".
``claim-next`` and ``recover-expired`` reach across owners, so they are staff
(worker service accounts) only.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from agentstore.api import task_serializers as t
from agentstore.api.exceptions import error_response
from agentstore.api.filters import TaskFilter
from agentstore.api.pagination import SeqCursor, TaskPagination, page_response
from agentstore.api.permissions import STAFF_PERMISSIONS
from agentstore.api.views.base import AgentStoreViewSet, errors
from agentstore.exceptions import (
    NoAgentTask,
    NoTask,
    NoToolTask,
    NoWorkflow,
    TaskConflict,
)
from agentstore.models import Task
from agentstore.selectors.tasks import tasks_visible_to, visible_task
from agentstore.tasks import (
    AgentTaskRepository,
    TaskRepository,
    ToolTaskRepository,
    WorkflowRepository,
)
from agentstore.tasks.recovery import RecoveryPolicy, recover_expired_leases
from agentstore.types.tasks import (
    AgentTaskEntity,
    ChildSessionRequest,
    TaskClaim,
    TaskEntity,
    TaskEventDraft,
    TaskFinish,
    ToolTaskEntity,
    WorkflowRunEntity,
)

__all__ = ["AgentTaskViewSet", "TaskViewSet", "ToolTaskViewSet", "WorkflowViewSet"]

_SESSION = OpenApiParameter(
    "session", str, required=False, description="Only the tasks this session owns."
)


def _conflict(tasks: TaskRepository, task_id: str, message: str) -> Response:
    """409 with the task as it is now (the repository said "nothing changed")."""
    current = tasks.get(task_id)
    details = {"task": t.TaskSerializer(current).data if current else None}
    return error_response(status.HTTP_409_CONFLICT, TaskConflict.code, message, details)


class _TaskBound(AgentStoreViewSet):
    """Resolve the task in the URL through the user's visibility (404 otherwise)."""

    #: What a missing (or someone else's) id of this resource raises: each
    #: resource has its own ``no_*`` code (decision record 0053).
    missing: type[NoTask] = NoTask

    def task_or_404(self) -> Task:
        pk = str(self.kwargs.get("pk", ""))
        task = visible_task(self.request.user, pk)
        if task is None:
            raise self.missing(f"{self.missing.default_message}: {pk}")
        return task

    def owner_session_or_404(self, session_id: str, field: str = "owner_session_id") -> str:
        return self.named_session_or_404(session_id, field).id

    def parent_task_or_404(self, task_id: str | None) -> str:
        """A ``parent_task_id`` the user may see (or none); else 404, missing or not.

        Every create that takes a parent goes through here, so someone else's
        task is "not there" exactly like a random id — no existence oracle, and
        no child hung under another user's task (whose session's deletion would
        cascade into it).
        """
        if task_id and visible_task(self.request.user, task_id) is None:
            raise NoTask(f"no such task: {task_id} (parent_task_id)")
        return task_id or ""

    def kind_page(self, kind: str, load: Any, serializer: Any) -> Response:
        """One page of the visible tasks of ``kind`` (``?session=`` narrows), newest first.

        The page is chosen on the task rows (one indexed query), then its
        details are read in one query for the page's ids only.
        """
        found = tasks_visible_to(self.request.user).filter(kind=kind).newest_first()
        session = self.request.query_params.get("session", "")
        if session:
            found = found.filter(owner_session_id=self.owner_session_or_404(session, "session"))
        page = self.paginate_queryset(found) or []
        ids = [task.id for task in page]
        by_id = {item.task.id: item for item in load(ids)}
        rows = [by_id[task_id] for task_id in ids if task_id in by_id]
        return self.get_paginated_response(serializer(rows, many=True).data)


@extend_schema_view(
    list=extend_schema(
        summary="Tasks of the sessions you can see",
        responses={200: t.TaskSerializer(many=True), **errors(400, 404)},
        tags=["tasks"],
    ),
)
class TaskViewSet(mixins.ListModelMixin, _TaskBound):
    """Durable tasks, scoped by their owner session."""

    serializer_class = t.TaskSerializer
    filter_backends = [DjangoFilterBackend]
    filterset_class = TaskFilter
    pagination_class = TaskPagination

    def get_queryset(self) -> Any:
        return tasks_visible_to(self.request.user).newest_first()

    def get_permissions(self) -> Sequence[Any]:
        if self.action in ("claim_next", "recover_expired"):
            return [permission() for permission in STAFF_PERMISSIONS]
        return super().get_permissions()

    @extend_schema(
        summary="Queue a task owned by one of your sessions",
        request=t.TaskCreateInput,
        responses={201: t.TaskSerializer, **errors(400, 404)},
        tags=["tasks"],
    )
    def create(self, request: Request) -> Response:
        data = t.TaskCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        owner = self.owner_session_or_404(values["owner_session_id"])
        task = TaskRepository().create(
            TaskEntity(
                kind=values["kind"],
                owner_session_id=owner,
                parent_task_id=self.parent_task_or_404(values["parent_task_id"]),
                concurrency_key=values["concurrency_key"],
            )
        )
        return Response(t.TaskSerializer(task).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Read a task", responses={200: t.TaskSerializer, **errors(404)}, tags=["tasks"]
    )
    def retrieve(self, request: Request, pk: str) -> Response:
        self.task_or_404()
        return Response(t.TaskSerializer(TaskRepository().get(pk)).data)

    @extend_schema(
        methods=["GET"],
        summary="The task's event log, oldest first",
        parameters=[
            OpenApiParameter("after", int, required=False),
            OpenApiParameter("cursor", str, required=False),
            OpenApiParameter("limit", int, required=False),
        ],
        responses={200: t.TaskEventPageSerializer, **errors(400, 404)},
        tags=["tasks"],
    )
    @extend_schema(
        methods=["POST"],
        summary="Append running events (only while your lease is live)",
        request=t.RunningEventsInput,
        responses={201: t.TaskEventSerializer(many=True), **errors(400, 404, 409)},
        tags=["tasks"],
    )
    @action(detail=True, methods=["get", "post"], pagination_class=None, filter_backends=[])
    def events(self, request: Request, pk: str) -> Response:
        task = self.task_or_404()
        tasks = TaskRepository()
        if request.method == "POST":
            data = t.RunningEventsInput(data=request.data)
            data.is_valid(raise_exception=True)
            drafts = [
                TaskEventDraft(kind=item["kind"], payload_json=t.compact(item["payload"]))
                for item in data.validated_data["events"]
            ]
            appended, ok = tasks.append_running_events(
                task.id, data.validated_data["lease_owner"], drafts
            )
            if not ok:
                return _conflict(tasks, task.id, "the lease is not held (or has expired)")
            return Response(
                t.TaskEventSerializer(appended, many=True).data, status=status.HTTP_201_CREATED
            )
        cursor = SeqCursor(request)
        found = tasks.list_events(task.id, cursor.after, cursor.limit + 1)
        rows, next_url = cursor.page(found, lambda event: event.sequence)
        return Response(
            {
                "next": next_url,
                "last_sequence": rows[-1].sequence if rows else cursor.after,
                "results": t.TaskEventSerializer(rows, many=True).data,
            }
        )

    @extend_schema(
        summary="Claim a queued task (or resume an interrupted one) under a lease",
        request=t.ClaimInput,
        responses={200: t.TaskSerializer, **errors(400, 404, 409)},
        tags=["tasks"],
    )
    @action(detail=True, methods=["post"], pagination_class=None, filter_backends=[])
    def claim(self, request: Request, pk: str) -> Response:
        task = self.task_or_404()
        data = t.ClaimInput(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        tasks = TaskRepository()
        claim = TaskClaim(
            task_id=task.id,
            lease_owner=values["lease_owner"],
            lease_expires_at=tasks.now() + timedelta(seconds=values["lease_seconds"]),
            event_kind=values["event_kind"],
        )
        ok = tasks.claim_interrupted(claim) if values["interrupted"] else tasks.claim_queued(claim)
        if not ok:
            return _conflict(tasks, task.id, "the task is not claimable")
        return Response(t.TaskSerializer(tasks.get(task.id)).data)

    @extend_schema(
        summary="Claim the oldest queued task of a kind (staff)",
        request=t.ClaimNextInput,
        responses={200: t.ClaimNextSerializer, **errors(400, 403)},
        tags=["tasks"],
    )
    @action(
        detail=False,
        methods=["post"],
        url_path="claim-next",
        url_name="claim-next",
        pagination_class=None,
        filter_backends=[],
    )
    def claim_next(self, request: Request) -> Response:
        data = t.ClaimNextInput(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        tasks = TaskRepository()
        task_id = tasks.claim_next_queued(
            values["kind"],
            values["lease_owner"],
            tasks.now() + timedelta(seconds=values["lease_seconds"]),
            values["event_kind"],
        )
        task = tasks.get(task_id) if task_id else None
        return Response({"task": t.TaskSerializer(task).data if task else None})

    @extend_schema(
        summary="Extend a live lease",
        request=t.LeaseInput,
        responses={200: t.TaskSerializer, **errors(400, 404, 409)},
        tags=["tasks"],
    )
    @action(
        detail=True,
        methods=["post"],
        url_path="renew-lease",
        url_name="renew-lease",
        pagination_class=None,
        filter_backends=[],
    )
    def renew_lease(self, request: Request, pk: str) -> Response:
        task = self.task_or_404()
        data = t.LeaseInput(data=request.data)
        data.is_valid(raise_exception=True)
        tasks = TaskRepository()
        expires = tasks.now() + timedelta(seconds=data.validated_data["lease_seconds"])
        if not tasks.renew_lease(task.id, data.validated_data["lease_owner"], expires):
            return _conflict(tasks, task.id, "the lease is not held (or has expired)")
        return Response(t.TaskSerializer(tasks.get(task.id)).data)

    @extend_schema(
        summary="Settle the task in a terminal state (fenced on the lease)",
        request=t.FinishInput,
        responses={200: t.TaskSerializer, **errors(400, 404, 409)},
        tags=["tasks"],
    )
    @action(detail=True, methods=["post"], pagination_class=None, filter_backends=[])
    def finish(self, request: Request, pk: str) -> Response:
        task = self.task_or_404()
        data = t.FinishInput(data=request.data)
        data.is_valid(raise_exception=True)
        tasks = TaskRepository()
        if not tasks.finish(_finish(task.id, data.validated_data)):
            return _conflict(tasks, task.id, "the task was not settled (state or lease changed)")
        return Response(t.TaskSerializer(tasks.get(task.id)).data)

    @extend_schema(
        summary="Cancel: a queued task is canceled, a running one asked to stop",
        request=None,
        responses={200: t.TaskSerializer, **errors(404, 409)},
        tags=["tasks"],
    )
    @action(detail=True, methods=["post"], pagination_class=None, filter_backends=[])
    def cancel(self, request: Request, pk: str) -> Response:
        task = self.task_or_404()
        tasks = TaskRepository()
        if task.kind == "tool":
            # Tool tasks settle with their canonical canceled outcome.
            ToolTaskRepository(tasks=tasks).cancel(task.owner_session_id or "", task.id)
            changed = tasks.get(task.id)
            if changed is not None and changed.state in ("canceled", "canceling"):
                return Response(t.TaskSerializer(changed).data)
            return _conflict(tasks, task.id, "the task can no longer be canceled")
        if not tasks.cancel(task.id, '{"canceled_by":"api"}'):
            return _conflict(tasks, task.id, "the task can no longer be canceled")
        return Response(t.TaskSerializer(tasks.get(task.id)).data)

    @extend_schema(
        summary="Move the task from one of the named states to another",
        request=t.TransitionInput,
        responses={200: t.TaskSerializer, **errors(400, 404, 409)},
        tags=["tasks"],
    )
    @action(detail=True, methods=["post"], pagination_class=None, filter_backends=[])
    def transition(self, request: Request, pk: str) -> Response:
        task = self.task_or_404()
        data = t.TransitionInput(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        tasks = TaskRepository()
        done = tasks.transition(
            task.id,
            values["from_states"],
            values["target_state"],
            values["kind"],
            t.compact(values["payload"]),
            values["lease_owner"],
        )
        if not done:
            return _conflict(
                tasks, task.id, "the task is not in one of from_states, or its lease forbids it"
            )
        return Response(t.TaskSerializer(tasks.get(task.id)).data)

    @extend_schema(
        summary="Settle tasks of a kind whose lease expired (staff)",
        request=t.RecoverInput,
        responses={200: t.RecoveredSerializer, **errors(400, 403)},
        tags=["tasks"],
    )
    @action(
        detail=False,
        methods=["post"],
        url_path="recover-expired",
        url_name="recover-expired",
        pagination_class=None,
        filter_backends=[],
    )
    def recover_expired(self, request: Request) -> Response:
        data = t.RecoverInput(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        # The one recovery entry point: a tool task gets its outcome too.
        policy = RecoveryPolicy(
            target_state=values["target_state"],
            event_kind=values["event_kind"],
            error_code=values["error_code"],
            error_message=values["error_message"],
            payload_json=t.compact(values["payload"]),
        )
        recovered = recover_expired_leases([values["kind"]], policy=policy)
        return Response({"recovered": recovered[values["kind"]]})


def _finish(task_id: str, values: dict[str, Any]) -> TaskFinish:
    return TaskFinish(
        task_id=task_id,
        lease_owner=values["lease_owner"],
        from_states=values["from_states"],
        target_state=values["target_state"],
        event_kind=values["event_kind"],
        result=values["result"],
        error_code=values["error_code"],
        error_message=values["error_message"],
        payload_json=t.compact(values["payload"]),
    )


class ToolTaskViewSet(_TaskBound):
    """Tool invocations as tasks; creating one is idempotent on (session, invocation id)."""

    serializer_class = t.ToolTaskSerializer
    pagination_class = TaskPagination
    filter_backends: list[Any] = []
    missing = NoToolTask

    @extend_schema(
        summary="Tool tasks of the sessions you can see, newest first",
        parameters=[_SESSION],
        responses={200: t.ToolTaskSerializer(many=True), **errors(400, 404)},
        tags=["tool tasks"],
    )
    def list(self, request: Request) -> Response:
        return self.kind_page("tool", ToolTaskRepository().list_by_ids, t.ToolTaskSerializer)

    @extend_schema(
        summary="Admit a tool invocation (a replay returns the original with 200)",
        request=t.ToolTaskCreateInput,
        responses={
            201: t.ToolTaskSerializer,
            200: t.ToolTaskSerializer,
            **errors(400, 404),
        },
        tags=["tool tasks"],
    )
    def create(self, request: Request) -> Response:
        data = t.ToolTaskCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        owner = self.owner_session_or_404(v["owner_session_id"])
        tools = ToolTaskRepository()
        # The store says whether this call admitted it (of racing identical
        # calls, exactly one): 201, else the replay's 200 (decision record 0080).
        task, created = tools.create_created(
            ToolTaskEntity(
                task=TaskEntity(
                    kind="tool",
                    owner_session_id=owner,
                    parent_task_id=self.parent_task_or_404(v["parent_task_id"]),
                    concurrency_key=v["concurrency_key"],
                ),
                owner_session_id=owner,
                invocation_id=v["invocation_id"],
                wrapper_call_id=v["wrapper_call_id"],
                cwd=v["cwd"],
                parent_call_id=v["parent_call_id"],
                initiating_entry_id=v["initiating_entry_id"],
                target_name=v["target_name"],
                source_sequence=v["source_sequence"],
                timeout_seconds=v["timeout_seconds"],
                policy_json=t.compact(v["policy"]),
                definition_json=t.compact(v["definition"]),
                arguments_json=t.compact(v["arguments"]),
            )
        )
        code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
        return Response(t.ToolTaskSerializer(task).data, status=code)

    @extend_schema(
        summary="Read a tool task",
        responses={200: t.ToolTaskSerializer, **errors(404)},
        tags=["tool tasks"],
    )
    def retrieve(self, request: Request, pk: str) -> Response:
        task = self.task_or_404()
        found = ToolTaskRepository().get(task.id)
        if found is None:
            raise NoToolTask(f"no such tool task: {pk} (it is a {task.kind} task)")
        return Response(t.ToolTaskSerializer(found).data)

    @extend_schema(
        summary="Settle a tool task with its outcome (cancellation wins; lease-fenced)",
        request=t.ToolFinishInput,
        responses={200: t.ToolTaskSerializer, **errors(400, 404, 409)},
        tags=["tool tasks"],
    )
    @action(detail=True, methods=["post"])
    def finish(self, request: Request, pk: str) -> Response:
        task = self.task_or_404()
        data = t.ToolFinishInput(data=request.data)
        data.is_valid(raise_exception=True)
        tools = ToolTaskRepository()
        finish = _finish(task.id, data.validated_data)
        if not tools.finish(finish, t.compact(data.validated_data["outcome"])):
            return _conflict(tools.tasks, task.id, "the task was not settled")
        return Response(t.ToolTaskSerializer(tools.get(task.id)).data)


class AgentTaskViewSet(_TaskBound):
    """Subagent tasks, each running in its own child session of the owner session."""

    serializer_class = t.AgentTaskSerializer
    pagination_class = TaskPagination
    filter_backends: list[Any] = []
    missing = NoAgentTask

    @extend_schema(
        summary="Agent tasks of the sessions you can see, newest first",
        parameters=[_SESSION],
        responses={200: t.AgentTaskSerializer(many=True), **errors(400, 404)},
        tags=["agent tasks"],
    )
    def list(self, request: Request) -> Response:
        return self.kind_page("agent", AgentTaskRepository().list_by_ids, t.AgentTaskSerializer)

    @extend_schema(
        summary="Start a subagent: a queued agent task and its child session, atomically",
        request=t.AgentTaskCreateInput,
        responses={201: t.AgentTaskSerializer, **errors(400, 404)},
        tags=["agent tasks"],
    )
    def create(self, request: Request) -> Response:
        data = t.AgentTaskCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        owner = self.owner_session_or_404(v["owner_session_id"])
        # The child session inherits the owner session's user (the store does it),
        # so the caller sees the subagent's session too.
        created = AgentTaskRepository().create_with_child_session(
            AgentTaskEntity(
                task=TaskEntity(
                    kind="agent",
                    owner_session_id=owner,
                    parent_task_id=self.parent_task_or_404(v["parent_task_id"]),
                    concurrency_key=v["concurrency_key"],
                ),
                agent_name=v["agent_name"],
                prompt=v["prompt"],
                model=v["model"],
                provider=v["provider"],
                depth=v["depth"],
                policy_json=t.compact(v["policy"]),
            ),
            ChildSessionRequest(cwd=v["cwd"], name=v["name"], parent_session_id=owner),
        )
        return Response(t.AgentTaskSerializer(created).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Read an agent task",
        responses={200: t.AgentTaskSerializer, **errors(404)},
        tags=["agent tasks"],
    )
    def retrieve(self, request: Request, pk: str) -> Response:
        task = self.task_or_404()
        found = AgentTaskRepository().get(task.id)
        if found is None:
            raise NoAgentTask(f"no such agent task: {pk} (it is a {task.kind} task)")
        return Response(t.AgentTaskSerializer(found).data)


class WorkflowViewSet(_TaskBound):
    """Workflow runs and the agent tasks they launched."""

    serializer_class = t.WorkflowSerializer
    pagination_class = TaskPagination
    filter_backends: list[Any] = []
    missing = NoWorkflow

    @extend_schema(
        summary="Workflow runs of the sessions you can see, newest first",
        parameters=[_SESSION],
        responses={200: t.WorkflowSerializer(many=True), **errors(400, 404)},
        tags=["workflows"],
    )
    def list(self, request: Request) -> Response:
        return self.kind_page("workflow", WorkflowRepository().list_by_ids, t.WorkflowSerializer)

    @extend_schema(
        summary="Queue a workflow run",
        request=t.WorkflowCreateInput,
        responses={201: t.WorkflowSerializer, **errors(400, 404)},
        tags=["workflows"],
    )
    def create(self, request: Request) -> Response:
        data = t.WorkflowCreateInput(data=request.data)
        data.is_valid(raise_exception=True)
        v = data.validated_data
        owner = self.owner_session_or_404(v["owner_session_id"])
        run = WorkflowRepository().create(
            WorkflowRunEntity(
                task=TaskEntity(
                    kind="workflow",
                    owner_session_id=owner,
                    parent_task_id=self.parent_task_or_404(v["parent_task_id"]),
                    concurrency_key=v["concurrency_key"],
                ),
                name=v["name"],
                source=v["source"],
                source_hash=v["source_hash"],
                source_version=v["source_version"],
                arguments_json=t.compact(v["arguments"]),
            )
        )
        return Response(t.WorkflowSerializer(run).data, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Read a workflow run",
        responses={200: t.WorkflowSerializer, **errors(404)},
        tags=["workflows"],
    )
    def retrieve(self, request: Request, pk: str) -> Response:
        task = self.task_or_404()
        found = WorkflowRepository().get(task.id)
        if found is None:
            raise NoWorkflow(f"no such workflow: {pk} (it is a {task.kind} task)")
        return Response(t.WorkflowSerializer(found).data)

    @extend_schema(
        methods=["GET"],
        summary="The workflow's agent-task links, in launch order (paged)",
        responses={200: t.WorkflowLinkSerializer(many=True), **errors(404)},
        tags=["workflows"],
    )
    @extend_schema(
        methods=["POST"],
        summary="Link an agent task to a (node, invocation); a different agent answers 409",
        description="201 with the new link; repeating the same link answers 200 with it.",
        request=t.WorkflowLinkInput,
        responses={
            201: t.WorkflowLinkSerializer,
            200: t.WorkflowLinkSerializer,
            **errors(400, 404, 409),
        },
        tags=["workflows"],
    )
    @action(detail=True, methods=["get", "post"])
    def links(self, request: Request, pk: str) -> Response:
        task = self.task_or_404()
        workflows = WorkflowRepository()
        if workflows.get(task.id) is None:
            raise NoWorkflow(f"no such workflow: {pk} (it is a {task.kind} task)")
        if request.method == "POST":
            data = t.WorkflowLinkInput(data=request.data)
            data.is_valid(raise_exception=True)
            v = data.validated_data
            if visible_task(request.user, v["agent_task_id"]) is None:
                raise NoAgentTask(f"no such agent task: {v['agent_task_id']} (agent_task_id)")
            link, created = workflows.link_agent_task_created(
                task.id, v["agent_task_id"], v["node_key"], v["invocation_index"]
            )
            # A repeated link returns the stored one: 200, not 201 (decision record 0080);
            # the store decides inside its write, so a race has one 201.
            code = status.HTTP_201_CREATED if created else status.HTTP_200_OK
            return Response(t.WorkflowLinkSerializer(link).data, status=code)
        links = workflows.list_agent_tasks(task.id)
        return page_response(links, request, self, t.WorkflowLinkSerializer)
