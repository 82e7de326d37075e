"""The Django app configuration of agentstore."""

from __future__ import annotations

from typing import Any

from django.apps import AppConfig
from django.utils.translation import gettext_lazy as _


class AgentStoreConfig(AppConfig):
    name = "agentstore"
    verbose_name = _("Agent store")
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Registers the system checks (agentstore.W001-W003, agentstore.E001).
        from django.db.backends.signals import connection_created
        from django.db.models.signals import post_migrate

        from agentstore import checks  # noqa: F401
        from agentstore.runs import execution  # noqa: F401 - the worker's "run" handler
        from agentstore.serving import check_follow_cap

        # A gunicorn worker loads the app after it set itself up: a follow cap
        # its threads cannot carry stops it here, before it serves anything.
        check_follow_cap()

        # Search matches the unindexed tail with a SQL function (agentstore.search).
        connection_created.connect(_register_functions, dispatch_uid="agentstore_search_functions")

        # The text-search index lives beside the migration (agentstore.search).
        post_migrate.connect(_search_index, sender=self, dispatch_uid="agentstore_search_index")


def _search_index(sender: AppConfig, using: str = "default", **kwargs: Any) -> None:
    from agentstore.models import Entry
    from agentstore.search import ensure_search_index

    table = Entry._meta.db_table
    from django.db import connections

    if table in connections[using].introspection.table_names():
        ensure_search_index(using)


def _register_functions(sender: Any, connection: Any, **kwargs: Any) -> None:
    from agentstore.search import register_functions

    register_functions(connection)
