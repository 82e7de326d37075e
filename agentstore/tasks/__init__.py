"""Durable tasks: the generic lifecycle and the agent, tool and workflow repositories.

    from agentstore.tasks import TaskRepository, AgentTaskRepository

    tasks = TaskRepository()
    agents = AgentTaskRepository(tasks=tasks)

Each repository is imported on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "AgentTaskRepository": "agentstore.tasks.agent",
    "TaskRepository": "agentstore.tasks.repository",
    "ToolTaskRepository": "agentstore.tasks.tool",
    "WorkflowRepository": "agentstore.tasks.workflow",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'agentstore.tasks' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
