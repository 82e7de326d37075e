"""``manage.py agentstore``: every subcommand's output, JSON, exit codes and bad arguments."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import CommandError

from agentstore.models import Holder, Session, Task
from agentstore.stores import LogStore, LoopStore, SessionStore, TreeStore
from agentstore.stores.checkpoints import CheckpointStore
from agentstore.types import MessageEntity, RunStep
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.django_db
PI = REPO_ROOT / "tests" / "data" / "pi"


def run(*args: str) -> tuple[str, str]:
    out, err = StringIO(), StringIO()
    call_command("agentstore", *args, stdout=out, stderr=err)
    return out.getvalue(), err.getvalue()


def fails(*args: str, code: int = 1) -> str:
    with pytest.raises(CommandError) as info:
        run(*args)
    assert info.value.returncode == code, str(info.value)
    return str(info.value)


def tree_session(cwd: str = "/w", name: str = "", owner: Any = None) -> tuple[str, list[str]]:
    store = TreeStore()
    session = store.create_session(cwd, name, owner=owner)
    first = store.append_message(
        session.id, None, MessageEntity(role="user", content="hello there")
    )
    second = store.append_message(
        session.id, first.id, MessageEntity(role="assistant", content="hi")
    )
    return session.id, [first.id, second.id]


# -- ls ---------------------------------------------------------------------------


def test_ls_empty_says_so_on_stderr() -> None:
    out, err = run("ls")
    assert out == "" and "No sessions." in err


def test_ls_table_and_json_with_filters() -> None:
    alice = get_user_model().objects.create_user("alice")
    a, _ = tree_session("/a", owner=alice)
    b, _ = tree_session("/b", name="named")
    LoopStore().append(RunStep(session_id="loop-1", step_index=0, step_type="user", content="go"))

    out, _ = run("ls")
    lines = out.splitlines()
    assert lines[0].split() == ["ID", "KIND", "UPDATED", "(UTC)", "OWNER", "NAME", "/", "OPENING"]
    assert {line.split()[0] for line in lines[1:]} == {a, b, "loop-1"}
    assert any("hello there" in line for line in lines)

    rows = [json.loads(line) for line in run("ls", "--json")[0].splitlines()]
    assert {r["id"] for r in rows} == {a, b, "loop-1"}
    assert [
        r["id"] for r in map(json.loads, run("ls", "--json", "--cwd", "/a")[0].splitlines())
    ] == [a]
    assert [
        json.loads(x)["id"] for x in run("ls", "--json", "--owner", "alice")[0].splitlines()
    ] == [a]
    assert [json.loads(x)["id"] for x in run("ls", "--json", "--kind", "loop")[0].splitlines()] == [
        "loop-1"
    ]
    assert len(run("ls", "--json", "--limit", "1")[0].splitlines()) == 1
    assert rows[0]["kind"] in ("tree", "loop") and "updated_at" in rows[0]


def test_ls_current_hides_superseded_sessions() -> None:
    a, _ = tree_session()
    b, _ = tree_session()
    Session.objects.filter(pk=a).update(superseded_by=b)

    ids = [json.loads(x)["id"] for x in run("ls", "--json", "--current")[0].splitlines()]
    assert ids == [b]


def test_bad_arguments_are_usage_errors() -> None:
    fails("ls", "--limit", "-1", code=2)
    fails("ls", "--kind", "nope", code=2)
    fails("nonsense", code=2)
    fails("show", code=2)


# -- show -------------------------------------------------------------------------------


def test_show_tree_session_with_context() -> None:
    sid, (first, second) = tree_session(name="demo")
    store = TreeStore()
    store.append_model_change(sid, second, "openai", "gpt-5")

    out, _ = run("show", sid, "--leaf", second)
    assert f"id              {sid}" in out
    assert "name            demo" in out
    assert "user: hello there" in out and "openai/gpt-5" in out
    assert f"context at {second}: 2 message(s)" in out

    document = json.loads(run("show", sid, "--json", "--leaf", second)[0])
    assert document["session"]["id"] == sid
    assert [e["id"] for e in document["entries"]][:2] == [first, second]
    assert [m["role"] for m in document["context"]["messages"]] == ["user", "assistant"]
    assert document["hold"] is None


def test_show_loop_session_with_grants() -> None:
    store = LoopStore()
    store.append(RunStep(session_id="loop-1", step_index=0, step_type="user", content="go"))
    store.grant("loop-1", "May I?")

    out, err = run("show", "loop-1")
    assert "--- user (step 0," in out and "go" in out
    assert "--- approved (1) ---" in out and "  May I?" in out
    assert "revoke loop-1" in err
    document = json.loads(run("show", "loop-1", "--json")[0])
    assert document["grants"] == ["May I?"] and document["steps"][0]["type"] == "user"


def test_show_unknown_session_or_entry_fails() -> None:
    assert "no such session: nope" in fails("show", "nope")
    sid, _ = tree_session()
    assert "not found" in fails("show", sid, "--leaf", "missing")


def test_show_reports_the_hold() -> None:
    sid, _ = tree_session()
    now = datetime.now(UTC)
    Holder.objects.create(
        session_id=sid, pid=4242, host="elsewhere", token="t", since=now, heartbeat=now
    )

    assert "pid 4242 on elsewhere" in run("show", sid)[0]


# -- rm, grants, revoke -----------------------------------------------------------------


def test_rm_reports_each_id_and_fails_if_any_failed() -> None:
    a, _ = tree_session()
    LoopStore().append(RunStep(session_id="loop-1", step_index=0, step_type="user"))

    with pytest.raises(CommandError) as info:
        call_command(
            "agentstore",
            "rm",
            a,
            "missing",
            "loop-1",
            stdout=StringIO(),
            stderr=(err := StringIO()),
        )
    assert info.value.returncode == 1
    assert f"· removed {a}" in err.getvalue() and "· removed loop-1" in err.getvalue()
    assert "no such session: missing" in err.getvalue()
    assert not Session.objects.filter(pk__in=[a, "loop-1"]).exists()

    b, _ = tree_session()
    _, err_text = run("rm", b)
    assert f"· removed {b}" in err_text


def test_grants_and_revoke() -> None:
    store = LoopStore()
    store.append(RunStep(session_id="loop-1", step_index=0, step_type="user"))
    store.grant("loop-1", "first?")
    store.grant("loop-1", "second?")

    assert run("grants", "loop-1")[0].splitlines() == ["first?", "second?"]
    assert json.loads(run("grants", "loop-1", "--json")[0]) == ["first?", "second?"]
    _, err = run("revoke", "loop-1", "other")
    assert "· loop-1: forgot 2 approval(s)" in err and "· other: forgot 0 approval(s)" in err
    assert store.grants("loop-1") == []


# -- locks ------------------------------------------------------------------------------


def test_locks_and_break_lock() -> None:
    sid, _ = tree_session()
    assert "No session is held." in run("locks")[1]
    now = datetime.now(UTC)
    Holder.objects.create(
        session_id=sid,
        pid=os.getpid(),
        host=os.uname().nodename,
        token="t",
        since=now,
        heartbeat=now,
    )

    out, _ = run("locks")
    assert sid in out and str(os.getpid()) in out
    row = json.loads(run("locks", "--json")[0])
    assert (row["session"], row["kind"], row["alive"]) == (sid, "tree", True)

    _, err = run("break-lock", sid)
    assert f"pid {os.getpid()}" in err
    assert not Holder.objects.exists()
    assert "is not held" in fails("break-lock", sid)


# -- export / import ----------------------------------------------------------------------


def test_pi_round_trip_through_files(tmp_path: Path) -> None:
    _, err = run("import", str(PI / "v3.jsonl"), str(PI / "v1.jsonl"))
    assert "[1/2] · imported" in err and "(12 entries)" in err
    assert "v1.jsonl:4: skipped (not JSON)" in err

    out, _ = run("export", "0f8d9c1e-5a41-4b7a-9c2e-3d5f6a7b8c9d")
    assert out == (PI / "v3.jsonl").read_text()

    _, err = run(
        "export",
        "0f8d9c1e-5a41-4b7a-9c2e-3d5f6a7b8c9d",
        "11111111-2222-4333-8444-555555555555",
        "--out",
        str(tmp_path),
        "--format",
        "pi",
    )
    assert "[2/2] · exported" in err
    exported = tmp_path / "0f8d9c1e-5a41-4b7a-9c2e-3d5f6a7b8c9d.jsonl"
    assert exported.read_text() == (PI / "v3.jsonl").read_text()
    v1 = (tmp_path / "11111111-2222-4333-8444-555555555555.jsonl").read_text().splitlines()
    assert json.loads(v1[0])["version"] == 3


def test_import_reports_failures_per_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not a session\n")
    with pytest.raises(CommandError) as info:
        call_command(
            "agentstore",
            "import",
            str(bad),
            str(PI / "v2.jsonl"),
            stdout=StringIO(),
            stderr=(err := StringIO()),
        )
    assert info.value.returncode == 1
    assert "bad.jsonl: line 1 is not JSON" in err.getvalue()
    assert "· imported" in err.getvalue() and "(2 entries)" in err.getvalue()
    with pytest.raises(CommandError):
        call_command(
            "agentstore",
            "import",
            str(PI / "v2.jsonl"),
            stdout=StringIO(),
            stderr=(err := StringIO()),
        )
    assert "already exists" in err.getvalue()
    fails("import", str(PI / "v2.jsonl"), "--owner", "nobody", code=2)


def test_import_skips_blank_lines_before_the_header(tmp_path: Path) -> None:
    padded = tmp_path / "padded.jsonl"
    padded.write_text("\n  \n" + (PI / "v3.jsonl").read_text())
    _, err = run("import", str(padded))
    assert "imported" in err and "(12 entries)" in err


def test_import_of_an_empty_file_says_it_is_empty(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    with pytest.raises(CommandError):
        call_command(
            "agentstore", "import", str(empty), stdout=StringIO(), stderr=(err := StringIO())
        )
    assert "empty.jsonl: the file is empty" in err.getvalue()
    assert not Session.objects.exists()


def test_version_names_agentstore_not_django() -> None:
    from agentstore import __version__

    out = subprocess.run(
        [sys.executable, "manage.py", "agentstore", "--version"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.strip() == __version__


def test_export_usage_errors() -> None:
    a, _ = tree_session()
    b, _ = tree_session()
    fails("export", a, b, code=2)
    fails("export", a, "--format", "agentsession", code=2)
    assert "no such session: nope" in fails("export", "nope")
    LoopStore().append(RunStep(session_id="loop-1", step_index=0, step_type="user"))
    assert "exports as agentstore, not pi" in fails("export", "loop-1", "--format", "pi", code=2)
    assert "exports as pi, not agentstore" in fails("export", a, "--format", "agentstore", code=2)


# -- stats, prune, demo -------------------------------------------------------------------


def test_stats() -> None:
    tree_session()
    numbers = json.loads(run("stats", "--json")[0])
    assert numbers["sessions"] == {"tree": 1, "loop": 0, "log": 0, "graph": 0}
    assert numbers["entries"] == 2
    assert "sessions                1" in run("stats")[0]


def test_prune_dry_run_deletes_nothing_then_prune_deletes() -> None:
    old, _ = tree_session()
    new, _ = tree_session()
    held, _ = tree_session()
    past = datetime(2020, 1, 1, tzinfo=UTC)
    Session.objects.filter(pk__in=[old, held]).update(updated_at=past)
    Holder.objects.create(session_id=held, pid=1, host="h", token="t", since=past, heartbeat=past)

    report = json.loads(run("prune", "--before", "2021-01-01", "--dry-run", "--json")[0])
    assert report == {"dry_run": True, "sessions": [old]}
    assert Session.objects.filter(pk=old).exists()
    out, err = run("prune", "--before", "2021-01-01")
    assert "Sessions: deleted 1." in out and f"· deleted session {old}" in err
    assert set(Session.objects.values_list("id", flat=True)) == {new, held}
    fails("prune", code=2)
    fails("prune", "--before", "yesterday", code=2)


def test_prune_finished_tasks() -> None:
    sid, _ = tree_session()
    now = datetime.now(UTC)
    for n, (state, finished) in enumerate(
        [
            ("succeeded", now - timedelta(days=40)),
            ("failed", now - timedelta(days=1)),
            ("running", None),
        ]
    ):
        Task.objects.create(
            id=f"01a00000-0000-7000-8000-00000000000{n}",
            kind="tool",
            state=state,
            owner_session_id=sid,
            created_at=now,
            updated_at=now,
            finished_at=finished,
        )
    assert (
        json.loads(run("prune", "--tasks-older-than", "30", "--dry-run", "--json")[0])["tasks"] == 1
    )
    assert Task.objects.count() == 3
    assert "Tasks: deleted 1." in run("prune", "--tasks-older-than", "30")[0]
    assert sorted(Task.objects.values_list("state", flat=True)) == ["failed", "running"]


@pytest.mark.django_db(transaction=True)
def test_prune_can_vacuum() -> None:
    old, _ = tree_session()
    Session.objects.filter(pk=old).update(updated_at=datetime(2020, 1, 1, tzinfo=UTC))

    out, err = run("prune", "--before", "2021-01-01", "--vacuum", "--json")
    assert json.loads(out) == {"dry_run": False, "sessions": [old], "vacuumed": True}
    assert "VACUUM" in err


def test_demo_seeds_once() -> None:
    first, _ = run("demo")
    counts = {kind: Session.objects.filter(kind=kind).count() for kind in ("tree", "loop", "log")}
    second, _ = run("demo")
    assert "Created tree session" in first and "Kept tree session" in second
    assert all(counts.values()), counts
    assert counts == {k: Session.objects.filter(kind=k).count() for k in ("tree", "loop", "log")}


# -- follow across processes ----------------------------------------------------------------


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_follow_prints_what_another_process_appends(test_database_url: str) -> None:
    store = TreeStore()
    session = store.create_session("/follow")
    first = store.append_message(session.id, None, MessageEntity(role="user", content="before"))
    # PYTHONFAULTHANDLER: a follower that does not end on Ctrl-C is made to
    # print every thread's stack (SIGABRT below), so a failure says where it was.
    env = {**os.environ, "DATABASE_URL": test_database_url, "PYTHONFAULTHANDLER": "1"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "manage.py",
            "agentstore",
            "follow",
            session.id,
            "--json",
            "--interval",
            "0.05",
        ],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # Ctrl-C as a terminal delivers it: a suite started in the background by
        # a non-interactive shell inherits SIGINT *ignored*, and so would the
        # follower (it then never sees the signal this test sends).
        preexec_fn=_default_sigint,
    )
    try:
        assert proc.stdout is not None
        line = json.loads(proc.stdout.readline())
        assert (line["seq"], line["id"]) == (1, first.id)
        appended = []
        parent = first.id
        for n in range(3):
            parent = store.append_message(
                session.id, parent, MessageEntity(role="assistant", content=f"m{n}")
            ).id
            appended.append(parent)
        seen = [json.loads(proc.stdout.readline())["id"] for _ in appended]
        assert seen == appended
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGABRT)
            _, err = proc.communicate(timeout=30)
            pytest.fail(f"follow did not end on Ctrl-C within 60 s; its stacks:\n{err}")
    # Ctrl-C ends quietly.
    assert proc.returncode == 0, err


def follow_json(sid: str) -> list[dict[str, Any]]:
    out, _ = run("follow", sid, "--json", "--max-seconds", "0.05", "--interval", "0.01")
    return [json.loads(line) for line in out.splitlines()]


def test_follow_prints_every_kind() -> None:
    """Each kind's items, positioned like the SSE stream (docs/commands.md, "follow")."""
    sid, ids = tree_session()
    tree = follow_json(sid)
    assert [(r["event"], r["seq"], r["id"]) for r in tree] == [
        ("entry", 1, ids[0]),
        ("entry", 2, ids[1]),
    ]
    assert tree[0]["summary"] == "user: hello there"

    loop = SessionStore().create("loop").id
    LoopStore().append(RunStep(session_id=loop, step_index=0, step_type="user", content="go"))
    LoopStore().append(RunStep(session_id=loop, step_index=1, step_type="response", content="ok"))
    steps = follow_json(loop)
    assert [(r["event"], r["type"], r["summary"]) for r in steps] == [
        ("step", "user", "go"),
        ("step", "response", "ok"),
    ]
    assert steps[0]["position"] < steps[1]["position"]

    log = LogStore()
    try:
        created = log.create({"cwd": "/repo"})
        entry_id = log.append(created.id, {"type": "info", "name": "first"})
    finally:
        log.close()
    lines = follow_json(created.id)
    assert [(r["event"], r["seq"], r["id"], r["type"]) for r in lines] == [
        ("line", 1, entry_id, "info")
    ]

    CheckpointStore().put("thread-f", "", "1f0-a", None, "json", b"{}", {"step": 0}, {})
    CheckpointStore().put("thread-f", "", "1f0-b", "1f0-a", "json", b"{}", {"step": 1}, {})
    checkpoints = follow_json("thread-f")
    assert [(r["event"], r["id"], r["parent_id"]) for r in checkpoints] == [
        ("checkpoint", "1f0-a", None),
        ("checkpoint", "1f0-b", "1f0-a"),
    ]
    assert checkpoints[1]["summary"] == "step 1 ()"


def test_follow_stops_after_max_seconds_and_reports_deletion() -> None:
    sid, ids = tree_session()
    # Returning at all is the point: without --max-seconds, follow runs until Ctrl-C.
    out, _ = run("follow", sid, "--max-seconds", "0.3", "--interval", "0.1")
    assert len(out.splitlines()) == 2 and "hello there" in out
    fails("follow", sid, "--interval", "0", code=2)
    TreeStore().delete_session(sid)
    assert "no such session" in fails("follow", sid)
