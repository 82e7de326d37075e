"""Read replicas: lag-tolerant reads on a replica, everything else on the primary.

A PostgreSQL deployment can offload reads to a streaming replica. Most of
agentstore's reads must not go there: a replica lags, and a hold, a lease, a
claim, a conditional append or a follower's cursor read from the past would be
wrong, not just old. So agentstore never routes a read by itself. Reads that
tolerate lag *say so*, and only those go to the replica:

* the admin's changelists (lists, filters, search) — ``ReadOnlyAdmin``;
* exports (``manage.py agentstore export``, ``GET /log-sessions/{id}/export``);
* your own code, inside ``with lag_tolerant():`` or with
  ``Store(using=read_alias())``.

Everything else — every store write, holds, claims, leases, follow streams and
their cursors, the API's reads after its writes — stays on the alias the store
was built with (``"default"``). Setup (docs/operations.md, "Scaling out")::

    DATABASES = {
        "default": {...},                                  # the primary
        "replica": {..., "TEST": {"MIRROR": "default"}},   # a streaming replica
    }
    DATABASE_ROUTERS = ["agentstore.routers.ReplicaRouter"]
    AGENTSTORE = {"READ_REPLICA": "replica"}

:class:`ReplicaRouter` sends the ORM reads of agentstore's models made inside a
:func:`lag_tolerant` block to ``READ_REPLICA`` (reads that name their alias
with ``using`` are left alone, which is how the stores stay on the primary),
never migrates the replica, and lets rows read from either alias relate.
Without ``READ_REPLICA`` it routes nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

from django.db import DEFAULT_DB_ALIAS

from agentstore.conf import agentstore_settings

__all__ = ["ReplicaRouter", "in_lag_tolerant_block", "lag_tolerant", "read_alias", "replica"]

_tolerant: ContextVar[bool] = ContextVar("agentstore_lag_tolerant", default=False)


def replica() -> str:
    """The configured replica alias (``READ_REPLICA``), or ``""``."""
    return str(agentstore_settings.READ_REPLICA or "")


def read_alias(primary: str = DEFAULT_DB_ALIAS) -> str:
    """The alias for a lag-tolerant read: the replica when configured, else ``primary``."""
    return replica() or primary


@contextlib.contextmanager
def lag_tolerant() -> Iterator[None]:
    """Mark the reads in the block as lag-tolerant (the router may send them to the replica).

    A context variable, so it follows the request into ``sync_to_async`` and
    never leaks into another thread's or request's reads.
    """
    token = _tolerant.set(True)
    try:
        yield
    finally:
        _tolerant.reset(token)


def in_lag_tolerant_block() -> bool:
    """Whether the current code runs inside :func:`lag_tolerant`."""
    return _tolerant.get()


class ReplicaRouter:
    """``DATABASE_ROUTERS`` entry: lag-tolerant reads of agentstore's models to the replica."""

    app_label = "agentstore"

    def db_for_read(self, model: type[Any], **hints: Any) -> str | None:
        if model._meta.app_label == self.app_label and _tolerant.get():
            return replica() or None
        return None

    def db_for_write(self, model: type[Any], **hints: Any) -> str | None:
        return None

    def allow_relation(self, obj1: Any, obj2: Any, **hints: Any) -> bool | None:
        # The replica holds the primary's rows: an object read from one may
        # refer to one read from the other.
        name = replica()
        if name and {obj1._state.db, obj2._state.db} <= {DEFAULT_DB_ALIAS, name}:
            return True
        return None

    def allow_migrate(self, db: str, app_label: str, **hints: Any) -> bool | None:
        # A replica follows the primary's schema; migrating it would fail (read-only).
        if db == replica():
            return False
        return None
