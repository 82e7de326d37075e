"""Request bodies of the API: JSON only, bounded before anything reads them.

Every agentstore view parses with :data:`PARSER_CLASSES` — JSON only — and
refuses, before authentication or anything else can read the body, a body it
would not parse (:func:`body_refusal`): another media type (multipart, forms)
is 415 ``unsupported_media_type``, a ``Content-Length`` over
``DATA_UPLOAD_MAX_MEMORY_SIZE`` 413 ``request_too_large``, a body without a
length (``Transfer-Encoding: chunked``) 411 ``length_required``. Why before:
DRF's session authentication checks CSRF through ``request.POST``, which parses
the body, and Django's multipart parser spools a file upload to a temporary
file whatever its size — a 200 MB upload was written to disk before the 400
that refused it. The same check runs in front of Django's ASGI handler
(:mod:`agentstore.asgi`), which otherwise reads a whole body into a spooled
temporary file before routing it. The JSON parser then reads
at most ``DATA_UPLOAD_MAX_MEMORY_SIZE`` bytes (413 ``request_too_large`` past
it, before anything is decoded), refuses what Python's parser would otherwise
let through or crash on — ``NaN``/``Infinity``, ``1e999`` (read as infinity),
and nesting deeper than the ``JSON_MAX_DEPTH`` setting (400 ``parse_error``
instead of a ``RecursionError`` 500) — and answers in the one error shape
(docs/api.md "Errors", docs/operations.md "Request limits")::

    class MyView(APIView):
        parser_classes = PARSER_CLASSES
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import IO, Any

from django.conf import settings
from rest_framework import parsers, status
from rest_framework.exceptions import APIException, ParseError, UnsupportedMediaType
from rest_framework.utils.mediatypes import media_type_matches

from agentstore.validation import json_depth, parse_json

__all__ = [
    "PARSER_CLASSES",
    "LengthRequired",
    "RequestTooLarge",
    "StrictJSONParser",
    "body_limit",
    "body_refusal",
]


class RequestTooLarge(APIException):
    """The body is larger than ``DATA_UPLOAD_MAX_MEMORY_SIZE``."""

    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "Request body is too large."
    default_code = "request_too_large"


class LengthRequired(APIException):
    """A body sent without ``Content-Length`` (chunked), which the API does not read."""

    status_code = status.HTTP_411_LENGTH_REQUIRED
    default_detail = "Send the request body with a Content-Length header (not chunked)."
    default_code = "length_required"


def body_limit() -> int | None:
    """The largest body the API reads, in bytes (``None``: Django's bound is off)."""
    limit: int | None = getattr(settings, "DATA_UPLOAD_MAX_MEMORY_SIZE", None)
    return limit


def body_refusal(
    content_type: str,
    content_length: str,
    transfer_encoding: str,
    parsers_: Sequence[type[parsers.BaseParser]],
) -> APIException | None:
    """Why a request's body must not be read, from its headers alone; ``None``: read it.

    The one policy of both doors (the views' ``initial`` and
    :class:`agentstore.asgi.ASGIHandler`): a body is there when it has a
    non-zero length or a transfer encoding; it must have a length within
    :func:`body_limit` and a media type one of ``parsers_`` takes. A request
    without a body (a GET, an empty POST) passes whatever it declares.
    """
    try:
        length = int(content_length) if content_length.strip() else 0
    except ValueError:
        return ParseError("Content-Length is not a number.")
    if length < 0:
        return ParseError("Content-Length is negative.")
    chunked = bool(transfer_encoding.strip())
    if length == 0 and not chunked:
        return None
    if not any(media_type_matches(parser.media_type, content_type) for parser in parsers_):
        return UnsupportedMediaType(content_type or "(none)")
    if chunked:
        return LengthRequired()
    limit = body_limit()
    if limit is not None and length > limit:
        return RequestTooLarge(
            f"Request body is larger than {limit} bytes (DATA_UPLOAD_MAX_MEMORY_SIZE)."
        )
    return None


class StrictJSONParser(parsers.JSONParser):
    """DRF's JSON parser with a size bound, a depth bound and no non-finite numbers."""

    def parse(
        self,
        stream: IO[Any] | None,
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        encoding = str((parser_context or {}).get("encoding") or settings.DEFAULT_CHARSET)
        try:
            # Only text codecs: a bytes-to-bytes codec (``bz2_codec``) would
            # decompress past the size bound.
            "".encode(encoding)
        except (LookupError, UnicodeError):
            raise ParseError(f"Unsupported charset {encoding!r} in the Content-Type.") from None
        limit = body_limit()
        if stream is None:
            raw = b""
        elif limit is None:
            raw = stream.read()
        else:
            # Read one byte past the limit: enough to know, never the whole body.
            raw = stream.read(limit + 1)
            if len(raw) > limit:
                raise RequestTooLarge(
                    f"Request body is larger than {limit} bytes (DATA_UPLOAD_MAX_MEMORY_SIZE)."
                )
        try:
            value = parse_json(raw.decode(encoding))
        except (ValueError, UnicodeDecodeError) as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        from agentstore.conf import agentstore_settings

        depth_limit = int(agentstore_settings.JSON_MAX_DEPTH)
        if json_depth(value) > depth_limit:
            raise ParseError(
                f"JSON nests deeper than {depth_limit} levels (the JSON_MAX_DEPTH setting)."
            )
        return value


#: What every agentstore view parses with: JSON only (docs/api.md "Strict input").
PARSER_CLASSES: list[type[parsers.BaseParser]] = [StrictJSONParser]
