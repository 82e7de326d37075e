"""Serializers of runs: what ``POST /runs`` takes and what every run read returns.

A run's ``input`` and ``overrides`` are JSON (not strings), checked by the same
rules as every other JSON member of a body; ``output`` is the runner's return
value once the run succeeded (``null`` before).
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from agentstore.api.serializers import JSONObjectField, StrictSerializer, _check_json_text
from agentstore.runs.registry import MAX_NAME
from agentstore.runs.repository import ENQUEUE, IF_BUSY

__all__ = ["RunSerializer", "RunStartInput"]


class _AnyJSON(serializers.JSONField):
    """Any JSON value, with the body rules (no NUL, no lone surrogate) applied."""

    def to_internal_value(self, data: Any) -> Any:
        value = super().to_internal_value(data)
        _check_json_text(value)
        return value


class RunStartInput(StrictSerializer):
    runner = serializers.CharField(max_length=MAX_NAME, help_text="A runner's name.")
    input = _AnyJSON(  # noqa: A003 - the run's input, as the Python API names it
        required=False,
        allow_null=True,
        default=None,
        help_text="The run's input: the next user message, a list of items, a graph's input.",
    )
    session_id = serializers.CharField(
        max_length=255,
        required=False,
        allow_null=True,
        default=None,
        help_text="The session to continue (yours); absent or null: a new session.",
    )
    overrides = JSONObjectField(
        required=False,
        default=dict,
        help_text="What the runner may change for this run: model, instructions …",
    )
    if_busy = serializers.ChoiceField(
        choices=list(IF_BUSY),
        required=False,
        default=ENQUEUE,
        help_text="Another run of the session is queued or going on: run after it (enqueue), "
        "409 session_busy (reject), or cancel it and continue from where it stops (interrupt).",
    )
    queue = serializers.CharField(max_length=64, required=False, default="default")
    priority = serializers.IntegerField(min_value=-100, max_value=100, required=False, default=0)
    max_attempts = serializers.IntegerField(
        min_value=1,
        max_value=100,
        required=False,
        default=1,
        help_text="Failed attempts allowed (a worker's crash does not spend one).",
    )


class RunSerializer(serializers.Serializer[Any]):
    """A run (``agentstore.types.runs.Run``)."""

    id = serializers.CharField()
    runner = serializers.CharField()
    session_id = serializers.CharField()
    state = serializers.CharField()
    input = serializers.SerializerMethodField()  # noqa: A003
    overrides = serializers.DictField()
    output = serializers.SerializerMethodField()
    error_code = serializers.CharField()
    error_message = serializers.CharField()
    queue = serializers.CharField(source="queue_name")
    attempts = serializers.IntegerField()
    max_attempts = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)
    updated_at = serializers.DateTimeField()

    @extend_schema_field(OpenApiTypes.ANY)
    def get_input(self, obj: Any) -> Any:
        """The run's input, as given."""
        return obj.input

    @extend_schema_field(OpenApiTypes.ANY)
    def get_output(self, obj: Any) -> Any:
        """What the runner returned; null until the run succeeded."""
        return obj.output
