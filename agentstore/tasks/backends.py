"""``AgentStoreBackend``: Django's task framework, stored in agentstore's task table.

Point ``TASKS`` at it and ``@task`` functions are durable agentstore tasks
(kind ``function``) that ``manage.py agentstore worker`` runs::

    TASKS = {
        "default": {
            "BACKEND": "agentstore.tasks.backends.AgentStoreBackend",
            "QUEUES": ["default", "mail"],
            "OPTIONS": {"DATABASE": "default", "MAX_ATTEMPTS": 3},
        }
    }

    @task(priority=10, queue_name="mail", max_attempts=5)   # max_attempts: ours
    def send(to: str) -> str: ...

    result = send.enqueue("a@example.com")
    result.refresh(); result.status, result.return_value, result.errors, result.attempts

Django 6 ships ``django.tasks``; Django 5.2 needs the ``django-tasks`` backport
(``agentstore[tasks]``); :mod:`agentstore.tasks.framework` picks whichever is
installed. Every feature flag the framework names is supported: ``priority``,
``run_after`` (defer), async task functions and ``get_result`` from any
process. ``attempts`` and ``worker_ids`` come from the task's ``task_started``
events, ``errors`` from its failure events, the return value from ``result``.
"""

from __future__ import annotations

import dataclasses
import json
import traceback
from dataclasses import dataclass
from functools import lru_cache
from types import TracebackType
from typing import TYPE_CHECKING, Any, NoReturn

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS
from django.utils import timezone
from django.utils.module_loading import import_string

from agentstore import db, sql
from agentstore.exceptions import InvalidTaskArguments, TaskCrashed, ValidationError
from agentstore.models import FunctionTask
from agentstore.sql import tasks as task_sql
from agentstore.tasks.framework import framework
from agentstore.tasks.handlers import FUNCTION_KIND, NotRetryable
from agentstore.tasks.repository import DetailInsert, TaskRepository
from agentstore.types.tasks import TaskEntity
from agentstore.validation import json_value_problem, name_problem

if TYPE_CHECKING:
    from agentstore.tasks.handlers import Job

__all__ = [
    "AgentStoreBackend",
    "AgentStoreTask",
    "exception_payload",
    "run_function",
    "send_finished",
    "send_recovered",
]

if framework is None:  # pragma: no cover - exercised only without either framework
    raise ImproperlyConfigured(
        "AgentStoreBackend needs Django's task framework: Django 6, or on Django 5.2 "
        "the django-tasks backport (pip install 'agentstore[tasks]')."
    )

_F = framework
# Base classes as plain Any-typed names (mypy cannot follow a runtime-chosen module).
_BaseTask: Any = _F.Task
_BaseBackend: Any = _F.BaseTaskBackend
#: Event kinds whose payload carries a TaskError (exception_class_path, traceback): a
#: failed attempt, and a run whose worker went away (``TaskCrashed``).
ERROR_EVENTS = frozenset({"task_retry_scheduled", "task_failed", "task_lease_expired"})

_STATUS = {
    "queued": "READY",
    "running": "RUNNING",
    "canceling": "RUNNING",
    "succeeded": "SUCCESSFUL",
    "failed": "FAILED",
    "canceled": "FAILED",
    "interrupted": "FAILED",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentStoreTask(_BaseTask):  # type: ignore[misc]
    """The framework's ``Task`` plus ``max_attempts`` (0: the backend's ``MAX_ATTEMPTS``)."""

    max_attempts: int = 0


class AgentStoreBackend(_BaseBackend):  # type: ignore[misc]
    """Store ``@task`` calls as agentstore tasks; read their results back from any process."""

    task_class = AgentStoreTask
    supports_defer = True
    supports_async_task = True
    supports_get_result = True
    supports_priority = True

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        options = self.options or {}
        self.database: str = options.get("DATABASE", DEFAULT_DB_ALIAS)
        self.max_attempts: int = int(options.get("MAX_ATTEMPTS", 1))
        if self.max_attempts < 1:
            raise ImproperlyConfigured(f"TASKS[{alias!r}]['OPTIONS']['MAX_ATTEMPTS'] must be ≥ 1")

    def validate_task(self, task: Any) -> None:
        """The framework's checks, then agentstore's: what the task table can hold.

        The queue name follows the one rule for names (``name_problem``: no NUL
        or control character, no lone surrogate, no ``/``, at most 64
        characters); ``max_attempts`` is an int from 0 (the backend's
        ``MAX_ATTEMPTS``) to the column's limit; the module path fits its
        column. Each raises the framework's ``InvalidTask`` from agentstore's
        ``ValidationError`` (``.field``, ``.code``), at ``@task`` time already.
        """
        super().validate_task(task)
        attempts = getattr(task, "max_attempts", 0)
        if isinstance(attempts, bool) or not isinstance(attempts, int):
            _invalid("task.max_attempts", "must be an integer")
        if not 0 <= attempts <= MAX_ATTEMPTS:
            _invalid("task.max_attempts", f"must be 0 (the backend's default) to {MAX_ATTEMPTS}")
        problem = name_problem(task.queue_name, QUEUE_NAME_LENGTH)
        if problem:
            _invalid("task.queue_name", problem)
        if len(task.module_path) > FUNCTION_PATH_LENGTH:
            _invalid("task.module_path", f"is longer than {FUNCTION_PATH_LENGTH} characters")

    def enqueue(self, task: Any, args: Any, kwargs: Any) -> Any:
        self.validate_task(task)
        args, kwargs = list(args), dict(kwargs)
        arguments = call_arguments(args, kwargs)
        path, alias = task.module_path, self.alias

        def details(task_id: str) -> list[Any]:
            return sql.row(
                FunctionTask,
                task_id=task_id,
                function=path,
                backend=alias,
                arguments_json=arguments,
            )

        entity = TaskRepository(using=self.database).enqueue(
            TaskEntity(
                kind=FUNCTION_KIND,
                queue_name=task.queue_name,
                priority=task.priority,
                run_after=task.run_after,
                max_attempts=getattr(task, "max_attempts", 0) or self.max_attempts,
            ),
            detail=DetailInsert(task_sql.INSERT_FUNCTION, details),
        )
        result = _F.TaskResult(
            task=task,
            id=entity.id,
            status=_F.TaskResultStatus.READY,
            enqueued_at=entity.created_at,
            started_at=None,
            finished_at=None,
            last_attempted_at=None,
            args=args,
            kwargs=kwargs,
            backend=self.alias,
            errors=[],
            worker_ids=[],
        )
        _F.task_enqueued.send(type(self), task_result=result)
        return result

    def get_result(self, result_id: str) -> Any:
        return function_result(str(result_id), self.database, self.alias)


#: The task table's bounds (``agentstore/models/tasks.py``): queue name and function path
#: columns, and the largest ``max_attempts`` both databases store.
QUEUE_NAME_LENGTH = 64
FUNCTION_PATH_LENGTH = 255
MAX_ATTEMPTS = 2**31 - 1


def _invalid(field: str, problem: str) -> NoReturn:
    """Raise the framework's ``InvalidTask`` from agentstore's ``ValidationError``."""
    error = ValidationError(f"{field} {problem}", field=field)
    raise _F.InvalidTask(error.message) from error


def call_arguments(args: list[Any], kwargs: dict[str, Any]) -> str:
    """The stored JSON of a call's arguments; ``InvalidTaskArguments`` if they are not JSON.

    The API's rules, so a Python enqueue stores nothing the HTTP API would
    refuse (``agentstore.validation.json_value_problem``, strict): plain JSON values
    that read back unchanged — no NaN or Infinity, no NUL or lone surrogate, no
    bytes, tuples, sets or non-string keys (refused, not converted) — nested at
    most ``JSON_MAX_DEPTH`` deep, and at most ``DATA_UPLOAD_MAX_MEMORY_SIZE``
    bytes of JSON, the API's request body limit (docs/operations.md,
    "Request limits"). Checked before anything is written.
    """
    for where, value in (("args", args), ("kwargs", kwargs)):
        problem = json_value_problem(value, where, strict=True)
        if problem:
            raise InvalidTaskArguments(f"task arguments: {problem}", field=where)
    text = json.dumps({"args": args, "kwargs": kwargs}, allow_nan=False)
    limit: int | None = getattr(settings, "DATA_UPLOAD_MAX_MEMORY_SIZE", None)
    if limit is not None and len(text.encode()) > limit:
        raise InvalidTaskArguments(
            f"task arguments are {len(text.encode())} bytes of JSON, more than "
            f"{limit} (DATA_UPLOAD_MAX_MEMORY_SIZE, the API's request limit)",
            field="args",
        )
    return text


def _task_object(path: str, entity: TaskEntity) -> Any:
    """The ``@task`` object at ``path`` with this call's priority, queue and run_after."""
    try:
        found = import_string(path)
    except ImportError as error:
        raise NotRetryable(f"cannot import task function {path!r}: {error}") from error
    if not isinstance(found, _F.Task):
        raise NotRetryable(f"{path!r} is not a task (decorate it with @task)")
    if (found.priority, found.queue_name, found.run_after) == (
        entity.priority,
        entity.queue_name,
        entity.run_after,
    ):
        return found  # the common case; using() would validate the task again
    return _task_variant(found, entity.priority, entity.queue_name, entity.run_after)


@lru_cache(maxsize=256)
def _task_variant(found: Any, priority: int, queue_name: str, run_after: Any) -> Any:
    """``found.using(…)``, once per variant: ``using()`` validates and copies the task.

    Task objects are frozen (hashable) dataclasses, so the variant of one call
    serves every later call with the same priority, queue and run_after.
    """
    return found.using(priority=priority, queue_name=queue_name, run_after=run_after)


def function_result(result_id: str, using: str, alias: str) -> Any:
    """Build the framework's ``TaskResult`` of a stored function task."""
    tasks = TaskRepository(using=using)
    entity = tasks.get(result_id)
    row = (
        FunctionTask.objects.using(using).filter(pk=result_id).values().first()
        if entity is not None and entity.kind == FUNCTION_KIND
        else None
    )
    if entity is None or row is None:
        raise _F.TaskResultDoesNotExist(result_id)
    arguments = json.loads(row["arguments_json"] or "{}")
    worker_ids: list[str] = []
    errors: list[Any] = []
    last_attempted_at = None
    # Bounded: at most one start and one failure event per attempt (failed or
    # crashed), plus a few.
    runs = entity.max_attempts + entity.crashes
    for event in tasks.list_events(result_id, 0, 4 * runs + 16):
        if event.event.kind == "task_started":
            payload = json.loads(event.event.payload_json or "{}")
            worker_ids.append(str(payload.get("worker_id", "")))
            last_attempted_at = event.event.created_at
        elif event.event.kind in ERROR_EVENTS:
            payload = json.loads(event.event.payload_json or "{}")
            if "exception_class_path" in payload:
                errors.append(
                    _F.TaskError(
                        exception_class_path=payload["exception_class_path"],
                        traceback=payload.get("traceback", ""),
                    )
                )
    try:
        task = _task_object(row["function"], entity)
    except NotRetryable as error:
        raise _F.TaskResultDoesNotExist(f"{result_id}: {error}") from error
    result = _F.TaskResult(
        task=task,
        id=entity.id,
        status=_F.TaskResultStatus[_STATUS[entity.state]],
        enqueued_at=entity.created_at,
        started_at=entity.started_at,
        finished_at=entity.finished_at,
        last_attempted_at=last_attempted_at,
        args=arguments.get("args", []),
        kwargs=arguments.get("kwargs", {}),
        backend=row["backend"] or alias,
        errors=errors,
        worker_ids=worker_ids,
    )
    if entity.state == "succeeded" and entity.result:
        object.__setattr__(result, "_return_value", json.loads(entity.result))
    return result


def exception_payload(error: BaseException, worker_id: str) -> dict[str, Any]:
    """The framework's TaskError fields for a failure event's payload."""
    kind = type(error)
    return {
        "worker_id": worker_id,
        "exception_class_path": f"{kind.__module__}.{kind.__qualname__}",
        "traceback": "".join(traceback.format_exception(error)),
    }


def _started_result(job: Job, task: Any, row: dict[str, Any], arguments: dict[str, Any]) -> Any:
    """The ``TaskResult`` of the attempt that is starting (status RUNNING).

    A first attempt is built from what the claim returned; a later one reads
    the task's events for the earlier workers and errors (as ``get_result``).
    """
    entity = job.task
    if task.takes_context or entity.attempts > 1:
        return function_result(entity.id, job.tasks.using, row["backend"])
    return _F.TaskResult(
        task=task,
        id=entity.id,
        status=_F.TaskResultStatus.RUNNING,
        enqueued_at=entity.created_at,
        started_at=entity.started_at,
        finished_at=None,
        last_attempted_at=entity.updated_at,
        args=arguments.get("args", []),
        kwargs=arguments.get("kwargs", {}),
        backend=row["backend"],
        errors=[],
        worker_ids=[job.worker_id],
    )


def send_finished(
    started: Any, *, return_json: str | None = None, error: BaseException | None = None
) -> None:
    """Send ``task_finished`` for a function task whose finish was stored.

    ``started`` is the attempt's :attr:`Job.task_result`; success passes the
    stored ``return_json``, failure the exception. (A failed attempt that will
    be retried is not finished: the task is READY again, and nothing is sent.)
    """
    errors = list(started.errors)
    if error is not None:
        payload = exception_payload(error, "")
        errors.append(
            _F.TaskError(
                exception_class_path=payload["exception_class_path"],
                traceback=payload["traceback"],
            )
        )
    finished = dataclasses.replace(
        started,
        status=_F.TaskResultStatus.FAILED if error is not None else _F.TaskResultStatus.SUCCESSFUL,
        finished_at=timezone.now(),
        errors=errors,
    )
    if error is None and return_json is not None:
        object.__setattr__(finished, "_return_value", json.loads(return_json))
    _send_finished(finished, error, None if error is None else error.__traceback__)


def send_recovered(result_id: str, using: str) -> None:
    """Send ``task_finished`` for a function task that recovery settled (its worker went away).

    The stored result lists every attempt's error, the crashes included; the
    receivers see a ``TaskCrashed`` as the exception being handled.
    """
    result = function_result(result_id, using, "default")
    if result.status != _F.TaskResultStatus.FAILED:
        return
    task = TaskRepository(using=using).get(result_id)
    message = task.error_message if task is not None else ""
    crashed = TaskCrashed(message or None, crashes=task.crashes if task else 0)
    _send_finished(result, crashed, None)


def _send_finished(
    result: Any, error: BaseException | None, traceback: TracebackType | None
) -> None:
    """``task_finished`` for ``result``; a failure's receivers run inside its ``except``.

    The framework's backends send a failure's ``task_finished`` from the
    ``except`` block that caught it, and its own receiver logs it with
    ``logger.exception``. Here the signal waits until the outcome is stored,
    long after that block ended — sent bare, the receiver logged
    ``NoneType: None``. So the error is raised again and the signal sent from
    its handler, showing ``traceback`` (where the task raised it; ``None`` for
    an error that was never raised); the exception's own attributes are put
    back afterwards.
    """
    sender = type(result.task.get_backend())
    if error is None:
        _F.task_finished.send(sender, task_result=result)
        return
    kept, context, cause = error.__traceback__, error.__context__, error.__suppress_context__
    try:
        raise error
    except BaseException:
        error.__traceback__ = traceback
        _F.task_finished.send(sender, task_result=result)
    finally:
        error.__traceback__ = kept
        error.__context__ = context
        error.__suppress_context__ = cause


def run_function(job: Job) -> str:
    """The built-in handler of kind ``function``: call the ``@task`` function; JSON result.

    Sends the framework's ``task_started`` before the call; the worker sends
    ``task_finished`` (:func:`send_finished`) once the outcome is stored.
    """
    found: Any = job.call  # the worker's claim read it (decision record 0046)
    if found is None:
        # Hand-written: the ORM would cost more than the read.
        with db.cursor(job.tasks.using) as cursor:
            cursor.execute(task_sql.SELECT_FUNCTION, [job.task.id])
            found = cursor.fetchone()
    if found is None:
        raise NotRetryable(f"function task {job.task.id} has no call details")
    row = dict(zip(task_sql.CALL_FIELDS, found, strict=True))
    task = _task_object(row["function"], job.task)
    arguments = json.loads(row["arguments_json"] or "{}")
    args, kwargs = arguments.get("args", []), arguments.get("kwargs", {})
    job.task_result = _started_result(job, task, row, arguments)
    _F.task_started.send(type(task.get_backend()), task_result=job.task_result)
    if task.takes_context:
        value = task.call(_F.TaskContext(task_result=job.task_result), *args, **kwargs)
    else:
        value = task.call(*args, **kwargs)
    try:
        # The framework's conversions (a tuple returns as a list), but no NaN or
        # Infinity: stored, they would not be JSON.
        return json.dumps(_F.normalize_json(value), allow_nan=False)
    except (TypeError, ValueError) as error:
        raise NotRetryable(f"task return value is not JSON: {error}") from error
