"""LangGraph threads on agentstore's surfaces, and what their hot paths cost.

Threads are ``graph`` sessions: the admin draws their checkpoint tree and shows
the state, writes and interrupts at a checkpoint; ``manage.py agentstore``
lists, shows, removes and prunes them; the API lists them as a kind. ``put`` and
``get_tuple`` of the latest checkpoint issue the same queries on a long thread
as on a short one, and those queries use the indexes.
"""

from __future__ import annotations

import re
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.types import Command
from rest_framework.test import APIClient

from agentstore import db, maintenance
from agentstore.integrations.langgraph import AgentStoreSaver
from agentstore.models import Checkpoint, CheckpointBlob, CheckpointWrite, Session
from agentstore.stores.checkpoints import CheckpointStore, touch_thread
from agentstore.types.checkpoints import ChannelBlob
from tests.integrations.graphs import approval_graph, chat_graph

pytestmark = pytest.mark.django_db(transaction=True)


def _config(thread_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


def _forked_chat(thread_id: str) -> str:
    """Three turns, then a fork from after the first; returns the fork point's id."""
    graph = chat_graph()
    for text in ("one", "two", "three"):
        graph.invoke({"messages": [("human", text)]}, _config(thread_id))
    after_first = next(
        s
        for s in reversed(list(graph.get_state_history(_config(thread_id))))
        if len(s.values.get("messages", [])) == 2 and not s.next
    )
    fork = graph.update_state(after_first.config, {"messages": [("human", "other")]})
    graph.invoke(None, fork)
    return str(after_first.config["configurable"]["checkpoint_id"])


def test_admin_thread_page_draws_forks_state_writes_and_open_interrupts(
    admin_client: Client,
) -> None:
    fork_point = _forked_chat("chat-admin")
    page_url = reverse("admin:agentstore_session_checkpoints", args=["chat-admin"])
    page = admin_client.get(page_url).content.decode()
    assert "1 fork" in page
    tree = page[page.index('id="checkpoint-tree"') : page.index('id="checkpoint-detail"')]
    assert (
        tree.count("data-checkpoint=") == Checkpoint.objects.filter(session_id="chat-admin").count()
    )
    assert "2 branches" in tree and fork_point in tree
    # The state at the fork point: its two messages, decoded.
    at_fork = admin_client.get(page_url, {"checkpoint": fork_point}).content.decode()
    channels = at_fork[at_fork.index('id="channels"') :]
    assert "#1 echo: one" in channels and "three" not in channels

    graph = approval_graph(AgentStoreSaver())
    graph.invoke({"request": "refund"}, _config("ask-admin"))
    page_url = reverse("admin:agentstore_session_checkpoints", args=["ask-admin"])
    page = admin_client.get(page_url).content.decode()
    waiting = page[page.index('id="interrupts"') :]
    assert "Open interrupts" in waiting and "approve refund?" in waiting
    writes = page[page.index('id="writes"') :]
    assert "review" in writes and "__interrupt__" in writes
    graph.invoke(Command(resume="no"), _config("ask-admin"))
    # The checkpoint that waited now shows its interrupt as resumed.
    waited = (
        CheckpointWrite.objects.filter(session_id="ask-admin", channel="__interrupt__")
        .values_list("checkpoint_id", flat=True)
        .get()
    )
    page = admin_client.get(page_url, {"checkpoint": waited}).content.decode()
    assert "Interrupts (resumed later)" in page
    # The changelist links graph sessions to their thread page.
    listing = admin_client.get(reverse("admin:agentstore_session_changelist")).content.decode()
    assert page_url in listing


def test_thread_page_is_bounded_and_pages_older_checkpoints(admin_client: Client) -> None:
    saver = AgentStoreSaver()
    config: Any = _config("long-admin") | {}
    config["configurable"]["checkpoint_ns"] = ""
    for step in range(8):
        config = saver.put(config, empty_checkpoint(), {"step": step, "source": "loop"}, {})
    from agentstore.selectors import checkpoints as selectors

    view = selectors.thread_view("long-admin", limit=5)
    assert len(view.rows) == 5 and view.total == 8 and view.older_than is not None
    older = selectors.thread_view("long-admin", older_than=view.older_than, limit=5)
    assert [n.step for n in older.rows] == [0, 1, 2]
    page_url = reverse("admin:agentstore_session_checkpoints", args=["long-admin"])
    page = admin_client.get(page_url, {"older_than": view.older_than}).content.decode()
    assert page.count("data-checkpoint=") == 3


def test_command_lists_shows_removes_and_prunes_threads() -> None:
    chat_graph().invoke({"messages": [("human", "hi")]}, _config("cli-1"))
    chat_graph().invoke({"messages": [("human", "hi")]}, _config("cli-2"))
    out = StringIO()
    call_command("agentstore", "ls", "--kind", "graph", stdout=out, stderr=StringIO())
    assert "cli-1" in out.getvalue() and "cli-2" in out.getvalue()
    out = StringIO()
    call_command("agentstore", "show", "cli-1", stdout=out, stderr=StringIO())
    latest = Checkpoint.objects.filter(session_id="cli-1").order_by("-checkpoint_id")[0]
    assert latest.checkpoint_id in out.getvalue()

    call_command("agentstore", "rm", "cli-1", stdout=StringIO(), stderr=StringIO())
    for model in (Checkpoint, CheckpointBlob, CheckpointWrite):
        assert not model.objects.filter(session_id="cli-1").exists()
    assert not Session.objects.filter(pk="cli-1").exists()

    Session.objects.filter(pk="cli-2").update(updated_at=timezone.now() - timedelta(days=9))
    pruned = maintenance.prune_sessions(timezone.now() - timedelta(days=1))
    assert pruned == ["cli-2"]
    assert not Checkpoint.objects.filter(session_id="cli-2").exists()
    assert maintenance.stats()["sessions"]["graph"] == 0


def test_api_lists_threads_as_a_session_kind() -> None:
    owner = get_user_model().objects.create_user("ana", password="pw-ana-12345")
    other = get_user_model().objects.create_user("bob", password="pw-bob-12345")
    chat_graph(AgentStoreSaver(owner=owner)).invoke(
        {"messages": [("human", "hi")]}, _config("api-1")
    )
    assert Session.objects.get(pk="api-1").owner == owner
    client = APIClient()
    client.force_authenticate(owner)
    listed = client.get("/api/v1/sessions", {"kind": "graph"}).json()
    assert [s["id"] for s in listed["results"]] == ["api-1"]
    assert listed["results"][0]["kind"] == "graph"
    assert client.get("/api/v1/sessions/api-1").json()["kind"] == "graph"
    client.force_authenticate(other)  # owner-scoped like every session
    assert client.get("/api/v1/sessions/api-1").status_code == 404


def test_thread_id_of_another_kind_of_session_is_refused() -> None:
    from agentstore import exceptions
    from agentstore.stores import TreeStore

    session = TreeStore().create_session("/w")
    with pytest.raises(exceptions.WrongSessionKind):
        chat_graph().invoke({"messages": [("human", "hi")]}, _config(session.id))
    assert not Checkpoint.objects.filter(session_id=session.id).exists()


def _anonymous(sql: str) -> str:
    """The statement with its literal values (ids, versions, times, JSON) blanked."""
    return re.sub(r"\d+", "?", re.sub(r"'(?:[^']|'')*'|X'[0-9A-Fa-f]*'", "?", sql))


def _long_thread(thread_id: str, n: int) -> Any:
    """A thread of ``n`` checkpoints, each reading its own version of two channels.

    Generated by the database from a series (``INSERT … SELECT``), not through
    ``put`` nor row objects: 300,000 rows in seconds on either backend. Checkpoint
    ``i`` has id ``…{i:012d}``, its parent ``i - 1``, metadata ``{"step": i}`` and
    both channels at version ``{i + 1:032}.0.5``, each with one blob.
    """
    now = timezone.now()
    db.write(lambda cursor: touch_thread(cursor, thread_id, now))
    saver = AgentStoreSaver()
    type_, data = saver.serde.dumps_typed({**empty_checkpoint(), "channel_values": {}})
    value_type, value = saver.serde.dumps_typed({"note": "x" * 100})
    if connection.vendor == "postgresql":
        series = "SELECT i FROM generate_series(0, %s) AS s(i)"

        def pad(expr: str, width: int) -> str:
            return f"lpad(({expr})::text, {width}, '0')"

        json_object, binary = "jsonb_build_object", "%s::bytea"
    else:
        series = (
            "WITH RECURSIVE s(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM s WHERE i < %s) "
            "SELECT i FROM s"
        )

        def pad(expr: str, width: int) -> str:
            return f"printf('%%0{width}d', {expr})"

        json_object, binary = "json_object", "%s"
    version = pad("i + 1", 32) + " || '.0.5'"
    checkpoint_id = f"'1f000000-0000-6000-8000-' || {pad('i', 12)}"
    parent_id = (
        f"CASE WHEN i = 0 THEN NULL ELSE '1f000000-0000-6000-8000-' || {pad('i - 1', 12)} END"
    )
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {Checkpoint._meta.db_table} (session_id, checkpoint_ns, "
            "checkpoint_id, parent_checkpoint_id, type, checkpoint, metadata, "
            "channel_versions, run_id, inline, created_at) "
            f"SELECT %s, '', {checkpoint_id}, {parent_id}, %s, {binary}, "
            f"{json_object}('step', i), {json_object}('a', {version}, 'b', {version}), "
            f"'', {binary}, %s FROM ({series}) AS numbers ORDER BY i",
            [thread_id, type_, data, b"", now, n - 1],
        )
        cursor.execute(
            f"INSERT INTO {CheckpointBlob._meta.db_table} (session_id, checkpoint_ns, "
            "channel, version, type, blob) "
            f"SELECT %s, '', channel, {version}, %s, {binary} "
            f"FROM ({series}) AS numbers, (SELECT 'a' AS channel UNION ALL SELECT 'b') AS c "
            "ORDER BY i, channel",
            [thread_id, value_type, value, n - 1],
        )
    return _config(thread_id) | {}


def _queries(fn: Any) -> list[str]:
    with CaptureQueriesContext(connection) as captured:
        fn()
    return [q["sql"] for q in captured.captured_queries]


@pytest.mark.slow
def test_put_and_get_latest_issue_the_same_indexed_queries_at_10_or_100000_checkpoints() -> None:
    saver = AgentStoreSaver()
    cp_type, cp_data = saver.serde.dumps_typed({**empty_checkpoint(), "channel_values": {}})
    value_type, value = saver.serde.dumps_typed({"note": "y"})
    costs = []
    for thread_id, n in (("short", 10), ("long", 100_000)):
        config = _long_thread(thread_id, n)
        latest = saver.get_tuple(config)
        assert latest is not None and latest.metadata == {"step": n - 1}
        assert latest.checkpoint["channel_values"] == {"a": {"note": "x" * 100}} | {
            "b": {"note": "x" * 100}
        }
        # The saver runs its statements on its own shared connection; the
        # store's get and put are what it calls there (around deserializing
        # and serializing), measured here on this thread's connection.
        get_sql = _queries(lambda t=thread_id: CheckpointStore().get(t, ""))
        put_sql = _queries(
            lambda t=thread_id, step=n: CheckpointStore().put(
                t,
                "",
                f"1f000000-0000-6000-8000-{step:012d}",
                f"1f000000-0000-6000-8000-{step - 1:012d}",
                cp_type,
                cp_data,
                {"step": step},
                {"a": f"{step + 1:032}.0.5", "b": f"{step:032}.0.5"},
                [
                    ChannelBlob(
                        channel="a", version=f"{step + 1:032}.0.5", type="msgpack", blob=b"v"
                    )
                ],
            )
        )
        # The same statements, up to the values they carry.
        costs.append(
            (
                [_anonymous(sql) for sql in get_sql],
                [_anonymous(sql) for sql in put_sql],
            )
        )
        if connection.vendor == "sqlite":
            with connection.cursor() as cursor:
                for sql in get_sql:
                    cursor.execute("EXPLAIN QUERY PLAN " + sql)
                    plan = " ".join(str(row[-1]) for row in cursor.fetchall())
                    # An index search, never a table scan or a sort of the history.
                    assert "SCAN" not in plan and "TEMP B-TREE" not in plan, plan
    assert costs[0] == costs[1]
    assert len(costs[0][0]) == 2  # the checkpoint with its writes, then its blobs
    assert len(costs[0][1]) >= 3  # the session touch, the blob, the checkpoint
    assert Checkpoint.objects.filter(session_id="long").count() == 100_001
    page = list(saver.list(_config("long"), limit=3))
    assert [t.metadata["step"] for t in page] == [100_000, 99_999, 99_998]


def test_writes_that_commit_before_their_thread_exists_create_it() -> None:
    # A run can save a step's writes before the checkpoint that creates the
    # thread's session. The short write path (one statement on PostgreSQL, the
    # bare sqlite3 transaction on SQLite) fails on the foreign key, rolls back
    # and runs again with the session's creation; the connection stays usable.
    from dataclasses import replace

    from agentstore.types.checkpoints import PendingWriteRow

    store = CheckpointStore()
    row = PendingWriteRow(
        task_id="task", task_path="", idx=0, channel="c", type="msgpack", blob=b"x"
    )
    store.put_writes("early-thread", "", "cp-1", [row])
    assert Session.objects.filter(pk="early-thread", kind="graph").exists()
    store.put_writes("early-thread", "", "cp-1", [row, replace(row, idx=1)])
    assert [w.idx for w in store.writes_of("early-thread", "", "cp-1")] == [0, 1]


def test_a_store_on_a_shared_connection_works_from_fresh_threads_and_is_watchable() -> None:
    # Decision record 0068: with a SharedConnection the hot paths use that object
    # directly — a fresh thread (LangGraph's executor threads) gets no
    # connection of its own — and fall back to Django's path, which borrows it,
    # where they must: the thread's creation on a first write, a watcher.
    import threading

    from django.db import connections

    from agentstore.db import SharedConnection
    from agentstore.types.checkpoints import PendingWriteRow

    shared = SharedConnection("default")
    store = CheckpointStore(shared=lambda: shared)
    row = PendingWriteRow(task_id="t", task_path="", idx=0, channel="c", type="msgpack", blob=b"x")
    cp_type, cp_data = "msgpack", b"checkpoint"
    own: list[list[Any]] = []

    def work() -> None:
        store.put_writes("fresh-thread", "", "cp-1", [row])  # before the thread exists
        store.put("fresh-thread", "", "cp-1", None, cp_type, cp_data, {"step": 0}, {"c": "1"})
        store.put_writes("fresh-thread", "", "cp-1", [row], replace=True)
        record = store.get("fresh-thread", "")
        assert record is not None and [w.channel for w in record.writes] == ["c"]
        own.append(connections.all(initialized_only=True))

    try:
        # Once per process, the first row of a model reads the defaults (which
        # may ask this thread's connection): not the fresh thread's business.
        store.put("warm", "", "cp-0", None, cp_type, cp_data, {}, {})
        store.put_writes("warm", "", "cp-0", [row])
        worker = threading.Thread(target=work)
        worker.start()
        worker.join()
        assert own == [[]]  # the thread never opened a connection of its own
        assert Session.objects.filter(pk="fresh-thread", kind="graph").exists()
        with CaptureQueriesContext(shared.connection) as captured:
            store.put("fresh-thread", "", "cp-2", "cp-1", cp_type, cp_data, {"step": 1}, {})
            store.put_writes("fresh-thread", "", "cp-2", [row])
            assert store.get("fresh-thread", "") is not None
        sent = " ".join(q["sql"] for q in captured.captured_queries)
        # A watcher of the shared connection sees every statement, Django's way.
        assert sent.count("INSERT INTO") == 2 and "SELECT" in sent
    finally:
        shared.close()


def test_small_values_ride_in_the_checkpoint_row_and_larger_ones_in_the_blob_table() -> None:
    # Decision record 0067: None, booleans, numbers, short strings and cleared channels
    # live in Checkpoint.inline; anything else is one blob row per new version.
    saver = AgentStoreSaver()
    checkpoint = empty_checkpoint()
    values = {"n": 1, "flag": True, "none": None, "short": "hi", "long": "x" * 300, "d": {"a": 1}}
    checkpoint["channel_values"] = dict(values)
    versions = {channel: saver.get_next_version(None, None) for channel in [*values, "gone"]}
    checkpoint["channel_versions"] = dict(versions)
    saved = saver.put(_config("inline") | {}, checkpoint, {"step": 0}, versions)
    stored = list(
        CheckpointBlob.objects.filter(session_id="inline").values_list("channel", "version")
    )
    assert sorted(stored) == sorted([("long", versions["long"]), ("d", versions["d"])])
    for config in (_config("inline"), saved):
        got = saver.get_tuple(config)
        assert got is not None
        assert got.checkpoint["channel_values"] == values
        assert got.checkpoint["channel_versions"] == versions
    record = CheckpointStore().get("inline", "")
    assert record is not None
    assert {(b.channel, b.version, b.type) for b in record.blobs} >= {
        ("gone", versions["gone"], "empty")
    }
    assert {b.channel for b in record.blobs} == {*values, "gone"}


def test_remembered_small_values_store_and_read_the_same_bytes_as_serializing_each() -> None:
    # Decision record 0067: the saver keeps packed small values and values read back,
    # the store unpacked inline columns; the rows and the values are what
    # serializing each one again gives, whatever was met before.
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    from agentstore.integrations import langgraph as integration
    from agentstore.stores.checkpoints import pack_values

    class Counting(JsonPlusSerializer):
        """Not LangGraph's own class: asked for every value, nothing remembered."""

        calls = 0

        def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
            Counting.calls += 1
            return super().dumps_typed(obj)

    serde = JsonPlusSerializer()
    values = {"n": 7, "flag": False, "one": True, "none": None, "s": "hé", "z": 0.0, "m": -0.0}
    for thread, saver in (("plain", AgentStoreSaver()), ("own", AgentStoreSaver(serde=Counting()))):
        for round_ in range(2):  # the second round meets every value remembered
            checkpoint = empty_checkpoint()
            checkpoint["channel_values"] = dict(values)
            versions = {ch: saver.get_next_version(None, None) for ch in [*values, "gone"]}
            checkpoint["channel_versions"] = dict(versions)
            before = Counting.calls
            saver.put(_config(thread), checkpoint, {"step": round_}, versions)
            if thread == "own":
                # The checkpoint itself and each of the seven values, every time.
                assert Counting.calls - before == 1 + len(values)
            row = Checkpoint.objects.get(session_id=thread, checkpoint_id=checkpoint["id"])
            each = [(ch, *serde.dumps_typed(v)) for ch, v in values.items()]
            expected = pack_values([*each, ("gone", "empty", None)])
            assert bytes(row.inline) == expected
            got = saver.get_tuple(_config(thread))
            assert got is not None
            read = got.checkpoint["channel_values"]
            assert read == values
            assert [type(read[ch]) for ch in values] == [type(v) for v in values.values()]
            assert str(read["m"]) == "-0.0" and str(read["z"]) == "0.0"
            # Versions are applied at each read, not remembered with the bytes.
            record = CheckpointStore().get(thread, "")
            assert record is not None
            assert {b.channel: b.version for b in record.blobs} == versions
    assert integration._PIECES and integration._VALUES


@pytest.mark.postgres_only
def test_the_latest_checkpoints_generic_plan_stops_at_one_index_entry() -> None:
    # Decision record 0069: the saver's statements are prepared, and PostgreSQL's generic
    # plan for MAX(checkpoint_id) aggregated the whole thread's index range.
    from agentstore.sql import checkpoints as checkpoint_sql

    statement = checkpoint_sql.GET_LATEST
    for n in (1, 2, 1, 2):
        statement = statement.replace("%s", f"${n}", 1)
    with connection.cursor() as cursor:
        cursor.execute("SET plan_cache_mode = force_generic_plan")
        cursor.execute(f"PREPARE latest_plan (varchar, text) AS {statement}")
        try:
            cursor.execute("EXPLAIN EXECUTE latest_plan ('t', '')")
            plan = " ".join(str(row[0]) for row in cursor.fetchall())
        finally:
            cursor.execute("DEALLOCATE latest_plan")
            cursor.execute("RESET plan_cache_mode")
    assert "Aggregate" not in plan and "Limit" in plan, plan
