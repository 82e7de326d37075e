"""The worker's settle-and-claim as a PostgreSQL prepared statement.

``agentstore.db.cursor(..., prepare=True)`` prepares its statements on the
server on PostgreSQL while ``AGENTSTORE["POSTGRES_PREPARE"]`` is on — watched
or not: a watcher sees the same prepared statement. These tests check it
through ``pg_prepared_statements``, the server's own list of what the session
has prepared, and that the connection's ``prepare_threshold`` (Django's
``None``: nothing else prepared) is put back. Outside a test transaction
(``transaction=True``), like a worker.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.db import ProgrammingError, connection
from django.test.utils import CaptureQueriesContext, override_settings

from agentstore import db
from agentstore.tasks import TaskRepository
from agentstore.types import TaskEntity, TaskFinish

pytestmark = pytest.mark.django_db(transaction=True)

PROBE = "SELECT %s::int + 1"


def prepared_statements() -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement FROM pg_prepared_statements")
        return [str(row[0]) for row in cursor.fetchall()]


def probe() -> object:
    with db.cursor("default", prepare=True) as cursor:
        cursor.execute(PROBE, [41])
        return cursor.fetchone()


@pytest.mark.postgres_only
def test_unwatched_statements_are_prepared_once_per_connection() -> None:
    connection.close()  # a fresh session: nothing prepared yet
    assert probe() == (42,)
    assert probe() == (42,)
    assert prepared_statements() == ["SELECT $1::int + 1"]
    # Django's own queries stay unprepared.
    assert connection.connection.prepare_threshold is None


@pytest.mark.postgres_only
def test_watched_statements_are_seen_and_prepared_alike() -> None:
    connection.close()
    with (
        CaptureQueriesContext(connection) as captured,
        db.cursor("default", prepare=True) as cursor,
    ):
        assert isinstance(cursor, db.cursors.PreparedCursor)
        cursor.execute(PROBE, [41])
        assert cursor.fetchone() == (42,)
    assert any("+ 1" in query["sql"] for query in captured.captured_queries)
    assert prepared_statements() == ["SELECT $1::int + 1"]


@pytest.mark.postgres_only
def test_the_setting_turns_preparing_off() -> None:
    connection.close()
    with override_settings(AGENTSTORE={"POSTGRES_PREPARE": False}):
        cursor = db.cursor("default", prepare=True)
        assert isinstance(cursor, db.Cursor)
        assert not isinstance(cursor, db.cursors.PreparedCursor)
        cursor.close()
        assert probe() == (42,)
    assert prepared_statements() == []


@pytest.mark.postgres_only
def test_errors_are_djangos_and_the_threshold_is_restored() -> None:
    with pytest.raises(ProgrammingError), db.cursor("default", prepare=True) as cursor:
        cursor.execute("SELECT no_such_column FROM (SELECT %s::int AS x) AS t", [1])
    assert connection.connection.prepare_threshold is None
    assert probe() == (42,)


@pytest.mark.postgres_only
def test_the_worker_settle_and_claim_is_prepared_watched_or_not() -> None:
    connection.close()
    tasks = TaskRepository()
    for _ in range(3):
        tasks.enqueue(TaskEntity(kind="job", queue_name="prep"))
    expiry = tasks.now() + timedelta(minutes=5)

    def settle_and_claim(previous: list[TaskEntity]) -> list[TaskEntity]:
        finishes = [
            TaskFinish(
                task_id=task.id,
                lease_owner="w",
                from_states=["running", "canceling"],
                target_state="succeeded",
                event_kind="task_succeeded",
                payload_json="{}",
            )
            for task in previous
        ]
        flags, claimed = tasks.finish_and_claim(finishes, ["prep"], ["job"], "w", expiry)
        assert flags == [True] * len(previous)
        assert len(claimed) == 1
        return claimed

    first = settle_and_claim([])
    claim_only = prepared_statements()
    assert len(claim_only) == 1 and claim_only[0].startswith("WITH ")
    with CaptureQueriesContext(connection) as captured:
        second = settle_and_claim(first)
    assert len(captured.captured_queries) == 1  # seen
    assert len(prepared_statements()) == 2  # and prepared: the settle-and-claim shape
    settle_and_claim(second)
    assert len(prepared_statements()) == 2  # once


def test_other_databases_get_the_ordinary_cursor() -> None:
    if connection.vendor == "postgresql":
        pytest.skip("PostgreSQL prepares")
    with db.cursor("default", prepare=True) as cursor:
        assert not isinstance(cursor, db.cursors.PreparedCursor)
        cursor.execute(PROBE.replace("::int", ""), [41])
        assert cursor.fetchone() == (42,)
