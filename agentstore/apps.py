"""The Django app configuration of agentstore."""

from __future__ import annotations

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class AgentStoreConfig(AppConfig):
    name = "agentstore"
    verbose_name = _("Agent store")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Registers the system checks (agentstore.W001, agentstore.W002).
        from agentstore import checks  # noqa: F401
