"""An ASGI handler that refuses an API request's body before reading it.

Django's ASGI handler reads the whole request body — any size, any media type
— into a spooled temporary file *before* it routes the request, so under
uvicorn a 200 MB multipart upload to the API was written to disk before the
view could refuse it. This handler looks at the request's headers first: when
the path is an agentstore API view, it applies the views' own rule
(:func:`agentstore.api.parsers.body_refusal`: JSON only, a ``Content-Length``
within ``DATA_UPLOAD_MAX_MEMORY_SIZE``, no chunked body) and answers 413, 415
or 411 in the API's error shape without reading a byte of the body. Every
other request, and every accepted one, is Django's handler unchanged::

    # asgi.py
    from agentstore.asgi import get_asgi_application

    application = get_asgi_application()

(docs/operations.md, "Request limits").
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

import django
from django.core.handlers.asgi import ASGIHandler as DjangoASGIHandler
from django.core.handlers.asgi import get_script_prefix
from django.urls import Resolver404, resolve

if TYPE_CHECKING:
    from rest_framework.exceptions import APIException

__all__ = ["ASGIHandler", "get_asgi_application"]


def _header(scope: dict[str, Any], name: bytes) -> str:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return ""


class ASGIHandler(DjangoASGIHandler):
    """Django's ASGI handler, with the API's body rule applied before the body is read."""

    def __init__(self) -> None:
        super().__init__()
        # Imported once Django is set up (get_asgi_application): DRF reads the
        # settings when imported, and a project's asgi.py imports this module
        # before it names its settings module.
        from agentstore.api import defaults, exceptions, parsers

        self.view_base = defaults.AgentStoreViewDefaults
        self.body_refusal = parsers.body_refusal
        self.api_error = exceptions.api_error
        self.error_body = exceptions.error_body

    def api_view(self, path_info: str, method: str) -> Any:
        """The agentstore view class that serves ``method`` on ``path_info``, else ``None``."""
        try:
            match = resolve(path_info)
        except Resolver404:
            return None
        cls = getattr(match.func, "cls", None)
        if not (isinstance(cls, type) and issubclass(cls, self.view_base)):
            return None
        actions = getattr(match.func, "actions", None)
        served = method in actions if actions else hasattr(cls, method)
        # A method the view does not serve is its 405, as in the view's own gate.
        return cls if served else None

    def refusal(self, scope: dict[str, Any]) -> APIException | None:
        """Why the request's body must not be read (an API view's rule), else ``None``."""
        script_name = get_script_prefix(scope)
        path_info = str(scope.get("path", ""))
        if script_name and path_info.startswith(script_name):
            path_info = path_info[len(script_name) :]
        view = self.api_view(path_info or "/", str(scope.get("method", "")).lower())
        if view is None:
            return None
        return self.body_refusal(
            _header(scope, b"content-type"),
            _header(scope, b"content-length"),
            _header(scope, b"transfer-encoding"),
            view.parser_classes,
        )

    async def handle(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        refused = self.refusal(scope)
        if refused is None:
            await super().handle(scope, receive, send)
            return
        status, code, message, details, headers = self.api_error(refused)
        body = json.dumps(self.error_body(code, message, details)).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    # The unread body stays on the socket: end the connection.
                    (b"connection", b"close"),
                    *[(k.lower().encode(), v.encode()) for k, v in headers.items()],
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def get_asgi_application() -> ASGIHandler:
    """Django's ``get_asgi_application`` with :class:`ASGIHandler`."""
    django.setup(set_prefix=False)
    return ASGIHandler()
