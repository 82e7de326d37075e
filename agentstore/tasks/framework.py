"""Django's task framework, whichever is installed: ``django.tasks`` or the backport.

Django 6 ships ``django.tasks``; on Django 5.2 the same API comes from the
``django-tasks`` backport (``pip install agentstore[tasks]``). The two differ
in details (``InvalidTask`` is the backport's ``InvalidTaskError``;
``normalize_json`` lives in ``django.utils.json`` or ``django_tasks.utils``),
so agentstore imports the framework from here only::

    from agentstore.tasks.framework import framework
    framework.TaskResultStatus.SUCCESSFUL

``framework`` is ``None`` when neither is installed; the backend then fails
with a clear ``ImproperlyConfigured`` when Django loads it. Names are typed
``Any``: the stubs of Django 5.2 know no ``django.tasks``.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

__all__ = ["Framework", "framework", "load"]


@dataclass(frozen=True)
class Framework:
    """The names agentstore uses, from one installed framework."""

    module: str
    BaseTaskBackend: Any
    Task: Any
    TaskContext: Any
    TaskError: Any
    TaskResult: Any
    TaskResultStatus: Any
    TaskResultDoesNotExist: Any
    InvalidTask: Any
    task: Any
    task_backends: Any
    task_enqueued: Any
    task_started: Any
    task_finished: Any
    normalize_json: Any


def load() -> Framework | None:
    """Import the built-in framework when Django has one, else the backport, else ``None``."""
    try:
        base = importlib.import_module("django.tasks")
        module = "django.tasks"
        exceptions = importlib.import_module("django.tasks.exceptions")
        invalid = exceptions.InvalidTask
        normalize_json = importlib.import_module("django.utils.json").normalize_json
    except ImportError:
        try:
            base = importlib.import_module("django_tasks")
        except ImportError:
            return None
        module = "django_tasks"
        exceptions = importlib.import_module("django_tasks.exceptions")
        invalid = exceptions.InvalidTaskError
        normalize_json = importlib.import_module("django_tasks.utils").normalize_json
    backends = importlib.import_module(f"{module}.backends.base")
    tasks_base = importlib.import_module(f"{module}.base")
    signals = importlib.import_module(f"{module}.signals")
    return Framework(
        module=module,
        BaseTaskBackend=backends.BaseTaskBackend,
        Task=tasks_base.Task,
        TaskContext=tasks_base.TaskContext,
        TaskError=tasks_base.TaskError,
        TaskResult=tasks_base.TaskResult,
        TaskResultStatus=tasks_base.TaskResultStatus,
        TaskResultDoesNotExist=exceptions.TaskResultDoesNotExist,
        InvalidTask=invalid,
        task=base.task,
        task_backends=base.task_backends,
        task_enqueued=signals.task_enqueued,
        task_started=signals.task_started,
        task_finished=signals.task_finished,
        normalize_json=normalize_json,
    )


framework = load()
