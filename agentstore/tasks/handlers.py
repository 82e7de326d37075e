"""The worker's handler registry: which callable runs a task of which kind.

A handler takes a :class:`Job` and returns what the task settles with::

    from agentstore.tasks.handlers import handler

    @handler("tool")
    def run_tool(job):                       # job.tool is the ToolTaskEntity
        return '{"is_error":false,"result":{"content":[],"details":{}},"truncated":false}'

    @handler("agent")
    def run_agent(job):                      # job.agent.child_session_id is the child session
        ...
        return '{"input_tokens": 10}'        # the agent task's usage JSON

Or by setting: ``AGENTSTORE = {"WORKER_HANDLERS": {"report": "myapp.jobs.report"}}``.
The ``function`` kind (``django.tasks`` functions enqueued through
:class:`~agentstore.tasks.backends.AgentStoreBackend`) is built in.

What the return value is depends on the kind (each kind settles through its
own repository, so the kind's rules hold): a tool task's outcome JSON
(``ToolTaskRepository.finish``), an agent task's usage JSON
(``AgentTaskRepository.finish``), any other task's ``result`` text.
A handler that raises fails the attempt; the worker retries it while the task
has attempts left (``Task.max_attempts``) unless the exception says it must
not be retried — :class:`NotRetryable`, or any exception with
``retryable = False``. A handler that cannot start the task yet raises
:class:`Postpone`: the task goes back to its queue for later, no attempt spent.
One that stopped because its task's cancel was asked raises :class:`Canceled`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import import_string

from agentstore.conf import agentstore_settings
from agentstore.tasks.agent import AgentTaskRepository
from agentstore.tasks.repository import TaskRepository
from agentstore.tasks.tool import ToolTaskRepository
from agentstore.types.tasks import AgentTaskEntity, TaskEntity, TaskFinish, ToolTaskEntity

__all__ = [
    "FUNCTION_KIND",
    "Canceled",
    "Handler",
    "Job",
    "NotRetryable",
    "Postpone",
    "handler",
    "handler_kinds",
    "handlers",
    "is_retryable",
    "plain_finish",
    "settle",
]

#: The kind of ``django.tasks`` function calls.
FUNCTION_KIND = "function"

Handler = Callable[["Job"], Any]

_registered: dict[str, Handler] = {}


class NotRetryable(Exception):  # noqa: N818 - it names what it means
    """Raise from a handler (or chain as the cause) to fail the task without a retry."""

    retryable = False


class Postpone(Exception):  # noqa: N818 - it names what it asks for
    """Raise from a handler that cannot start the task yet: it goes back to its queue.

    The attempt is not counted and nothing is recorded as an error; the task
    is claimed again (by any worker) no sooner than ``delay`` seconds from now.
    A run whose session another run holds waits this way.
    """

    def __init__(self, reason: str, delay: float = 1.0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.delay = max(0.0, float(delay))


class Canceled(Exception):  # noqa: N818 - it names what happened
    """Raise from a handler that stopped because its task's cancel was asked (``canceling``).

    The task is settled ``canceled`` (event ``task_canceled``), not failed and
    not retried.
    """

    retryable = False


def is_retryable(error: BaseException) -> bool:
    """``False`` when ``error`` (or what it was raised from) says it must not be retried."""
    seen: BaseException | None = error
    for _ in range(8):  # a short, bounded walk down the cause chain
        if seen is None:
            return True
        if getattr(seen, "retryable", True) is False:
            return False
        seen = seen.__cause__
    return True


@dataclass
class Job:
    """One claimed attempt of one task, as a handler sees it."""

    task: TaskEntity
    worker_id: str
    tasks: TaskRepository
    #: The framework's ``TaskResult`` of a ``function`` task as it started (set by
    #: its handler; the worker sends ``task_finished`` from it once the finish is stored).
    task_result: Any = None
    #: A ``function`` task's call (function, backend, arguments_json) as the claim
    #: read it (``TaskRepository.finish_and_claim(calls=…)``); ``None``: read it.
    call: tuple[str, str, str] | None = None
    _details: dict[str, Any] = field(default_factory=dict)

    @property
    def attempt(self) -> int:
        """1 for the first run, 2 for the next (a retry, or a rerun after a crash) …"""
        return self.task.attempts

    @property
    def tool(self) -> ToolTaskEntity:
        """The tool task's admitted invocation (kind ``tool``)."""
        if "tool" not in self._details:
            tool = ToolTaskRepository(tasks=self.tasks).get(self.task.id)
            if tool is None:
                raise NotRetryable(f"task {self.task.id} is not a tool task")
            self._details["tool"] = tool
        value: ToolTaskEntity = self._details["tool"]
        return value

    @property
    def agent(self) -> AgentTaskEntity:
        """The agent task, with ``child_session_id`` (kind ``agent``)."""
        if "agent" not in self._details:
            agent = AgentTaskRepository(tasks=self.tasks).get(self.task.id)
            if agent is None:
                raise NotRetryable(f"task {self.task.id} is not an agent task")
            self._details["agent"] = agent
        value: AgentTaskEntity = self._details["agent"]
        return value

    def event(self, kind: str, payload_json: str = "{}") -> bool:
        """Append a progress event while this worker still holds the lease."""
        return (
            self.tasks.append_running_event(self.task.id, self.worker_id, kind, payload_json)
            is not None
        )


def handler(kind: str) -> Callable[[Handler], Handler]:
    """Register the decorated callable as the handler of ``kind``."""

    def register(fn: Handler) -> Handler:
        _registered[kind] = fn
        return fn

    return register


def handler_kinds() -> list[str]:
    """The kinds a handler is registered for (``@handler`` or ``WORKER_HANDLERS``), sorted.

    Nothing is imported: listings (the admin's kind filter) name them cheaply.
    """
    configured = agentstore_settings.WORKER_HANDLERS
    return sorted({*_registered, *(configured if isinstance(configured, dict) else {})})


def handlers() -> dict[str, Handler]:
    """Handlers by kind from ``@handler`` and ``WORKER_HANDLERS`` (the setting wins).

    The built-in ``function`` kind is added by the worker, which imports the backend.
    """
    found: dict[str, Handler] = dict(_registered)
    configured = agentstore_settings.WORKER_HANDLERS
    if not isinstance(configured, dict):
        raise ImproperlyConfigured("AGENTSTORE['WORKER_HANDLERS'] must map kinds to dotted paths.")
    for kind, path in configured.items():
        try:
            found[kind] = import_string(path) if isinstance(path, str) else path
        except ImportError as error:
            raise ImproperlyConfigured(
                f"AGENTSTORE['WORKER_HANDLERS'][{kind!r}]: cannot import {path!r}: {error}"
            ) from error
    return found


#: A tool task's outcome when its handler raised (same shape as the canonical ones).
def _tool_error_outcome(message: str) -> str:
    return json.dumps(
        {
            "error": message,
            "is_error": True,
            "result": {"content": [], "details": {}},
            "truncated": False,
        },
        separators=(",", ":"),
    )


def plain_finish(kind: str, finish: TaskFinish, value: Any) -> TaskFinish | None:
    """The generic finish of a kind with no details table, ready for ``TaskRepository.finish``.

    ``None`` for tool and agent tasks, which settle through their repositories.
    """
    if kind in ("tool", "agent"):
        return None
    if finish.target_state == "succeeded" and value is not None:
        result = value if isinstance(value, str) else json.dumps(value)
        return dataclasses.replace(finish, result=result)
    return finish


def settle(tasks: TaskRepository, kind: str, finish: TaskFinish, value: Any) -> bool:
    """Finish ``finish.task_id`` through its kind's repository; ``False`` if fenced out.

    ``value`` is the handler's return (success) or ``None`` (failure).
    """
    failed = finish.target_state != "succeeded"
    if kind == "tool":
        if failed:
            outcome = _tool_error_outcome(finish.error_message or "tool task failed")
        else:
            outcome = value if isinstance(value, str) else json.dumps(value)
        return ToolTaskRepository(tasks=tasks).finish(finish, outcome)
    if kind == "agent":
        usage = "{}" if failed or value is None else value
        if not isinstance(usage, str):
            usage = json.dumps(usage)
        return AgentTaskRepository(tasks=tasks).finish(finish, usage)
    plain = plain_finish(kind, finish, value)
    assert plain is not None
    return tasks.finish(plain)
