"""Who may call the API: agentstore's own rule, whatever the project's defaults are.

Every agentstore view names its permission classes itself instead of taking
DRF's ``DEFAULT_PERMISSION_CLASSES``: a new project's default is ``AllowAny``,
and the API must not become writable by anonymous clients because the host
project never set a default (docs/api.md, "Authentication and who sees what")::

    class MyView(AgentStoreAPIView):             # API_PERMISSIONS: a signed-in user
        ...

    def get_permissions(self):                   # a staff-only action
        return [permission() for permission in STAFF_PERMISSIONS]

How a client *authenticates* stays the project's choice
(``DEFAULT_AUTHENTICATION_CLASSES``: tokens, sessions, JWT, …); the system
checks in :mod:`agentstore.checks` say when none of them can authenticate an
API client.
"""

from __future__ import annotations

from rest_framework.permissions import BasePermission, IsAdminUser, IsAuthenticated

__all__ = ["API_PERMISSIONS", "STAFF_PERMISSIONS"]

#: Every endpoint: an authenticated user (owner scoping then decides what it sees).
API_PERMISSIONS: list[type[BasePermission]] = [IsAuthenticated]

#: Staff-only endpoints and actions (documents in any namespace, ``claim-next``,
#: ``recover-expired``): authenticated first, so an anonymous call is 401, not 403.
STAFF_PERMISSIONS: list[type[BasePermission]] = [IsAuthenticated, IsAdminUser]
