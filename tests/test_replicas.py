"""Read replicas: lag-tolerant reads go to the replica alias, everything else to the primary.

agentstore/routers.py; docs/operations.md, "Scaling out" (issue 21, item 4).
The "replica" here is a second alias on the test database (as a streaming
replica is a second server with the same rows), so where a query ran is told
by capturing each alias's queries, not by lag.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.db import connections
from django.test import Client, override_settings
from django.test.utils import CaptureQueriesContext

from agentstore.cli.transfer import export_session
from agentstore.models import Session
from agentstore.routers import ReplicaRouter, lag_tolerant, read_alias
from agentstore.stores import LogStore, TreeStore
from agentstore.tasks import TaskRepository
from agentstore.types import TaskClaim, TaskEntity
from agentstore.types.tree import MessageEntity

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def replica(transactional_db: None) -> Iterator[str]:
    # A second connection to the test database under another alias. Made
    # directly (not through settings.DATABASES) so Django's test case counts it
    # as a dynamically created connection, which tests may use.
    default = connections["default"]
    wrapper = type(default)(copy.deepcopy(default.settings_dict), alias="replica")
    connections._connections.replica = wrapper  # type: ignore[attr-defined]
    try:
        with override_settings(
            DATABASE_ROUTERS=["agentstore.routers.ReplicaRouter"],
            AGENTSTORE={"READ_REPLICA": "replica"},
        ):
            yield "replica"
    finally:
        wrapper.close()
        delattr(connections._connections, "replica")  # type: ignore[attr-defined]


def agentstore_queries(captured: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in captured.captured_queries if "agentstore_" in q["sql"]]


def test_without_a_replica_everything_reads_the_primary() -> None:
    assert read_alias() == "default"
    with lag_tolerant():
        assert ReplicaRouter().db_for_read(Session) is None


def test_the_router_routes_only_lag_tolerant_reads_of_agentstore_models(replica: str) -> None:
    router = ReplicaRouter()
    assert router.db_for_read(Session) is None
    with lag_tolerant():
        assert router.db_for_read(Session) == replica
        assert router.db_for_read(get_user_model()) is None  # not ours
    assert router.db_for_write(Session) is None
    assert router.allow_migrate(replica, "agentstore") is False
    assert router.allow_migrate("default", "agentstore") is None


def test_writes_holds_claims_and_follow_stay_on_the_primary(replica: str) -> None:
    tree, log, tasks = TreeStore(), LogStore(), TaskRepository()
    with CaptureQueriesContext(connections[replica]) as on_replica, lag_tolerant():
        sid = tree.create_session("/primary").id
        tree.append_message(sid, None, MessageEntity(role="user", content="hi"))
        log_sid = log.create({"cwd": "/primary"}).id  # a hold
        log.append(log_sid, {"type": "config", "model": "m"})
        task = tasks.create(TaskEntity(kind="tool", owner_session_id=sid))
        expires = tasks.now() + timedelta(seconds=30)
        claim = TaskClaim(
            task_id=task.id, lease_owner="w", lease_expires_at=expires, event_kind="started"
        )
        assert tasks.claim_queued(claim)
        follow: Any = log.follow(log_sid)
        assert next(follow).kind == "snapshot"
        follow.close()
        # Unpinned ORM reads in the block are routed (the router's job).
        assert Session.objects.filter(pk=sid).exists()
    log.close()
    routed = agentstore_queries(on_replica)
    assert len(routed) == 1 and "agentstore_session" in routed[0]


def test_exports_read_the_replica(replica: str) -> None:
    log = LogStore()
    session = log.create({"cwd": "/export"})
    log.append(session.id, {"type": "config", "model": "m"})
    log.close()
    row = Session.objects.get(pk=session.id)
    with (
        CaptureQueriesContext(connections[replica]) as on_replica,
        CaptureQueriesContext(connections["default"]) as on_primary,
    ):
        text = export_session(row)
    assert text.count("\n") == 2
    assert agentstore_queries(on_replica)
    assert not agentstore_queries(on_primary)


def test_admin_changelists_read_the_replica_other_pages_the_primary(replica: str) -> None:
    admin = get_user_model().objects.create_superuser("admin", password="pw-admin-123")
    tree = TreeStore()
    sid = tree.create_session("/admin", owner=admin).id
    tree.append_message(sid, None, MessageEntity(role="user", content="replicated words"))
    client = Client()
    client.force_login(admin)
    with (
        CaptureQueriesContext(connections[replica]) as on_replica,
        CaptureQueriesContext(connections["default"]) as on_primary,
    ):
        listing = client.get("/admin/agentstore/session/", {"q": "replicated"})
    assert listing.status_code == 200
    assert f"/admin/agentstore/session/{sid}/change/" in listing.content.decode()
    assert agentstore_queries(on_replica)
    assert not agentstore_queries(on_primary)  # auth and the admin's session only

    with CaptureQueriesContext(connections[replica]) as on_replica:
        page = client.get(f"/admin/agentstore/session/{sid}/change/")
    assert page.status_code == 200
    assert not agentstore_queries(on_replica)
