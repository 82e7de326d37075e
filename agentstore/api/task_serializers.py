"""Serializers of the task resources: tasks, their events, tool/agent tasks, workflows.

Inputs carry JSON payloads as JSON (objects), not as strings; they are encoded
compactly for the repositories, which keep the text as given. Leases are asked
for in seconds (``lease_seconds``) and turned into an expiry on the *server's*
clock, so a worker with a skewed clock still gets the lease it asked for.
"""

from __future__ import annotations

import json
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from agentstore.api.serializers import (
    INT32_MAX,
    JSONObjectField,
    StrictSerializer,
    _check_json_text,
)
from agentstore.tasks.recovery import LEASE_EXPIRED

STATES = ["queued", "running", "canceling", "succeeded", "failed", "canceled", "interrupted"]
TERMINAL = ["succeeded", "failed", "canceled", "interrupted"]
#: The same as (value, label) pairs, named in the schema (``ENUM_NAME_OVERRIDES``).
STATE_CHOICES = [(state, state) for state in STATES]
TERMINAL_CHOICES = [(state, state) for state in TERMINAL]
#: Longest lease a worker may ask for in one claim or renewal (a day).
MAX_LEASE_SECONDS = 86_400


def compact(value: Any) -> str:
    """JSON text of ``value`` as the repositories store it (``""`` for none)."""
    if value is None:
        return ""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _loads(text: str | None) -> Any:
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return None


class AbsentAsNullField(serializers.CharField):
    """An optional id or name: ``null`` when absent, whichever form the value came in.

    A ``TaskEntity`` says "none" with ``""`` (the Go zero value) while a ``Task``
    row says it with ``NULL``; the API says ``null`` in both cases, so a list,
    a detail, a create and a claim agree (decision record 0053).
    """

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("allow_null", True)
        super().__init__(**kwargs)

    def to_representation(self, value: Any) -> str | None:  # type: ignore[override]
        return None if value in (None, "") else str(value)


def _parent_task() -> serializers.CharField:
    return serializers.CharField(
        max_length=36,
        required=False,
        allow_null=True,
        default=None,
        help_text="The parent task (a task you can see); null or absent: none.",
    )


class TaskSerializer(serializers.Serializer[Any]):
    """A task and its lease (from a ``TaskEntity`` or a ``Task`` row)."""

    id = serializers.CharField()
    kind = serializers.CharField()
    state = serializers.CharField()
    # null for django.tasks functions, which no session owns (only staff see those).
    owner_session_id = AbsentAsNullField()
    parent_task_id = AbsentAsNullField()
    concurrency_key = serializers.CharField()
    result = serializers.CharField()
    error_code = serializers.CharField()
    error_message = serializers.CharField()
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    updated_at = serializers.DateTimeField()
    lease_owner = AbsentAsNullField()
    lease_expires_at = serializers.DateTimeField(allow_null=True)


class TaskEventSerializer(serializers.Serializer[Any]):
    """One event of a task's log (``sequence`` is 1..n, contiguous)."""

    task_id = serializers.CharField()
    sequence = serializers.IntegerField()
    id = serializers.CharField(source="event.id")
    kind = serializers.CharField(source="event.kind")
    payload = serializers.SerializerMethodField()
    created_at = serializers.DateTimeField(source="event.created_at")

    @extend_schema_field(OpenApiTypes.ANY)
    def get_payload(self, obj: Any) -> Any:
        """The event's JSON payload."""
        return _loads(obj.event.payload_json)


class TaskEventPageSerializer(serializers.Serializer[Any]):
    next = serializers.URLField(allow_null=True)
    last_sequence = serializers.IntegerField()
    results = TaskEventSerializer(many=True)


class TaskCreateInput(StrictSerializer):
    kind = serializers.CharField(max_length=64)
    owner_session_id = serializers.CharField(max_length=255)
    parent_task_id = _parent_task()
    concurrency_key = serializers.CharField(max_length=255, required=False, default="")


class LeaseInput(StrictSerializer):
    lease_owner = serializers.CharField(max_length=255, help_text="The worker's identity.")
    lease_seconds = serializers.IntegerField(
        min_value=1, max_value=MAX_LEASE_SECONDS, help_text="Lease length from now."
    )


class ClaimInput(LeaseInput):
    event_kind = serializers.CharField(max_length=64, default="task_started")
    interrupted = serializers.BooleanField(
        default=False, help_text="Resume an interrupted task instead of claiming a queued one."
    )


class ClaimNextInput(LeaseInput):
    kind = serializers.CharField(max_length=64)
    event_kind = serializers.CharField(max_length=64, default="task_started")


class ClaimNextSerializer(serializers.Serializer[Any]):
    task = TaskSerializer(allow_null=True, help_text="The claimed task, or null when none.")


class EventDraftInput(StrictSerializer):
    kind = serializers.CharField(max_length=64)
    payload = serializers.JSONField(required=False, default=dict)

    def validate_payload(self, value: Any) -> Any:
        _check_json_text(value)
        return value


class RunningEventsInput(StrictSerializer):
    lease_owner = serializers.CharField(max_length=255)
    events = EventDraftInput(many=True)


class FinishInput(StrictSerializer):
    lease_owner = serializers.CharField(
        max_length=255, required=False, allow_blank=True, default="", help_text="'' if unleased."
    )
    from_states = serializers.ListField(
        child=serializers.ChoiceField(choices=STATES), default=lambda: ["running", "canceling"]
    )
    target_state = serializers.ChoiceField(choices=TERMINAL)
    event_kind = serializers.CharField(
        max_length=64,
        required=False,
        help_text="The event recorded with the change; default `task_<target_state>` "
        "(`task_succeeded`, `task_failed`, `task_canceled`, `task_interrupted`).",
    )
    result = serializers.CharField(
        required=False, allow_blank=True, default="", trim_whitespace=False
    )
    error_code = serializers.CharField(max_length=255, required=False, allow_blank=True, default="")
    error_message = serializers.CharField(required=False, allow_blank=True, default="")
    payload = serializers.JSONField(required=False, default=dict)

    def validate_payload(self, value: Any) -> Any:
        _check_json_text(value)
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        # The obvious event for the target state (what the worker records).
        attrs.setdefault("event_kind", f"task_{attrs['target_state']}")
        return attrs


class ToolFinishInput(FinishInput):
    outcome = serializers.JSONField(help_text="The tool's outcome (JSON).")

    def validate_outcome(self, value: Any) -> Any:
        _check_json_text(value)
        return value


class TransitionInput(StrictSerializer):
    from_states = serializers.ListField(child=serializers.ChoiceField(choices=STATES), min_length=1)
    target_state = serializers.ChoiceField(choices=STATES)
    kind = serializers.CharField(max_length=64, help_text="The event appended with the change.")
    payload = serializers.JSONField(required=False, default=dict)
    lease_owner = serializers.CharField(
        max_length=255,
        required=False,
        allow_blank=True,
        default="",
        help_text="The lease holder moving its own task (fenced on its live lease). Without "
        "it, a task under someone's live lease only moves to canceling.",
    )

    def validate_payload(self, value: Any) -> Any:
        _check_json_text(value)
        return value


class RecoverInput(StrictSerializer):
    kind = serializers.CharField(max_length=64)
    target_state = serializers.ChoiceField(choices=TERMINAL, default="interrupted")
    event_kind = serializers.CharField(max_length=64, default="task_interrupted")
    error_code = serializers.CharField(max_length=255, default="lease_expired")
    error_message = serializers.CharField(default=LEASE_EXPIRED.error_message)
    payload = serializers.JSONField(required=False, default=dict)

    def validate_payload(self, value: Any) -> Any:
        _check_json_text(value)
        return value


class RecoveredSerializer(serializers.Serializer[Any]):
    recovered = serializers.ListField(child=serializers.CharField())


class ToolTaskSerializer(serializers.Serializer[Any]):
    task = TaskSerializer()
    invocation_id = serializers.CharField()
    wrapper_call_id = serializers.CharField()
    cwd = serializers.CharField()
    parent_call_id = serializers.CharField()
    initiating_entry_id = serializers.CharField()
    target_name = serializers.CharField()
    source_sequence = serializers.IntegerField()
    timeout_seconds = serializers.IntegerField()
    policy = serializers.SerializerMethodField()
    definition = serializers.SerializerMethodField()
    arguments = serializers.SerializerMethodField()
    outcome_version = serializers.IntegerField(allow_null=True)
    outcome = serializers.SerializerMethodField()

    @extend_schema_field(OpenApiTypes.ANY)
    def get_policy(self, obj: Any) -> Any:
        """The invocation's policy (JSON)."""
        return _loads(obj.policy_json)

    @extend_schema_field(OpenApiTypes.ANY)
    def get_definition(self, obj: Any) -> Any:
        """The tool's definition (JSON)."""
        return _loads(obj.definition_json)

    @extend_schema_field(OpenApiTypes.ANY)
    def get_arguments(self, obj: Any) -> Any:
        """The call's arguments (JSON)."""
        return _loads(obj.arguments_json)

    @extend_schema_field(OpenApiTypes.ANY)
    def get_outcome(self, obj: Any) -> Any:
        """The settled outcome (JSON), null until settled."""
        return _loads(obj.outcome_json)


class ToolTaskCreateInput(StrictSerializer):
    owner_session_id = serializers.CharField(max_length=36)
    invocation_id = serializers.CharField(max_length=255, help_text="Idempotency key per session.")
    wrapper_call_id = serializers.CharField(max_length=255)
    parent_task_id = _parent_task()
    concurrency_key = serializers.CharField(max_length=255, required=False, default="")
    cwd = serializers.CharField(trim_whitespace=False)
    parent_call_id = serializers.CharField(max_length=255, required=False, default="")
    initiating_entry_id = serializers.CharField(max_length=128, required=False, default="")
    target_name = serializers.CharField(max_length=255)
    source_sequence = serializers.IntegerField(min_value=0, max_value=INT32_MAX, default=0)
    timeout_seconds = serializers.IntegerField(min_value=1, max_value=INT32_MAX)
    policy = JSONObjectField(required=False, allow_null=True, default=None)
    definition = JSONObjectField(help_text="The tool's definition (object).")
    arguments = JSONObjectField(help_text="The call's arguments (object).")


class AgentTaskCreateInput(StrictSerializer):
    owner_session_id = serializers.CharField(max_length=36, help_text="The parent session.")
    agent_name = serializers.CharField(max_length=255)
    prompt = serializers.CharField()
    model = serializers.CharField(max_length=255, required=False, default="")
    provider = serializers.CharField(max_length=255, required=False, default="")
    depth = serializers.IntegerField(min_value=1, max_value=INT32_MAX, default=1)
    parent_task_id = _parent_task()
    concurrency_key = serializers.CharField(max_length=255, required=False, default="")
    policy = JSONObjectField(required=False, allow_null=True, default=None)
    cwd = serializers.CharField(trim_whitespace=False, help_text="The child session's cwd.")
    name = serializers.CharField(
        max_length=500, required=False, default="", help_text="The child session's name."
    )


class AgentTaskSerializer(serializers.Serializer[Any]):
    task = TaskSerializer()
    child_session_id = serializers.CharField()
    agent_name = serializers.CharField()
    prompt = serializers.CharField()
    model = serializers.CharField()
    provider = serializers.CharField()
    depth = serializers.IntegerField()
    policy = serializers.SerializerMethodField()
    usage = serializers.SerializerMethodField()

    @extend_schema_field(OpenApiTypes.ANY)
    def get_policy(self, obj: Any) -> Any:
        """The agent's policy (JSON)."""
        return _loads(obj.policy_json)

    @extend_schema_field(OpenApiTypes.ANY)
    def get_usage(self, obj: Any) -> Any:
        """Token usage reported at finish (JSON)."""
        return _loads(obj.usage_json)


class WorkflowSerializer(serializers.Serializer[Any]):
    task = TaskSerializer()
    name = serializers.CharField()
    source = serializers.CharField()  # type: ignore[assignment]
    source_hash = serializers.CharField()
    source_version = serializers.CharField()
    arguments = serializers.SerializerMethodField()

    @extend_schema_field(OpenApiTypes.ANY)
    def get_arguments(self, obj: Any) -> Any:
        """The run's arguments (JSON)."""
        return _loads(obj.arguments_json)


class WorkflowCreateInput(StrictSerializer):
    owner_session_id = serializers.CharField(max_length=36)
    name = serializers.CharField(max_length=255)
    source = serializers.CharField(trim_whitespace=False)  # type: ignore[assignment]
    source_hash = serializers.CharField(max_length=255)
    source_version = serializers.CharField(max_length=255, required=False, default="")
    arguments = serializers.JSONField(required=False, allow_null=True, default=None)
    parent_task_id = _parent_task()
    concurrency_key = serializers.CharField(max_length=255, required=False, default="")

    def validate_arguments(self, value: Any) -> Any:
        _check_json_text(value)
        return value


class WorkflowLinkSerializer(serializers.Serializer[Any]):
    workflow_task_id = serializers.CharField()
    agent_task_id = serializers.CharField()
    node_key = serializers.CharField()
    invocation_index = serializers.IntegerField()
    sequence = serializers.IntegerField()
    created_at = serializers.DateTimeField(allow_null=True)


class WorkflowLinkInput(StrictSerializer):
    agent_task_id = serializers.CharField(max_length=36)
    node_key = serializers.CharField(max_length=255)
    invocation_index = serializers.IntegerField(min_value=0, max_value=INT32_MAX, default=0)
