"""agentstore's schema: one module per aggregate, all re-exported here.

One :class:`Session` table serves the three stores (tree, loop and log); tree
entries of both formats live in :class:`Entry`, ordered by a per-session ``seq``.
``docs/schema.md`` maps every table to the spec it comes from.
"""

from __future__ import annotations

from agentstore.models.checkpoints import Checkpoint, CheckpointBlob, CheckpointWrite
from agentstore.models.documents import Document
from agentstore.models.entries import Entry, MessagePart
from agentstore.models.holds import Holder
from agentstore.models.loop import Grant, Step
from agentstore.models.refs import Ref, RefLog
from agentstore.models.runs import RunTask
from agentstore.models.sessions import Session
from agentstore.models.tasks import (
    AgentTask,
    FunctionTask,
    Task,
    TaskEvent,
    TaskState,
    ToolTask,
    Worker,
)
from agentstore.models.workflows import WorkflowAgentTask, WorkflowRun

__all__ = [
    "AgentTask",
    "Checkpoint",
    "CheckpointBlob",
    "CheckpointWrite",
    "Document",
    "Entry",
    "FunctionTask",
    "Grant",
    "Holder",
    "MessagePart",
    "Ref",
    "RefLog",
    "RunTask",
    "Session",
    "Step",
    "Task",
    "TaskEvent",
    "TaskState",
    "ToolTask",
    "WorkflowAgentTask",
    "WorkflowRun",
    "Worker",
]
