"""What the server running this process can give live follow streams, and the cap that follows.

    from agentstore.serving import follow_cap, thread_server

    thread_server()     # ThreadServer(name="gunicorn gthread", threads=8), or None
    follow_cap()        # FollowCap(limit=4, why="derived from …"): streams this process serves

A live follow stream (``GET /sessions/{id}/follow``) on a WSGI server holds one
of the server's threads for its whole life; on an ASGI server it holds none
while it waits. A per-process cap above the threads a WSGI process has lets
followers take every thread, and then no ordinary request is answered until a
stream ends (gunicorn ``gthread``, 8 threads, the old default cap of 16: 40
streams starved four workers). So the cap is tied to the server's capacity
(docs/operations.md, "Following live: ASGI and caps"):

* **A thread-bounded server** (gunicorn's ``sync`` and ``gthread`` workers,
  detected below): ``FOLLOW_MAX_PER_PROCESS`` unset (``None``) derives the cap
  as half the threads (``threads // 2``: a ``sync`` worker's one thread gives
  0, every stream is refused), so the other half always serves ordinary
  requests, slow ones included. An explicit cap may go up to ``threads - 1``,
  never further: a larger one (or ``0``, "no cap") stops the worker at
  start-up with :class:`~django.core.exceptions.ImproperlyConfigured`
  (:func:`check_follow_cap`, run when the app loads), and where the app was
  loaded before the worker existed (gunicorn ``--preload``) it is lowered to
  ``threads - 1`` and logged once — one thread is always left.
* **Anything else** (ASGI servers, gunicorn's async workers, a server this
  module cannot ask): ``None`` means :data:`DEFAULT_CAP`, which bounds open
  connections and polling work, not threads; an explicit cap is used as given.
  Under another thread-pooled WSGI server (waitress, uWSGI, mod_wsgi) set
  ``FOLLOW_MAX_PER_PROCESS`` below its threads yourself.

How gunicorn is detected: its workers install their signal handlers — bound
methods of the worker object — before they load the application
(``Worker.init_process``), so the handler of ``SIGTERM``/``SIGQUIT`` is the
worker and its ``cfg.threads`` is the number of request threads. Nothing is
imported from gunicorn that this process has not imported already, and outside
a gunicorn worker (tests, commands, uvicorn) nothing is found.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from agentstore.conf import agentstore_settings

__all__ = [
    "DEFAULT_CAP",
    "FollowCap",
    "ThreadServer",
    "check_follow_cap",
    "derive_follow_cap",
    "follow_cap",
    "thread_server",
]

logger = logging.getLogger("agentstore.serving")

#: Followers per process where a stream holds no thread (ASGI) or the server is unknown.
DEFAULT_CAP = 16

#: Where the caps are explained (error messages point there).
DOCS = 'docs/operations.md, "Following live: ASGI and caps"'


@dataclass(frozen=True, slots=True)
class ThreadServer:
    """A WSGI server process whose requests each take one of ``threads`` threads."""

    name: str
    threads: int


@dataclass(frozen=True, slots=True)
class FollowCap:
    """The follower cap of this process: ``limit`` streams (``None``: no cap) and why."""

    limit: int | None
    why: str


def _gunicorn_worker() -> Any:
    """This process's gunicorn worker object, or ``None`` (not a booted gunicorn worker)."""
    base = sys.modules.get("gunicorn.workers.base")
    if base is None:
        return None
    for signum in (signal.SIGTERM, signal.SIGQUIT):
        owner = getattr(signal.getsignal(signum), "__self__", None)
        if isinstance(owner, base.Worker):
            return owner
    return None


def thread_server() -> ThreadServer | None:
    """This process's thread-bounded server; ``None``: streams hold no thread, or it can't tell.

    gunicorn's ``sync`` worker serves one request at a time (1 thread); its
    ``gthread`` worker ``--threads``. Its async workers (``gevent``,
    ``eventlet``, ``tornado``, ASGI ones) hold no thread per stream.
    """
    worker = _gunicorn_worker()
    if worker is None:
        return None
    sync = sys.modules.get("gunicorn.workers.sync")
    if sync is not None and isinstance(worker, sync.SyncWorker):
        return ThreadServer("gunicorn sync worker", 1)
    gthread = sys.modules.get("gunicorn.workers.gthread")
    if gthread is not None and isinstance(worker, gthread.ThreadWorker):
        return ThreadServer("gunicorn gthread worker", max(1, int(worker.cfg.threads)))
    return None


def _configured() -> int | None:
    value = agentstore_settings.FOLLOW_MAX_PER_PROCESS
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ImproperlyConfigured(
            f"AGENTSTORE['FOLLOW_MAX_PER_PROCESS'] must be None (derive it from the server) "
            f"or a whole number >= 0, not {value!r}."
        )
    return value


def _over_capacity(configured: int, server: ThreadServer) -> str:
    wanted = "no cap (0)" if configured == 0 else str(configured)
    return (
        f"AGENTSTORE['FOLLOW_MAX_PER_PROCESS'] is {wanted}, but this {server.name} has "
        f"{server.threads} thread(s) and a follow stream holds one for its whole life: "
        f"followers could take every thread and starve ordinary requests. Set it to at most "
        f"{server.threads - 1}, or leave it unset to derive {server.threads // 2}, or give "
        f"the worker more threads, or serve follow from ASGI ({DOCS})."
    )


def derive_follow_cap(configured: int | None, server: ThreadServer | None) -> FollowCap:
    """The cap for a ``configured`` setting on ``server`` (pure; the rules of the module doc).

    A configured cap above a thread-bounded server's ``threads - 1`` comes back
    lowered to it; :func:`check_follow_cap` is what refuses it at start-up.
    """
    if server is None:
        if configured is None:
            return FollowCap(DEFAULT_CAP, "FOLLOW_MAX_PER_PROCESS, default")
        return FollowCap(configured or None, "FOLLOW_MAX_PER_PROCESS")
    most = server.threads - 1
    if configured is None:
        return FollowCap(
            server.threads // 2,
            f"FOLLOW_MAX_PER_PROCESS derived from the {server.threads} thread(s) of this "
            f"{server.name}: half of them always serve other requests",
        )
    if configured == 0 or configured > most:
        return FollowCap(
            most,
            f"FOLLOW_MAX_PER_PROCESS lowered to the {server.threads} thread(s) of this "
            f"{server.name} minus one",
        )
    return FollowCap(configured, "FOLLOW_MAX_PER_PROCESS")


_warned = threading.Event()


def follow_cap() -> FollowCap:
    """The follower cap of this process now (read on every follow request: settings may change)."""
    configured = _configured()
    server = thread_server()
    cap = derive_follow_cap(configured, server)
    if server is None or configured is None or cap.limit == configured:
        return cap
    if not _warned.is_set():
        _warned.set()
        # Only reachable when the app loaded before the worker existed
        # (gunicorn --preload); otherwise check_follow_cap refused to start.
        logger.error("%s Serving at most %s.", _over_capacity(configured, server), cap.limit)
    return cap


def check_follow_cap() -> None:
    """Refuse to start a thread-bounded server whose configured cap would starve it.

    Called when the app loads (``AgentStoreConfig.ready``): in a gunicorn worker
    that is after the worker set itself up, so a cap above ``threads - 1`` stops
    the worker before it serves anything, and gunicorn stops with "Worker
    failed to boot". Elsewhere (no thread-bounded server found) it checks only
    the setting's type.
    """
    configured = _configured()
    server = thread_server()
    if server is None or configured is None:
        return
    if configured == 0 or configured > server.threads - 1:
        raise ImproperlyConfigured(_over_capacity(configured, server))
