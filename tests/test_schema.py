"""The schema: every table exists, the constraints reject bad rows, cascades and survivals.

Run on both backends; the same rows must be refused by SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.apps import apps
from django.core.management import call_command
from django.db import IntegrityError, connection, transaction

from agentstore import models as m
from agentstore.ids import new_id

NOW = datetime(2026, 5, 31, 12, 0, tzinfo=UTC)

pytestmark = pytest.mark.django_db


def rejected(fn: Callable[[], Any]) -> None:
    """Assert the database refuses what ``fn`` writes (and the test can go on)."""
    with pytest.raises(IntegrityError), transaction.atomic():
        fn()
        # Foreign keys are checked at commit time; check them now.
        connection.check_constraints()


def session(sid: str | None = None, **fields: Any) -> m.Session:
    return m.Session.objects.create(
        id=new_id() if sid is None else sid,
        created_at=NOW,
        updated_at=NOW,
        **{"cwd": "/repo", **fields},
    )


def entry(s: m.Session, seq: int, **fields: Any) -> m.Entry:
    values: dict[str, Any] = {"entry_id": new_id(), "type": "message", "created_at": NOW}
    values.update(fields)
    return m.Entry.objects.create(session=s, seq=seq, **values)


def task(owner: m.Session, **fields: Any) -> m.Task:
    values: dict[str, Any] = {
        "id": new_id(),
        "kind": "agent",
        "state": m.TaskState.QUEUED,
        "created_at": NOW,
        "updated_at": NOW,
    }
    values.update(fields)
    return m.Task.objects.create(owner_session=owner, **values)


def tool_task(owner: m.Session, invocation: str = "call-1", **fields: Any) -> m.ToolTask:
    values: dict[str, Any] = {
        "target_name": "bash",
        "arguments_json": "{}",
        "cwd": "/repo",
        "invocation_id": invocation,
        "wrapper_call_id": "wrap-1",
        "timeout_seconds": 30,
        "definition_json": "{}",
    }
    values.update(fields)
    return m.ToolTask.objects.create(task=task(owner, kind="tool"), owner_session=owner, **values)


def agent_task(owner: m.Session, child: m.Session, **fields: Any) -> m.AgentTask:
    values: dict[str, Any] = {"agent_name": "general", "prompt": "inspect", "depth": 1}
    values.update(fields)
    if "task" not in values:
        values["task"] = task(owner)
    return m.AgentTask.objects.create(child_session=child, **values)


# -- shape ---------------------------------------------------------------------


def test_every_model_has_its_table() -> None:
    tables = set(connection.introspection.table_names())
    expected = {model._meta.db_table for model in apps.get_app_config("agentstore").get_models()}

    assert expected <= tables
    assert {
        "agentstore_session",
        "agentstore_entry",
        "agentstore_messagepart",
        "agentstore_step",
        "agentstore_grant",
        "agentstore_holder",
        "agentstore_ref",
        "agentstore_reflog",
        "agentstore_document",
        "agentstore_task",
        "agentstore_taskevent",
        "agentstore_agenttask",
        "agentstore_tooltask",
        "agentstore_functiontask",
        "agentstore_runtask",
        "agentstore_worker",
        "agentstore_workflowrun",
        "agentstore_workflowagenttask",
        "agentstore_checkpoint",
        "agentstore_checkpointblob",
        "agentstore_checkpointwrite",
    } == expected


def test_models_and_migrations_agree() -> None:
    call_command("makemigrations", "agentstore", "--check", "--dry-run", verbosity=0)


def test_named_constraints_exist_in_the_database() -> None:
    with connection.cursor() as cursor:
        constraints = connection.introspection.get_constraints(cursor, "agentstore_entry")
    assert {
        "agentstore_entry_seq_uniq",
        "agentstore_entry_entry_id_uniq",
        "agentstore_entry_operation_uniq",
        "agentstore_entry_compaction_parent_uniq",
    } <= set(constraints)


# -- sessions and entries --------------------------------------------------------


def test_session_rows_are_checked() -> None:
    rejected(lambda: session(""))
    rejected(lambda: session(kind="chat"))
    rejected(lambda: session(prompt_tokens=-1))
    s = session("dup")
    rejected(lambda: session(s.id))


def test_entry_seq_is_unique_and_positive_per_session() -> None:
    a, b = session(), session()
    entry(a, 1)
    entry(b, 1)  # another session may use the same seq

    rejected(lambda: entry(a, 1))
    rejected(lambda: entry(a, 0))
    rejected(lambda: entry(a, 2, type=""))


def test_entry_id_is_unique_per_session_only() -> None:
    a, b = session(), session()
    entry(a, 1, entry_id="sha256:abc")
    entry(b, 1, entry_id="sha256:abc")  # a fork's prefix repeats the origin's ids

    rejected(lambda: entry(a, 2, entry_id="sha256:abc"))
    rejected(lambda: entry(a, 2, entry_id=""))


def test_one_new_style_compaction_per_session_and_parent() -> None:
    s = session()
    parent = entry(s, 1)
    entry(s, 2, type="compaction", parent_id=parent.entry_id, operation_id="op-1")

    # The race loser: same (session, parent), another operation.
    rejected(lambda: entry(s, 3, type="compaction", parent_id=parent.entry_id, operation_id="op-2"))
    # Another parent is fine; so are old-style compactions without an operation id.
    entry(s, 3, type="compaction", parent_id=new_id(), operation_id="op-3")
    entry(s, 4, type="compaction", parent_id=parent.entry_id)
    entry(s, 5, type="compaction", parent_id=parent.entry_id)
    # Another session may compact "the same" parent id.
    entry(session(), 1, type="compaction", parent_id=parent.entry_id, operation_id="op-4")


def test_root_compactions_collapse_to_one_parent() -> None:
    s = session()
    entry(s, 1, type="compaction", parent_id=None, operation_id="root-1")

    rejected(lambda: entry(s, 2, type="compaction", parent_id=None, operation_id="root-2"))


def test_operation_id_names_one_entry() -> None:
    s = session()
    entry(s, 1, type="compaction", parent_id="p1", operation_id="summary-a")

    rejected(lambda: entry(s, 2, type="compaction", parent_id="p2", operation_id="summary-a"))
    rejected(lambda: entry(session(), 1, type="compaction", operation_id="summary-a"))


def test_message_parts_are_checked() -> None:
    e = entry(session(), 1, role="user")
    m.MessagePart.objects.create(entry=e, sequence=0, type="text", text="hi")

    rejected(lambda: m.MessagePart.objects.create(entry=e, sequence=0, type="text", text="again"))
    rejected(lambda: m.MessagePart.objects.create(entry=e, sequence=1, type="audio"))
    rejected(lambda: m.MessagePart.objects.create(entry=e, sequence=-1, type="text", text="x"))
    m.MessagePart.objects.create(
        entry=e, sequence=1, type="image", data=b"\x89PNG", width=1, height=1
    )


# -- loop, holds, refs, documents --------------------------------------------------


def test_step_index_may_repeat_but_counts_are_non_negative() -> None:
    s = session(kind="loop")
    for _ in range(2):
        m.Step.objects.create(session=s, step_index=0, step_type="user", created_at=NOW)

    rejected(
        lambda: m.Step.objects.create(
            session=s, step_index=1, step_type="response", prompt_tokens=-5, created_at=NOW
        )
    )
    assert m.Step.objects.filter(session=s).count() == 2


def test_grants_are_unique_per_session_and_prompt_digest() -> None:
    m.Grant.objects.create(session_id="s1", prompt="rm -rf?", prompt_digest="d1", granted_at=NOW)
    m.Grant.objects.create(session_id="s2", prompt="rm -rf?", prompt_digest="d1", granted_at=NOW)

    rejected(
        lambda: m.Grant.objects.create(
            session_id="s1", prompt="rm -rf?", prompt_digest="d1", granted_at=NOW
        )
    )
    rejected(
        lambda: m.Grant.objects.create(
            session_id="", prompt="x", prompt_digest="d2", granted_at=NOW
        )
    )


def test_one_holder_per_session() -> None:
    s = session()
    m.Holder.objects.create(session=s, pid=1, host="h", token="t", since=NOW, heartbeat=NOW)

    rejected(
        lambda: m.Holder.objects.create(
            session=s, pid=2, host="h", token="u", since=NOW, heartbeat=NOW
        )
    )


def test_refs_and_documents_are_checked() -> None:
    m.Ref.objects.create(name="team/main", session_id="s", updated_at=NOW)
    rejected(lambda: m.Ref.objects.create(name="team/main", session_id="t", updated_at=NOW))
    rejected(lambda: m.Ref.objects.create(name="", session_id="t", updated_at=NOW))
    rejected(lambda: m.Ref.objects.create(name="x", session_id="", updated_at=NOW))

    m.Document.objects.create(namespace="ns", key="k", updated_at=NOW)
    rejected(lambda: m.Document.objects.create(namespace="ns", key="k", updated_at=NOW))
    rejected(lambda: m.Document.objects.create(namespace="", key="k2", updated_at=NOW))


# -- tasks and workflows ---------------------------------------------------------


def test_task_state_kind_and_lease_owner_are_checked() -> None:
    owner = session()
    task(owner)

    rejected(lambda: task(owner, state="paused"))
    rejected(lambda: task(owner, kind=""))
    rejected(lambda: task(owner, lease_owner=""))
    rejected(lambda: task(owner, owner_session_id="no-such-session"))


def test_task_events_are_contiguous_keys() -> None:
    t = task(session())
    m.TaskEvent.objects.create(
        task=t, sequence=1, event_id=new_id(), kind="task_queued", created_at=NOW
    )

    rejected(
        lambda: m.TaskEvent.objects.create(
            task=t, sequence=1, event_id=new_id(), kind="task_started", created_at=NOW
        )
    )
    rejected(
        lambda: m.TaskEvent.objects.create(
            task=t, sequence=0, event_id=new_id(), kind="task_started", created_at=NOW
        )
    )
    rejected(
        lambda: m.TaskEvent.objects.create(
            task=t, sequence=2, event_id=new_id(), kind="", created_at=NOW
        )
    )


def test_agent_tasks_are_checked() -> None:
    owner, child = session(), session()
    agent_task(owner, child)

    rejected(lambda: agent_task(owner, child))  # one agent task per child session
    rejected(lambda: agent_task(owner, session(), depth=0))
    rejected(lambda: agent_task(owner, session(), agent_name=""))
    rejected(lambda: agent_task(owner, session(), prompt=""))


def test_tool_tasks_are_idempotent_per_owner_and_invocation() -> None:
    owner, other = session(), session()
    tool_task(owner, "call-1")
    tool_task(other, "call-1")  # invocation ids are session-local

    rejected(lambda: tool_task(owner, "call-1"))
    rejected(lambda: tool_task(owner, "call-2", timeout_seconds=0))
    rejected(lambda: tool_task(owner, "call-3", target_name=""))
    rejected(lambda: tool_task(owner, "call-4", outcome_version=1))  # outcome without JSON
    rejected(lambda: tool_task(owner, "call-5", outcome_json="{}"))  # JSON without version
    tool_task(owner, "call-6", outcome_version=1, outcome_json='{"is_error":false}')


def test_workflow_links_are_unique_by_node_invocation_and_sequence() -> None:
    owner = session()
    wf = m.WorkflowRun.objects.create(
        task=task(owner, kind="workflow"), source="steps: []", source_hash="h"
    )

    def link(seq: int, node: str, index: int, agent: m.AgentTask | None = None) -> None:
        m.WorkflowAgentTask.objects.create(
            workflow=wf,
            agent_task=agent or agent_task(owner, session()),
            sequence=seq,
            node_key=node,
            invocation_index=index,
            created_at=NOW,
        )

    first = agent_task(owner, session())
    link(1, "review", 0, first)
    link(2, "review", 1)

    rejected(lambda: link(3, "review", 1))  # same node and invocation
    rejected(lambda: link(2, "fix", 0))  # same sequence
    rejected(lambda: link(3, "fix", 0, first))  # an agent task belongs to one link
    rejected(lambda: link(0, "fix", 0))
    rejected(
        lambda: m.WorkflowRun.objects.create(
            task=task(owner, kind="workflow"), source="", source_hash=""
        )
    )


# -- cascades and what survives ------------------------------------------------------


def test_deleting_a_session_removes_what_it_owns_and_keeps_the_rest() -> None:
    parent = session()
    child = session(parent_session=parent.id)
    e = entry(parent, 1, role="user", content="hi")
    m.MessagePart.objects.create(entry=e, sequence=0, type="text", text="hi")
    m.Step.objects.create(session=parent, step_index=0, step_type="user", created_at=NOW)
    m.Holder.objects.create(session=parent, pid=1, host="h", token="t", since=NOW, heartbeat=NOW)
    m.Grant.objects.create(session_id=parent.id, prompt="ok?", prompt_digest="d", granted_at=NOW)
    m.Ref.objects.create(name="main", session_id=parent.id, updated_at=NOW)
    m.RefLog.objects.create(name="main", new_session=parent.id, at=NOW)
    owned = tool_task(parent)
    m.TaskEvent.objects.create(
        task=owned.task, sequence=1, event_id=new_id(), kind="task_queued", created_at=NOW
    )
    subagent = agent_task(parent, child)
    parent_id = parent.id

    parent.delete()

    assert not m.Entry.objects.exists()
    assert not m.MessagePart.objects.exists()
    assert not m.Step.objects.exists()
    assert not m.Holder.objects.exists()
    assert not m.Task.objects.exists()
    assert not m.TaskEvent.objects.exists()
    assert not m.ToolTask.objects.exists()
    assert not m.AgentTask.objects.filter(pk=subagent.pk).exists()
    # Child sessions, grants (purged by the store, not by cascade), refs and the ref log survive.
    assert m.Session.objects.filter(pk=child.pk, parent_session=parent_id).exists()
    assert m.Grant.objects.filter(session_id=parent_id).exists()
    assert m.Ref.objects.filter(name="main", session_id=parent_id).exists()
    assert m.RefLog.objects.filter(name="main").exists()


def test_deleting_a_child_session_removes_its_agent_task_row() -> None:
    owner, child = session(), session()
    subagent = agent_task(owner, child)

    child.delete()

    # The generic task row is the owner's; TreeStore.delete_session removes it
    # explicitly together with the child (SessionStore.delete), the schema only cascades
    # the agent details.
    assert not m.AgentTask.objects.filter(pk=subagent.pk).exists()
    assert m.Session.objects.filter(pk=owner.pk).exists()


def test_deleting_a_task_removes_children_events_and_workflow_links() -> None:
    owner = session()
    wf_task = task(owner, kind="workflow")
    wf = m.WorkflowRun.objects.create(task=wf_task, source="s", source_hash="h")
    sub = agent_task(owner, session(), task=task(owner, parent_task=wf_task))
    m.WorkflowAgentTask.objects.create(
        workflow=wf, agent_task=sub, sequence=1, node_key="n", created_at=NOW
    )
    m.TaskEvent.objects.create(
        task=wf_task, sequence=1, event_id=new_id(), kind="task_queued", created_at=NOW
    )

    wf_task.delete()

    assert not m.Task.objects.exists()
    assert not m.WorkflowRun.objects.exists()
    assert not m.WorkflowAgentTask.objects.exists()
    assert not m.AgentTask.objects.exists()
    assert not m.TaskEvent.objects.exists()


def test_datetimes_round_trip_with_microseconds_in_utc() -> None:
    stamp = NOW + timedelta(microseconds=123456)
    s = session()
    m.Session.objects.filter(pk=s.pk).update(updated_at=stamp)

    assert m.Session.objects.get(pk=s.pk).updated_at == stamp
