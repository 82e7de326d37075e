"""Where coroutines run their database work: one thread, or Django's — and the async twins.

    from agentstore.db import thread

    class LoopStore(StoreBase):
        def append(self, step): ...
        aappend = thread.async_twin(append)        # the one way an async twin is made

    items = await thread.run(session.get_items_sync, 50)    # never on the event loop
    await thread.run_to_end(session.add_items_sync, items)  # a write: ends even if cancelled
    thread.close_connections()                               # tests, shutdown

Every ``a``-prefixed coroutine of a store, and every async method of an
integration, is :func:`async_twin` of its synchronous body: the same code, run
once on the thread chosen below, awaited to its end.

The SDK's session protocol is async, the stores are synchronous Django code, so
each call hops to a thread and back. ``asgiref``'s ``sync_to_async`` (thread
sensitive) picks the thread that owns Django's connection — and that choice
matters in two cases, where :func:`run` keeps it:

* **A synchronous caller is waiting** (``async_to_sync`` above us: a sync view,
  a management command, Django's async test cases): the work must run on *its*
  thread, whose connection may be inside an ``atomic()`` block; another
  connection would not see that transaction's rows and, on SQLite, would wait
  for its write lock.
* **A Django request** (``ThreadSensitiveContext``, which Django's ASGI handler
  enters per request): the request's thread, whose connection Django closes at
  the request's end (``CONN_MAX_AGE``).

Everywhere else — an ``asyncio`` program, a worker, a script: no caller thread,
no request — ``sync_to_async`` sends the work to one process-wide thread of
its own, whose connections Django never closes either. There :func:`run` uses
a thread of this module instead (``agentstore-db``), with a lighter hand-off:
the call goes on a queue, the result comes back by ``call_soon_threadsafe``
onto a future of the caller's loop — no ``ThreadPoolExecutor`` future, no
context copy-back, about half of ``sync_to_async``'s cost per call
(decision record 0064). Like ``asyncio.to_thread``, the function runs in a
copy of the caller's ``contextvars`` context.

Because nothing in Django closes this thread's connections, it does what a
request's end would: after each call a connection that saw an error is
closed if unusable, one past a positive ``CONN_MAX_AGE`` is closed; and when
no call has come for :data:`IDLE_SECONDS`, every connection of the thread is
closed (``CONN_MAX_AGE = 0``, Django's default, means "per request": a burst
of calls is this thread's request). The next call reconnects. No one-item
append waits for SQLite's checkpoint and its fsyncs: every agentstore write
leaves that to ``agentstore.walcopy``'s thread (decision record 0008).

What callers get either way: the event loop never blocks on the database;
the work of one :func:`run` happens exactly once, on one thread, and
:func:`run` returns its result or raises its exception. Cancellation of the
awaiting task cannot stop a thread: :func:`run_to_end`, for writes, waits for
the call's end and then re-raises the cancellation (decision record 0064).
After ``os.fork`` the child starts its own thread (a thread does not survive
a fork).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import logging
import os
import queue
import threading
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

from asgiref.sync import AsyncToSync, SyncToAsync, sync_to_async
from django.db import connections

__all__ = [
    "IDLE_SECONDS",
    "THREAD_NAME",
    "async_twin",
    "close_connections",
    "django_owns_the_thread",
    "run",
    "run_to_end",
]

T = TypeVar("T")
P = ParamSpec("P")

logger = logging.getLogger(__name__)

#: Seconds without a call after which the thread closes its connections.
IDLE_SECONDS = 5.0
#: The name of the thread (``threading.current_thread().name`` in the work).
THREAD_NAME = "agentstore-db"


class _Call:
    """One call handed to the thread; settled on the caller's loop when it has run."""

    __slots__ = ("args", "context", "ended", "fn", "future", "loop", "ok", "value", "waiter")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop | None,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        context: contextvars.Context | None,
    ) -> None:
        self.loop = loop
        self.future: asyncio.Future[Any] | None = loop.create_future() if loop else None
        self.fn = fn
        self.args: tuple[Any, ...] = args
        self.context = context
        #: Set on the caller's loop once the call has run (``ok``, ``value``).
        self.ended = False
        self.ok = False
        self.value: Any = None
        #: A future :func:`run_to_end` waits on after its caller was cancelled.
        self.waiter: asyncio.Future[None] | None = None

    def settle(self, ok: bool, value: Any) -> None:
        # On the caller's loop. A future cancelled meanwhile (its caller gave
        # up waiting) takes no result; the work itself is done either way.
        self.ended, self.ok, self.value = True, ok, value
        future = self.future
        if future is not None and not future.done():
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)
        if self.waiter is not None and not self.waiter.done():
            self.waiter.set_result(None)


def _done() -> None:
    """What a :class:`_Call` holds once its function has been taken to run."""


def _recycle(idle: bool) -> None:
    """After a call or when idle: what the end of a request would do (see the module doc)."""
    try:
        for connection in connections.all(initialized_only=True):
            if connection.connection is None or connection.in_atomic_block:
                continue
            if idle:
                connection.close()
                continue
            if connection.errors_occurred or connection.settings_dict.get("CONN_MAX_AGE"):
                # Django's own rule: unusable after an error, or past a positive
                # CONN_MAX_AGE. (With 0 it would close after every call; the
                # idle close is this thread's end of a request.)
                connection.close_if_unusable_or_obsolete()
    except Exception:
        # A connection that fails to close must not stop the thread serving.
        logger.exception("%s could not close a database connection", THREAD_NAME)


def _close_all() -> None:
    """Close every connection of this thread."""
    connections.close_all()


class _Thread:
    """The one thread of a process, serving :class:`_Call`s in order."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.calls: queue.SimpleQueue[_Call] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._serve, name=THREAD_NAME, daemon=True)
        self.thread.start()

    def submit(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> _Call:
        call = _Call(asyncio.get_running_loop(), fn, args, contextvars.copy_context())
        self.calls.put(call)
        return call

    def call(self, fn: Callable[[], None], timeout: float) -> bool:
        """Run ``fn`` on the thread from synchronous code; whether it ended within ``timeout``."""
        done = threading.Event()

        def job() -> None:
            try:
                fn()
            finally:
                done.set()

        self.calls.put(_Call(None, job, (), None))
        return done.wait(timeout)

    def _serve(self) -> None:
        calls = self.calls
        open_connections = False
        while True:
            if open_connections:
                try:
                    call = calls.get(timeout=IDLE_SECONDS)
                except queue.Empty:
                    _recycle(idle=True)
                    open_connections = False
                    continue
            else:
                call = calls.get()
            fn, args, context = call.fn, call.args, call.context
            call.fn, call.args, call.context = _done, (), None  # nothing kept alive after
            try:
                value = context.run(fn, *args) if context is not None else fn(*args)
                ok = True
            except BaseException as exc:  # handed to the caller, whatever it is
                value, ok = exc, False
            finally:
                _recycle(idle=False)
                open_connections = True
            del fn, args, context
            if call.loop is not None:
                # A loop that closed while the work ran (RuntimeError) has nobody waiting.
                with contextlib.suppress(RuntimeError):
                    call.loop.call_soon_threadsafe(call.settle, ok, value)
            del value, call


_thread: _Thread | None = None
_thread_lock = threading.Lock()


def _the_thread() -> _Thread:
    global _thread
    current = _thread
    if current is not None and current.pid == os.getpid():
        return current
    with _thread_lock:
        if _thread is None or _thread.pid != os.getpid():
            _thread = _Thread()
        return _thread


def django_owns_the_thread() -> bool:
    """Whether ``sync_to_async`` would run work on a thread Django's code depends on.

    asgiref's own routing (``SyncToAsync.__call__``): a synchronous caller
    waiting above us (``async_to_sync``), a ``ThreadSensitiveContext`` (a
    Django request), or a loop that ``async_to_sync`` started for a caller.
    Called on the event loop's thread.
    """
    # The cheap tests first; the Local's lookup costs a few microseconds.
    if SyncToAsync.thread_sensitive_context.get(None) is not None:
        return True
    if AsyncToSync.loop_thread_executors and (
        asyncio.get_running_loop() in AsyncToSync.loop_thread_executors
    ):
        return True
    return getattr(AsyncToSync.executors, "current", None) is not None


def run(fn: Callable[..., T], *args: Any) -> Awaitable[T]:
    """``fn(*args)`` off the event loop, on the thread that should own the connection.

    Must be called on a running event loop; await the result. See the module
    docstring for which thread. Cancelling the awaiting task stops the wait,
    not the call; writes use :func:`run_to_end`.
    """
    if django_owns_the_thread():
        return sync_to_async(fn)(*args)
    future = _the_thread().submit(fn, args).future
    assert future is not None
    return future


async def run_to_end(fn: Callable[..., T], *args: Any) -> T:
    """:func:`run`, awaited to the call's end even if the awaiting task is cancelled meanwhile.

    The call runs in a thread, which cancellation cannot stop; returning early
    would let the caller believe it did not happen. Like the SDK's own
    sessions, wait for the outcome, then re-raise the cancellation (or the
    call's own error, if it failed).
    """
    if django_owns_the_thread():
        return await _shielded(sync_to_async(fn)(*args))
    call = _the_thread().submit(fn, args)
    assert call.future is not None and call.loop is not None
    try:
        return cast(T, await call.future)
    except asyncio.CancelledError:
        if call.ended and not call.future.cancelled():
            raise  # the call itself raised CancelledError
        while not call.ended:
            call.waiter = call.loop.create_future()
            with contextlib.suppress(asyncio.CancelledError):
                await call.waiter
        if not call.ok:
            raise call.value from None
        raise


def async_twin(
    method: Callable[Concatenate[Any, P], T],
) -> Callable[Concatenate[Any, P], Coroutine[Any, Any, T]]:
    """The async twin of a synchronous method: the same body, run once off the event loop.

    ``aappend = async_twin(append)`` in a class body. The twin looks the method
    up on the instance at each call, so a subclass that overrides ``append``
    changes ``aappend`` too; it runs it through :func:`run_to_end` — on the
    thread that should own the connection, awaited to its end even if the
    caller is cancelled (a write that happened is never reported as not
    having happened). One hop per call, however many statements the body sends.
    """
    name = method.__name__

    # ``self`` is Any: the twin also fills a base class's abstract method
    # (the SDK's SessionABC, LangGraph's saver), whose self type is the base.
    async def twin(self: Any, /, *args: P.args, **kwargs: P.kwargs) -> T:
        body: Callable[..., T] = getattr(self, name)
        if kwargs:
            return await run_to_end(functools.partial(body, *args, **kwargs))
        return await run_to_end(body, *args)

    twin.__name__ = twin.__qualname__ = f"a{name}"
    twin.__doc__ = f"Async :meth:`{name}`: the same body, run once off the event loop."
    return twin


async def _shielded(awaitable: Awaitable[T]) -> T:
    """Await ``awaitable`` (a ``sync_to_async`` call) to its end, as :func:`run_to_end`."""
    task = asyncio.ensure_future(awaitable)
    try:
        # The common case, in one await: shield() keeps the call running if
        # the caller is cancelled (then the loop below waits for its end).
        return await asyncio.shield(task)
    except asyncio.CancelledError as exc:
        cancelled = exc  # the caller's, or the call's own (task.result() re-raises it)
    while not task.done():
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait({task})
    task.result()  # a call that failed raises its own error
    raise cancelled


def close_connections(timeout: float = 30.0) -> None:
    """Close the connections of this module's thread now (tests, before dropping a database).

    A no-op when the thread was never started in this process. Call it from
    synchronous code (or from the thread's own work, where it closes at once).
    """
    current = _thread
    if current is None or current.pid != os.getpid():
        return
    if threading.current_thread() is current.thread:
        _close_all()  # called from the thread's own work: waiting for itself would hang
        return
    if not current.call(_close_all, timeout):
        raise TimeoutError(f"{THREAD_NAME} did not close its connections in {timeout}s")


def _forget_after_fork() -> None:
    global _thread
    _thread = None


os.register_at_fork(after_in_child=_forget_after_fork)
