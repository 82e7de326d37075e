"""Input and output serializers of the API.

Input serializers check *shape* (types, sizes, base64, no NUL characters) and
build the store's value objects; every rule about meaning (a parent that must
exist, a session of the right kind, a compaction race) stays in the store, which
answers with its own errors. Output serializers render the value objects the
stores return, never ORM rows, except for plain listings of model rows
(sessions, steps) where the row *is* the value::

    data = AppendMessageInput(data=request.data)
    data.is_valid(raise_exception=True)
    entry = TreeStore().append_message(session_id, **data.store_kwargs())
    return Response(EntrySerializer(entry).data, status=201)
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

from django.http import QueryDict
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.fields import empty

from agentstore.models import Session
from agentstore.types.loop import FinalizeSummary, RunStep
from agentstore.types.tree import (
    MESSAGE_ROLES,
    AppendCompactionInput,
    EntryTokenUsageEntity,
    MessageEntity,
    MessagePartEntity,
)

#: Largest 64-bit integer (token counts, durations, positions).
INT64_MAX = 2**63 - 1
#: Largest 32-bit integer (step indexes, image sizes).
INT32_MAX = 2**31 - 1


# -- strict input --------------------------------------------------------------------

#: The JSON type each kind of input field takes, most specific class first.
#: DRF would coerce ``42`` into ``"42"`` for a CharField and ``"5"`` into ``5``
#: for an IntegerField; a JSON body is typed, so a wrong type is the caller's
#: mistake and is refused (docs/api.md "Strict input", decision record 0079).
_JSON_TYPES: tuple[tuple[type[Any], type | tuple[type, ...], str], ...] = (
    (serializers.MultipleChoiceField, (list, tuple), "a list"),
    (serializers.ChoiceField, str, "a string"),
    (serializers.CharField, str, "a string"),
    (serializers.BooleanField, bool, "a boolean"),
    (serializers.IntegerField, int, "an integer"),
    (serializers.DateTimeField, str, "a string"),
    (serializers.ListField, (list, tuple), "a list"),
)


def _json_name(value: Any) -> str:
    """The JSON type of ``value`` as a client would call it."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    return "null" if value is None else type(value).__name__


def _type_error(field: serializers.Field[Any, Any, Any, Any], value: Any) -> str | None:
    """Why ``value`` has the wrong JSON type for ``field`` (``None`` when it is right)."""
    if value is None or value is empty:
        return None  # DRF's own allow_null / required checks answer these
    for cls, types, name in _JSON_TYPES:
        if isinstance(field, cls):
            ok = isinstance(value, types) and not (isinstance(value, bool) and types is not bool)
            return None if ok else f"Expected {name}, got {_json_name(value)}."
    return None


#: The message for a body key the input does not define.
UNKNOWN_FIELD = "Unknown field."


class StrictSerializer(serializers.Serializer[Any]):
    """The base of every request-body serializer: JSON types are checked, not coerced.

    One check for every field of every input (nested serializers inherit it):
    a string field takes only a string, an integer field only an integer (not
    ``true``, not ``"5"``), a boolean only ``true``/``false``, and a key the
    input does not define is refused by name (``message.colour: Unknown
    field.``) rather than dropped — a misspelt ``usage`` or ``display`` used to
    vanish silently. Free-form JSON members (``data``, ``details``, an
    ``entry``) are values, not fields: their keys are kept as given. Query data
    (a ``QueryDict``, where everything is text) keeps DRF's parsing. Every bad
    field is reported, together with DRF's own errors for the others.
    """

    def to_internal_value(self, data: Any) -> Any:
        wrong: dict[str, list[str]] = {}
        if isinstance(data, Mapping) and not isinstance(data, QueryDict):
            for key in data:
                if key not in self.fields:
                    wrong[str(key)] = [UNKNOWN_FIELD]
            for field in self._writable_fields:
                name = str(field.field_name)
                problem = _type_error(field, data.get(name, empty))
                if problem:
                    wrong[name] = [problem]
        try:
            value = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            if not wrong or not isinstance(exc.detail, dict):
                raise
            # DRF's detail may be keyed by int (list errors); the merged keys are field names.
            merged: dict[Any, Any] = {**exc.detail, **wrong}
            raise serializers.ValidationError(merged) from None
        if wrong:
            raise serializers.ValidationError(wrong)
        return value


# -- shared fields -------------------------------------------------------------------


def _check_json_text(value: Any, path: str = "") -> None:
    """Refuse JSON values the databases cannot store (NUL, lone surrogates)."""
    if isinstance(value, dict):
        for key, item in value.items():
            _check_json_text(key, path)
            _check_json_text(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _check_json_text(item, f"{path}[{index}]")
    elif isinstance(value, str):
        if "\x00" in value:
            raise serializers.ValidationError("Null characters are not allowed.")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise serializers.ValidationError("Surrogate characters are not allowed.") from None


class JSONObjectField(serializers.JSONField):
    """A JSON object (dict), kept with its keys as given."""

    def to_internal_value(self, data: Any) -> Any:
        value: Any = super().to_internal_value(data)
        # ``value is None`` is possible even without allow_null: a form field
        # holding the text "null" decodes to it.
        if value is None and not self.allow_null:
            raise serializers.ValidationError("Expected a JSON object.")
        if value is not None and not isinstance(value, dict):
            raise serializers.ValidationError("Expected a JSON object.")
        _check_json_text(value)
        return value


class Base64Field(serializers.CharField):
    """Bytes sent and returned as standard base64 text."""

    def to_internal_value(self, data: Any) -> bytes:  # type: ignore[override]
        text = super().to_internal_value(data)
        try:
            return base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            raise serializers.ValidationError("Invalid base64 data.") from None

    def to_representation(self, value: Any) -> str:
        return base64.b64encode(bytes(value or b"")).decode("ascii")


def _text(**kwargs: Any) -> serializers.CharField:
    """A string field that keeps whitespace (message text is data, not a form value)."""
    kwargs.setdefault("trim_whitespace", False)
    return serializers.CharField(**kwargs)


def _parent() -> serializers.CharField:
    # Required (decision record 0051): an append that left it out used to start a new
    # root silently, and the default context then showed only that message.
    return serializers.CharField(
        required=True,
        allow_null=True,
        max_length=128,
        help_text="The entry to append under (required); null deliberately starts a new root.",
    )


def _json_text(value: dict[str, Any] | None) -> str:
    return json.dumps(value or {}, separators=(",", ":"), ensure_ascii=False)


# -- sessions ------------------------------------------------------------------------


class SessionSerializer(serializers.ModelSerializer[Session]):
    """A session of any kind (tree, loop or log), as listed."""

    owner = serializers.SerializerMethodField()

    class Meta:
        model = Session
        fields = [
            "id",
            "kind",
            "owner",
            "cwd",
            "name",
            "parent_session",
            "created_at",
            "updated_at",
            "model",
            "system_prompt",
            "status",
            "prompt_tokens",
            "completion_tokens",
            "step_count",
            "duration_ms",
            "superseded_by",
        ]
        read_only_fields = fields

    def get_owner(self, obj: Session) -> str | None:
        """The owner's username (``null`` when the session has no owner)."""
        owner = obj.owner
        return None if owner is None else owner.get_username()


class SessionCreateInput(StrictSerializer):
    kind = serializers.ChoiceField(
        choices=["tree", "loop"],
        default="tree",
        help_text="tree: an entry tree (TreeStore); loop: a step trace (LoopStore).",
    )
    cwd = _text(
        max_length=4096,
        required=False,
        allow_blank=True,
        default="",
        help_text="The directory the session works in; required (non-blank) for tree sessions.",
    )
    name = _text(max_length=500, required=False, allow_blank=True, default="")
    parent_session = serializers.CharField(
        max_length=255, required=False, allow_blank=True, default=""
    )
    model = serializers.CharField(max_length=255, required=False, allow_blank=True, default="")
    system_prompt = _text(required=False, allow_blank=True, default="")

    def validate_cwd(self, value: str) -> str:
        # Checked here, not left to the tree store, so the error names the body's
        # key (`cwd`) in details.fields rather than the store's `session.cwd`,
        # and with the other fields' errors (a field check, run for the default too).
        data = self.initial_data if isinstance(self.initial_data, Mapping) else {}
        if data.get("kind", "tree") == "tree" and not value.strip():
            raise serializers.ValidationError(
                "A tree session needs a cwd (the directory it works in)."
            )
        return value


class RenameInput(StrictSerializer):
    name = _text(max_length=500, allow_blank=True)
    parent_id = serializers.CharField(
        required=False,
        allow_null=True,
        default=None,
        max_length=128,
        help_text="Where the session_info entry goes; omitted: under the latest leaf.",
    )


# -- entries -------------------------------------------------------------------------


class MessagePartSerializer(StrictSerializer):
    type = serializers.ChoiceField(choices=["text", "image"])
    text = _text(required=False, allow_blank=True, default="")
    mime_type = serializers.CharField(max_length=255, required=False, allow_blank=True, default="")
    name = serializers.CharField(max_length=255, required=False, allow_blank=True, default="")
    data = Base64Field(  # type: ignore[assignment]
        required=False,
        allow_blank=True,
        default=b"",  # type: ignore[arg-type]
        help_text="base64 bytes",
    )
    width = serializers.IntegerField(required=False, default=0, min_value=0, max_value=INT32_MAX)
    height = serializers.IntegerField(required=False, default=0, min_value=0, max_value=INT32_MAX)


class MessageSerializer(StrictSerializer):
    role = serializers.ChoiceField(
        choices=MESSAGE_ROLES, help_text="Who wrote it (the roles the tree store defines)."
    )
    content = _text(required=False, allow_blank=True, default="")
    provider = serializers.CharField(max_length=255, required=False, allow_blank=True, default="")
    model = serializers.CharField(max_length=255, required=False, allow_blank=True, default="")
    parts = MessagePartSerializer(many=True, required=False, default=list)
    timestamp = serializers.DateTimeField(required=False, allow_null=True, default=None)


class UsageSerializer(StrictSerializer):
    context_window = serializers.IntegerField(min_value=0, max_value=INT64_MAX, default=0)
    context_tokens = serializers.IntegerField(min_value=0, max_value=INT64_MAX, default=0)
    input_tokens = serializers.IntegerField(min_value=0, max_value=INT64_MAX, default=0)
    output_tokens = serializers.IntegerField(min_value=0, max_value=INT64_MAX, default=0)


def message_entity(data: dict[str, Any]) -> MessageEntity:
    """Build the store's ``MessageEntity`` from validated message data."""
    return MessageEntity(
        role=data["role"],
        content=data["content"],
        provider=data["provider"],
        model=data["model"],
        parts=tuple(MessagePartEntity(**part) for part in data["parts"]),
        timestamp=data["timestamp"],
    )


class AppendMessageInput(StrictSerializer):
    parent_id = _parent()
    message = MessageSerializer()
    model_facing = serializers.BooleanField(required=False, allow_null=True, default=None)
    display = serializers.BooleanField(required=False, allow_null=True, default=None)
    usage = UsageSerializer(required=False, allow_null=True, default=None)

    def store_kwargs(self) -> dict[str, Any]:
        data = self.validated_data
        usage = data["usage"]
        return {
            "parent_id": data["parent_id"],
            "message": message_entity(data["message"]),
            "model_facing": data["model_facing"],
            "display": data["display"],
            "usage": None if usage is None else EntryTokenUsageEntity(**usage),
        }


class AppendCustomInput(StrictSerializer):
    parent_id = _parent()
    custom_type = serializers.CharField(max_length=255)
    data = JSONObjectField(  # type: ignore[assignment]
        required=False, default=dict, help_text="Extension state (object)."
    )

    def store_args(self) -> tuple[Any, ...]:
        data = self.validated_data
        return (data["parent_id"], data["custom_type"], _json_text(data["data"]))


class AppendCustomMessageInput(StrictSerializer):
    parent_id = _parent()
    custom_type = serializers.CharField(max_length=255)
    content = _text(allow_blank=True)
    display = serializers.BooleanField()
    details = JSONObjectField(required=False, allow_null=True, default=None)

    def store_args(self) -> tuple[Any, ...]:
        data = self.validated_data
        return (
            data["parent_id"],
            data["custom_type"],
            data["content"],
            data["display"],
            data["details"],
        )


class AppendModelChangeInput(StrictSerializer):
    parent_id = _parent()
    provider = serializers.CharField(max_length=255, allow_blank=True)
    model = serializers.CharField(max_length=255, allow_blank=True)

    def store_args(self) -> tuple[Any, ...]:
        data = self.validated_data
        return (data["parent_id"], data["provider"], data["model"])


class AppendThinkingLevelChangeInput(StrictSerializer):
    parent_id = _parent()
    thinking_level = serializers.CharField(max_length=64, allow_blank=True)

    def store_args(self) -> tuple[Any, ...]:
        data = self.validated_data
        return (data["parent_id"], data["thinking_level"])


class AppendBranchSummaryInput(StrictSerializer):
    parent_id = _parent()
    from_id = serializers.CharField(max_length=128, required=False, allow_blank=True, default="")
    summary = _text(allow_blank=True)
    details = JSONObjectField(required=False, allow_null=True, default=None)
    from_hook = serializers.BooleanField(required=False, default=False)

    def store_args(self) -> tuple[Any, ...]:
        data = self.validated_data
        return (
            data["parent_id"],
            data["from_id"],
            data["summary"],
            data["details"],
            data["from_hook"],
        )


class AppendLabelInput(StrictSerializer):
    parent_id = _parent()
    target_id = serializers.CharField(max_length=128)
    label = _text(  # type: ignore[assignment]
        max_length=500, allow_null=True, allow_blank=True, help_text="null clears it"
    )

    def store_args(self) -> tuple[Any, ...]:
        data = self.validated_data
        return (data["parent_id"], data["target_id"], data["label"])


class AppendSessionInfoInput(StrictSerializer):
    parent_id = _parent()
    name = _text(max_length=500, allow_blank=True)

    def store_args(self) -> tuple[Any, ...]:
        data = self.validated_data
        return (data["parent_id"], data["name"])


class AppendCompactionInputSerializer(StrictSerializer):
    parent_id = _parent()
    summary = _text(allow_blank=True)
    operation_id = serializers.CharField(
        max_length=255, help_text="Makes the append idempotent: a replay returns the stored entry."
    )
    first_kept_entry_id = serializers.CharField(
        max_length=128, required=False, allow_blank=True, default=""
    )
    tokens_before = serializers.IntegerField(
        required=False, default=0, min_value=0, max_value=INT64_MAX
    )
    details = JSONObjectField(required=False, allow_null=True, default=None)
    from_hook = serializers.BooleanField(required=False, default=False)

    def compaction(self, session_id: str) -> AppendCompactionInput:
        return AppendCompactionInput(session_id=session_id, **self.validated_data)


class MessagePartOutput(serializers.Serializer[Any]):
    type = serializers.CharField()
    text = serializers.CharField()
    mime_type = serializers.CharField()
    name = serializers.CharField()
    data = Base64Field(help_text="base64 bytes")  # type: ignore[assignment]
    width = serializers.IntegerField()
    height = serializers.IntegerField()


class MessageOutput(serializers.Serializer[Any]):
    role = serializers.CharField()
    content = serializers.CharField()
    provider = serializers.CharField()
    model = serializers.CharField()
    parts = MessagePartOutput(many=True)
    timestamp = serializers.DateTimeField(allow_null=True)


class EntrySerializer(serializers.Serializer[Any]):
    """One entry of a session's tree (``message`` is null when it carries none)."""

    id = serializers.CharField()
    seq = serializers.IntegerField()
    session_id = serializers.CharField()
    parent_id = serializers.CharField(allow_null=True)
    type = serializers.CharField()
    created_at = serializers.DateTimeField()
    message = serializers.SerializerMethodField()
    custom_type = serializers.CharField()
    data = serializers.SerializerMethodField()  # type: ignore[assignment]
    summary = serializers.CharField()
    tool_name = serializers.CharField()
    tool_status = serializers.CharField()
    tool_args_json = serializers.CharField()
    token_estimate = serializers.IntegerField()
    model_facing = serializers.BooleanField()
    display = serializers.BooleanField()
    compaction_first_kept_entry_id = serializers.CharField()
    compaction_tokens_before = serializers.IntegerField()
    branch_from_entry_id = serializers.CharField()
    operation_id = serializers.CharField()

    def to_representation(self, instance: Any) -> dict[str, Any]:
        # Hand-written on purpose: this runs once per appended entry (and once
        # per entry of a page or a follow stream), and DRF's generic path deep-
        # copies every declared field of every nested serializer per call,
        # which was most of an append's CPU time. The declared fields above
        # still describe the shape for the schema; ``test_entry_fast_path``
        # checks both agree.
        return entry_payload(instance)

    @extend_schema_field(MessageOutput(allow_null=True))
    def get_message(self, obj: Any) -> dict[str, Any] | None:
        """The message the entry carries, or null."""
        if not obj.message.role:
            return None
        return MessageOutput(obj.message).data

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_data(self, obj: Any) -> dict[str, Any]:
        """The entry's data object (caller keys preserved, derived keys added)."""
        return obj.data  # type: ignore[no-any-return]


def _stamp(value: Any) -> str | None:
    """A datetime as DRF renders it (ISO 8601, UTC as ``Z``)."""
    if value is None:
        return None
    text: str = value.isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def _parts(parts: Any) -> list[dict[str, Any]]:
    return [
        {
            "type": part.type,
            "text": part.text,
            "mime_type": part.mime_type,
            "name": part.name,
            "data": base64.b64encode(part.data).decode("ascii") if part.data else "",
            "width": part.width,
            "height": part.height,
        }
        for part in parts
    ]


def entry_payload(entry: Any) -> dict[str, Any]:
    """The JSON form of an ``EntryEntity`` (what :class:`EntrySerializer` renders)."""
    message = entry.message
    return {
        "id": entry.id,
        "seq": entry.seq,
        "session_id": entry.session_id,
        "parent_id": entry.parent_id,
        "type": entry.type,
        "created_at": _stamp(entry.created_at),
        "message": None
        if not message.role
        else {
            "role": message.role,
            "content": message.content,
            "provider": message.provider,
            "model": message.model,
            "parts": _parts(message.parts),
            "timestamp": _stamp(message.timestamp),
        },
        "custom_type": entry.custom_type,
        "data": entry.data,
        "summary": entry.summary,
        "tool_name": entry.tool_name,
        "tool_status": entry.tool_status,
        "tool_args_json": entry.tool_args_json,
        "token_estimate": entry.token_estimate,
        "model_facing": entry.model_facing,
        "display": entry.display,
        "compaction_first_kept_entry_id": entry.compaction_first_kept_entry_id,
        "compaction_tokens_before": entry.compaction_tokens_before,
        "branch_from_entry_id": entry.branch_from_entry_id,
        "operation_id": entry.operation_id,
    }


class EntryPageSerializer(serializers.Serializer[Any]):
    next = serializers.URLField(allow_null=True, help_text="The next page, or null at the end.")
    last_seq = serializers.IntegerField(
        help_text="The position of the last entry returned (or the cursor given): tail with "
        "?after=last_seq."
    )
    results = EntrySerializer(many=True)


class TreeRowSerializer(serializers.Serializer[Any]):
    """One entry of the tree, listed flat depth-first (no nesting: chains can be 100,000 deep)."""

    depth = serializers.IntegerField(help_text="0 for a root, its parent's depth + 1 otherwise.")
    child_count = serializers.IntegerField(help_text="How many entries have this one as parent.")
    entry = EntrySerializer()

    def to_representation(self, instance: Any) -> dict[str, Any]:
        # The entry's fast path (see EntrySerializer): DRF's generic nesting
        # deep-copies every field per row, which dominated a 1,000-row page.
        return {
            "depth": instance.depth,
            "child_count": instance.child_count,
            "entry": entry_payload(instance.entry),
        }


class TreePageSerializer(serializers.Serializer[Any]):
    next = serializers.URLField(allow_null=True, help_text="The next page, or null at the end.")
    results = TreeRowSerializer(many=True)


class BranchPageSerializer(serializers.Serializer[Any]):
    next = serializers.URLField(
        allow_null=True,
        help_text="The part of the path above these entries (towards the root), or null when "
        "the first result is a root.",
    )
    results = EntrySerializer(many=True)


class SessionMessageSerializer(serializers.Serializer[Any]):
    id = serializers.CharField()
    session_id = serializers.CharField()
    entry_id = serializers.CharField()
    sender = serializers.CharField()
    role = serializers.CharField()
    created_at = serializers.DateTimeField()
    content = serializers.CharField()
    provider = serializers.CharField()
    model = serializers.CharField()
    parts = MessagePartOutput(many=True)


class MessagePageSerializer(serializers.Serializer[Any]):
    next = serializers.URLField(allow_null=True, help_text="The next page, or null at the end.")
    results = SessionMessageSerializer(many=True)


class UsageOutput(serializers.Serializer[Any]):
    context_window = serializers.IntegerField()
    context_tokens = serializers.IntegerField()
    input_tokens = serializers.IntegerField()
    output_tokens = serializers.IntegerField()


class UsageAnchorSerializer(serializers.Serializer[Any]):
    entry_id = serializers.CharField()
    message_index = serializers.IntegerField()
    usage = UsageOutput()
    provider = serializers.CharField()
    model = serializers.CharField()


class ContextSerializer(serializers.Serializer[Any]):
    """What the model would see at an entry."""

    messages = MessageOutput(many=True)
    provider = serializers.CharField()
    model = serializers.CharField()
    thinking_level = serializers.CharField()
    usage_anchor = UsageAnchorSerializer(allow_null=True)


# -- loop: steps, grants, snapshot -----------------------------------------------------


class StepInput(StrictSerializer):
    step_index = serializers.IntegerField(min_value=0, max_value=INT32_MAX, default=0)
    step_type = serializers.CharField(max_length=64)
    content = _text(required=False, allow_blank=True, default="")
    tool_args = serializers.JSONField(
        required=False,
        allow_null=True,
        default=None,
        help_text="Any JSON value; stored as its compact JSON text.",
    )
    duration_ms = serializers.IntegerField(min_value=0, max_value=INT64_MAX, default=0)
    prompt_tokens = serializers.IntegerField(min_value=0, max_value=INT64_MAX, default=0)
    completion_tokens = serializers.IntegerField(min_value=0, max_value=INT64_MAX, default=0)
    created_at = serializers.DateTimeField(required=False, allow_null=True, default=None)

    def validate_tool_args(self, value: Any) -> Any:
        _check_json_text(value)
        return value

    def step(self, session_id: str) -> RunStep:
        data = dict(self.validated_data)
        args = data.pop("tool_args")
        tool_args = (
            None
            if args is None
            else json.dumps(args, separators=(",", ":"), ensure_ascii=False).encode()
        )
        return RunStep(session_id=session_id, tool_args=tool_args, **data)


class StepSerializer(serializers.Serializer[Any]):
    """One recorded step (``tool_args`` is the stored JSON, decoded)."""

    step_index = serializers.IntegerField()
    step_type = serializers.CharField()
    content = serializers.CharField()
    tool_args = serializers.SerializerMethodField()
    duration_ms = serializers.IntegerField()
    prompt_tokens = serializers.IntegerField()
    completion_tokens = serializers.IntegerField()
    created_at = serializers.DateTimeField()

    @extend_schema_field(OpenApiTypes.ANY)
    def get_tool_args(self, obj: Any) -> Any:
        """The tool arguments as JSON (null when none were recorded)."""
        raw = obj.tool_args
        if raw is None:
            return None
        try:
            return json.loads(bytes(raw))
        except (ValueError, UnicodeDecodeError):
            return None


class LastNQuery(serializers.Serializer[Any]):
    n = serializers.IntegerField(min_value=1, max_value=100_000, default=50)


class GrantInput(StrictSerializer):
    prompt = _text(max_length=100_000)


class GrantSerializer(serializers.Serializer[Any]):
    """One approval: the exact prompt and when it was (last) approved."""

    prompt = serializers.CharField()
    granted_at = serializers.DateTimeField(help_text="Refreshed when the prompt is approved again.")


class GrantCheckSerializer(serializers.Serializer[Any]):
    granted = serializers.BooleanField()


class RevokeSerializer(serializers.Serializer[Any]):
    revoked = serializers.IntegerField(help_text="How many approvals were forgotten.")


class FinalizeInput(StrictSerializer):
    status = serializers.CharField(max_length=64, allow_blank=True)
    prompt_tokens = serializers.IntegerField(min_value=0, max_value=INT64_MAX, default=0)
    completion_tokens = serializers.IntegerField(min_value=0, max_value=INT64_MAX, default=0)
    step_count = serializers.IntegerField(min_value=0, max_value=INT64_MAX, default=0)
    duration_ms = serializers.IntegerField(min_value=0, max_value=INT64_MAX, default=0)
    data_bytes_carried = serializers.IntegerField(min_value=0, max_value=INT64_MAX, default=0)

    def summary(self) -> FinalizeSummary:
        return FinalizeSummary(**self.validated_data)


class SnapshotSerializer(StrictSerializer):
    data = serializers.JSONField(  # type: ignore[assignment]
        allow_null=True, help_text="The working-memory snapshot (JSON)."
    )

    def validate_data(self, value: Any) -> Any:
        _check_json_text(value)
        return value


# -- holds -----------------------------------------------------------------------------


class HoldSerializer(serializers.Serializer[Any]):
    held = serializers.BooleanField()
    pid = serializers.IntegerField(allow_null=True)
    host = serializers.CharField(allow_null=True)
    since = serializers.DateTimeField(allow_null=True)
    heartbeat = serializers.DateTimeField(allow_null=True)


class BreakHoldSerializer(serializers.Serializer[Any]):
    broken = serializers.BooleanField(help_text="Whether a hold was removed.")


# -- documents ---------------------------------------------------------------------------


class DocumentSerializer(serializers.Serializer[Any]):
    namespace = serializers.CharField()
    key = serializers.CharField()
    value = serializers.SerializerMethodField()
    updated_at = serializers.DateTimeField(allow_null=True)

    @extend_schema_field(OpenApiTypes.ANY)
    def get_value(self, obj: Any) -> Any:
        """The stored JSON value (any shape)."""
        return json.loads(obj.value_json)


class DocumentPutInput(StrictSerializer):
    value = serializers.JSONField(help_text="Any JSON value.")

    def validate_value(self, value: Any) -> Any:
        _check_json_text(value)
        return value

    def value_json(self) -> str:
        return json.dumps(self.validated_data["value"], separators=(",", ":"), ensure_ascii=False)
