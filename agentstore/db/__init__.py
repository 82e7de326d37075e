"""agentstore's one door to the database: every statement, every transaction.

Everything agentstore sends goes through this package, as everything in
sqlite-utils goes through ``Database.execute`` and its tracer::

    from agentstore import db

    db.write(lambda cursor: cursor.execute(INSERT, params), using="default")   # a write
    with db.cursor("default") as cursor:                                       # a read
        cursor.execute(SELECT, [session_id])
    rows = db.read_only(lambda: list(Entry.objects.filter(...)))               # a snapshot

* :mod:`~agentstore.db.driver` — :func:`write`, the one way into a write
  transaction: how it opens (SQLite's ``BEGIN IMMEDIATE`` on the ``sqlite3``
  connection where it may, Django's ``atomic()`` elsewhere), the writer
  queue, the single busy-retry loop;
* :mod:`~agentstore.db.cursors` — the one cursor every statement runs on, which
  reports to Django's instrumentation (``execute_wrappers``,
  ``connection.queries``) whenever something watches; watching never changes
  which statements run or how the transaction opens;
* :mod:`~agentstore.db.queue` — the SQLite writer queue and the WAL's
  checkpoints off the writer's path;
* :mod:`~agentstore.db.read` — read snapshots that never take the write lock;
* :mod:`~agentstore.db.errors` — "busy, try again" and "that key exists";
* :mod:`~agentstore.db.shared` — one connection object for short-lived threads
  (the LangGraph savers); :mod:`~agentstore.db.info` — a connection's pragmas.

docs/decisions/0002-one-statement-door.md says why it is shaped this way.
"""

from __future__ import annotations

from agentstore.db.cursors import Cursor, SqlCursor, cursor, cursor_on, qmark, watched
from agentstore.db.driver import backoff_delay, write
from agentstore.db.errors import is_busy_error, is_unique_violation
from agentstore.db.info import describe_connection
from agentstore.db.queue import sqlite_lock_path
from agentstore.db.read import read_only, read_snapshot
from agentstore.db.shared import SharedConnection

__all__ = [
    "Cursor",
    "SharedConnection",
    "SqlCursor",
    "backoff_delay",
    "cursor",
    "cursor_on",
    "describe_connection",
    "is_busy_error",
    "is_unique_violation",
    "qmark",
    "read_only",
    "read_snapshot",
    "sqlite_lock_path",
    "watched",
    "write",
]
