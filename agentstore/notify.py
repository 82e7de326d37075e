"""Wake-ups across processes on PostgreSQL: ``NOTIFY`` in the write, one ``LISTEN`` per process.

Followers (``LogStore.follow``, the SSE endpoint, ``manage.py agentstore follow``)
and idle task workers poll the database. On PostgreSQL this module lets them
wake the moment a write they care about commits, in any process on any host::

    from agentstore import notify

    # inside a store's write transaction (stores/sessions.py and the task
    # repository do this; nothing else needs to):
    notify.notify(using, notify.queue_key(queue))
    notify.session_changed(using, session_id)     # notify(using, session_key(id)), cheaper

    # a follower, for as long as it follows:
    with notify.subscribe(using, notify.session_key(session_id)) as sub:
        while True:
            rows = read_new_rows()           # after subscribing: nothing is missed
            if not rows:
                sub.wait(poll_interval)      # or: await sub.wait_async(poll_interval)

How it works (docs/operations.md, "Scaling out"):

* **In the writing transaction.** :func:`notify` runs ``SELECT pg_notify(…)`` on
  the writer's own connection, inside its transaction. PostgreSQL delivers a
  notification only when that transaction commits (and drops it on rollback),
  so a wake-up never precedes the row it announces. Identical notifications
  in one transaction are folded, here (one statement per key and transaction)
  and by PostgreSQL.
* **One channel, small payloads.** Everything goes to the channel
  ``agentstore``; the payload names what changed: ``s:<session id>`` (an
  append or delete of entries, steps or log lines; any write that touches the
  session row), ``q:<queue>`` (a task enqueued), ``r:<ref name>`` (a ref
  moved). A key longer than :data:`MAX_PAYLOAD` bytes is sent as ``*``
  (wake everyone) rather than cut: PostgreSQL refuses payloads of 8000 bytes.
* **One listening connection per process and database alias**, opened lazily
  by the first :func:`subscribe`: a daemon thread holds a dedicated psycopg
  connection (never one of Django's or the pool's), runs ``LISTEN agentstore``
  and wakes the subscriptions registered for each payload. A hundred followers
  in a process cost one connection, not a hundred.
* **Polling stays the fallback.** A subscription only shortens a wait; every
  caller still waits with its poll interval as the timeout. While the listener
  is down (not yet connected, reconnecting after the database restarted)
  callers just poll; when it (re)connects it wakes every subscription once,
  since notifications sent meanwhile are lost.
* **Inert on SQLite** (and when ``AGENTSTORE["NOTIFY"]`` is ``False``):
  :func:`notify` does nothing and a subscription's wait is a plain timed wait.

Subscribe *before* reading, then wait: a notification that arrives between the
read and the wait leaves the subscription set, and the wait returns at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any

from django.core.signals import setting_changed
from django.db import connections

from agentstore import db
from agentstore.conf import agentstore_settings

__all__ = [
    "ALL",
    "CHANNEL",
    "MAX_PAYLOAD",
    "Subscription",
    "listening",
    "notify",
    "payload_of",
    "queue_key",
    "ref_key",
    "session_key",
    "shutdown",
    "subscribe",
    "wait_listening",
]

logger = logging.getLogger("agentstore.notify")

#: The one channel agentstore notifies on.
CHANNEL = "agentstore"
#: The payload that wakes every subscription.
ALL = "*"
#: Longest payload sent as is (PostgreSQL's limit is 8000 bytes, exclusive).
MAX_PAYLOAD = 7000
#: Seconds the listener blocks before looking whether it should stop.
_SLICE = 1.0
#: Seconds without a notification after which the listener checks its connection.
_IDLE_CHECK = 30.0
#: Reconnect backoff of the listener: first and longest wait, in seconds.
_RETRY_FIRST, _RETRY_MAX = 0.1, 5.0


def session_key(session_id: str) -> str:
    """The key of a session's writes (entries, steps, log lines, its deletion)."""
    return f"s:{session_id}"


def queue_key(queue: str) -> str:
    """The key of a task queue (a task enqueued on it)."""
    return f"q:{queue or 'default'}"


def ref_key(name: str) -> str:
    """The key of a ref (it moved)."""
    return f"r:{name}"


#: Each alias's backend vendor: ``connections[using]`` is an ``asgiref`` look-up
#: (~2 µs) and ``_enabled`` runs on every write of every store
#: (bench/results/2026-12-01-write-layer-python.md).
_vendors: dict[str, str] = {}


def _enabled(using: str) -> bool:
    vendor = _vendors.get(using)
    if vendor is None:
        vendor = _vendors[using] = str(connections[using].vendor)
    return vendor == "postgresql" and bool(agentstore_settings.NOTIFY)


def _databases_changed(*, setting: str, **kwargs: Any) -> None:
    if setting == "DATABASES":
        _vendors.clear()


setting_changed.connect(_databases_changed)


# -- the writer's side ------------------------------------------------------------


def payload_of(using: str, key: str) -> str | None:
    """The payload :func:`notify` sends for ``key`` on ``using``; ``None``: it sends nothing.

    For a statement that carries its own ``pg_notify(CHANNEL, payload)`` (the
    task repository's one-statement enqueue).
    """
    if not _enabled(using):
        return None
    return key if len(key.encode()) <= MAX_PAYLOAD else ALL


def session_changed(using: str, session_id: str) -> None:
    """:func:`notify` of :func:`session_key`: on SQLite one look and nothing else (every append)."""
    if _enabled(using):
        notify(using, session_key(session_id))


def notify(using: str, key: str) -> None:
    """Announce ``key`` to every listening process when the current transaction commits.

    Call it inside the write transaction (a store's ``write``); outside one the
    notification goes out at once. A no-op on SQLite and with ``NOTIFY`` off.
    """
    payload = payload_of(using, key)
    if payload is None:
        return
    connection = connections[using]
    if connection.in_atomic_block:
        # Fold repeats within one transaction (an append_many touches its
        # session once per entry): remember what this transaction sent,
        # keyed by its outermost atomic block.
        outermost = connection.atomic_blocks[0]
        sent: tuple[Any, set[str]] | None = getattr(connection, "_agentstore_notified", None)
        if sent is None or sent[0] is not outermost:
            sent = (outermost, set())
            connection._agentstore_notified = sent  # type: ignore[attr-defined]
        if payload in sent[1]:
            return
        sent[1].add(payload)
    with db.cursor_on(connection) as cursor:
        cursor.execute("SELECT pg_notify(%s, %s)", [CHANNEL, payload])


# -- the follower's side ----------------------------------------------------------


class Subscription:
    """Interest in some keys; woken by their notifications (see the module docstring).

    ``wake`` (optional) is called from the listener thread on every wake-up,
    besides setting the subscription's own event — for callers that already
    wait on something else (``LogStore.follow``'s same-store hub).
    """

    def __init__(
        self,
        keys: tuple[str, ...],
        wake: Callable[[], None] | None = None,
        *,
        listener: _Listener | None = None,
    ) -> None:
        self.keys = keys
        self._wake_cb = wake
        self._event = threading.Event()
        self._async: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None
        # The listener that wakes it (``close`` leaves it); given at construction so
        # no other code sets this object's private state.
        self._listener = listener

    def wake(self) -> None:
        """Wake the waiter (thread-safe; called by the listener)."""
        self._event.set()
        if self._async is not None:
            loop, event = self._async
            with contextlib.suppress(RuntimeError):  # the loop closed
                loop.call_soon_threadsafe(event.set)
        if self._wake_cb is not None:
            self._wake_cb()

    def wait(self, timeout: float, stop: threading.Event | None = None) -> bool:
        """Wait until woken, ``timeout`` seconds pass, or ``stop`` is set; ``True`` if woken.

        ``stop`` is looked at every 50 ms (an event cannot wait on two).
        """
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            remaining = deadline - time.monotonic()
            if stop is not None:
                if stop.is_set():
                    return False
                remaining = min(remaining, 0.05)
            if remaining <= 0:
                return self._consume()
            if self._event.wait(remaining):
                return self._consume()
            if stop is None or time.monotonic() >= deadline:
                return self._consume()

    def _consume(self) -> bool:
        woken = self._event.is_set()
        self._event.clear()
        return woken

    async def wait_async(self, timeout: float) -> bool:
        """The async twin of :meth:`wait` (waits on the running event loop)."""
        if self._async is None:
            self._async = (asyncio.get_running_loop(), asyncio.Event())
            if self._event.is_set():
                self._async[1].set()
        event = self._async[1]
        try:
            await asyncio.wait_for(event.wait(), timeout=max(0.0, timeout))
            woken = True
        except TimeoutError:
            woken = False
        event.clear()
        self._event.clear()
        return woken

    def close(self) -> None:
        """Stop receiving wake-ups (idempotent)."""
        if self._listener is not None:
            self._listener.remove(self)
            self._listener = None

    def __enter__(self) -> Subscription:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def subscribe(using: str, *keys: str, wake: Callable[[], None] | None = None) -> Subscription:
    """Register interest in ``keys`` on ``using``; close the result when done.

    On PostgreSQL (with ``NOTIFY`` on) this starts the process's listener for
    ``using`` if needed; elsewhere the subscription is never woken and its
    waits simply time out.
    """
    listener = _listener_for(using) if _enabled(using) else None
    subscription = Subscription(keys, wake, listener=listener)
    if listener is not None:
        listener.add(subscription)
    return subscription


def listening(using: str) -> bool:
    """Whether this process's listener on ``using`` is connected right now."""
    with _registry_lock:
        listener = _listeners.get(using)
    return listener is not None and listener.connected.is_set()


def wait_listening(using: str, timeout: float) -> bool:
    """Wait until this process's listener on ``using`` is connected (tests, benchmarks).

    ``False`` when it is not within ``timeout`` seconds or nothing subscribed
    on ``using`` yet (there is no listener to wait for).
    """
    with _registry_lock:
        listener = _listeners.get(using)
    return listener is not None and listener.connected.wait(timeout)


def shutdown(timeout: float = 5.0) -> None:
    """Close every listener of this process (tests call it before dropping the database)."""
    with _registry_lock:
        found = list(_listeners.values())
        _listeners.clear()
    for listener in found:
        listener.stop(timeout)


# -- the listener -------------------------------------------------------------------


class _Listener(threading.Thread):
    """The process's ``LISTEN`` connection for one alias, in a daemon thread."""

    def __init__(self, using: str, params: dict[str, Any]) -> None:
        super().__init__(name=f"agentstore-listen-{using}", daemon=True)
        self.using = using
        self.params = params
        self.connected = threading.Event()
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._by_key: dict[str, set[Subscription]] = {}

    def add(self, subscription: Subscription) -> None:
        with self._lock:
            for key in subscription.keys:
                self._by_key.setdefault(key, set()).add(subscription)

    def remove(self, subscription: Subscription) -> None:
        with self._lock:
            for key in subscription.keys:
                found = self._by_key.get(key)
                if found is not None:
                    found.discard(subscription)
                    if not found:
                        del self._by_key[key]

    def dispatch(self, payload: str) -> None:
        with self._lock:
            if payload == ALL:
                targets = {s for subs in self._by_key.values() for s in subs}
            else:
                targets = set(self._by_key.get(payload, ()))
        for subscription in targets:
            try:
                subscription.wake()
            except Exception:  # one waiter's failure must not cost everyone the listener
                logger.exception("waking a subscription to %s failed", payload)

    def run(self) -> None:
        import psycopg

        delay = _RETRY_FIRST
        while not self._stopping.is_set():
            try:
                with psycopg.connect(**self.params, autocommit=True) as conn:
                    conn.execute(f"LISTEN {CHANNEL}")
                    self.connected.set()
                    delay = _RETRY_FIRST
                    # Whatever was sent while we were not listening is lost:
                    # everyone looks once.
                    self.dispatch(ALL)
                    quiet_since = time.monotonic()
                    while not self._stopping.is_set():
                        for note in conn.notifies(timeout=_SLICE):
                            quiet_since = time.monotonic()
                            self.dispatch(note.payload)
                            if self._stopping.is_set():
                                break
                        if time.monotonic() - quiet_since >= _IDLE_CHECK:
                            conn.execute("SELECT 1")  # a dead server shows here
                            quiet_since = time.monotonic()
            except Exception as exc:
                if self._stopping.is_set():
                    break
                logger.warning(
                    "LISTEN on %r lost (%s); polling until it reconnects", self.using, exc
                )
            finally:
                self.connected.clear()
            if self._stopping.wait(delay):
                break
            delay = min(delay * 2, _RETRY_MAX)

    def stop(self, timeout: float) -> None:
        # The thread looks at the flag every _SLICE seconds.
        self._stopping.set()
        self.join(timeout)


_registry_lock = threading.Lock()
_listeners: dict[str, _Listener] = {}
#: Listeners inherited through ``fork``: kept referenced, never closed, since
#: closing would end the *parent's* connection (they share the socket).
_orphans: list[_Listener] = []


def _listener_for(using: str) -> _Listener:
    with _registry_lock:
        listener = _listeners.get(using)
        if listener is None:
            listener = _listeners[using] = _Listener(using, _connect_params(using))
            listener.start()
        return listener


def _connect_params(using: str) -> dict[str, Any]:
    """Django's own connection parameters for ``using``, minus what only Django's cursor needs."""
    params: dict[str, Any] = dict(connections[using].get_connection_params())
    for name in ("cursor_factory", "context", "prepare_threshold"):
        params.pop(name, None)
    return params


def _reset_after_fork() -> None:
    # The thread did not survive the fork; its connection object did, and must
    # never be used or closed here. The child starts its own listener lazily.
    global _registry_lock
    _registry_lock = threading.Lock()  # the parent may have held it mid-fork
    _orphans.extend(_listeners.values())
    _listeners.clear()


os.register_at_fork(after_in_child=_reset_after_fork)
