"""agentstore's settings, read from one ``AGENTSTORE`` dict in the project settings.

Everything has a default, so an empty (or missing) ``AGENTSTORE`` works::

    AGENTSTORE = {
        "WRITE_ATTEMPTS": 3,          # SQLITE_BUSY retries of one write transaction
        "SQLITE_WRITE_LOCK": True,    # serialise writers with an OS file lock
    }

Read values through :data:`agentstore_settings` (``agentstore_settings.WRITE_ATTEMPTS``);
it follows ``override_settings`` in tests.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed

DEFAULTS: dict[str, Any] = {
    # How many times one write transaction is attempted when SQLite answers
    # SQLITE_BUSY (the busy timeout already waited each time).
    "WRITE_ATTEMPTS": 3,
    # Backoff between attempts: attempt n waits a random time in [d/2, d] where
    # d = min(BASE << (n - 1), MAX), in seconds.
    "WRITE_BACKOFF_BASE": 0.005,
    "WRITE_BACKOFF_MAX": 0.020,
    # Serialise agentstore's writers on a file-backed SQLite database with an OS
    # file lock beside the database (fair, kernel-queued) before BEGIN IMMEDIATE.
    # See docs/operations.md for why SQLite's own busy handler is not enough.
    "SQLITE_WRITE_LOCK": True,
    # Suffix of that lock file, appended to the database path.
    "SQLITE_LOCK_SUFFIX": ".agentstore-lock",
    # Seconds a writer waits for that lock file before the store raises
    # DatabaseBusy (the API answers 503 database_busy). A holder only keeps it
    # for one short transaction, so waiting longer means it is frozen or stuck
    # (docs/operations.md, "Writer queue deadline"). 0 waits forever.
    "WRITE_QUEUE_TIMEOUT": 30.0,
    # Live follow (GET /sessions/{id}/follow) caps, per server process: under
    # WSGI each follower holds a worker thread for as long as it follows
    # (docs/operations.md, "Following live: ASGI and caps"). 0: no cap.
    "FOLLOW_MAX_PER_USER": 4,
    # None: derived from the server (agentstore.serving): half the threads of
    # a gunicorn sync/gthread worker, 16 elsewhere. A number above a thread-
    # bounded worker's threads - 1 (or 0, no cap, there) refuses to start.
    "FOLLOW_MAX_PER_PROCESS": None,
    # Seconds after which a follow stream ends with a "reconnect" event;
    # EventSource resumes with Last-Event-ID. 0: streams never end on their own.
    "FOLLOW_MAX_SECONDS": 300.0,
    # The longest branch (entries from the root) for which the API's /context
    # and the admin's context view build a whole context; longer answers 400
    # too_large (docs/api.md, "Bounded answers"). A compacted session's branch
    # is still walked to its root, so this bounds the work, not the result.
    "MAX_CONTEXT_BRANCH": 2_000,
    # The task worker's hottest PostgreSQL statements (settle-and-claim, the
    # stepwise claim) run as server-side prepared statements, planned once per
    # connection (agentstore.db.cursors). False for PgBouncer in transaction
    # mode before 1.21 (it cannot route prepared statements). docs/operations.md.
    "POSTGRES_PREPARE": True,
    # How deeply a JSON value may nest arrays and objects, in request bodies
    # and imported files. Python's parser and encoder recurse and fail near
    # 1000 levels; agentstore's own data needs a handful (docs/operations.md).
    "JSON_MAX_DEPTH": 100,
    # The worker (manage.py agentstore worker; docs/tasks.md "Running tasks").
    # Handlers by task kind, as dotted paths, beside those registered with
    # @agentstore.tasks.handlers.handler("kind").
    "WORKER_HANDLERS": {},
    # Runners by name, as dotted paths (docs/runs.md): what a run started with
    # agentstore.runs.start("name", ...) calls to continue its session.
    "RUNNERS": {},
    # Lease of a claimed task in seconds; the worker renews it every third.
    "WORKER_LEASE": 30.0,
    # Idle poll interval (seconds) when no task is ready.
    "WORKER_POLL_INTERVAL": 0.02,
    # Retry n of a failed task waits min(BASE * 2 ** (n - 1), MAX) seconds.
    "WORKER_RETRY_BACKOFF_BASE": 1.0,
    "WORKER_RETRY_BACKOFF_MAX": 300.0,
    # SIGTERM/SIGINT: how long the running task may take before it is released.
    "WORKER_GRACE": 30.0,
    # How many times a task whose worker went away (killed, its lease expired) is
    # queued to run again. A crash is not the task's failure: it does not spend
    # the task's retry attempts. The crash past this budget fails the task
    # (error "crashed"), so a task that kills its worker does not loop forever;
    # 0: never rerun a crashed task (docs/tasks.md, "Retries and recovery").
    "TASK_MAX_CRASHES": 3,
    # PostgreSQL: writes send NOTIFY in their transaction and followers and idle
    # workers LISTEN (one connection per process), so they wake at once instead
    # of at their next poll (docs/operations.md, "Scaling out"). Ignored on SQLite.
    "NOTIFY": True,
    # A database alias (a streaming replica) for reads that tolerate lag: the
    # admin's changelists and exports (agentstore/routers.py). "": none.
    "READ_REPLICA": "",
    # Prices the admin's usage page multiplies tokens by: model name →
    # (USD per million input tokens, USD per million output tokens). A model
    # without a price shows tokens and no cost.
    "MODEL_PRICES": {},
}


class AgentStoreSettings:
    """Attribute access to ``settings.AGENTSTORE`` with defaults, cached until changed.

    A value read once is kept as an attribute of the instance, so later reads
    are plain attribute look-ups that never reach ``__getattr__`` (~0.05
    against ~1 µs: the write paths read settings on every transaction;
    bench/results/2026-12-01-write-layer-python.md); :meth:`reload` drops them.
    """

    @property
    def user_settings(self) -> dict[str, Any]:
        value = getattr(settings, "AGENTSTORE", None) or {}
        if not isinstance(value, dict):
            raise ImproperlyConfigured("settings.AGENTSTORE must be a dict.")
        unknown = sorted(set(value) - set(DEFAULTS))
        if unknown:
            raise ImproperlyConfigured(
                f"settings.AGENTSTORE has unknown keys: {', '.join(unknown)}. "
                f"Known keys: {', '.join(sorted(DEFAULTS))}."
            )
        return value

    def __getattr__(self, name: str) -> Any:
        # Only reached for a name not cached yet (or not a setting at all).
        if name not in DEFAULTS:
            raise AttributeError(f"Invalid agentstore setting: {name!r}")
        value = self.user_settings.get(name, DEFAULTS[name])
        self.__dict__[name] = value
        return value

    def reload(self) -> None:
        self.__dict__.clear()


agentstore_settings = AgentStoreSettings()


def _reload(*, setting: str, **kwargs: Any) -> None:
    if setting == "AGENTSTORE":
        agentstore_settings.reload()


setting_changed.connect(_reload)
