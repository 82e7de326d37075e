"""Inspection data for the admin tests, the browser test and the bench — written through the stores.

    world = seed_world(owner=None)
    world.tree_id, world.leaf_id, world.tool_task_id, …

One tree session with everything the tree and context views draw (a branch
point, a label, a hidden message, model and thinking changes, a compaction with
a kept range, usage on an assistant reply, a long plain run), a loop session
with steps and a grant, a hold, and tasks of every kind — including a running
tool task whose lease has already expired, and a queued run.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from agentstore.ids import new_id
from agentstore.models import Holder
from agentstore.runs import RunRepository
from agentstore.stores.loop import LoopStore
from agentstore.stores.tree import TreeStore
from agentstore.tasks import (
    AgentTaskRepository,
    TaskRepository,
    ToolTaskRepository,
    WorkflowRepository,
)
from agentstore.types import (
    AgentTaskEntity,
    AppendCompactionInput,
    ChildSessionRequest,
    EntryTokenUsageEntity,
    MessageEntity,
    RunStep,
    TaskClaim,
    TaskEntity,
    ToolTaskEntity,
    WorkflowRunEntity,
)

#: Plain messages appended after the compaction (a run long enough to fold).
RUN = 30


@dataclass
class World:
    tree_id: str
    loop_id: str
    root_id: str
    branch_a_id: str
    branch_b_id: str
    hidden_id: str
    compaction_id: str
    first_kept_id: str
    usage_id: str
    leaf_id: str
    tool_task_id: str
    queued_tool_task_id: str
    agent_task_id: str
    child_session_id: str
    workflow_id: str
    workflow_agent_id: str
    run_id: str


def seed_world(owner: Any = None, *, cwd: str = "/repo/demo") -> World:
    tree = TreeStore()
    session = tree.create_session(cwd, "admin tour", owner=owner)
    sid = session.id
    root = tree.append_message(sid, None, MessageEntity(role="user", content="Plan the refactor"))
    model = tree.append_model_change(sid, root.id, "anthropic", "claude-opus")
    think = tree.append_thinking_level_change(sid, model.id, "high")
    # A branch point: two answers to the same question.
    branch_a = tree.append_message(sid, think.id, MessageEntity(role="assistant", content="Plan A"))
    branch_b = tree.append_message(
        sid,
        think.id,
        MessageEntity(
            role="assistant", content="Plan B", provider="anthropic", model="claude-opus"
        ),
        usage=EntryTokenUsageEntity(
            context_window=200000, context_tokens=1200, input_tokens=1000, output_tokens=200
        ),
    )
    tree.append_label_change(sid, branch_b.id, branch_a.id, "rejected")
    hidden = tree.append_custom_message(sid, branch_b.id, "note", "internal note", False)
    kept = tree.append_message(sid, hidden.id, MessageEntity(role="user", content="Go with B"))
    ack = tree.append_message(sid, kept.id, MessageEntity(role="assistant", content="On it"))
    compaction = tree.append_compaction(
        AppendCompactionInput(
            session_id=sid,
            parent_id=ack.id,
            summary="We chose plan B.",
            operation_id=new_id(),
            first_kept_entry_id=kept.id,
            tokens_before=5400,
        )
    )
    parent = compaction.id
    usage_id = ""
    for i in range(RUN):
        role = "user" if i % 2 == 0 else "assistant"
        usage = (
            EntryTokenUsageEntity(
                context_window=200000, context_tokens=900 + i, input_tokens=800, output_tokens=100
            )
            if role == "assistant"
            else None
        )
        entry = tree.append_message(
            sid,
            parent,
            MessageEntity(
                role=role, content=f"step {i}", provider="anthropic", model="claude-opus"
            ),
            usage=usage,
        )
        if usage is not None:
            usage_id = entry.id
        parent = entry.id
    leaf_id = parent

    loop = LoopStore()
    loop_id = new_id()
    for index, (kind, content) in enumerate(
        [("user", "What's the weather?"), ("execute_js", "fetching"), ("response", "Sunny")]
    ):
        loop.append(
            RunStep(
                session_id=loop_id,
                step_index=index,
                step_type=kind,
                content=content,
                tool_args=b'{"code":"1+1"}' if kind == "execute_js" else None,
            )
        )
    loop.grant(loop_id, "Allow fetch from api.example.com?")

    now = datetime.now(UTC)
    # No LogStore is needed to *show* a hold: the row is what LogStore.create writes.
    Holder.objects.create(
        session_id=sid, pid=4242, host="build-7", token="t" * 16, since=now, heartbeat=now
    )

    tasks = TaskRepository()
    agents = AgentTaskRepository(tasks=tasks)
    tools = ToolTaskRepository(tasks=tasks)
    workflows = WorkflowRepository(tasks=tasks, agents=agents)

    def tool(invocation: str) -> ToolTaskEntity:
        return ToolTaskEntity(
            owner_session_id=sid,
            invocation_id=invocation,
            wrapper_call_id="wrap-" + invocation,
            target_name="read",
            cwd=cwd,
            arguments_json='{"path":"go.mod"}',
            timeout_seconds=30,
            policy_json="{}",
            definition_json='{"name":"read"}',
        )

    running = tools.create(tool("call-1"))
    # Claimed with a lease that is already over: the worker "went away".
    tasks.claim_queued(
        TaskClaim(
            task_id=running.task.id,
            lease_owner="worker-9",
            lease_expires_at=now - timedelta(minutes=5),
            event_kind="task_started",
        )
    )
    queued = tools.create(tool("call-2"))
    agent = agents.create_with_child_session(
        AgentTaskEntity(
            task=TaskEntity(owner_session_id=sid),
            agent_name="explorer",
            prompt="map the modules",
            depth=1,
            policy_json="{}",
            usage_json="{}",
        ),
        ChildSessionRequest(cwd=cwd, name="explore", parent_session_id=sid),
    )
    run = workflows.create(
        WorkflowRunEntity(
            task=TaskEntity(owner_session_id=sid),
            name="review",
            source="steps: [review]",
            source_hash="sha256:abc",
            arguments_json="{}",
        )
    )
    linked = workflows.create_agent_task_with_child_session(
        run.task.id,
        AgentTaskEntity(
            task=TaskEntity(owner_session_id=sid, parent_task_id=run.task.id),
            agent_name="reviewer",
            prompt="review the diff",
            depth=1,
            policy_json="{}",
            usage_json="{}",
        ),
        ChildSessionRequest(cwd=cwd, name="review", parent_session_id=sid),
        "review",
        0,
    )
    # A run of the demo's runner on the tree session, queued (no worker here).
    agent_run = RunRepository().start("weather", "What is the weather in Paris?", session_id=sid)
    return World(
        tree_id=sid,
        loop_id=loop_id,
        root_id=root.id,
        branch_a_id=branch_a.id,
        branch_b_id=branch_b.id,
        hidden_id=hidden.id,
        compaction_id=compaction.id,
        first_kept_id=kept.id,
        usage_id=usage_id,
        leaf_id=leaf_id,
        tool_task_id=running.task.id,
        queued_tool_task_id=queued.task.id,
        agent_task_id=agent.task.id,
        child_session_id=agent.child_session_id,
        workflow_id=run.task.id,
        workflow_agent_id=linked.task.id,
        run_id=agent_run.id,
    )
