"""What every agentstore view sets itself: permissions, the body gate, the error shape.

Every view — viewsets, plain views, the API root — takes these from
:class:`AgentStoreViewDefaults`, never from the project's ``REST_FRAMEWORK``
defaults: an authenticated user is required (:mod:`agentstore.api.permissions`;
a new project's default is ``AllowAny``), the body is JSON and is refused
unread when it is not, or is too large (:func:`agentstore.api.parsers.body_refusal`),
and every error takes the one shape (:mod:`agentstore.api.exceptions`)::

    class MyView(AgentStoreAPIView):
        def get(self, request): ...

This module imports no models, so :mod:`agentstore.asgi` can recognise the
API's views before Django is set up.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agentstore.api.exceptions import exception_handler
from agentstore.api.parsers import PARSER_CLASSES, body_refusal
from agentstore.api.permissions import API_PERMISSIONS

__all__ = ["AgentStoreAPIView", "AgentStoreViewDefaults"]

if TYPE_CHECKING:
    _ViewBase = APIView
else:
    _ViewBase = object


class AgentStoreViewDefaults(_ViewBase):
    """What every agentstore view sets itself rather than take from the project's defaults."""

    #: A signed-in user, whatever ``DEFAULT_PERMISSION_CLASSES`` says (a new
    #: project's is ``AllowAny``); staff-only views and actions narrow it.
    permission_classes = API_PERMISSIONS
    parser_classes = PARSER_CLASSES

    def get_exception_handler(self) -> Callable[[Exception, dict[str, Any]], Response | None]:
        # The error shape even when the host keeps DRF's default handler.
        return exception_handler

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        # Before authentication: SessionAuthentication's CSRF check reads
        # ``request.POST``, which would parse (and spool) a multipart body.
        # A method the view does not serve stays DRF's 405 (nothing reads its body).
        method = str(request.method).lower()
        if method not in self.http_method_names or not hasattr(self, method):
            super().initial(request, *args, **kwargs)
            return
        meta = request.META
        refusal = body_refusal(
            str(meta.get("CONTENT_TYPE", "")),
            str(meta.get("CONTENT_LENGTH", "")),
            str(meta.get("HTTP_TRANSFER_ENCODING", "")),
            self.parser_classes,
        )
        if refusal is not None:
            raise refusal
        super().initial(request, *args, **kwargs)


class AgentStoreAPIView(AgentStoreViewDefaults, APIView):
    """Base of the plain (non-viewset) views: documents, refs, the ref log."""
