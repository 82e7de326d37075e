"""agentstore's REST API: every store over Django REST framework.

Include it under a prefix of your choosing (the demo uses ``/api/v1/``)::

    path("api/v1/", include("agentstore.api.urls")),

Views are thin: an input serializer parses the body, one store call does the
work, an output serializer renders the value object the store returned. Owner
scoping lives in :mod:`agentstore.selectors`; every failure is rendered by
:func:`agentstore.api.exceptions.exception_handler` as
``{"error": {"code", "message", "details"}}``. See ``docs/api.md``.
"""

from __future__ import annotations
