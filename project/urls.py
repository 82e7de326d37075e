"""URLs of the demo project: a home page, the admin, the API with its schema and Swagger UI."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from django.views.generic import TemplateView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

# The demo's admin names the product, not "Django administration".
admin.site.site_header = "agentstore"
admin.site.site_title = "agentstore"
admin.site.index_title = "Inspect agent sessions, holds, refs and tasks"

urlpatterns = [
    path("", TemplateView.as_view(template_name="home.html"), name="home"),
    path("admin/", admin.site.urls),
    path("api/v1/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path(
        "api/v1/schema/swagger-ui/",
        SpectacularSwaggerView.as_view(url_name="api-schema"),
        name="api-swagger-ui",
    ),
    path("api-auth/", include("rest_framework.urls")),
    path("api/v1/", include("agentstore.api.urls")),
]
