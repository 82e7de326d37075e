"""URLs of the agentstore API; include them under any prefix::

    path("api/v1/", include("agentstore.api.urls"))

No trailing slashes (``/sessions/{id}/follow``). Anything else under the prefix
answers 404 in the API's error shape.
"""

from __future__ import annotations

from typing import Any

from django.urls import path, re_path
from rest_framework.routers import APIRootView, DefaultRouter

from agentstore.api.defaults import AgentStoreViewDefaults
from agentstore.api.views.base import not_found_view
from agentstore.api.views.documents import DocumentListView, DocumentView
from agentstore.api.views.log import LogSessionViewSet, RefListView, RefLogView, RefView
from agentstore.api.views.runs import RunViewSet
from agentstore.api.views.sessions import SessionViewSet
from agentstore.api.views.tasks import (
    AgentTaskViewSet,
    TaskViewSet,
    ToolTaskViewSet,
    WorkflowViewSet,
)

app_name = "agentstore-api"


class _APIRoot(AgentStoreViewDefaults, APIRootView):
    """The API root, with the same permissions and error shape as every other view."""


class _Router(DefaultRouter):
    """The router whose API root lists every collection, the plain views' too."""

    APIRootView = _APIRoot

    #: Collections served by plain views (root name → URL name).
    extra_collections = {"refs": "refs", "documents": "documents"}

    def get_api_root_view(self, api_urls: Any = None) -> Any:
        root = {
            prefix: self.routes[0].name.format(basename=basename)
            for prefix, _viewset, basename in self.registry
        }
        root.update(self.extra_collections)
        return self.APIRootView.as_view(api_root_dict=root)


router = _Router(trailing_slash=False)
router.register("sessions", SessionViewSet, basename="session")
router.register("tasks", TaskViewSet, basename="task")
router.register("tool-tasks", ToolTaskViewSet, basename="tool-task")
router.register("agent-tasks", AgentTaskViewSet, basename="agent-task")
router.register("workflows", WorkflowViewSet, basename="workflow")
router.register("log-sessions", LogSessionViewSet, basename="log-session")
router.register("runs", RunViewSet, basename="run")

urlpatterns = [
    *router.urls,
    path("documents", DocumentListView.as_view(), name="documents"),
    path("documents/<str:namespace>/<str:key>", DocumentView.as_view(), name="document"),
    path("refs", RefListView.as_view(), name="refs"),
    path("refs/<path:name>", RefView.as_view(), name="ref"),
    path("ref-log/<path:name>", RefLogView.as_view(), name="ref-log"),
    re_path(r"^.*$", not_found_view),
]
