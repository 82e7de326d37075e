"""Fixtures of the task repository tests: a ticking clock, owner sessions, one repository graph.

Every repository comes from one graph (``WorkflowRepository(tasks=…, agents=…)``)
sharing one task repository and its clock, like librecode's fixture. Session rows
are created directly (the tree store is not needed to own tasks).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from agentstore.demo import seeding
from agentstore.tasks import (
    AgentTaskRepository,
    TaskRepository,
    ToolTaskRepository,
    WorkflowRepository,
)
from agentstore.types import AgentTaskEntity, TaskClaim, TaskEntity, ToolTaskEntity

START = datetime(2026, 8, 6, 12, 0, 0, tzinfo=UTC)


class TickingClock:
    """A clock that advances one millisecond per reading (distinct, ordered timestamps)."""

    def __init__(self, start: datetime = START, step: timedelta = timedelta(milliseconds=1)):
        self.current = start
        self.step = step

    def __call__(self) -> datetime:
        self.current += self.step
        return self.current

    def peek(self) -> datetime:
        return self.current

    def advance(self, delta: timedelta) -> None:
        self.current += delta


@dataclass
class Graph:
    tasks: TaskRepository
    agents: AgentTaskRepository
    tools: ToolTaskRepository
    workflows: WorkflowRepository
    clock: TickingClock


@pytest.fixture
def clock() -> TickingClock:
    return TickingClock()


@pytest.fixture
def graph(clock: TickingClock) -> Graph:
    tasks = TaskRepository(clock=clock)
    agents = AgentTaskRepository(tasks=tasks)
    return Graph(
        tasks=tasks,
        agents=agents,
        tools=ToolTaskRepository(tasks=tasks),
        workflows=WorkflowRepository(tasks=tasks, agents=agents),
        clock=clock,
    )


def make_session(parent: str = "", name: str = "") -> str:
    return seeding.session(cwd="/repo", name=name, parent_session=parent)


@pytest.fixture
def owner(db: None) -> str:
    return make_session(name="owner")


@pytest.fixture
def other_owner(db: None) -> str:
    return make_session(name="other")


@pytest.fixture
def session_factory(db: None) -> Callable[..., str]:
    return make_session


def claim_for(
    task_id: str, owner: str, expires: datetime, event: str = "task_started"
) -> TaskClaim:
    return TaskClaim(task_id=task_id, lease_owner=owner, lease_expires_at=expires, event_kind=event)


def agent_entity(owner: str, child: str = "", parent: str = "", **extra: object) -> AgentTaskEntity:
    fields: dict[str, object] = {
        "agent_name": "general",
        "prompt": "inspect the repository",
        "depth": 1,
        "policy_json": "{}",
        "usage_json": "{}",
    }
    fields.update(extra)
    return AgentTaskEntity(
        task=TaskEntity(owner_session_id=owner, parent_task_id=parent),
        child_session_id=child,
        **fields,  # type: ignore[arg-type]
    )


def tool_entity(owner: str, invocation: str = "call-1", **extra: object) -> ToolTaskEntity:
    fields: dict[str, object] = {
        "owner_session_id": owner,
        "invocation_id": invocation,
        "wrapper_call_id": "wrapper-1",
        "target_name": "read",
        "cwd": "/repo",
        "arguments_json": '{"path":"go.mod"}',
        "timeout_seconds": 30,
        "policy_json": "{}",
        "definition_json": '{"name":"read"}',
    }
    fields.update(extra)
    return ToolTaskEntity(**fields)  # type: ignore[arg-type]


def run_together(*functions: Callable[[], object]) -> tuple[list[object], list[BaseException]]:
    """Run ``functions`` in threads released at once; return results and errors.

    Each thread closes its own database connection when done.
    """
    from django.db import connection

    barrier = threading.Barrier(len(functions))
    results: list[object] = []
    errors: list[BaseException] = []

    def run(fn: Callable[[], object]) -> None:
        try:
            barrier.wait()
            results.append(fn())
        except BaseException as exc:  # reported to the test
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=run, args=(fn,)) for fn in functions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results, errors


def reject_inserts(table: str, message: str) -> None:
    """Install a trigger that makes every insert into ``table`` fail with ``message``."""
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute(
                f"CREATE TRIGGER reject_{table} BEFORE INSERT ON {table} "
                f"BEGIN SELECT RAISE(ABORT, '{message}'); END"
            )
        else:
            cursor.execute(
                f"CREATE FUNCTION reject_{table}() RETURNS trigger LANGUAGE plpgsql AS "
                f"$$ BEGIN RAISE EXCEPTION '{message}' "
                "USING ERRCODE = 'integrity_constraint_violation'; END $$"
            )
            cursor.execute(
                f"CREATE TRIGGER reject_{table} BEFORE INSERT ON {table} "
                f"FOR EACH ROW EXECUTE FUNCTION reject_{table}()"
            )
