"""LogStore across real OS processes (``tests/workers/log_worker.py``), SQLite and PostgreSQL.

* two processes contend for one session's hold: exactly one gets it;
* 8 processes race ``session_for`` on one ref: one session, one ref, and every
  process that succeeded got that session (losers may be refused the hold);
* a follower here sees another process's appends, in order, each once;
* a broken hold makes the victim process's next append fail loudly, and the
  one after it too;
* a holder process killed while holding is taken over (and reported) by the
  next open on this host.
"""

from __future__ import annotations

import os
import subprocess
from typing import Any

import pytest

from agentstore.models import Ref
from agentstore.models import Session as SessionRow
from agentstore.stores import LogStore
from tests.processes import Launcher

pytestmark = pytest.mark.slow


MODULE = ("-m", "tests.workers.log_worker")


class Workers(Launcher):
    """The shared launcher, plus the ``--done-file`` the hold mode waits for."""

    def __init__(self, database_url: str) -> None:
        super().__init__(database_url)
        self.done = self.dir / "done"

    def spawn_worker(self, *args: str) -> subprocess.Popen[str]:
        return self.spawn(*MODULE, "--done-file", str(self.done), *args)


def test_two_processes_contend_for_one_hold(test_database_url: str) -> None:
    store = LogStore()
    sid = store.create({"id": "contended"}).id
    store.close()
    with Workers(test_database_url) as pool:
        procs = [pool.spawn_worker("--mode", "hold", "--session", sid) for _ in range(2)]
        pool.release()
        first = [pool.read_line(p) for p in procs]
        assert sorted(r["held"] for r in first) == [False, True], first
        winner = next(r for r in first if r["held"])
        loser = next(r for r in first if not r["held"])
        assert f"held by pid {winner['pid']}" in loser["error"]
        info = LogStore().lock_holder(sid)
        assert info is not None and info.pid == winner["pid"]
        pool.done.touch()
        for p in procs:
            pool.lines(p)
    assert LogStore().lock_holder(sid) is None  # the winner released on close


def test_eight_processes_race_session_for(test_database_url: str) -> None:
    rounds = 3
    with Workers(test_database_url) as pool:
        procs = [
            pool.spawn_worker(
                "--mode", "session_for", "--ref", "race/name", "--rounds", str(rounds)
            )
            for _ in range(8)
        ]
        pool.release()
        results = [pool.result(p)["results"] for p in procs]
    store = LogStore()
    for n in range(rounds):
        named = store.resolve_ref(f"race/name/{n}").session
        got = [r[n] for r in results]
        assert all(r.get("id") == named or r.get("error") == "session_locked" for r in got), got
        assert any(r.get("id") == named for r in got)
    assert SessionRow.objects.filter(kind="log").count() == rounds
    assert Ref.objects.count() == rounds


def test_follower_sees_another_process_append(test_database_url: str) -> None:
    store = LogStore()
    sid = store.create({"id": "followed"}).id
    store.close()
    follower = LogStore(read_only=True)
    with Workers(test_database_url) as pool:
        proc = pool.spawn_worker(
            "--mode", "append", "--session", sid, "--count", "3", "--gap", "0.05"
        )
        changes = follower.follow(sid)
        assert next(changes).kind == "snapshot"
        pool.release()
        arrived: list[str] = []
        for change in changes:  # polling only: another process rings no bell here
            if change.kind == "appended":
                arrived.append(change.entry_id)
            if len(arrived) == 3:
                break
        committed = [r["id"] for r in pool.lines(proc)]
    # Every append, in commit order, each once (no timing asserted: a busy
    # machine may delay a poll, never lose or reorder a line).
    assert arrived == committed


def test_broken_hold_makes_the_victims_next_append_fail(test_database_url: str) -> None:
    store = LogStore()
    sid = store.create({"id": "victim"}).id
    store.close()
    with Workers(test_database_url) as pool:
        proc = pool.spawn_worker("--mode", "victim", "--session", sid)
        assert pool.read_line(proc)["ready"] is True
        operator = LogStore()
        assert operator.break_lock(sid) is True
        operator.open(sid)  # the operator's store now holds it
        pool.release()
        outcomes = pool.result(proc)["outcomes"]
        operator.close()
    assert [o.get("error") for o in outcomes] == ["session_locked", "session_locked"]
    assert "lost to" in outcomes[0]["message"]
    assert len(LogStore().read(sid)) == 1  # nothing interleaved after the break


def test_a_killed_holder_is_taken_over_and_reported(test_database_url: str) -> None:
    store = LogStore()
    sid = store.create({"id": "orphaned"}).id
    store.close()
    with Workers(test_database_url) as pool:
        proc = pool.spawn_worker("--mode", "hold", "--session", sid)
        pool.release()
        held = pool.read_line(proc)
        assert held["held"] is True
        proc.kill()  # dies holding the session: no release, no close
        proc.wait()
    reports: list[Any] = []
    taker = LogStore(stale_lock_report=reports.append)
    taker.open(sid)
    assert [r.pid for r in reports] == [held["pid"]]
    assert taker.lock_holder(sid).pid == os.getpid()  # type: ignore[union-attr]
    taker.close()
