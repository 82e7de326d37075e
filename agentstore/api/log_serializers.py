"""Serializers of the LogStore resources: agentsession sessions and refs."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from agentstore.api.serializers import JSONObjectField, StrictSerializer


class LogSessionCreateInput(StrictSerializer):
    header = JSONObjectField(
        help_text="The session header; missing members are filled (the server assigns `id`)."
    )

    def validate_header(self, value: dict[str, Any]) -> dict[str, Any]:
        if "id" in value:
            raise serializers.ValidationError("id is assigned by the server.")
        if value.get("base"):
            raise serializers.ValidationError("forks (base) are not created over the API.")
        return value


class LogEntrySerializer(serializers.Serializer[Any]):
    id = serializers.CharField()
    type = serializers.CharField()
    parent = serializers.CharField(allow_null=True)  # type: ignore[assignment]
    ts = serializers.CharField()
    data = serializers.SerializerMethodField()  # type: ignore[assignment]

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_data(self, obj: Any) -> Any:
        """The entry as written (its JSON object)."""
        return obj.data


class LogSessionSerializer(serializers.Serializer[Any]):
    id = serializers.CharField()
    header = serializers.SerializerMethodField()
    leaf = serializers.CharField()
    entries = LogEntrySerializer(many=True)

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_header(self, obj: Any) -> Any:
        """The session header."""
        return obj.header


class LogSessionPageSerializer(LogSessionSerializer):
    """A log session with one page of its entries (``GET /log-sessions/{id}``)."""

    next = serializers.CharField(
        allow_null=True, help_text="The next page (same query, a `cursor`); null on the last."
    )
    last_seq = serializers.IntegerField(
        help_text="The position of the page's last entry (or the `after` asked for): "
        "`?after=` it to tail."
    )


class LogAppendInput(StrictSerializer):
    entry = JSONObjectField(help_text="The entry body (parent defaults to the leaf).")


class LogAppendedSerializer(serializers.Serializer[Any]):
    id = serializers.CharField(help_text="The appended entry's id (sha256:…).")


class RefTargetSerializer(StrictSerializer):
    session = serializers.CharField(max_length=255)
    entry = serializers.CharField(max_length=128, required=False, allow_blank=True, default="")


class NamedRefSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    target = RefTargetSerializer()
    updated_at = serializers.DateTimeField(allow_null=True)


class RefUpdateInput(StrictSerializer):
    expected = RefTargetSerializer(allow_null=True, help_text="null: the ref must not exist.")
    next = RefTargetSerializer(allow_null=True, help_text="null: delete the ref.")
    reason = serializers.CharField(required=False, allow_blank=True, default="", max_length=1000)


class RefLogSerializer(serializers.Serializer[Any]):
    name = serializers.CharField()
    old = RefTargetSerializer(allow_null=True)
    new = RefTargetSerializer(allow_null=True)
    time = serializers.DateTimeField(allow_null=True)
    reason = serializers.CharField()
