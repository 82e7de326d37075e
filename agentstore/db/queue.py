"""The SQLite writer queue: one writer at a time, handed over by the kernel in order.

On SQLite one writer at a time holds the database, and SQLite's busy handler
*sleeps and polls*: a waiting writer can lose the race to newcomers again and
again until its timeout expires and "database is locked" escapes to the caller
(measured: 1–4 escapes a run at 4–8 processes, single waits of several
seconds). So agentstore's writers first queue on an OS file lock beside the
database (``fcntl.flock``), which the kernel hands to a sleeping waiter when it
is released — no polling, no starvation — and only then begin their
transaction. SQLite's own lock still protects the data against every other
writer (Django's admin, ``manage.py shell``, other programs)::

    slot = queue.slot_of(connection)        # resolved once per connection object
    fd = queue.take(slot, connection)       # DatabaseBusy after WRITE_QUEUE_TIMEOUT
    try:
        ...                                 # BEGIN IMMEDIATE … COMMIT
    finally:
        queue.release(fd)
    queue.after_commit(slot, raw)           # the WAL's checkpoint, off the queue

The write driver (:mod:`agentstore.db.driver`) is the one caller; tests and the
queue's own tools use :func:`writer_slot`. The WAL's checkpoints are taken off
the writer's path too (:class:`WalLog`, :mod:`agentstore.walcopy`).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import queue
import sqlite3
import struct
import threading
import time
import weakref
from collections.abc import Iterator
from typing import Any

from django.core.signals import setting_changed
from django.db.backends.base.base import BaseDatabaseWrapper

from agentstore import walcopy
from agentstore.conf import agentstore_settings
from agentstore.exceptions import DatabaseBusy

__all__ = [
    "DEFERRED_AUTOCHECKPOINT",
    "RESTART_FACTOR",
    "SPIN_SECONDS",
    "LockFile",
    "Slot",
    "WalLog",
    "acquire",
    "after_commit",
    "release",
    "slot_of",
    "spin",
    "sqlite_lock_path",
    "take",
    "writer_slot",
]

logger = logging.getLogger("agentstore.db")


_lock_paths: dict[tuple[str, str, bool, str], str | None] = {}


def sqlite_lock_path(connection: BaseDatabaseWrapper) -> str | None:
    """Return the writer lock file of a file-backed SQLite connection, else ``None``."""
    if connection.vendor != "sqlite":
        return None
    # Cached: this runs on every write transaction, and the settings lookups
    # and path resolution cost more than the lock itself.
    key = (
        connection.alias,
        str(connection.settings_dict["NAME"] or ""),
        bool(agentstore_settings.SQLITE_WRITE_LOCK),
        str(agentstore_settings.SQLITE_LOCK_SUFFIX),
    )
    if key not in _lock_paths:
        _lock_paths[key] = _resolve_lock_path(connection)
    return _lock_paths[key]


def _resolve_lock_path(connection: BaseDatabaseWrapper) -> str | None:
    if not agentstore_settings.SQLITE_WRITE_LOCK:
        return None
    name = str(connection.settings_dict["NAME"] or "")
    if connection.is_in_memory_db() or not name:  # type: ignore[attr-defined]
        return None
    if name.startswith("file:"):
        name = name[len("file:") :].split("?", 1)[0]
    return os.path.abspath(name) + str(agentstore_settings.SQLITE_LOCK_SUFFIX)


class LockFile:
    """One open description of a lock file, owned by one connection of one process.

    ``flock`` locks belong to the open file description, and descriptions opened
    separately conflict even inside one process — so giving every connection
    (every thread's, see ``_files``) its own description lets the kernel queue
    threads and processes alike. A description
    inherited through ``fork`` is shared with the parent, so a child opens anew.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.pid = os.getpid()
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        #: The helper thread of contended waits with a deadline, started at the first.
        self.waiter: _Waiter | None = None

    def detach(self) -> int:
        """Hand the descriptor to someone else (it is no longer closed here)."""
        fd, self.fd = self.fd, -1
        self.waiter = None  # it ends after the abandoned wait it runs
        return fd

    def __del__(self) -> None:
        if os.getpid() != self.pid:
            return
        if self.waiter is not None:
            self.waiter.stop()
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)


# Each connection object's lock descriptions. A Django connection object
# belongs to one thread, or is lent to one thread at a time under a lock (the
# LangGraph savers' shared connection), so one description per connection
# queues exactly the parties a description per thread did — without opening
# the file again for every short-lived thread that borrows a shared connection
# (an open is ~50 µs; LangGraph's executor threads are new at every invoke).
_files: weakref.WeakKeyDictionary[BaseDatabaseWrapper, dict[str, LockFile]] = (
    weakref.WeakKeyDictionary()
)
_unavailable: set[str] = set()


def _lock_files(connection: BaseDatabaseWrapper) -> dict[str, LockFile]:
    files = _files.get(connection)
    if files is None:
        files = _files[connection] = {}
    return files


def _lock_file(connection: BaseDatabaseWrapper, path: str) -> LockFile | None:
    files = _lock_files(connection)
    lock = files.get(path)
    if lock is None or lock.pid != os.getpid():
        if path in _unavailable:
            return None
        try:
            lock = LockFile(path)
        except OSError as exc:
            # A read-only directory, say: fall back to SQLite's own locking.
            _unavailable.add(path)
            logger.warning("cannot open writer lock file %s (%s); writers not queued", path, exc)
            return None
        files[path] = lock
    return lock


@contextlib.contextmanager
def writer_slot(connection: BaseDatabaseWrapper) -> Iterator[None]:
    """Hold the database's writer lock file for the duration of the block.

    Waits at most ``WRITE_QUEUE_TIMEOUT`` seconds for it, then raises
    :class:`~agentstore.exceptions.DatabaseBusy`: a holder that is frozen
    (``SIGSTOP``, a debugger) must not stall every other writer forever.
    """
    fd = take(slot_of(connection), connection)
    try:
        yield
    finally:
        if fd >= 0:
            fcntl.flock(fd, fcntl.LOCK_UN)


class Slot:
    """What :func:`take` needs of one connection object, resolved once and kept between writes.

    The lock file's path (settings and the database's name), its open
    description and the queue's deadline cost more to look up than the
    ``flock`` itself (decision record 0006); they are resolved again when the
    database's name, the process or the ``AGENTSTORE`` settings change.
    """

    __slots__ = ("lock", "name", "path", "pid", "timeout", "wal")

    def __init__(self, connection: BaseDatabaseWrapper) -> None:
        self.name = connection.settings_dict["NAME"]
        self.pid = os.getpid()
        self.path = sqlite_lock_path(connection)
        self.lock = _lock_file(connection, self.path) if self.path else None
        self.timeout = float(agentstore_settings.WRITE_QUEUE_TIMEOUT or 0)
        #: The WAL of the connection's current ``sqlite3`` connection (set after its first write).
        self.wal: WalLog | None = None


# The wal-index header (https://www.sqlite.org/walformat.html, "The WAL-Index
# Format"): the first copy of ``WalIndexHdr`` holds ``mxFrame``, the frames in
# the log, at byte 16; ``WalCkptInfo`` follows both 48-byte copies and begins
# with ``nBackfill``, the frames already copied into the database. Native byte
# order. Processes of different SQLite versions share this file, so its layout
# does not change between versions.
_WAL_INDEX = struct.Struct("=16xI76xI")

#: The writer copies the rest itself, so that the log starts over, once the log
#: holds ``RESTART_FACTOR`` times the threshold (16 MB at SQLite's defaults).
RESTART_FACTOR = 4

#: A writer connection whose WAL :mod:`agentstore.walcopy` keeps short checkpoints
#: by itself only past this many frames (SQLite's default is 1,000): the safety
#: net if the copier stalls.
DEFERRED_AUTOCHECKPOINT = 10_000


class WalLog:
    """The WAL of one ``sqlite3`` connection, checkpointed off the writer's path.

    In WAL mode SQLite checkpoints inside the ``COMMIT`` that takes the log
    past ``wal_autocheckpoint`` frames, and at ``synchronous=NORMAL`` that
    commit waits for two fsyncs (5–20 ms on the bench disk). Behind
    agentstore's writer queue that wait holds the queue, so every other
    writer waits for it too; and even after the queue, the writer's caller
    waits for a disk it does not need. So the connection's own threshold is
    raised to :data:`DEFERRED_AUTOCHECKPOINT` (the safety net) and the
    writer, once it has released the queue, reads how many frames the log
    holds and how many are copied — from the wal-index (``-shm``) file, one
    ``pread`` — and at its old threshold not yet copied asks
    :mod:`agentstore.walcopy`'s thread for a ``PASSIVE`` checkpoint, with the
    connection's ``synchronous`` level. Once the log holds
    :data:`RESTART_FACTOR` times the threshold, the writer copies the few
    frames left itself, so its next write starts the log over. Where
    that cannot be done (not in WAL mode, no ``-shm`` file — exclusive
    locking —, automatic checkpoints off) nothing is changed.
    """

    __slots__ = ("caught_up", "fd", "path", "raw", "synchronous", "threshold")

    def __init__(self, raw: sqlite3.Connection) -> None:
        # A strong reference: sqlite3 connections take no weak ones; the slot
        # drops it when the Django connection opens its next one.
        self.raw = raw
        self.fd, self.threshold, self.path, self.synchronous = -1, 0, "", 1
        #: The log's frame count at the writer's last catch-up (:meth:`checkpoint_if_due`).
        self.caught_up = 0
        try:
            if str(raw.execute("PRAGMA journal_mode").fetchone()[0]).lower() != "wal":
                return
            threshold = int(raw.execute("PRAGMA wal_autocheckpoint").fetchone()[0])
            path = next(str(r[2]) for r in raw.execute("PRAGMA database_list") if r[1] == "main")
            if threshold <= 0 or not path:
                return
            self.synchronous = int(raw.execute("PRAGMA synchronous").fetchone()[0])
            self.fd = os.open(f"{path}-shm", os.O_RDONLY | os.O_CLOEXEC)
            if threshold < DEFERRED_AUTOCHECKPOINT:
                raw.execute(f"PRAGMA wal_autocheckpoint = {DEFERRED_AUTOCHECKPOINT}")
            self.threshold, self.path = threshold, path
        except (sqlite3.Error, OSError, StopIteration):
            logger.debug("WAL checkpoints stay inside the commit", exc_info=True)

    def __del__(self) -> None:
        if self.fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.fd)

    def checkpoint_if_due(self) -> None:
        """Hand the WAL's copy to the copier; start the log over now and then (see the class)."""
        if self.threshold <= 0:
            return
        try:
            frames, copied = _WAL_INDEX.unpack(os.pread(self.fd, _WAL_INDEX.size, 0))
        except (OSError, struct.error):
            return
        uncopied = frames - copied
        if not uncopied:
            return
        if frames < self.caught_up:
            self.caught_up = 0  # the log started over since
        if (
            frames >= self.caught_up + self.threshold * RESTART_FACTOR
            and not walcopy.busy(self.path)
            and not self.raw.in_transaction
        ):
            # SQLite starts the log over only at a write that begins with every
            # frame copied, and the copier's runs overlap the writes, so that
            # moment seldom comes by itself: the log would grow to the safety
            # net (40 MB at 4 KB pages). So once it holds RESTART_FACTOR times
            # the threshold, the writer copies what is left (what was committed
            # during the copier's last run) itself — the one wait left on its
            # path — and its next write starts the log over (decision record 0008).
            self.caught_up = frames
            try:
                self.raw.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
            except sqlite3.Error:
                logger.debug("WAL catch-up skipped", exc_info=True)
        elif uncopied >= self.threshold:
            walcopy.request(self.path, self.synchronous)


def after_commit(slot: Slot, raw: sqlite3.Connection, *, changed: bool = True) -> None:
    """Checkpoint ``raw``'s WAL when due, its writer queue released (:class:`WalLog`).

    ``changed``: whether the transaction just committed changed a row
    (``total_changes`` moved). One that changed none wrote no page, so it
    added no frame to the log and cannot have taken it past the threshold:
    the ``pread`` is skipped (decision record 0008). Frames only grow through writes
    that change rows, and each of those checks; a statement that writes pages
    without changing a row (DDL, a ``PRAGMA`` that writes the header) leaves
    its frames to the next write's check, or to the safety net.
    """
    wal = slot.wal
    if wal is None or wal.raw is not raw:
        wal = slot.wal = WalLog(raw)
    elif not changed:
        return
    wal.checkpoint_if_due()


_slots: weakref.WeakKeyDictionary[BaseDatabaseWrapper, Slot] = weakref.WeakKeyDictionary()

#: This process's id, for :func:`slot_of`'s check (``os.getpid()`` is a system
#: call on every read); updated in a forked child by :func:`_reset_after_fork`.
_pid = os.getpid()


def _settings_changed(*, setting: str, **kwargs: Any) -> None:
    if setting in ("AGENTSTORE", "DATABASES"):
        _slots.clear()


setting_changed.connect(_settings_changed)


def slot_of(connection: BaseDatabaseWrapper) -> Slot:
    """The connection object's :class:`Slot`, resolved again when it no longer holds."""
    slot = _slots.get(connection)
    if (
        slot is None
        or slot.name != connection.settings_dict["NAME"]
        or slot.pid != _pid
        or (slot.lock is not None and slot.lock.fd < 0)
    ):
        slot = _slots[connection] = Slot(connection)
    return slot


def release(fd: int) -> None:
    """Hand the queue to the next writer (``fd`` from :func:`take`; -1: nothing to release)."""
    if fd >= 0:
        fcntl.flock(fd, fcntl.LOCK_UN)


def take(slot: Slot, connection: BaseDatabaseWrapper) -> int:
    """Take the writer queue of ``slot``'s database: the lock's descriptor, or -1 when none.

    The caller releases it with :func:`release` once its transaction has
    ended. Waits at most ``WRITE_QUEUE_TIMEOUT`` seconds, then raises
    :class:`~agentstore.exceptions.DatabaseBusy`.
    """
    lock = slot.lock
    if lock is None:
        return -1
    try:
        # The free queue (nearly always, in one process) without acquire's call.
        fcntl.flock(lock.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return lock.fd
    except BlockingIOError:
        pass
    if not acquire(lock, slot.timeout):
        # The abandoned wait owns the old descriptor now (it releases and closes
        # it when the kernel finally grants it): this connection opens a fresh one.
        timeout, path = slot.timeout, lock.path
        _slots.pop(connection, None)
        _lock_files(connection).pop(path, None)
        logger.warning("writer queue %s not granted within %.3fs", path, timeout)
        raise DatabaseBusy(
            f"database {connection.alias!r} is busy: the writer queue ({path}) was not "
            f"granted within WRITE_QUEUE_TIMEOUT={timeout:g}s (another process holds it)",
        )
    return lock.fd


class _QueueWait:
    """A blocking ``flock`` in a helper thread, so the caller can stop waiting.

    Blocking (rather than polling ``LOCK_NB``) is what keeps the queue fair:
    the kernel grants the lock to a sleeping waiter when it is released. Only
    :func:`_spin`'s bounded poll (a few hundred µs) comes first. The
    wait itself cannot be cancelled, so a caller that gives up *abandons* it:
    the helper keeps waiting, and releases and closes the descriptor as soon as
    the kernel grants it, so an abandoned wait never holds the queue.

    ``waiter``: the long-lived thread of the lock's description that runs the
    wait (:class:`_Waiter`); without one, a thread of its own.
    """

    def __init__(self, fd: int, waiter: _Waiter | None = None) -> None:
        self.fd = fd
        self.granted = threading.Event()
        self.abandoned = False
        self.mutex = threading.Lock()
        if waiter is not None:
            waiter.requests.put(self)
            return
        self.thread = threading.Thread(target=self.run, name="agentstore-writer-queue", daemon=True)
        self.thread.start()

    def run(self) -> None:
        """Block until the kernel grants the lock; then hand it over, or drop it if abandoned."""
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        except OSError:  # pragma: no cover - the descriptor went away
            return
        with self.mutex:
            if not self.abandoned:
                self.granted.set()
                return
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)

    def wait(self, timeout: float) -> bool:
        """Whether the lock was granted within ``timeout`` (if not, the wait is abandoned)."""
        if self.granted.wait(timeout):
            return True
        with self.mutex:
            if self.granted.is_set():
                return True
            self.abandoned = True
            return False


class _Waiter:
    """One lock description's helper thread, kept for all its contended waits.

    Decision record 0007.

    Starting a thread for every wait cost ~65 µs of CPU (~150 µs of wall time),
    paid by nearly every write when several processes take turns. The thread
    runs one :class:`_QueueWait` at a time — a description is one connection's,
    used by one thread at a time — and ends after an abandoned one (its
    descriptor is gone; the connection opens a new description, with a new
    waiter) or when its description is dropped.
    """

    def __init__(self) -> None:
        self.requests: queue.SimpleQueue[_QueueWait | None] = queue.SimpleQueue()
        threading.Thread(
            target=self._serve, args=(self.requests,), name="agentstore-writer-queue", daemon=True
        ).start()

    @staticmethod
    def _serve(requests: queue.SimpleQueue[_QueueWait | None]) -> None:
        # Holds only the queue, so a dropped LockFile (and its _Waiter) can be
        # collected; its __del__ sends the None that ends this loop.
        while (wait := requests.get()) is not None:
            wait.run()
            if wait.abandoned:
                return

    def stop(self) -> None:
        self.requests.put(None)


#: How long a contended wait with a deadline polls ``LOCK_NB`` before it blocks
#: (decision record 0007): the measured best of 50, 100 (adaptive) and 200 µs.
SPIN_SECONDS = 200e-6

# The spin's yield between tries, a name of its own so a test can act inside the spin.
_spin_yield = os.sched_yield


def spin(fd: int, budget: float) -> bool:
    """Poll ``LOCK_NB`` on ``fd`` for up to ``budget`` seconds; whether it was granted.

    A holder's transaction often ends within a couple of hundred µs: taking
    the lock while still running saves the blocking wait's two wake-ups (the
    kernel's of the helper thread, the helper's of the caller). The yield lets
    a preempted holder on this core run first.
    """
    end = time.monotonic() + budget
    while True:
        _spin_yield()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            pass
        if time.monotonic() >= end:
            return False


def acquire(lock: LockFile, timeout: float) -> bool:
    """Take ``lock`` exclusively, waiting at most ``timeout`` seconds (≤ 0: forever).

    With a deadline, a short spin (:data:`SPIN_SECONDS`, counted against
    ``timeout``) comes before the blocking wait in the helper thread.
    """
    try:
        fcntl.flock(lock.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        pass
    if timeout <= 0:
        fcntl.flock(lock.fd, fcntl.LOCK_EX)
        return True
    started = time.monotonic()
    if spin(lock.fd, min(SPIN_SECONDS, timeout)):
        return True
    if lock.waiter is None:
        lock.waiter = _Waiter()
    remaining = max(0.0, timeout - (time.monotonic() - started))
    if _QueueWait(lock.fd, lock.waiter).wait(remaining):
        return True
    lock.detach()  # the abandoned wait closes it (and its waiter ends)
    return False


def _reset_after_fork() -> None:
    # Descriptions inherited from the parent must not be used by the child.
    global _pid
    _pid = os.getpid()
    _files.clear()
    _slots.clear()


os.register_at_fork(after_in_child=_reset_after_fork)
