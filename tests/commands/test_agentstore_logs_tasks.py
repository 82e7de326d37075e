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


def test_refs_and_ref_log_are_read_in_limited_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    """``refs`` and ``ref --log`` page through the store: ``--limit``, ``--after``, LIMIT."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from agentstore.cli import refs as ref_commands
    from agentstore.models import Ref, RefLog

    monkeypatch.setattr(ref_commands, "PAGE", 7)  # several pages from a few dozen rows
    store = LogStore()
    sid = log_session(store)
    names = [f"many/{i:04d}" for i in range(1030)]
    now = datetime.now(UTC)
    Ref.objects.bulk_create([Ref(name=n, session_id=sid, updated_at=now) for n in names])

    with CaptureQueriesContext(connection) as queries:
        out, err = run("refs", "--json", "--limit", "20")
    assert [json.loads(line)["name"] for line in out.splitlines()] == names[:20]
    assert f"--after {names[19]}" in err
    reads = [q["sql"] for q in queries.captured_queries if 'FROM "agentstore_ref"' in q["sql"]]
    pages = [q for q in reads if "LIMIT 8" in q or "LIMIT 7" in q]  # 7 + 7 + 6, one more each
    assert len(pages) == 3, reads

    out, _ = run("refs", "--json")  # the default bound: 1,000
    assert len(out.splitlines()) == 1000
    out, err = run("refs", "many/", "--json", "--after", names[999], "--limit", "0")
    assert [json.loads(line)["name"] for line in out.splitlines()] == names[1000:]
    assert "--after" not in err
    out, err = run("refs", "many/", "--after", names[1027])
    assert names[1028] in out and names[1029] in out and names[1027] not in out
    fails("refs", "--after", "bad name", code=2)
    fails("refs", "--limit", "-1", code=2)

    store.update_ref("h", None, RefTarget(session=sid), "0")
    for index in range(1, 10):
        store.update_ref("h", RefTarget(session=sid), None, f"{index} off")
        store.update_ref("h", None, RefTarget(session=sid), f"{index} on")
    newest = [e.reason for e in store.ref_log("h")]
    document = json.loads(run("ref", "h", "--log", "--json", "--limit", "9")[0])
    assert [e["reason"] for e in document["log"]] == newest[:9]
    older = json.loads(
        run("ref", "h", "--log", "--json", "--after", str(document["more_after"]))[0]
    )
    assert [e["reason"] for e in older["log"]] == newest[9:] and "more_after" not in older
    out, err = run("ref", "h", "--log", "--limit", "3")
    assert "9 on" in out and "8 on" in out and "8 off" not in out
    assert f"--after {document['log'][2]['position']}" in err
    with CaptureQueriesContext(connection) as queries:
        run("ref", "h", "--log", "--limit", "0")
    logs = [q["sql"] for q in queries.captured_queries if RefLog._meta.db_table in q["sql"]]
    assert len(logs) == 3 and all("LIMIT 8" in q for q in logs), logs  # 19 rows: 7, 7, 5
