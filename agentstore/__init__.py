"""agentstore: durable storage for what LLM agents do, in your Django project's database.

Add ``"agentstore"`` to ``INSTALLED_APPS`` and migrate; then use the stores::

    from agentstore.stores import TreeStore
    from agentstore.tasks import TaskRepository

See README.md and docs/ for the concepts, settings and operations.
"""

from __future__ import annotations

__version__ = "0.1.0.dev0"
