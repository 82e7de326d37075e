"""The write driver of ``agentstore.db``, its writer queue, and the SQLite connection settings.

``orm_write`` is a body that uses the ORM (Django opens the transaction); the
driver's own transaction (``BEGIN IMMEDIATE`` on the ``sqlite3`` connection) is
tested with statement bodies in ``tests/test_door.py`` and below.
"""

from __future__ import annotations

import os
import sqlite3
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest
from django.db import DatabaseError, IntegrityError, connection, transaction
from django.db.utils import OperationalError
from django.test import override_settings
from django.utils import timezone

from agentstore import db, sql
from agentstore.db import backoff_delay, is_busy_error, read_only, read_snapshot
from agentstore.exceptions import AgentStoreError, DatabaseBusy
from agentstore.models import Document

T = TypeVar("T")


def fake_sqlite_error(code: int, message: str = "database is locked") -> OperationalError:
    """An error shaped like Django's wrapper around a sqlite3 error with ``code``."""
    cause = sqlite3.OperationalError(message)
    cause.sqlite_errorcode = code
    try:
        raise OperationalError(message) from cause
    except OperationalError as exc:
        return exc


def orm_write(fn: Callable[[], T]) -> T:
    """A write whose body uses the ORM: the driver has Django open the transaction."""
    return db.write(lambda cursor: fn(), orm=True)


def make_document(key: str, namespace: str = "db-tests") -> Document:
    return Document.objects.create(namespace=namespace, key=key, updated_at=timezone.now())


def raw_connection() -> sqlite3.Connection:
    """A second, non-Django connection to the test database file."""
    return sqlite3.connect(connection.settings_dict["NAME"], timeout=0, isolation_level=None)


@pytest.fixture
def no_sleep(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    delays: list[float] = []
    monkeypatch.setattr(db.driver.time, "sleep", delays.append)
    return delays


# -- connection settings -------------------------------------------------------


@pytest.mark.sqlite_only
@pytest.mark.django_db
def test_sqlite_file_connection_is_wal_normal_with_foreign_keys() -> None:
    info = db.describe_connection()

    assert not connection.is_in_memory_db()
    assert info["journal_mode"] == "wal"
    assert info["synchronous"] == 1  # NORMAL
    assert info["foreign_keys"] is True
    assert info["busy_timeout_ms"] == 20_000
    assert info["transaction_mode"] == "IMMEDIATE"
    assert info["write_lock"] == str(Path(connection.settings_dict["NAME"]).resolve()) + (
        ".agentstore-lock"
    )


@pytest.mark.postgres_only
@pytest.mark.django_db
def test_describe_connection_on_postgresql() -> None:
    assert db.describe_connection() == {"vendor": "postgresql"}


# -- atomic_write ----------------------------------------------------------------


@pytest.mark.sqlite_only
@pytest.mark.django_db(transaction=True)
def test_write_transaction_begins_immediate() -> None:
    """The write lock is taken at BEGIN, before the callback reads or writes anything."""
    other = raw_connection()
    outcome: list[str] = []

    def callback() -> None:
        try:
            other.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            outcome.append(str(exc))
        else:  # pragma: no cover - the assertion below reports it
            other.execute("ROLLBACK")
            outcome.append("acquired")

    orm_write(callback)
    other.close()

    assert outcome == ["database is locked"]


@pytest.mark.django_db(transaction=True)
def test_write_commits_and_returns_the_callback_result() -> None:
    doc = orm_write(lambda: make_document("committed"))

    assert doc.key == "committed"
    assert Document.objects.filter(key="committed").exists()


@pytest.mark.django_db(transaction=True)
def test_write_rolls_back_everything_on_error() -> None:
    def callback() -> None:
        make_document("first")
        make_document("first")  # unique (namespace, key)

    with pytest.raises(IntegrityError):
        orm_write(callback)

    assert not Document.objects.filter(namespace="db-tests").exists()


@pytest.mark.django_db(transaction=True)
def test_write_refuses_to_nest_in_a_callers_transaction() -> None:
    with transaction.atomic(), pytest.raises(RuntimeError, match="durable"):
        orm_write(lambda: make_document("nested"))

    assert not Document.objects.filter(key="nested").exists()


@pytest.mark.sqlite_only
@pytest.mark.django_db(transaction=True)
def test_busy_error_is_retried_until_it_succeeds(no_sleep: list[float]) -> None:
    calls: list[int] = []

    def callback() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise fake_sqlite_error(5)
        return "done"

    assert orm_write(callback) == "done"
    assert len(calls) == 3
    assert len(no_sleep) == 2
    assert 0.0025 <= no_sleep[0] <= 0.005
    assert 0.005 <= no_sleep[1] <= 0.010


@pytest.mark.sqlite_only
@pytest.mark.django_db(transaction=True)
def test_busy_error_gives_up_after_three_attempts(no_sleep: list[float]) -> None:
    calls: list[int] = []

    def callback() -> None:
        calls.append(1)
        make_document(f"attempt-{len(calls)}")
        raise fake_sqlite_error(5 | (2 << 8))  # SQLITE_BUSY_SNAPSHOT: primary code BUSY

    with pytest.raises(DatabaseBusy, match="exhausted after 3 attempts") as info:
        orm_write(callback)

    assert len(calls) == 3
    assert info.value.attempts == 3
    assert info.value.code == "database_busy"
    assert isinstance(info.value, OperationalError)
    assert isinstance(info.value, AgentStoreError)
    assert is_busy_error(info.value)
    assert isinstance(info.value.__cause__, OperationalError)
    # Every failed attempt rolled back its write.
    assert not Document.objects.filter(namespace="db-tests").exists()


@pytest.mark.sqlite_only
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(
    "error",
    [
        pytest.param(lambda: fake_sqlite_error(6, "database table is locked"), id="SQLITE_LOCKED"),
        pytest.param(lambda: IntegrityError("UNIQUE constraint failed"), id="integrity"),
        pytest.param(lambda: ValueError("domain error"), id="domain"),
    ],
)
def test_other_errors_are_not_retried(no_sleep: list[float], error) -> None:  # type: ignore[no-untyped-def]
    calls: list[int] = []

    def callback() -> None:
        calls.append(1)
        raise error()

    with pytest.raises((DatabaseError, ValueError)):
        orm_write(callback)

    assert calls == [1]
    assert no_sleep == []


@override_settings(AGENTSTORE={"WRITE_ATTEMPTS": 5})
@pytest.mark.sqlite_only
@pytest.mark.django_db(transaction=True)
def test_attempts_follow_the_setting(no_sleep: list[float]) -> None:
    calls: list[int] = []

    def callback() -> None:
        calls.append(1)
        raise fake_sqlite_error(5)

    with pytest.raises(DatabaseBusy, match="exhausted after 5 attempts"):
        orm_write(callback)
    assert len(calls) == 5
    assert no_sleep[-1] <= 0.020  # the backoff is capped


@pytest.fixture
def short_busy_timeout() -> Iterator[None]:
    connection.ensure_connection()
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA busy_timeout = 30")
    yield
    connection.close()  # the next connection gets the configured timeout back


@pytest.mark.sqlite_only
@pytest.mark.django_db(transaction=True)
def test_a_real_foreign_writer_makes_the_helper_give_up_cleanly(short_busy_timeout: None) -> None:
    """Another program holding SQLite's write lock: three busy attempts, one clear error."""
    other = raw_connection()
    other.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(DatabaseBusy, match="exhausted after 3 attempts"):
            orm_write(lambda: make_document("blocked"))
    finally:
        other.execute("ROLLBACK")
        other.close()

    assert orm_write(lambda: make_document("after")).key == "after"


def test_is_busy_error_reads_codes_and_messages() -> None:
    assert is_busy_error(fake_sqlite_error(5))
    assert is_busy_error(fake_sqlite_error(261))  # SQLITE_BUSY_RECOVERY
    assert not is_busy_error(fake_sqlite_error(6))  # SQLITE_LOCKED
    assert not is_busy_error(fake_sqlite_error(19, "UNIQUE constraint failed"))
    assert is_busy_error(sqlite3.OperationalError("database is locked"))
    assert not is_busy_error(sqlite3.OperationalError("no such table: x"))
    assert not is_busy_error(ValueError("database is locked"))


def test_backoff_is_jittered_and_capped() -> None:
    for _ in range(200):
        assert 0.0025 <= backoff_delay(1) <= 0.005
        assert 0.005 <= backoff_delay(2) <= 0.010
        assert 0.010 <= backoff_delay(3) <= 0.020
        assert 0.010 <= backoff_delay(6) <= 0.020


# -- read_snapshot -----------------------------------------------------------------


@pytest.mark.sqlite_only
@pytest.mark.django_db(transaction=True)
def test_read_snapshot_never_takes_the_write_lock() -> None:
    make_document("before")
    other = raw_connection()
    with read_snapshot():
        assert Document.objects.filter(namespace="db-tests").count() == 1
        # Another writer gets the lock at once (timeout=0) while we read …
        other.execute("BEGIN IMMEDIATE")
        other.execute(
            "INSERT INTO agentstore_document (namespace, document_key, value_json, updated_at)"
            " VALUES ('db-tests', 'during', '{}', '2026-01-01 00:00:00')"
        )
        other.execute("COMMIT")
        # … and our snapshot does not move.
        assert Document.objects.filter(namespace="db-tests").count() == 1
    other.close()

    assert Document.objects.filter(namespace="db-tests").count() == 2


@pytest.mark.django_db(transaction=True)
def test_read_snapshot_refuses_writes_and_leaves_the_connection_writable() -> None:
    with pytest.raises(DatabaseError), read_snapshot():
        make_document("inside")

    assert orm_write(lambda: make_document("outside")).key == "outside"
    assert list(Document.objects.values_list("key", flat=True)) == ["outside"]


@pytest.mark.django_db
def test_read_only_returns_the_callback_result() -> None:
    make_document("x")
    assert read_only(lambda: Document.objects.count()) == 1


@pytest.mark.django_db(transaction=True)
def test_read_snapshot_inside_a_transaction_joins_it() -> None:
    with transaction.atomic():
        make_document("joined")
        with read_snapshot():
            assert Document.objects.filter(key="joined").exists()


# -- the writer lock file --------------------------------------------------------


@pytest.mark.sqlite_only
@pytest.mark.django_db(transaction=True)
def test_writer_lock_file_sits_beside_the_database() -> None:
    orm_write(lambda: make_document("locked"))

    assert os.path.exists(connection.settings_dict["NAME"] + ".agentstore-lock")


@override_settings(AGENTSTORE={"SQLITE_WRITE_LOCK": False})
@pytest.mark.django_db(transaction=True)
def test_writer_lock_can_be_turned_off() -> None:
    assert db.sqlite_lock_path(connection) is None
    assert orm_write(lambda: make_document("unlocked")).key == "unlocked"


@pytest.mark.sqlite_only
def test_a_lock_description_belongs_to_a_connection_not_a_thread(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # A connection lent to one short-lived thread after another (the LangGraph
    # savers' shared connection) opens the lock file once, not once a thread;
    # two connections still get two descriptions, so they queue on each other.
    import threading

    from django.db import connections

    opened: list[str] = []
    real = db.queue.LockFile

    def counting(path: str) -> db.queue.LockFile:
        opened.append(path)
        return real(path)

    monkeypatch.setattr(db.queue, "LockFile", counting)
    shared = connections.create_connection("default")
    other = connections.create_connection("default")
    for each in (shared, other):  # never connected: only the path is read
        each.settings_dict = {**each.settings_dict, "NAME": str(tmp_path / "probe.sqlite3")}

    def hold() -> None:
        with db.queue.writer_slot(shared):
            pass

    for _ in range(3):
        thread = threading.Thread(target=hold)
        thread.start()
        thread.join()
    with db.queue.writer_slot(other):
        pass
    assert opened == [str(tmp_path / "probe.sqlite3") + ".agentstore-lock"] * 2


INSERT_DOCUMENT = (
    f"INSERT INTO {sql.DOCUMENT} ({sql.columns(Document)}) VALUES ({sql.marks(Document)})"
)


def document_row(key: str, namespace: str = "statements") -> list[object]:
    return sql.row(
        Document, namespace=namespace, key=key, updated_at=str(timezone.now().replace(tzinfo=None))
    )


@pytest.mark.sqlite_only
@pytest.mark.django_db(transaction=True)
def test_a_statement_body_commits_rolls_back_and_raises_djangos_errors() -> None:
    def add(key: str, again: bool = False) -> None:
        row = document_row(key)

        def write(cursor: db.SqlCursor) -> None:
            cursor.execute(INSERT_DOCUMENT, row)
            if again:
                cursor.execute(INSERT_DOCUMENT, row)  # unique (namespace, key)

        db.write(write)

    add("one")
    with pytest.raises(IntegrityError):  # Django's class, as Django's transactions raise it
        add("two", again=True)
    # The failed transaction is gone: nothing of it stays, and the connection
    # is back in autocommit, ready for the next write.
    assert not connection.connection.in_transaction
    add("three")
    assert sorted(
        Document.objects.filter(namespace="statements").values_list("key", flat=True)
    ) == ["one", "three"]


@pytest.mark.sqlite_only
@pytest.mark.django_db(transaction=True)
def test_a_statement_body_retries_a_busy_database(no_sleep: list[float]) -> None:
    calls: list[int] = []

    def write(cursor: db.SqlCursor) -> str:
        calls.append(1)
        cursor.execute(INSERT_DOCUMENT, document_row(f"attempt-{len(calls)}"))
        if len(calls) < 2:
            raise fake_sqlite_error(5)
        return "done"

    assert db.write(write) == "done"
    assert len(calls) == 2 and len(no_sleep) == 1
    # The first attempt was rolled back whole.
    assert list(Document.objects.filter(namespace="statements").values_list("key", flat=True)) == [
        "attempt-2"
    ]


@pytest.mark.sqlite_only
@pytest.mark.django_db(transaction=True)
def test_a_single_statement_is_its_own_transaction() -> None:
    from django.db import connections

    connection = connections["default"]  # the object itself, not the proxy
    sent: list[str] = []
    connection.ensure_connection()
    connection.connection.set_trace_callback(sent.append)
    try:
        db.write(lambda cursor: cursor.execute(INSERT_DOCUMENT, document_row("a")), single=True)
        assert not connection.connection.in_transaction  # committed: SQLite's autocommit
        with pytest.raises(IntegrityError):  # Django's class; the statement left nothing
            db.write(lambda cursor: cursor.execute(INSERT_DOCUMENT, document_row("a")), single=True)
        assert not connection.connection.in_transaction
    finally:
        connection.connection.set_trace_callback(None)
    assert not [s for s in sent if s.startswith(("BEGIN", "COMMIT"))]
    assert list(Document.objects.filter(namespace="statements").values_list("key", flat=True)) == [
        "a"
    ]


@pytest.mark.sqlite_only
@pytest.mark.django_db(transaction=True)
def test_the_writer_slot_follows_settings_and_the_database_name() -> None:
    # Resolved once per connection object (decision record 0006), and again when the
    # AGENTSTORE settings or the database's name change.
    import fcntl

    from django.db import connections

    connection = connections["default"]  # the object itself, not the proxy
    fd = db.queue.take(db.queue.slot_of(connection), connection)
    assert fd >= 0
    fcntl.flock(fd, fcntl.LOCK_UN)
    with override_settings(AGENTSTORE={"SQLITE_WRITE_LOCK": False}):
        assert db.queue.take(db.queue.slot_of(connection), connection) == -1
    fd = db.queue.take(db.queue.slot_of(connection), connection)
    assert fd >= 0
    fcntl.flock(fd, fcntl.LOCK_UN)
    name = connection.settings_dict["NAME"]
    try:
        connection.settings_dict["NAME"] = ":memory:"
        assert db.queue.take(db.queue.slot_of(connection), connection) == -1  # no file, no queue
    finally:
        connection.settings_dict["NAME"] = name


# -- the WAL's checkpoints (agentstore.walcopy) ----------------------------------------


def _file_digest(path: str) -> str:
    import hashlib

    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _fresh_connection(threshold: int) -> sqlite3.Connection:
    """Django's connection reopened, its ``wal_autocheckpoint`` set before any write."""
    connection.close()
    connection.ensure_connection()
    raw: sqlite3.Connection = connection.connection
    raw.execute(f"PRAGMA wal_autocheckpoint = {threshold}")
    raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # start from an empty WAL
    return raw


def _wal_counts(path: str) -> tuple[int, int]:
    """``(frames in the log, frames copied)`` from the wal-index, as ``agentstore.db`` reads it."""
    index = struct.Struct("=16xI76xI")
    with open(f"{path}-shm", "rb") as shm:
        frames, copied = index.unpack(shm.read(index.size))
    return int(frames), int(copied)


@pytest.mark.sqlite_only
@pytest.mark.django_db(transaction=True)
def test_the_wal_is_copied_by_the_copier_after_the_writer_queue_is_released(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Decision record 0008: no commit checkpoints; the copier does, asked after the queue."""
    import fcntl

    from agentstore import walcopy

    raw = _fresh_connection(20)
    path = str(connection.settings_dict["NAME"])
    lock_path = db.sqlite_lock_path(connection)
    assert lock_path is not None
    queue_free: list[bool] = []
    request = walcopy.request

    def spy(path: str, synchronous: int) -> None:
        probe = os.open(lock_path, os.O_RDWR)
        try:
            fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises while a writer holds it
            queue_free.append(True)
        finally:
            os.close(probe)
        request(path, synchronous)

    monkeypatch.setattr(walcopy, "request", spy)
    # Nothing starts the log over in this test: only the copier may copy.
    monkeypatch.setattr(db.queue, "RESTART_FACTOR", 10**6)
    sent: list[str] = []
    raw.set_trace_callback(sent.append)  # every statement of the writer's own connection
    before = _file_digest(path)
    orm_write(lambda: make_document("wal-after-0"))
    # The connection's own threshold is the safety net now; the old one is the copier's.
    assert (
        raw.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == db.queue.DEFERRED_AUTOCHECKPOINT
    )
    for n in range(1, 40):
        orm_write(lambda n=n: make_document(f"wal-after-{n}"))
    # A request made while the copier runs is dropped (the next commit asks
    # again): on a loaded machine the last writes may all have met a run.
    # One more write once it is idle asks while nothing runs.
    assert walcopy.settled(path)
    orm_write(lambda: make_document("wal-after-idle"))
    raw.set_trace_callback(None)
    assert queue_free and all(queue_free)
    assert not [s for s in sent if "wal_checkpoint" in s.lower()]  # the writer copied nothing
    assert walcopy.settled(path)
    assert _file_digest(path) != before  # the copier's pages reached the database file
    frames, copied = _wal_counts(path)
    assert frames - copied < 20  # never more than the old threshold left uncopied
    connection.close()  # the next test's connection has SQLite's default again


@pytest.mark.sqlite_only
@pytest.mark.django_db(transaction=True)
def test_the_writer_catches_up_so_the_wal_starts_over(monkeypatch: pytest.MonkeyPatch) -> None:
    """Decision record 0008: without the writer's catch-up the log would grow to the safety net."""
    from agentstore import walcopy

    # The copier's runs overlap the writes in real use, so the log never starts
    # over by itself; with no copier at all the writer's catch-up is alone too.
    monkeypatch.setattr(walcopy, "request", lambda path, synchronous: None)
    raw = _fresh_connection(20)
    path = str(connection.settings_dict["NAME"])
    sent: list[str] = []
    raw.set_trace_callback(sent.append)
    most = starts = 0
    last = -1
    for n in range(300):
        orm_write(lambda n=n: make_document(f"wal-restart-{n}"))
        frames, _ = _wal_counts(path)
        starts += frames < last
        last, most = frames, max(most, frames)
    raw.set_trace_callback(None)
    catch_ups = [s for s in sent if "wal_checkpoint" in s.lower()]
    assert catch_ups  # the writer copied the last frames itself, now and then
    assert starts >= 2  # and the log started over each time
    # Bounded by RESTART_FACTOR x the threshold plus what one write adds.
    assert most < 20 * db.queue.RESTART_FACTOR + 40
    connection.close()


@pytest.mark.sqlite_only
@pytest.mark.django_db(transaction=True)
def test_automatic_checkpoints_turned_off_stay_off() -> None:
    """``wal_autocheckpoint = 0`` (someone else checkpoints): the writer leaves the WAL alone."""
    raw = _fresh_connection(0)
    path = str(connection.settings_dict["NAME"])
    before = _file_digest(path)
    for n in range(40):
        orm_write(lambda n=n: make_document(f"wal-off-{n}"))
    assert raw.execute("PRAGMA wal_autocheckpoint").fetchone()[0] == 0
    assert _file_digest(path) == before
    connection.close()  # the next test's connection has SQLite's default again


def test_contended_waits_of_one_description_share_one_helper_thread(tmp_path: Path) -> None:
    # Decision record 0007: a thread per contended wait cost ~65 µs of CPU a write.
    import fcntl
    import threading

    def helpers() -> int:
        return sum(t.name == "agentstore-writer-queue" for t in threading.enumerate())

    path = str(tmp_path / "waits.lock")
    holder = os.open(path, os.O_RDWR | os.O_CREAT)
    lock = db.queue.LockFile(path)
    before = helpers()
    try:
        for _ in range(3):
            fcntl.flock(holder, fcntl.LOCK_EX)
            releaser = threading.Timer(0.05, fcntl.flock, (holder, fcntl.LOCK_UN))
            releaser.start()
            assert db.queue.acquire(lock, timeout=5)  # granted once the holder lets go
            fcntl.flock(lock.fd, fcntl.LOCK_UN)
            releaser.join()
        assert lock.waiter is not None
        assert helpers() == before + 1  # three contended waits, one helper thread
        # A wait past its deadline is abandoned, and the description goes with it.
        fcntl.flock(holder, fcntl.LOCK_EX)
        assert not db.queue.acquire(lock, timeout=0.05)
        after: object = lock.waiter  # (not narrowed by the assert above)
        assert lock.fd == -1 and after is None
        fcntl.flock(holder, fcntl.LOCK_UN)  # the abandoned wait takes it, drops it, ends
        for _ in range(250):
            if helpers() == before:
                break
            threading.Event().wait(0.02)
        assert helpers() == before
        fcntl.flock(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)  # nobody kept the lock
        fcntl.flock(holder, fcntl.LOCK_UN)
    finally:
        os.close(holder)


def test_a_holder_that_lets_go_during_the_spin_is_followed_without_the_helper(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Decision record 0007: a contended wait polls LOCK_NB briefly before it blocks.
    import fcntl

    path = str(tmp_path / "spin.lock")
    holder = os.open(path, os.O_RDWR | os.O_CREAT)  # another description: another party
    lock = db.queue.LockFile(path)
    yields = 0

    def release_on_the_second_yield() -> None:
        nonlocal yields
        yields += 1
        if yields == 2:
            fcntl.flock(holder, fcntl.LOCK_UN)

    monkeypatch.setattr(db.queue, "_spin_yield", release_on_the_second_yield)
    monkeypatch.setattr(db.queue, "SPIN_SECONDS", 3600.0)  # only the release ends this spin
    try:
        fcntl.flock(holder, fcntl.LOCK_EX)
        assert db.queue.acquire(lock, timeout=5)
        assert yields == 2  # taken at the first try after the release
        assert lock.waiter is None  # no helper thread was started or used
        with pytest.raises(BlockingIOError):
            fcntl.flock(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the spinner holds it
        fcntl.flock(lock.fd, fcntl.LOCK_UN)
    finally:
        os.close(holder)


def test_the_spin_counts_against_the_queue_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A deadline shorter than the spin ends the wait: the spin is bounded by it,
    # and the blocking wait after it gets only what is left (here nothing).
    import fcntl

    path = str(tmp_path / "deadline.lock")
    holder = os.open(path, os.O_RDWR | os.O_CREAT)
    lock = db.queue.LockFile(path)
    budgets: list[float] = []
    spin = db.queue.spin

    def recorded(fd: int, budget: float) -> bool:
        budgets.append(budget)
        return spin(fd, budget)

    monkeypatch.setattr(db.queue, "spin", recorded)
    monkeypatch.setattr(db.queue, "SPIN_SECONDS", 3600.0)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX)
        assert not db.queue.acquire(lock, timeout=0.01)  # never granted: the holder keeps it
        assert budgets == [0.01]  # the spin got the deadline, not its own hour
        assert lock.fd == -1  # the abandoned wait owns the description, as before
        fcntl.flock(holder, fcntl.LOCK_UN)
    finally:
        os.close(holder)


@pytest.mark.sqlite_only
@pytest.mark.django_db(transaction=True)
def test_a_write_that_changed_no_row_skips_the_wal_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No row changed, no frame written: the ``-shm`` read is skipped."""
    checks: list[int] = []
    checkpoint = db.queue.WalLog.checkpoint_if_due

    def spy(self: db.queue.WalLog) -> None:
        checks.append(1)
        checkpoint(self)

    monkeypatch.setattr(db.queue.WalLog, "checkpoint_if_due", spy)
    noop = f"UPDATE {sql.DOCUMENT} SET value_json = value_json WHERE namespace = %s"

    orm_write(lambda: make_document("wal-check-0"))  # the log's first check
    checks.clear()
    db.write(lambda cursor: cursor.execute(noop, ["no-such-namespace"]))
    db.write(lambda cursor: cursor.execute(noop, ["none"]), single=True)
    assert checks == []
    row = sql.row(Document, namespace="db-tests", key="wal-check-1", updated_at="2026-01-01")
    db.write(lambda cursor: cursor.execute(INSERT_DOCUMENT, row))
    # Matches a row: a change, even to the same value.
    db.write(lambda cursor: cursor.execute(noop, ["db-tests"]), single=True)
    assert checks == [1, 1]
