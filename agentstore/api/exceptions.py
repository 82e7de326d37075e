"""One error shape for every failure: ``{"error": {"code", "message", "details"}}``.

Set it as DRF's ``EXCEPTION_HANDLER`` (the views also install it themselves, so
a host project that keeps DRF's default still gets the shape from agentstore)::

    REST_FRAMEWORK = {"EXCEPTION_HANDLER": "agentstore.api.exceptions.exception_handler"}

``code`` is the store exception's stable ``code`` (``no_session``, ``no_task``,
``stale_compaction_parent``, ``wrong_session_kind`` …) or DRF's own code
(``not_authenticated``, ``method_not_allowed``, ``throttled`` …); ``details``
carries what a client needs to act (the bad ``field``, the compaction
``winner_entry_id``, a ref's ``current`` target). A domain error's HTTP status
is its class's ``status`` (declared in ``agentstore/exceptions.py``, inherited by
subclasses).

A validation error has the same ``details`` whether DRF or a store refused the
input: ``field`` is the first bad field's path and ``fields`` maps *every* bad
field's path (``message.role``, ``parts[1].type``) to its messages, flat, so a
client can mark all of them at once (docs/api.md "One error shape").
"""

from __future__ import annotations

import logging
from dataclasses import asdict, is_dataclass
from typing import Any

from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.http import Http404
from rest_framework import exceptions as drf
from rest_framework import serializers, status
from rest_framework.response import Response

from agentstore import exceptions as errors

__all__ = [
    "ErrorBodySerializer",
    "ErrorSerializer",
    "api_error",
    "error_body",
    "error_response",
    "exception_handler",
]

logger = logging.getLogger("agentstore.api")


class ErrorBodySerializer(serializers.Serializer[Any]):
    code = serializers.CharField(help_text="Stable machine-readable code.")
    message = serializers.CharField(help_text="What went wrong, for people.")
    details = serializers.DictField(
        help_text="What a client needs to act: the bad field, a winner id, a current target.",
    )


class ErrorSerializer(serializers.Serializer[Any]):
    """The body of every error response."""

    error = ErrorBodySerializer()


def _encodable(value: Any) -> Any:
    """``value`` with every string made UTF-8 encodable (a lone surrogate as ``\\udXXX``).

    Error messages echo what the client sent (``"\\ud800" is not a valid
    choice.``, a field name that is a key of the body); a lone surrogate in
    them made the JSON renderer fail and the error an HTML 500. Iterative: the
    details mirror the body, whose depth only ``JSON_MAX_DEPTH`` bounds.
    """

    def clean(text: str) -> str:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return text.encode("utf-8", "backslashreplace").decode("utf-8")
        return text

    if isinstance(value, str):
        return clean(value)
    root: list[Any] = [value]
    stack: list[tuple[Any, Any]] = [(root, 0)]
    while stack:
        holder, key = stack.pop()
        item = holder[key]
        if isinstance(item, str):
            holder[key] = clean(item)
        elif isinstance(item, dict):
            copy = {clean(k) if isinstance(k, str) else k: v for k, v in item.items()}
            holder[key] = copy
            stack.extend((copy, k) for k in copy)
        elif isinstance(item, list | tuple):
            items = list(item)
            holder[key] = items
            stack.extend((items, index) for index in range(len(items)))
    return root[0]


def error_body(code: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    """The one error shape's body; every string in it can be encoded (see ``_encodable``)."""
    body = {"error": {"code": code, "message": message, "details": details or {}}}
    cleaned: dict[str, Any] = _encodable(body)
    return cleaned


def error_response(
    status_code: int,
    code: str,
    message: str,
    details: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> Response:
    """Build a response in the one error shape."""
    return Response(error_body(code, message, details), status=status_code, headers=headers)


def _plain(value: Any) -> Any:
    """A JSON-ready form of an error attribute (dataclass value objects become dicts)."""
    if is_dataclass(value) and not isinstance(value, type):
        return {key: _plain(item) for key, item in asdict(value).items()}
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    return str(value)


def _domain_details(exc: errors.AgentStoreError) -> dict[str, Any]:
    details: dict[str, Any] = {}
    field = getattr(exc, "field", "")
    if field:
        details["field"] = field
        if isinstance(exc, errors.ValidationError):
            details["fields"] = {field: [exc.message]}
    for name in (
        "winner_entry_id",
        "current",
        "name",
        "target",
        "limit",
        "session_id",
        "kind",
        "expected",
    ):
        value = getattr(exc, name, None)
        if value not in (None, ""):
            details[name] = _plain(value)
    return details


def _domain_status(exc: errors.AgentStoreError) -> int:
    # An error that declares no status is still the caller's business (a
    # refusal by a store), never a server fault: the base's 400.
    return int(exc.status)


def _join(path: str, key: Any) -> str:
    if isinstance(key, int) or (isinstance(key, str) and key.isdigit()):
        return f"{path}[{key}]"
    if key == "non_field_errors":
        return path
    return f"{path}.{key}" if path else str(key)


#: The ``details.fields`` key of errors about the body as a whole.
NON_FIELD = "non_field_errors"


def _flat_messages(detail: Any, path: str = "") -> dict[str, list[str]]:
    """Every (field path → messages) of a DRF validation detail, e.g. ``parts[1].type``.

    Iterative (a stack, not recursion): the detail mirrors the request body,
    whose depth only the parser's ``JSON_MAX_DEPTH`` bounds.
    """
    found: dict[str, list[str]] = {}
    stack: list[tuple[str, Any]] = [(path, detail)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, dict):
            # Reversed, so the stack pops them in the body's order.
            stack.extend((_join(where, key), value) for key, value in reversed(item.items()))
        elif isinstance(item, list):
            pending: list[tuple[str, Any]] = []
            for index, value in enumerate(item):
                if isinstance(value, dict | list):
                    # A list serializer reports every item, valid ones as {}.
                    pending.append((_join(where, index), value))
                elif value:
                    found.setdefault(where or NON_FIELD, []).append(str(value))
            stack.extend(reversed(pending))
        else:
            found.setdefault(where or NON_FIELD, []).append(str(item))
    return found


def _drf_response(exc: drf.APIException) -> Response:
    status_code, code, message, details, headers = api_error(exc)
    return error_response(status_code, code, message, details, headers)


def api_error(
    exc: drf.APIException,
) -> tuple[int, str, str, dict[str, Any], dict[str, str]]:
    """``(status, code, message, details, headers)`` of a DRF exception in the one shape.

    Also what :class:`agentstore.asgi.ASGIHandler` sends when it refuses a body
    before Django reads it.
    """
    headers: dict[str, str] = {}
    auth_header = getattr(exc, "auth_header", None)
    if auth_header:
        headers["WWW-Authenticate"] = auth_header
    wait = getattr(exc, "wait", None)
    if wait is not None:
        headers["Retry-After"] = str(int(wait))
    if isinstance(exc, drf.ValidationError):
        fields = _flat_messages(exc.detail)
        details: dict[str, Any] = {"fields": fields}
        first = next(iter(fields), NON_FIELD)
        if first != NON_FIELD:
            details["field"] = first
        text = "; ".join(
            " ".join(texts) if name == NON_FIELD else f"{name}: {' '.join(texts)}"
            for name, texts in fields.items()
        )
        text = text or "invalid input"
        return exc.status_code, "validation_error", text, details, headers
    codes = exc.get_codes()
    code = codes if isinstance(codes, str) else exc.default_code
    details = {"wait": wait} if wait is not None else {}
    return exc.status_code, str(code), str(exc.detail), details, headers


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response:
    """Render ``exc`` in the one error shape (DRF's ``EXCEPTION_HANDLER`` hook)."""
    if isinstance(exc, errors.AgentStoreError):
        status_code = _domain_status(exc)
        headers = {"Retry-After": "1"} if isinstance(exc, errors.DatabaseBusy) else None
        return error_response(status_code, exc.code, exc.message, _domain_details(exc), headers)
    if isinstance(exc, RequestDataTooBig):
        # Django's own body bound (forms, multipart, ``request.body``).
        return error_response(
            status.HTTP_413_REQUEST_ENTITY_TOO_LARGE, "request_too_large", str(exc) or "too large"
        )
    if isinstance(exc, TooManyFieldsSent | TooManyFilesSent):
        return error_response(status.HTTP_400_BAD_REQUEST, "too_many_fields", str(exc))
    if isinstance(exc, Http404):
        exc = drf.NotFound()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = drf.PermissionDenied()
    if isinstance(exc, drf.APIException):
        return _drf_response(exc)
    # A bug, not bad input: log it with the traceback and answer in the same
    # shape, without internals.
    logger.exception("unhandled error in %s", context.get("view"))
    return error_response(
        status.HTTP_500_INTERNAL_SERVER_ERROR, "server_error", "internal server error"
    )
