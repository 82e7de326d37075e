"""No-op task functions, one per backend (a Task object belongs to one backend)."""

from __future__ import annotations

from agentstore.tasks.framework import framework

assert framework is not None
task = framework.task


@task
def noop() -> None:
    return None


@task(backend="db")
def noop_db() -> None:
    return None
