"""One Django connection object shared by short-lived threads (the LangGraph savers).

shared = SharedConnection("default")
with shared.lock:
    db.write(body, using="default", connection=shared.ready())   # statements only
with shared.borrowed():
    db.write(body, using="default", orm=True)                    # the ORM too
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from typing import Any

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper

__all__ = ["SharedConnection"]


class SharedConnection:
    """One Django connection object of an alias, lent to one thread at a time.

    LangGraph calls a checkpointer from short-lived executor threads — a new set
    for every ``invoke`` — and Django opens one connection per thread, which
    those threads never close (measured: 507 connections for 200 invocations).
    So the LangGraph savers keep one connection object of their own (as
    ``SqliteSaver`` keeps one ``sqlite3`` connection behind a lock) and use it
    from whichever thread calls, holding :attr:`lock`:

    * a hot path that needs only the connection object (statements on it: ``db.write(...,
      connection=shared.ready())``) takes :attr:`lock` and :meth:`ready` —
      nothing else, since Django's per-thread machinery (``connections[alias]``,
      ``asgiref.local``) was a fifth of the saver's time per call (decision record 0068);
    * anything that goes through ``connections[alias]`` (the ORM, a write
      Django opens) runs inside :meth:`borrowed`, which installs the object
      as the calling thread's connection for the alias while it runs, then
      puts the thread's own back.

    A transaction the caller has open lives on the caller's connection, so
    work on this one never joins it. ``settings(alias)`` gives the settings
    the connection (re)connects with, read at each reconnect (a test run
    renames the database after import); by default Django's own.
    """

    def __init__(
        self, using: str, *, settings: Callable[[str], dict[str, Any]] | None = None
    ) -> None:
        self.using = using
        self.pid = os.getpid()
        self.lock = threading.RLock()
        self.settings = settings or (lambda alias: connections.settings[alias])
        self.connection: BaseDatabaseWrapper = connections.create_connection(using)
        # Used from whichever thread holds the lock; Django checks the owner.
        self.connection.inc_thread_sharing()

    def ready(self) -> BaseDatabaseWrapper:
        """The connection object, for the thread that holds :attr:`lock`."""
        connection = self.connection
        if connection.connection is None:
            # (Re)connecting: read the settings now, as Django's own
            # connections do (a test run renames the database after import).
            connection.settings_dict = self.settings(self.using)
        return connection

    @contextlib.contextmanager
    def borrowed(self) -> Iterator[BaseDatabaseWrapper]:
        """Hold :attr:`lock`, the connection installed as the thread's ``connections[alias]``."""
        with self.lock:
            # The thread's own connection object, if it has one: LangGraph's
            # executor threads are new at every invoke, and making them one
            # (connections[alias]) would cost 50 µs per thread for nothing.
            own = next(
                (c for c in connections.all(initialized_only=True) if c.alias == self.using),
                None,
            )
            if own is self.connection:  # a nested call on the same thread
                yield own
                return
            self.ready()
            connections[self.using] = self.connection
            try:
                yield self.connection
            finally:
                if own is None:
                    del connections[self.using]
                else:
                    connections[self.using] = own

    def close(self) -> None:
        """Close the connection (the next use opens a new one)."""
        with self.lock:
            self.connection.close()
