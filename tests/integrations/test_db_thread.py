"""``db_thread.run``: which thread does an integration's database work, and its connections.

Behaviour only (decision record 0064): outside any Django context the work
runs on agentstore's own thread; under ``async_to_sync`` on the waiting
caller's thread; in a request's ``ThreadSensitiveContext`` on the request's
thread. The event loop never runs it, cancellation never loses a write
(tests/integrations/test_openai_agents.py has both for ``AgentStoreSession``),
and the thread's connections are closed when it idles or on demand.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import ThreadSensitiveContext, async_to_sync
from django.db import connections

from agentstore import exceptions
from agentstore.db import thread as db_thread
from agentstore.integrations.openai_agents import AgentStoreSession

pytestmark = pytest.mark.django_db(transaction=True)

USER: Any = {"role": "user", "content": "hello"}
ANSWER: Any = {"type": "message", "role": "assistant", "content": "hi"}
REQUEST = contextvars.ContextVar("REQUEST", default="none")


def where() -> tuple[int, str]:
    return threading.get_ident(), threading.current_thread().name


def raw_connection() -> Any:
    # The thread's own connection object, without connecting.
    return connections["default"].connection


@pytest.fixture
def short_idle(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(db_thread, "IDLE_SECONDS", 0.05)
    yield


def wait_until(predicate: Any, what: str) -> None:
    deadline = time.monotonic() + 30
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"never {what}")
        time.sleep(0.01)


def test_outside_django_the_work_runs_on_agentstores_thread() -> None:
    async def main() -> tuple[tuple[int, str], tuple[int, str], bool]:
        first = await db_thread.run(where)
        second = await db_thread.run(where)
        return first, second, db_thread.django_owns_the_thread()

    first, second, owned = asyncio.run(main())
    assert first == second  # one thread: one connection for every call
    assert first[1] == db_thread.THREAD_NAME
    assert first[0] != threading.get_ident()
    assert owned is False


def test_a_session_writes_and_reads_through_it() -> None:
    async def main() -> list[Any]:
        async with AgentStoreSession("hop") as session:
            await session.add_items([USER])
            await session.add_items([ANSWER])
            return await session.get_items()

    assert asyncio.run(main()) == [USER, ANSWER]
    assert AgentStoreSession("hop").get_items_sync() == [USER, ANSWER]


def test_under_async_to_sync_the_waiting_callers_thread_does_the_work() -> None:
    # A sync caller (a view, a command) may be inside atomic(): only its own
    # thread's connection sees that transaction.
    async def main() -> tuple[tuple[int, str], bool]:
        return await db_thread.run(where), db_thread.django_owns_the_thread()

    (ident, _name), owned = async_to_sync(main)()
    assert ident == threading.get_ident()
    assert owned is True


def test_in_a_request_context_the_requests_thread_does_the_work() -> None:
    # Django's ASGI handler enters a ThreadSensitiveContext per request; its
    # thread's connection is closed by Django at the request's end.
    async def main() -> tuple[tuple[int, str], tuple[int, str]]:
        async with ThreadSensitiveContext():
            assert db_thread.django_owns_the_thread()
            return await db_thread.run(where), await db_thread.run(where)

    first, second = asyncio.run(main())
    assert first == second
    assert first[1] != db_thread.THREAD_NAME


def test_results_exceptions_and_context_variables_cross_over() -> None:
    def fails() -> None:
        raise exceptions.NoSession("no such session: x")

    async def main() -> str:
        with pytest.raises(exceptions.NoSession, match="no such session"):
            await db_thread.run(fails)
        REQUEST.set("req-1")  # as asyncio.to_thread: the caller's context, copied
        return await db_thread.run(REQUEST.get)

    assert asyncio.run(main()) == "req-1"


def test_a_cancelled_read_leaves_the_thread_serving() -> None:
    started, release = threading.Event(), threading.Event()

    def read() -> bool:
        started.set()
        return release.wait(30)

    async def main() -> tuple[int, str]:
        task = asyncio.ensure_future(db_thread.run(read))
        await asyncio.to_thread(started.wait, 30)  # the call is running on the thread
        task.cancel()  # the caller stops waiting; the thread finishes the call
        with pytest.raises(asyncio.CancelledError):
            await task
        release.set()
        return await db_thread.run(where)

    assert asyncio.run(main())[1] == db_thread.THREAD_NAME


def test_a_result_for_a_loop_that_closed_is_dropped() -> None:
    # asyncio.run ends (its loop closed) while the thread still works for it.
    started, release = threading.Event(), threading.Event()

    def slow() -> str:
        started.set()
        release.wait(30)
        return "late"

    async def main() -> None:
        asyncio.ensure_future(db_thread.run(slow))
        await asyncio.to_thread(started.wait, 30)

    asyncio.run(main())
    release.set()

    async def after() -> tuple[int, str]:
        return await db_thread.run(where)

    assert asyncio.run(after())[1] == db_thread.THREAD_NAME


@pytest.mark.usefixtures("short_idle")
def test_an_idle_thread_closes_its_connections() -> None:
    async def main() -> None:
        async with AgentStoreSession("idle") as session:
            await session.add_items([USER])
            assert await db_thread.run(raw_connection) is not None

    asyncio.run(main())

    async def probe() -> Any:
        await asyncio.sleep(0.1)
        return await db_thread.run(raw_connection)

    # Each probe is itself a call; between probes the thread idles again.
    wait_until(lambda: asyncio.run(probe()) is None, "closed its connection")
    assert AgentStoreSession("idle").get_items_sync() == [USER]  # reconnects as needed


def test_close_connections_closes_the_threads_connections() -> None:
    async def main() -> Any:
        await AgentStoreSession("closing").get_items()
        return await db_thread.run(raw_connection)

    assert asyncio.run(main()) is not None
    db_thread.close_connections()

    async def after() -> Any:
        return await db_thread.run(raw_connection)

    assert asyncio.run(after()) is None


def _cancel_while_running(wrap: Any) -> tuple[bool, BaseException | None, list[str]]:
    """Cancel a ``run_to_end`` whose call is running; the call's end, then the outcome."""
    started, release = threading.Event(), threading.Event()
    done: list[str] = []

    def write(fail: bool) -> str:
        started.set()
        release.wait(30)
        done.append("written")
        if fail:
            raise exceptions.ConcurrentWriter("moved")
        return "ok"

    async def main(fail: bool) -> tuple[bool, BaseException | None]:
        async def caller() -> Any:
            return await wrap(db_thread.run_to_end(write, fail))

        task = asyncio.ensure_future(caller())
        await asyncio.to_thread(started.wait, 30)
        task.cancel()
        for _ in range(5):
            await asyncio.sleep(0)  # let the cancellation reach the waiting caller
        waited = not task.done()
        release.set()
        try:
            await task
        except BaseException as exc:  # noqa: BLE001 - the outcome is what is asserted
            return waited, exc
        return waited, None

    waited, outcome = asyncio.run(main(wrap.fail))
    return waited, outcome, done


class _Plain:
    fail = False

    async def __call__(self, awaitable: Any) -> Any:
        return await awaitable


class _Failing(_Plain):
    fail = True


class _InARequest(_Plain):
    async def __call__(self, awaitable: Any) -> Any:
        async with ThreadSensitiveContext():
            return await awaitable


@pytest.mark.parametrize("wrap", [_Plain(), _InARequest()], ids=["own-thread", "request"])
def test_a_cancelled_write_ends_before_the_cancellation_is_raised(wrap: Any) -> None:
    waited, outcome, done = _cancel_while_running(wrap)
    assert waited  # the cancelled caller still waited for the call
    assert isinstance(outcome, asyncio.CancelledError)
    assert done == ["written"]


def test_a_cancelled_write_that_fails_raises_its_own_error() -> None:
    waited, outcome, done = _cancel_while_running(_Failing())
    assert waited
    assert isinstance(outcome, exceptions.ConcurrentWriter)
    assert done == ["written"]


def test_close_connections_from_the_threads_own_work_does_not_wait_for_itself() -> None:
    async def main() -> Any:
        await AgentStoreSession("self-close").get_items()
        await db_thread.run(db_thread.close_connections, 5.0)
        return await db_thread.run(raw_connection)

    assert asyncio.run(main()) is None
