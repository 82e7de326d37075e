"""The demo project as an app, so it can carry its own management commands."""

from __future__ import annotations

from django.apps import AppConfig


class ProjectConfig(AppConfig):
    name = "project"
    verbose_name = "agentstore demo"
