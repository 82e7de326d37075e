"""The demo project's settings plus django-tasks-db (its ``db_worker``) and a no-op runner.

django-tasks-db is a benchmark-only dependency (``pip install --group bench``);
agentstore never imports it.
"""

from __future__ import annotations

from project.settings import *  # noqa: F403
from project.settings import AGENTSTORE, INSTALLED_APPS

INSTALLED_APPS = [*INSTALLED_APPS, "django_tasks_db"]
# bench/run_throughput.py's no-op runner, beside the demo's.
AGENTSTORE = {
    **AGENTSTORE,
    "RUNNERS": {**AGENTSTORE["RUNNERS"], "noop": "bench.worker_bench.runners.noop"},
}
TASKS = {
    "default": {"BACKEND": "agentstore.tasks.backends.AgentStoreBackend", "QUEUES": []},
    "db": {"BACKEND": "django_tasks_db.DatabaseBackend", "QUEUES": []},
}
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    # db_worker says "Starting worker" at INFO: the bench's ready signal.
    "loggers": {
        "django_tasks_db": {"handlers": ["console"], "level": "INFO"},
        "django_tasks": {"handlers": [], "level": "WARNING", "propagate": False},
        "django.tasks": {"handlers": [], "level": "WARNING", "propagate": False},
    },
}
