"""URLs of the agentstore API; include them under any prefix::

    path("api/v1/", include("agentstore.api.urls"))

No trailing slashes (``/sessions/{id}/follow``). Anything else under the prefix
answers 404 in the API's error shape.
"""

from __future__ import annotations

from django.urls import path, re_path
from rest_framework.routers import DefaultRouter

from agentstore.api.views.base import not_found_view
from agentstore.api.views.documents import DocumentView
from agentstore.api.views.log import LogSessionViewSet, RefListView, RefLogView, RefView
from agentstore.api.views.sessions import SessionViewSet
from agentstore.api.views.tasks import (
    AgentTaskViewSet,
    TaskViewSet,
    ToolTaskViewSet,
    WorkflowViewSet,
)

app_name = "agentstore-api"

router = DefaultRouter(trailing_slash=False)
router.register("sessions", SessionViewSet, basename="session")
router.register("tasks", TaskViewSet, basename="task")
router.register("tool-tasks", ToolTaskViewSet, basename="tool-task")
router.register("agent-tasks", AgentTaskViewSet, basename="agent-task")
router.register("workflows", WorkflowViewSet, basename="workflow")
router.register("log-sessions", LogSessionViewSet, basename="log-session")

urlpatterns = [
    *router.urls,
    path("documents/<str:namespace>/<str:key>", DocumentView.as_view(), name="document"),
    path("refs", RefListView.as_view(), name="refs"),
    path("refs/<path:name>", RefView.as_view(), name="ref"),
    path("ref-log/<path:name>", RefLogView.as_view(), name="ref-log"),
    re_path(r"^.*$", not_found_view),
]
