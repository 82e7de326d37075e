"""How the composite task repositories share one :class:`TaskRepository`.

librecode builds its agent, tool and workflow repositories on the *same* task
repository (same transaction provider, same clock) and refuses a mismatched
graph. In Python the shape is::

    tasks = TaskRepository(using="default", clock=clock)
    agents = AgentTaskRepository(tasks=tasks)                  # shares tasks
    workflows = WorkflowRepository(tasks=tasks, agents=agents)
    AgentTaskRepository()                                      # builds its own

A composite repository's ``using`` and ``clock`` *are* its task repository's
(setting ``tasks.clock`` changes what every repository built on it reports).
Passing ``using`` or ``clock`` together with ``tasks`` is allowed only when they
agree with it; anything else raises ``RepositoryGraphMismatch``.
"""

from __future__ import annotations

from django.db import DEFAULT_DB_ALIAS

from agentstore.exceptions import RepositoryGraphMismatch
from agentstore.stores.base import Clock, StoreBase
from agentstore.tasks.repository import TaskRepository

__all__ = ["SharesTasks"]


class SharesTasks(StoreBase):
    """Base of the repositories built on a shared :class:`TaskRepository`."""

    tasks: TaskRepository

    def __init__(
        self,
        *,
        tasks: TaskRepository | None = None,
        using: str | None = None,
        clock: Clock | None = None,
    ) -> None:
        if tasks is None:
            tasks = TaskRepository(using=using or DEFAULT_DB_ALIAS, clock=clock)
        elif not isinstance(tasks, TaskRepository):
            raise RepositoryGraphMismatch(
                f"{type(self).__name__} needs a TaskRepository, not {type(tasks).__name__}"
            )
        else:
            if using is not None and using != tasks.using:
                raise RepositoryGraphMismatch(
                    f"{type(self).__name__}(using={using!r}) does not match its task "
                    f"repository's database {tasks.using!r}"
                )
            if clock is not None and clock is not tasks.clock:
                raise RepositoryGraphMismatch(
                    f"{type(self).__name__} must share its task repository's clock"
                )
        self.tasks = tasks

    # ``using`` and ``clock`` live on the shared task repository.

    @property
    def using(self) -> str:
        return self.tasks.using

    @using.setter
    def using(self, value: str) -> None:
        self.tasks.using = value

    @property
    def clock(self) -> Clock:
        return self.tasks.clock

    @clock.setter
    def clock(self, value: Clock) -> None:
        self.tasks.clock = value
