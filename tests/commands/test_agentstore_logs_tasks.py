"""``manage.py agentstore`` on log sessions, refs and tasks (the LogStore and task repositories)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from agentstore.models import Holder, Session
from agentstore.stores import LogStore, TreeStore
from agentstore.tasks import TaskRepository
from agentstore.types import RefTarget, TaskClaim, TaskEntity

pytestmark = pytest.mark.django_db


def run(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("agentstore", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def fails(*args: str, code: int = 1) -> str:
    with pytest.raises(CommandError) as info:
        run(*args)
    assert info.value.returncode == code, str(info.value)
    return str(info.value)


def log_session(store: LogStore) -> str:
    session = store.create({"cwd": "/logs", "harness": {"name": "test"}})
    store.append(session.id, {"type": "config", "model": "m"})
    store.append(
        session.id,
        {
            "type": "item",
            "item": {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "hi"}],
            },
        },
    )
    return str(session.id)


def test_log_sessions_list_show_export_import_and_rm(tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = LogStore()
    sid = log_session(store)

    rows = [json.loads(x) for x in run("ls", "--json", "--kind", "log")[0].splitlines()]
    assert [r["id"] for r in rows] == [sid]
    document = json.loads(run("show", sid, "--json")[0])
    assert [e["type"] for e in document["entries"]] == ["config", "item"]
    assert document["hold"] is not None  # the store that created it holds it

    text, _ = run("export", sid, "--format", "agentsession")
    assert text == store.export_jsonl(sid)
    store.release(sid)
    run("rm", sid)
    assert not Session.objects.filter(pk=sid).exists()

    path = tmp_path / "s.jsonl"
    path.write_text(text)
    _, err = run("import", str(path))
    assert f"as {sid} (2 entries)" in err
    assert LogStore(read_only=True).export_jsonl(sid) == text


def test_refs_and_ref_log() -> None:
    store = LogStore()
    sid = log_session(store)
    store.update_ref("team/main", None, RefTarget(session=sid), "start")

    out, _ = run("refs", "team/")
    assert "team/main" in out and sid in out and "ok" in out
    row = json.loads(run("refs", "--json")[0])
    assert (row["name"], row["session"], row["state"]) == ("team/main", sid, "ok")

    document = json.loads(run("ref", "team/main", "--log", "--json")[0])
    assert document["state"] == "ok" and document["session"] == sid
    assert [(e["new"]["session"], e["reason"]) for e in document["log"]] == [(sid, "start")]

    store.delete(sid)
    assert json.loads(run("refs", "--json")[0])["state"] == "dangling"
    assert "dangling" in run("ref", "team/main")[0]
    assert "no such ref" in fails("ref", "nope")
    fails("refs", "bad name", code=2)


def test_tasks_task_and_recover() -> None:
    owner = TreeStore().create_session("/tasks")
    repository = TaskRepository()
    queued = repository.create(TaskEntity(kind="agent", owner_session_id=owner.id))
    running = repository.create(TaskEntity(kind="agent", owner_session_id=owner.id))
    past = datetime.now(UTC) - timedelta(minutes=5)
    assert repository.claim_queued(
        TaskClaim(
            task_id=running.id,
            lease_owner="worker-1",
            lease_expires_at=past,
            event_kind="task_started",
        )
    )

    out, _ = run("tasks")
    assert queued.id in out and "EXPIRED" in out
    rows = [json.loads(x) for x in run("tasks", "--json", "--state", "running")[0].splitlines()]
    assert [r["id"] for r in rows] == [running.id]

    document = json.loads(run("task", running.id, "--json")[0])
    assert document["task"]["state"] == "running"
    assert [e["kind"] for e in document["events"]] == ["task_queued", "task_started"]
    assert "task_started" in run("task", running.id)[0]
    assert "no such task" in fails("task", "01a00000-0000-7000-8000-000000000000")

    result = json.loads(run("recover", "--json")[0])
    assert result == {"agent": [running.id]}
    assert repository.get(running.id).state == "interrupted"  # type: ignore[union-attr]
    assert "Recovered 0 task(s)" in run("recover")[0]


def test_break_lock_of_a_log_session() -> None:
    store = LogStore()
    sid = log_session(store)
    assert Holder.objects.filter(session_id=sid).exists()

    run("break-lock", sid)

    assert not Holder.objects.filter(session_id=sid).exists()
