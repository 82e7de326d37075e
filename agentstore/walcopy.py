"""A SQLite file's WAL copied into the database by a thread of its own, mostly not by a writer.

In WAL mode a commit only appends pages to the ``-wal`` file; a *checkpoint*
copies them back into the database file. SQLite runs one inside the commit
that takes the log past ``wal_autocheckpoint`` frames (1,000 by default), and
at ``synchronous=NORMAL`` that checkpoint waits for two fsyncs — of the log,
then of the database file after the copy. On the bench disk a checkpoint
after ~100 one-item appends took ~15 ms of wall time (1–2 ms of it CPU): an
append's caller spent a third of its time waiting for a disk it did not need
(decision record 0008).

``agentstore.db`` keeps the writer's own threshold out of the way (it raises
it to ``DEFERRED_AUTOCHECKPOINT``, a safety net) and, once a write has left
the writer queue, reads the log's frame counts from the wal-index
(decision record 0008). At the old threshold not yet copied it calls
:func:`request`, and this module does the rest:

* one :class:`Copier` thread per database file and process, started at the
  first request and ended after :data:`IDLE_SECONDS` without one;
* a request made while a checkpoint is due or running is dropped: the writers
  ask again at their next commit if the log still holds enough frames not
  yet copied;
* each run sets the writer's ``synchronous`` level — which decides the
  checkpoint's fsyncs — on the thread's own ``sqlite3`` connection (read-write,
  never creating the file; kept until the thread ends) and runs ``PRAGMA
  wal_checkpoint(PASSIVE)``, which never waits for readers or writers (nor
  for another process's checkpoint: it then does nothing). ``sqlite3``
  releases the GIL around the call, so the writers carry on meanwhile.

One thing a thread cannot do: SQLite starts the log over only at a write that
begins with every frame copied, and the copier's runs overlap the writes. So
``agentstore.db``'s writer copies the last few frames itself once the log
holds four times the threshold (16 MB at SQLite's defaults, where the log of
a thread that alone checkpoints grows to the safety net: 40 MB).

The durability of a commit does not change: at ``synchronous=NORMAL`` a
commit in WAL mode is durable once the log holds it, whoever checkpoints.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from urllib.parse import quote

__all__ = ["IDLE_SECONDS", "Copier", "busy", "request", "settled"]

logger = logging.getLogger("agentstore.db")

#: A copier with no request for this long ends (a new request starts another):
#: a process that touched many database files (a test run) keeps no idle threads.
IDLE_SECONDS = 5.0


class Copier(threading.Thread):
    """The thread that checkpoints one database file's WAL for this process (see the module)."""

    def __init__(self, path: str, synchronous: int) -> None:
        super().__init__(name=f"agentstore-wal-copy-{os.path.basename(path)}", daemon=True)
        self.path = path
        self.pid = os.getpid()
        self.synchronous = synchronous
        #: Set by :func:`request`; cleared when a run begins.
        self.due = threading.Event()
        #: Set while no run is due or running (:func:`settled`); changed under ``_lock``.
        self.idle = threading.Event()
        #: The thread's own connection (opened at its first run, closed when it ends).
        self.raw: sqlite3.Connection | None = None
        self.inode = -1

    def run(self) -> None:
        try:
            while True:
                if not self.due.wait(IDLE_SECONDS):
                    with _lock:
                        # Under the lock a request either found this thread (and
                        # set ``due`` before we look) or will start a new one.
                        if not self.due.is_set():
                            self._leave()
                            return
                    continue
                self.due.clear()
                self.checkpoint()
                with _lock:
                    self.idle.set()
        finally:
            # However the thread ends — idle, or an error no one foresaw — it
            # leaves no copier that looks busy for ever: the writer's catch-up
            # (agentstore.db) waits for an idle copier, and the next request
            # starts a new one.
            with _lock:
                self._leave()
            self._close()

    def _leave(self) -> None:
        """Unregister and look idle (under ``_lock``; a second call changes nothing)."""
        if _copiers.get(self.path) is self:
            del _copiers[self.path]
        self.idle.set()

    def checkpoint(self) -> None:
        """One ``PASSIVE`` checkpoint on the thread's own connection; a failure only skips it."""
        try:
            raw = self._connection()
        except (sqlite3.Error, OSError):
            logger.debug("WAL copy of %s skipped: cannot open it", self.path, exc_info=True)
            return
        try:
            raw.execute(f"PRAGMA synchronous = {int(self.synchronous)}")
            raw.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
        except sqlite3.Error:
            logger.debug("WAL copy of %s skipped", self.path, exc_info=True)
            self._close()

    def _connection(self) -> sqlite3.Connection:
        # Kept open between runs (an open costs more than the check below; with
        # several processes every writer's copier asks at once and all but one
        # find the checkpoint taken), unless the path now names another file —
        # a database deleted and created again.
        inode = os.stat(self.path).st_ino
        if self.raw is None or inode != self.inode:
            self._close()
            # mode=rw: a database deleted meanwhile is not created again.
            self.raw = sqlite3.connect(
                f"file:{quote(self.path)}?mode=rw", uri=True, timeout=0, isolation_level=None
            )
            self.inode = inode
        return self.raw

    def _close(self) -> None:
        if self.raw is not None:
            self.raw.close()
            self.raw = None


_lock = threading.Lock()
_copiers: dict[str, Copier] = {}
#: Copiers of a parent process (see :func:`request`); SQLite must not close in a
#: child the connections a parent opened.
_inherited: list[Copier] = []


def request(path: str, synchronous: int) -> None:
    """Ask for a checkpoint of ``path``'s WAL, in this process's copier of that file."""
    with _lock:
        copier = _copiers.get(path)
        if copier is None or copier.pid != os.getpid():
            if copier is not None:
                # Inherited through fork: its thread no longer runs, and its
                # connection is the parent's — never closed here, only kept.
                _inherited.append(copier)
            copier = _copiers[path] = Copier(path, synchronous)
            copier.idle.clear()
            copier.due.set()
            copier.start()
            return
        if not copier.idle.is_set():
            return  # due or running already: see the module doc
        copier.synchronous = synchronous
        copier.idle.clear()
        copier.due.set()


def busy(path: str) -> bool:
    """Whether a checkpoint of ``path`` is due or running in this process's copier."""
    with _lock:
        copier = _copiers.get(path)
        return copier is not None and copier.pid == os.getpid() and not copier.idle.is_set()


def settled(path: str, timeout: float = 10.0) -> bool:
    """Wait until no checkpoint of ``path`` is due or running here; whether that happened.

    For tests and for a process about to hand its files over: the copy is
    otherwise asynchronous by design.
    """
    with _lock:
        copier = _copiers.get(path)
    return copier is None or copier.idle.wait(timeout)
