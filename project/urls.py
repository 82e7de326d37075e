"""URLs of the demo project: a home page, the admin and (as they land) the API."""

from __future__ import annotations

from django.contrib import admin
from django.urls import path
from django.views.generic import TemplateView

urlpatterns = [
    path("", TemplateView.as_view(template_name="home.html"), name="home"),
    path("admin/", admin.site.urls),
]
