"""What every agentstore viewset shares: the defaults, schema helpers, session lookup.

The defaults every view sets itself (permissions, the body gate, the error
shape) are :class:`agentstore.api.defaults.AgentStoreViewDefaults`.

The session lookup is the one security gate of every session-bound endpoint:
``session_or_404`` answers ``no_session`` alike for a missing session and for
someone else's, so an id never tells a stranger that a session exists.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import viewsets
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agentstore.api.defaults import AgentStoreAPIView, AgentStoreViewDefaults
from agentstore.api.exceptions import ErrorSerializer, error_response, exception_handler
from agentstore.api.schema import AgentStoreAutoSchema
from agentstore.exceptions import NoSession, WrongSessionKind
from agentstore.models import Session
from agentstore.selectors.sessions import visible_session

__all__ = [
    "ENTRY_ID",
    "AgentStoreAPIView",
    "AgentStoreViewDefaults",
    "AgentStoreViewSetMixin",
    "errors",
    "not_found_view",
    "session_of_kind",
]

_ERROR_TEXT = {
    400: "Bad input; `details.field` names it.",
    401: "Not authenticated.",
    403: "Not allowed (staff only).",
    404: "No such resource, or not yours (or no such page of a collection).",
    409: "Conflict with the current state (`details` says what won), or a session of the "
    "wrong kind (`wrong_session_kind`).",
    413: "The request body is larger than the server accepts.",
    423: "The session is held by another writer.",
    429: "Too many live followers for you on this server process; close one.",
    503: "Busy: the database writer queue or this process's follower capacity; retry.",
}


def errors(*codes: int) -> dict[int, OpenApiResponse]:
    """Schema entries for error responses (401 is always possible)."""
    return {
        code: OpenApiResponse(ErrorSerializer, description=_ERROR_TEXT[code])
        for code in sorted({401, *codes})
    }


ENTRY_ID = OpenApiParameter(
    "entry_id", str, OpenApiParameter.PATH, description="An entry id of the session."
)


if TYPE_CHECKING:
    _Base = viewsets.GenericViewSet[Any]
else:
    _Base = object


class AgentStoreViewSetMixin(AgentStoreViewDefaults, _Base):
    """The viewsets' base: the defaults above, path lookups and the schema with links."""

    lookup_value_regex = "[^/]+"
    # Adds the OpenAPI links between operations (agentstore/api/schema.py).
    schema = AgentStoreAutoSchema()

    def named_session_or_404(self, session_id: str, field: str) -> Session:
        """The session a request *names* in ``field`` (a body key or query parameter).

        The same gate as :meth:`session_or_404`; the 404 names the field too
        (``no such session: … (owner_session_id)``), so a caller knows which
        of the ids it sent was not there.
        """
        try:
            return self.session_or_404(session_id)
        except NoSession:
            raise NoSession(f"no such session: {session_id} ({field})") from None

    def session_or_404(self, session_id: str | None = None, *kinds: str) -> Session:
        """The session named in the URL if the user may see it, else ``NoSession`` (a 404).

        With ``kinds``, a visible session of another kind is ``WrongSessionKind``
        (409): one answer for every request made on the wrong kind (a step for
        a tree session, an append to a loop session), decided here rather than
        by whichever store the request reaches first (decision record 0053).
        """
        sid = session_id if session_id is not None else str(self.kwargs.get("pk", ""))
        return session_of_kind(self.request.user, sid, *kinds)


def session_of_kind(user: Any, session_id: str, *kinds: str) -> Session:
    """The session if ``user`` may see it (else ``NoSession``), of one of ``kinds`` if given."""
    session = visible_session(user, session_id)
    if session is None:
        raise NoSession(f"no such session: {session_id}")
    if kinds and session.kind not in kinds:
        raise WrongSessionKind(
            session_id=session.id, kind=session.kind, expected=" or ".join(kinds)
        )
    return session


class AgentStoreViewSet(AgentStoreViewSetMixin, viewsets.GenericViewSet):  # type: ignore[type-arg]
    """Base of the resource viewsets."""


@csrf_exempt
def not_found_view(request: Any, *args: Any, **kwargs: Any) -> Response:
    """Answer unknown API paths in the one error shape (not Django's HTML page).

    Exempt from CSRF: the check would otherwise answer a POST/PUT/PATCH/DELETE
    to an unknown path with Django's HTML 403 before this view could say 404.
    Nothing is written here, so there is nothing to forge; real endpoints keep
    DRF's CSRF check for session-authenticated writes.
    """
    return _NotFound.as_view()(request)


class _NotFound(APIView):
    authentication_classes: list[Any] = []
    permission_classes: list[Any] = []

    def get_exception_handler(self) -> Callable[[Exception, dict[str, Any]], Response | None]:
        return exception_handler

    def _answer(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        return error_response(404, "not_found", "Not found.")

    get = post = put = patch = delete = head = options = _answer
