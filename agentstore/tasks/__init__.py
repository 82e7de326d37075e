"""Durable tasks: the generic lifecycle and the agent, tool and workflow repositories.

    from agentstore.tasks import TaskRepository, AgentTaskRepository

    tasks = TaskRepository()
    agents = AgentTaskRepository(tasks=tasks)

Each repository is imported on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the real names for type checkers; at run time they load lazily
    from agentstore.tasks.agent import AgentTaskRepository
    from agentstore.tasks.repository import TaskRepository
    from agentstore.tasks.tool import ToolTaskRepository
    from agentstore.tasks.workflow import WorkflowRepository

_EXPORTS = {
    "AgentTaskRepository": "agentstore.tasks.agent",
    "TaskRepository": "agentstore.tasks.repository",
    "ToolTaskRepository": "agentstore.tasks.tool",
    "WorkflowRepository": "agentstore.tasks.workflow",
}

__all__ = ["AgentTaskRepository", "TaskRepository", "ToolTaskRepository", "WorkflowRepository"]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'agentstore.tasks' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
