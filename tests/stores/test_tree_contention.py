"""TreeStore under real contention: threads with their own connections and OS processes.

Ports librecode's sqlite_contention tests: concurrent writers wait instead of
failing, a read snapshot overlaps a committing writer, concurrent compactors of
one parent get exactly one winner, and the same with 8 OS processes on one file.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection, connections

from agentstore import exceptions
from agentstore.db import read_snapshot
from agentstore.models import Entry
from agentstore.stores.tree import TreeStore
from agentstore.types.tree import AppendCompactionInput, MessageEntity
from tests.processes import run_together

pytestmark = pytest.mark.django_db(transaction=True)


def in_threads(*targets: Callable[[], Any]) -> list[Any]:
    """Run each target in its own thread (its own DB connection), started together."""
    barrier = threading.Barrier(len(targets))
    results: list[Any] = [None] * len(targets)

    def run(index: int, target: Callable[[], Any]) -> None:
        try:
            barrier.wait()
            results[index] = target()
        except BaseException as exc:
            results[index] = exc
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(i, t)) for i, t in enumerate(targets)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results


def test_concurrent_writers_wait_for_each_other() -> None:
    store = TreeStore()
    session = store.create_session("/w")

    def append_twenty() -> int:
        for n in range(20):
            store.append_message(session.id, None, MessageEntity(role="user", content=str(n)))
        return 20

    assert in_threads(append_twenty, append_twenty) == [20, 20]
    assert Entry.objects.filter(session_id=session.id).count() == 40
    assert sorted(Entry.objects.values_list("seq", flat=True)) == list(range(1, 41))


def test_concurrent_compactions_choose_one_winner() -> None:
    store = TreeStore()
    session = store.create_session("/w")
    parent = store.append_message(session.id, None, MessageEntity(role="user", content="p"))

    def compact(operation_id: str) -> Callable[[], Any]:
        return lambda: store.append_compaction(
            AppendCompactionInput(
                session_id=session.id, parent_id=parent.id, summary="s", operation_id=operation_id
            )
        )

    results = in_threads(compact("a"), compact("b"))

    winners = [r for r in results if not isinstance(r, BaseException)]
    losers = [r for r in results if isinstance(r, exceptions.StaleCompactionParent)]
    assert len(winners) == 1 and len(losers) == 1, results
    assert losers[0].winner_entry_id == winners[0].id
    assert [e.type for e in store.children(session.id, parent.id)] == ["compaction"]


def test_compaction_operation_is_idempotent_across_connections() -> None:
    store = TreeStore()
    session = store.create_session("/w")
    parent = store.append_message(session.id, None, MessageEntity(role="user", content="p"))
    request = AppendCompactionInput(
        session_id=session.id, parent_id=parent.id, summary="s", operation_id="same"
    )

    first, second = in_threads(
        lambda: store.append_compaction(request), lambda: store.append_compaction(request)
    )

    assert first == second
    other = store.append_message(session.id, parent.id, MessageEntity(role="user", content="o"))
    with pytest.raises(exceptions.CompactionConflict):
        store.append_compaction(
            AppendCompactionInput(
                session_id=session.id, parent_id=other.id, summary="s", operation_id="same"
            )
        )
    assert [e.type for e in store.children(session.id, parent.id)] == ["compaction", "message"]


def test_a_read_snapshot_overlaps_a_committing_writer() -> None:
    store = TreeStore()
    session = store.create_session("/w")
    store.append_message(session.id, None, MessageEntity(role="user", content="before"))
    inside = threading.Event()
    written = threading.Event()

    def writer() -> None:
        inside.wait(10)
        store.append_message(session.id, None, MessageEntity(role="user", content="during"))
        written.set()

    thread = threading.Thread(target=lambda: (writer(), connections.close_all()))
    thread.start()
    with read_snapshot():
        assert Entry.objects.filter(session_id=session.id).count() == 1
        inside.set()
        # The writer commits while our snapshot is open: it never waits for us.
        assert written.wait(10)
        assert Entry.objects.filter(session_id=session.id).count() == 1
    thread.join()

    assert Entry.objects.filter(session_id=session.id).count() == 2


@pytest.mark.sqlite_only
def test_a_writer_waits_for_an_external_lock_then_succeeds() -> None:
    store = TreeStore()
    other = sqlite3.connect(connection.settings_dict["NAME"], isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    begun, done = threading.Event(), threading.Event()
    outcome: list[Any] = []

    def watch(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        if sql.startswith("BEGIN"):
            begun.set()  # the writer asks for the lock the other connection holds
        return execute(sql, params, many, context)

    def create() -> None:
        try:
            # Django's execute_wrapper hook on the writer thread's connection.
            with connections["default"].execute_wrapper(watch):
                outcome.append(store.create_session("/waited"))
        except BaseException as exc:  # pragma: no cover - asserted below
            outcome.append(exc)
        finally:
            done.set()
            connections.close_all()

    thread = threading.Thread(target=create)
    thread.start()
    # Release the lock only once the writer has reached its BEGIN: it cannot
    # have the lock before the COMMIT below, so it waits for it.
    assert begun.wait(30), "the writer never began its transaction"
    assert not done.wait(0.3)  # a while later: still waiting on the lock, not failed
    other.execute("COMMIT")
    other.close()
    thread.join(10)

    assert len(outcome) == 1 and not isinstance(outcome[0], BaseException), outcome
    assert store.get_session(outcome[0].id) == outcome[0]


def run_workers(url: str, commands: list[list[str]]) -> list[dict[str, Any]]:
    return run_together(
        url, [["-m", "tests.workers.tree_worker", *command] for command in commands], timeout=120
    )


@pytest.mark.slow
def test_eight_processes_race_to_compact_one_parent(test_database_url: str) -> None:
    store = TreeStore()
    session = store.create_session("/w")
    parent = store.append_message(session.id, None, MessageEntity(role="user", content="p"))

    results = run_workers(
        test_database_url,
        [["compact", session.id, parent.id, f"summary-{n}"] for n in range(8)],
    )

    statuses = sorted(r["status"] for r in results)
    assert statuses == ["ok"] + ["stale"] * 7, results
    winner = next(r["entry_id"] for r in results if r["status"] == "ok")
    assert {r["winner"] for r in results if r["status"] == "stale"} == {winner}
    assert [e.id for e in store.children(session.id, parent.id)] == [winner]


@pytest.mark.slow
def test_processes_appending_to_one_session_lose_nothing(test_database_url: str) -> None:
    store = TreeStore()
    session = store.create_session("/w")

    results = run_workers(test_database_url, [["append", session.id, "25"] for _ in range(4)])

    assert [r["status"] for r in results] == ["ok"] * 4, results
    entries = store.entries(session.id)
    assert len(entries) == 100
    assert len({e.message.content for e in entries}) == 100
    assert sorted(e.seq for e in entries) == list(range(1, 101))
