"""LogStore across real OS processes (``tests/workers/log_worker.py``), SQLite and PostgreSQL.

* two processes contend for one session's hold: exactly one gets it;
* 8 processes race ``session_for`` on one ref: one session, one ref, and every
  process that succeeded got that session (losers may be refused the hold);
* a follower here sees another process's appends within 2 s of their commit;
* a broken hold makes the victim process's next append fail loudly, and the
  one after it too;
* a holder process killed while holding is taken over (and reported) by the
  next open on this host.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from agentstore.models import Ref
from agentstore.models import Session as SessionRow
from agentstore.stores import LogStore
from tests.conftest import REPO_ROOT

pytestmark = pytest.mark.slow


class Workers:
    def __init__(self, database_url: str, tmp: Path) -> None:
        self.env = {
            **os.environ,
            "DATABASE_URL": database_url,
            "DJANGO_SETTINGS_MODULE": "project.settings",
        }
        self.tmp = tmp
        self.start = tmp / "go"
        self.done = tmp / "done"
        self.procs: list[subprocess.Popen[str]] = []

    def spawn(self, *args: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "tests.workers.log_worker",
                "--start-file",
                str(self.start),
                "--done-file",
                str(self.done),
                *args,
            ],
            cwd=REPO_ROOT,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.procs.append(proc)
        return proc

    def finish(self, proc: subprocess.Popen[str]) -> list[dict[str, Any]]:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        return [json.loads(line) for line in out.splitlines() if line.strip()]

    def kill_all(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


@contextmanager
def workers(database_url: str) -> Iterator[Workers]:
    with tempfile.TemporaryDirectory() as tmp:
        pool = Workers(database_url, Path(tmp))
        try:
            yield pool
        finally:
            pool.kill_all()


def read_line(proc: subprocess.Popen[str], timeout: float = 60.0) -> dict[str, Any]:
    """The next JSON line of a worker (blocking, with a timeout)."""
    box: list[str] = []
    reader = threading.Thread(target=lambda: box.append(proc.stdout.readline()))  # type: ignore[union-attr]
    reader.start()
    reader.join(timeout)
    assert box and box[0], "worker printed nothing"
    return dict(json.loads(box[0]))


def test_two_processes_contend_for_one_hold(test_database_url: str) -> None:
    store = LogStore()
    sid = store.create({"id": "contended"}).id
    store.close()
    with workers(test_database_url) as pool:
        procs = [pool.spawn("--mode", "hold", "--session", sid) for _ in range(2)]
        time.sleep(1.5)  # let both finish django.setup()
        pool.start.touch()
        first = [read_line(p) for p in procs]
        assert sorted(r["held"] for r in first) == [False, True], first
        winner = next(r for r in first if r["held"])
        loser = next(r for r in first if not r["held"])
        assert f"held by pid {winner['pid']}" in loser["error"]
        info = LogStore().lock_holder(sid)
        assert info is not None and info.pid == winner["pid"]
        pool.done.touch()
        for p in procs:
            pool.finish(p)
    assert LogStore().lock_holder(sid) is None  # the winner released on close


def test_eight_processes_race_session_for(test_database_url: str) -> None:
    rounds = 3
    with workers(test_database_url) as pool:
        procs = [
            pool.spawn("--mode", "session_for", "--ref", "race/name", "--rounds", str(rounds))
            for _ in range(8)
        ]
        time.sleep(2.0)
        pool.start.touch()
        results = [pool.finish(p)[-1]["results"] for p in procs]
    store = LogStore()
    for n in range(rounds):
        named = store.resolve_ref(f"race/name/{n}").session
        got = [r[n] for r in results]
        assert all(r.get("id") == named or r.get("error") == "session_locked" for r in got), got
        assert any(r.get("id") == named for r in got)
    assert SessionRow.objects.filter(kind="log").count() == rounds
    assert Ref.objects.count() == rounds


def test_follower_sees_another_process_within_two_seconds(test_database_url: str) -> None:
    store = LogStore()
    sid = store.create({"id": "followed"}).id
    store.close()
    follower = LogStore(read_only=True)
    with workers(test_database_url) as pool:
        proc = pool.spawn("--mode", "append", "--session", sid, "--count", "3", "--gap", "0.3")
        changes = follower.follow(sid)
        assert next(changes).kind == "snapshot"
        time.sleep(1.5)
        pool.start.touch()
        arrived: dict[str, float] = {}
        stop_at = time.monotonic() + 30
        for change in changes:
            if change.kind == "appended":
                arrived[change.entry_id] = time.time()
            if len(arrived) == 3 or time.monotonic() > stop_at:
                break
        committed = {r["id"]: r["committed"] for r in pool.finish(proc)}
    assert list(arrived) == list(committed)
    for eid, at in committed.items():
        assert arrived[eid] - at < 2.0


def test_broken_hold_makes_the_victims_next_append_fail(test_database_url: str) -> None:
    store = LogStore()
    sid = store.create({"id": "victim"}).id
    store.close()
    with workers(test_database_url) as pool:
        proc = pool.spawn("--mode", "victim", "--session", sid)
        assert read_line(proc)["ready"] is True
        operator = LogStore()
        assert operator.break_lock(sid) is True
        operator.open(sid)  # the operator's store now holds it
        pool.start.touch()
        outcomes = pool.finish(proc)[-1]["outcomes"]
        operator.close()
    assert [o.get("error") for o in outcomes] == ["session_locked", "session_locked"]
    assert "lost to" in outcomes[0]["message"]
    assert len(LogStore().read(sid)) == 1  # nothing interleaved after the break


def test_a_killed_holder_is_taken_over_and_reported(test_database_url: str) -> None:
    store = LogStore()
    sid = store.create({"id": "orphaned"}).id
    store.close()
    with workers(test_database_url) as pool:
        proc = pool.spawn("--mode", "hold", "--session", sid)
        pool.start.touch()
        held = read_line(proc)
        assert held["held"] is True
        proc.kill()  # dies holding the session: no release, no close
        proc.wait()
    reports: list[Any] = []
    taker = LogStore(stale_lock_report=reports.append)
    taker.open(sid)
    assert [r.pid for r in reports] == [held["pid"]]
    assert taker.lock_holder(sid).pid == os.getpid()  # type: ignore[union-attr]
    taker.close()
