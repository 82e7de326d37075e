"""The task queries a worker, the sweep and recovery send keep an indexed plan (SQLite).

``EXPLAIN QUERY PLAN`` of each: the hot statements must search an index, never
scan the task table — a claim or finish that scanned would cost O(tasks) per
task. The indexes are described in ``agentstore/models/tasks.py`` and
docs/tasks.md, "Performance".
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from agentstore.models import Task
from agentstore.models.tasks import LEASED_STATES
from agentstore.sql import tasks as task_sql

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def sqlite_only() -> None:
    if connection.vendor != "sqlite":
        pytest.skip("SQLite's EXPLAIN QUERY PLAN")


def plan(sql: str, params: list[Any]) -> str:
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
        return "\n".join(str(row[-1]) for row in cursor.fetchall())


def at() -> Any:
    return connection.ops.adapt_datetimefield_value(timezone.now())


def assert_indexed(text: str, *indexes: str) -> None:
    assert "SCAN agentstore_task\n" not in text + "\n", text
    assert "SCAN agentstore_task " not in text, text
    for index in indexes:
        assert index in text, text


def test_the_claims_pick_through_the_ready_index() -> None:
    now = at()
    for fair in (False, True):
        sql = task_sql.claim_ready(1, 2, 4, "sqlite", fair)
        params = [now, "w", now, now, "q", "a", "b", now]
        if fair:
            params += [2, 2, "q", "a", "b", now, 8]
        assert_indexed(plan(sql, params), "agentstore_task_ready")
    assert_indexed(plan(task_sql.ready(1, 0), ["q", now]), "agentstore_task_ready")
    assert_indexed(
        plan(task_sql.claim_next("sqlite"), [now, "w", now, now, "k"]), "agentstore_task_queue"
    )


def test_settling_and_renewing_search_by_id() -> None:
    now = at()
    finish = [*["succeeded", "", "", "", now, now, "t"], "running", "canceling", "w", now]
    assert_indexed(plan(task_sql.finish(2, True), finish), "sqlite_autoindex_agentstore_task_1")
    renew = [now, now, "a", "b", "w", now]
    assert_indexed(plan(task_sql.renew_many(2), renew), "sqlite_autoindex_agentstore_task_1")
    event = ["t", "e", "k", "{}", now, "t"]
    assert "agentstore_taskevent" in plan(task_sql.INSERT_NEXT_EVENT, event)


def test_the_sweep_and_recovery_read_an_index() -> None:
    now = at()
    assert_indexed(plan(task_sql.expired_of_kind("sqlite"), ["k", now]))
    assert_indexed(plan(task_sql.expired_requeueable(2, "sqlite"), [now, 3, "a", "b"]))
    # Every kind at once: the partial index of held leases, in expiry order.
    assert_indexed(
        plan(task_sql.expired_requeueable(0, "sqlite"), [now, 3]), "agentstore_task_leases"
    )
    when = timezone.now()
    sweep = Task.objects.filter(
        state__in=LEASED_STATES, lease_expires_at__lte=when, kind__in=["a", "function"]
    ).values("pk")[:1]
    sql, params = sweep.query.sql_with_params()
    assert_indexed(plan(sql, list(params)))
    sql, params = Task.objects.recoverable("tool", when).query.sql_with_params()
    assert_indexed(plan(sql, list(params)))
    live = Task.objects.live_lease("w", when + timedelta(seconds=1))
    sql, params = live.query.sql_with_params()
    assert_indexed(plan(sql, list(params)), "agentstore_task_leases")
