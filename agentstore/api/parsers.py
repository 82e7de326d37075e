"""Request body parsers of the API: bounded, strict JSON (and DRF's form parsers).

Every agentstore view parses with :data:`PARSER_CLASSES`. The JSON parser reads
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

from collections.abc import Mapping
from typing import IO, Any

from django.conf import settings
from rest_framework import parsers, status
from rest_framework.exceptions import APIException, ParseError

from agentstore.validation import json_depth, parse_json

__all__ = ["PARSER_CLASSES", "RequestTooLarge", "StrictJSONParser"]


class RequestTooLarge(APIException):
    """The body is larger than ``DATA_UPLOAD_MAX_MEMORY_SIZE``."""

    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "Request body is too large."
    default_code = "request_too_large"


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
        limit: int | None = getattr(settings, "DATA_UPLOAD_MAX_MEMORY_SIZE", None)
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


#: What every agentstore view parses with.
PARSER_CLASSES: list[type[parsers.BaseParser]] = [
    StrictJSONParser,
    parsers.FormParser,
    parsers.MultiPartParser,
]
