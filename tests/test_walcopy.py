"""The WAL copier thread (agentstore/walcopy.py): checkpoints off the writer's path.

Plain ``sqlite3`` files in WAL mode; no Django. Decision record 0008 says why the
copy runs in a thread of its own; these tests pin what that thread does.
"""

from __future__ import annotations

import hashlib
import sqlite3
import struct
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from agentstore import walcopy
from tests.conftest import REPO_ROOT


def _wal_database(path: Path, rows: int) -> sqlite3.Connection:
    """A WAL database whose last ``rows`` commits are only in the log."""
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("PRAGMA journal_mode = WAL")
    raw.execute("PRAGMA wal_autocheckpoint = 0")  # nobody but the copier checkpoints
    raw.execute("CREATE TABLE t (n INTEGER PRIMARY KEY, body TEXT)")
    raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    for _ in range(rows):
        raw.execute("INSERT INTO t (body) VALUES (?)", ("x" * 1000,))
    return raw


def _copied_now(path: Path) -> bool:
    """Ask the copier for ``path``, wait for its run; whether every frame is copied."""
    walcopy.request(str(path), 1)
    return walcopy.settled(str(path)) and _uncopied(path) == 0


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _uncopied(path: Path) -> int:
    """Frames in the log not yet copied, read from the wal-index as agentstore.db reads it.

    (Not ``PRAGMA wal_checkpoint``: that would copy them itself.)
    """
    index = struct.Struct("=16xI76xI")
    header = (path.parent / f"{path.name}-shm").read_bytes()[: index.size]
    frames, copied = index.unpack(header)
    return int(frames) - int(copied)


def test_a_request_copies_the_log_into_the_database(tmp_path: Path) -> None:
    path = tmp_path / "a.sqlite3"
    raw = _wal_database(path, 50)
    before = _digest(path)
    assert _uncopied(path) > 50
    walcopy.request(str(path), 1)
    assert walcopy.settled(str(path))
    assert _digest(path) != before  # the pages reached the database file
    assert _uncopied(path) == 0
    assert [row[0] for row in raw.execute("SELECT count(*) FROM t")] == [50]
    raw.close()


def test_requests_during_a_run_are_dropped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "b.sqlite3"
    raw = _wal_database(path, 5)
    started, release = threading.Event(), threading.Event()
    checkpoint = walcopy.Copier.checkpoint
    runs: list[int] = []

    def slow(self: walcopy.Copier) -> None:
        runs.append(1)
        started.set()
        assert release.wait(10)
        checkpoint(self)

    monkeypatch.setattr(walcopy.Copier, "checkpoint", slow)
    walcopy.request(str(path), 1)
    assert started.wait(10)  # the first run is under way, held
    for _ in range(5):
        walcopy.request(str(path), 1)
    assert not walcopy.settled(str(path), timeout=0.05)  # the run is not over
    release.set()
    assert walcopy.settled(str(path))
    assert len(runs) == 1  # the writers ask again at their next commit if still due
    walcopy.request(str(path), 1)  # once idle, a request runs again
    assert walcopy.settled(str(path))
    assert len(runs) == 2
    raw.close()


def test_an_idle_copier_ends_and_a_new_request_starts_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(walcopy, "IDLE_SECONDS", 0.05)
    path = tmp_path / "c.sqlite3"
    raw = _wal_database(path, 5)
    walcopy.request(str(path), 1)
    first = walcopy._copiers[str(path)]
    first.join(timeout=10)  # it ends on its own once idle
    assert not first.is_alive()
    assert str(path) not in walcopy._copiers
    for _ in range(5):
        raw.execute("INSERT INTO t (body) VALUES ('y')")
    assert _uncopied(path) > 0
    assert _copied_now(path)
    raw.close()


def test_a_deleted_database_is_not_created_again(tmp_path: Path) -> None:
    path = tmp_path / "gone.sqlite3"
    walcopy.request(str(path), 1)  # never existed (or deleted since the request)
    assert walcopy.settled(str(path))
    assert not path.exists()


def test_a_database_created_again_at_the_path_is_the_one_copied(tmp_path: Path) -> None:
    path = tmp_path / "again.sqlite3"
    raw = _wal_database(path, 5)
    walcopy.request(str(path), 1)
    assert walcopy.settled(str(path))
    raw.close()
    for name in (path.name, f"{path.name}-wal", f"{path.name}-shm"):
        (tmp_path / name).unlink(missing_ok=True)
    raw = _wal_database(path, 20)  # a new file: the copier's old connection is stale
    assert _uncopied(path) > 0
    assert _copied_now(path)
    raw.close()


#: Run in a fresh interpreter (test_a_forked_child_...): a fork from the test
#: process would copy pytest's threads and Django's open connections into the
#: child (Python 3.12+ warns about exactly that), so the fork happens in a
#: process that holds nothing but the copier under test.
_FORK_SCRIPT = """
import os, sqlite3, struct, sys, warnings
from agentstore import walcopy
from tests.conftest import REPO_ROOT

path = sys.argv[1]

def uncopied():
    index = struct.Struct("=16xI76xI")
    with open(path + "-shm", "rb") as f:
        frames, copied = index.unpack(f.read(index.size))
    return frames - copied

raw = sqlite3.connect(path, isolation_level=None)
raw.execute("PRAGMA wal_autocheckpoint = 0")
raw.execute("INSERT INTO t (body) VALUES ('before the fork')")
walcopy.request(path, 1)
assert walcopy.settled(path)
parent = walcopy._copiers[path]
assert parent.is_alive()  # the fork below copies a process whose copier runs
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # forking with a thread is the point
    pid = os.fork()
if pid == 0:  # the child: its own copier, the parent's kept, not closed
    code = 1
    try:
        own = sqlite3.connect(path, isolation_level=None)  # never the parent's
        own.execute("PRAGMA wal_autocheckpoint = 0")
        own.execute("INSERT INTO t (body) VALUES ('child')")
        walcopy.request(path, 1)
        ok = walcopy.settled(path) and uncopied() == 0
        mine = walcopy._copiers[path]
        code = 0 if ok and mine is not parent and parent in walcopy._inherited else 2
    finally:
        os._exit(code)
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0, "the child's copier failed"
raw.execute("INSERT INTO t (body) VALUES ('parent')")
walcopy.request(path, 1)  # the parent's copier and connection still work
assert walcopy.settled(path)
assert uncopied() == 0
assert walcopy._copiers[path] is parent
print("ok")
"""


def test_a_forked_child_starts_its_own_copier_and_keeps_the_parents(tmp_path: Path) -> None:
    path = tmp_path / "fork.sqlite3"
    _wal_database(path, 5).close()
    done = subprocess.run(
        [sys.executable, "-c", _FORK_SCRIPT, str(path)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["ok"]


def test_a_copier_that_fails_unexpectedly_is_not_left_looking_busy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The writer's catch-up (agentstore.db) runs only while no copy is busy: a
    # copier thread dying mid-run must not look busy for ever.
    path = tmp_path / "crash.sqlite3"
    raw = _wal_database(path, 5)
    checkpoint = walcopy.Copier.checkpoint
    raised: list[BaseException | None] = []

    def broken(self: walcopy.Copier) -> None:
        raise RuntimeError("a bug no one foresaw")

    monkeypatch.setattr(walcopy.Copier, "checkpoint", broken)
    monkeypatch.setattr(threading, "excepthook", lambda args: raised.append(args.exc_value))
    walcopy.request(str(path), 1)
    first = walcopy._copiers[str(path)]
    first.join(timeout=10)
    assert not first.is_alive()
    assert [type(e) for e in raised] == [RuntimeError]  # reported, not swallowed
    assert not walcopy.busy(str(path))
    assert walcopy.settled(str(path), timeout=0)
    monkeypatch.setattr(walcopy.Copier, "checkpoint", checkpoint)
    assert _copied_now(path)  # the next request starts a copier that works
    assert walcopy._copiers[str(path)] is not first
    raw.close()
