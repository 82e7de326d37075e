"""Wake-ups across connections: NOTIFY in the writing transaction, one LISTEN per process.

agentstore/notify.py; docs/operations.md, "Scaling out". On PostgreSQL a
store write wakes the subscriptions of its key when — and only when — it
commits; on SQLite the module is inert and a wait is a plain timed wait.
"""

from __future__ import annotations

import asyncio
import threading

import pytest
from django.db import connection, transaction

from agentstore import notify
from agentstore.stores import LogStore, LoopStore, TreeStore
from agentstore.tasks import TaskRepository
from agentstore.types import RefTarget, TaskEntity
from agentstore.types.loop import RunStep
from agentstore.types.tree import MessageEntity

pytestmark = pytest.mark.django_db(transaction=True)

#: Bounds a wait that must end with a wake-up (never a timing assertion).
WOKEN_WITHIN = 30.0
#: How long a wait that must *not* be woken is given.
QUIET = 0.3


def listening_subscription(*keys: str) -> notify.Subscription:
    sub = notify.subscribe("default", *keys)
    assert notify.wait_listening("default", WOKEN_WITHIN)
    sub.wait(0)  # the (re)connect wake-up
    return sub


@pytest.mark.sqlite_only
def test_sqlite_is_inert() -> None:
    sid = TreeStore().create_session("/repo").id
    with notify.subscribe("default", notify.session_key(sid)) as sub:
        TreeStore().append_message(sid, None, MessageEntity(role="user", content="hi"))
        assert sub.wait(0.01) is False
    assert notify.listening("default") is False
    with connection.cursor() as cursor:  # nothing was sent: no pg_notify on SQLite
        cursor.execute("SELECT 1")


def test_keys_are_small_and_named() -> None:
    assert notify.session_key("abc") == "s:abc"
    assert notify.queue_key("") == "q:default"
    assert notify.ref_key("main") == "r:main"


def test_a_wait_without_a_wake_up_times_out_and_stop_ends_it() -> None:
    sub = notify.Subscription(("s:x",))
    assert sub.wait(0.01) is False
    stop = threading.Event()
    stop.set()
    assert sub.wait(60, stop) is False
    sub.wake()
    assert sub.wait(60) is True
    assert sub.wait(0) is False  # consumed
    sub.wake()
    assert asyncio.run(sub.wait_async(60)) is True


@pytest.mark.postgres_only
def test_the_wake_up_comes_with_the_commit_never_before() -> None:
    sid = TreeStore().create_session("/repo").id
    with listening_subscription(notify.session_key(sid)) as sub:
        with transaction.atomic():
            notify.notify("default", notify.session_key(sid))
            notify.notify("default", notify.session_key(sid))  # folded
            assert sub.wait(QUIET) is False  # not committed yet
        assert sub.wait(WOKEN_WITHIN) is True
        assert sub.wait(QUIET) is False  # one wake-up, not two


@pytest.mark.postgres_only
def test_a_rolled_back_write_wakes_nobody() -> None:
    sid = TreeStore().create_session("/repo").id
    with listening_subscription(notify.session_key(sid)) as sub:
        with pytest.raises(RuntimeError), transaction.atomic():
            notify.notify("default", notify.session_key(sid))
            raise RuntimeError("rolled back")
        assert sub.wait(QUIET) is False


@pytest.mark.postgres_only
def test_every_kind_of_write_wakes_its_key() -> None:
    tree, loop, log = TreeStore(), LoopStore(), LogStore()
    tree_sid = tree.create_session("/repo").id
    log_sid = log.create({"cwd": "/repo"}).id
    loop_sid = "0197a000-0000-7000-8000-000000000001"
    keys = [notify.session_key(s) for s in (tree_sid, log_sid, loop_sid)]
    with (
        listening_subscription(keys[0]) as tree_sub,
        listening_subscription(keys[1]) as log_sub,
        listening_subscription(keys[2]) as loop_sub,
        listening_subscription(notify.queue_key("mail")) as queue_sub,
        listening_subscription(notify.ref_key("main")) as ref_sub,
    ):
        tree.append_message(tree_sid, None, MessageEntity(role="user", content="hi"))
        assert tree_sub.wait(WOKEN_WITHIN)
        assert not log_sub.wait(0) and not loop_sub.wait(0)

        log.append(log_sid, {"type": "config", "model": "m"})
        assert log_sub.wait(WOKEN_WITHIN)

        loop.append(RunStep(session_id=loop_sid, step_index=0, step_type="user", content="hi"))
        assert loop_sub.wait(WOKEN_WITHIN)

        TaskRepository().enqueue(TaskEntity(kind="function", queue_name="mail"))
        assert queue_sub.wait(WOKEN_WITHIN)

        log.update_ref("main", None, RefTarget(session=log_sid))
        assert ref_sub.wait(WOKEN_WITHIN)

        tree.delete_session(tree_sid)
        assert tree_sub.wait(WOKEN_WITHIN)
    log.close()


@pytest.mark.postgres_only
def test_a_touch_carries_its_notification_in_the_same_statement() -> None:
    """A tree append and a loop step: the session's wake-up rides in the touch's UPDATE
    (``RETURNING pg_notify``), no separate ``SELECT pg_notify`` round trip."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    tree = TreeStore()
    sid = tree.create_session("/repo").id
    loop_sid = "0197a000-0000-7000-8000-000000000002"
    LoopStore().append(RunStep(session_id=loop_sid, step_index=0, step_type="user", content="a"))
    with (
        listening_subscription(notify.session_key(sid)) as sub,
        CaptureQueriesContext(connection) as queries,
    ):
        tree.append_message(sid, None, MessageEntity(role="user", content="hi"))
        LoopStore().append(
            RunStep(session_id=loop_sid, step_index=1, step_type="assistant", content="b")
        )
        assert sub.wait(WOKEN_WITHIN)
    notifying = [q["sql"] for q in queries.captured_queries if "pg_notify" in q["sql"]]
    assert len(notifying) == 2, notifying
    assert all(s.startswith("UPDATE agentstore_session") for s in notifying), notifying
