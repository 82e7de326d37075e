"""agentstore's Django admin: a read-only inspection UI over every table.

Importing this package (Django's admin autodiscovery does) registers an admin
for each model on ``django.contrib.admin.site``:

* ``sessions`` — the session page and its tree, context, transcript, steps and
  grants views, and "break lock";
* ``entries``, ``loop``, ``refs``, ``documents`` — the other session-side tables;
* ``checkpoints`` — LangGraph checkpoints, blobs and writes (the thread page is
  a session view);
* ``tasks`` — tasks with their event timeline, agent/tool/workflow details, and
  the "cancel" and "recover expired leases" operations;
* ``workers`` — running workers and the depth of each queue.

Nothing can be added or edited by hand; deletes and operations call the stores
and task repositories. The dashboard block on the admin index comes from the
``admin/agentstore/index.html`` template: the default site uses it unless the
project set its own ``admin.site.index_template`` (see ``docs/admin.md``).
"""

from __future__ import annotations

from django.contrib import admin

from agentstore.admin import (
    checkpoints,
    documents,
    entries,
    loop,
    refs,
    sessions,
    tasks,
    workers,
)

__all__ = ["checkpoints", "documents", "entries", "loop", "refs", "sessions", "tasks", "workers"]

# The dashboard block extends the stock index; a project that chose its own
# index template keeps it (and can {% include "admin/agentstore/dashboard.html" %}).
if admin.site.index_template is None:
    admin.site.index_template = "admin/agentstore/index.html"
