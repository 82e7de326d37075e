"""Follow every session kind over SSE, in process; errors before the stream are JSON.

A stream with ``FOLLOW_MAX_SECONDS`` tiny sends what is there, then ``reconnect``
and ends, so the test client can read it to the end. Live following across
processes is in ``test_follow.py``; the pure tick is tested at the bottom.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.test import override_settings
from rest_framework.test import APIClient

from agentstore.api.sse import Cursor, event_frame, next_frames
from agentstore.selectors.follow import Followed, read_after
from agentstore.stores import LogStore, LoopStore, SessionStore, TreeStore
from agentstore.stores.checkpoints import CheckpointStore
from agentstore.types import MessageEntity, RunStep
from tests.api.conftest import API

#: Ends each stream after its first idle tick (a reconnect event).
QUICK = override_settings(AGENTSTORE={"FOLLOW_MAX_SECONDS": 0.001})


def read_stream(
    client: APIClient, session_id: str, last_event_id: str = ""
) -> list[dict[str, str]]:
    headers = {"Accept": "text/event-stream"}
    if last_event_id:
        headers["Last-Event-ID"] = last_event_id
    response = client.get(f"{API}/sessions/{session_id}/follow", headers=headers)
    assert response.status_code == 200, response.content
    assert response["Content-Type"].startswith("text/event-stream")
    text = b"".join(response.streaming_content).decode()  # type: ignore[attr-defined]
    events = []
    for block in text.split("\n\n"):
        fields = dict(
            line.split(": ", 1) for line in block.splitlines() if line and not line.startswith(":")
        )
        if "data" in fields:
            events.append(fields)
    return events


@QUICK
def test_tree_sessions_send_entries(api: APIClient, alice: Any) -> None:
    store = TreeStore()
    sid = store.create_session("/w", owner=alice).id
    first = store.append_message(sid, None, MessageEntity(role="user", content="hi"))
    second = store.append_message(sid, first.id, MessageEntity(role="assistant", content="yo"))
    events = read_stream(api, sid)
    assert [(e["event"], e["id"]) for e in events] == [
        ("entry", "1"),
        ("entry", "2"),
        ("reconnect", "2"),
    ]
    assert [json.loads(e["data"])["id"] for e in events[:2]] == [first.id, second.id]
    assert json.loads(events[2]["data"]) == {"after": 2, "reason": "FOLLOW_MAX_SECONDS"}
    # Resuming after the first entry sends only the second.
    resumed = read_stream(api, sid, last_event_id="1")
    assert [e["id"] for e in resumed] == ["2", "2"]


@QUICK
def test_loop_sessions_send_steps(api: APIClient, alice: Any) -> None:
    sid = SessionStore().create("loop", owner=alice).id
    store = LoopStore()
    store.append(RunStep(session_id=sid, step_index=0, step_type="user", content="go"))
    store.append(
        RunStep(
            session_id=sid,
            step_index=1,
            step_type="execute_js",
            content="1+1",
            tool_args=b'{"code":"1+1"}',
        )
    )
    events = read_stream(api, sid)
    assert [e["event"] for e in events] == ["step", "step", "reconnect"]
    steps = [json.loads(e["data"]) for e in events[:2]]
    assert [(s["step_type"], s["content"]) for s in steps] == [
        ("user", "go"),
        ("execute_js", "1+1"),
    ]
    assert steps[1]["tool_args"] == {"code": "1+1"}
    # The event id is the step's position, which resumes the stream.
    assert [str(s["position"]) for s in steps] == [e["id"] for e in events[:2]]
    resumed = read_stream(api, sid, last_event_id=events[0]["id"])
    assert [e["event"] for e in resumed] == ["step", "reconnect"]
    assert json.loads(resumed[0]["data"])["content"] == "1+1"


@QUICK
def test_log_sessions_send_exact_lines(api: APIClient, alice: Any) -> None:
    store = LogStore()
    try:
        session = store.create({"cwd": "/repo"}, owner=alice)
        entry_id = store.append(session.id, {"type": "info", "name": "first"})
    finally:
        store.close()
    events = read_stream(api, session.id)
    assert [(e["event"], e["id"]) for e in events] == [("line", "1"), ("reconnect", "1")]
    line = json.loads(events[0]["data"])
    assert (line["seq"], line["id"], line["type"]) == (1, entry_id, "info")
    assert json.loads(line["line"])["name"] == "first"
    assert json.loads(line["line"])["id"] == entry_id


@QUICK
def test_graph_threads_send_checkpoints(api: APIClient, alice: Any) -> None:
    store = CheckpointStore()
    ids = [f"1f000000-0000-6000-8000-{n:012d}" for n in range(2)]
    for n, checkpoint_id in enumerate(ids):
        store.put(
            "thread-1",
            "",
            checkpoint_id,
            ids[n - 1] if n else None,
            "json",
            b"{}",
            {"step": n, "source": "loop"},
            {},
            owner_id=alice.pk,
        )
    events = read_stream(api, "thread-1")
    assert [e["event"] for e in events] == ["checkpoint", "checkpoint", "reconnect"]
    found = [json.loads(e["data"]) for e in events[:2]]
    assert [c["checkpoint_id"] for c in found] == ids
    assert found[1]["parent_checkpoint_id"] == ids[0]
    assert found[1]["metadata"] == {"step": 1, "source": "loop"}


# -- errors before the stream starts ------------------------------------------------------


def assert_json_error(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/json"
    error = response.json()["error"]
    assert set(error) == {"code", "message", "details"}
    return error  # type: ignore[no-any-return]


def test_unknown_or_foreign_session_is_a_json_404(
    api: APIClient, bob_api: APIClient, alice: Any
) -> None:
    sid = TreeStore().create_session("/w", owner=alice).id
    for client, target in ((api, "nope"), (bob_api, sid)):
        response = client.get(f"{API}/sessions/{target}/follow", HTTP_ACCEPT="text/event-stream")
        error = assert_json_error(response, 404)
        assert target in error["message"]


def test_bad_position_is_a_json_400(api: APIClient, alice: Any) -> None:
    sid = SessionStore().create("loop", owner=alice).id
    response = api.get(
        f"{API}/sessions/{sid}/follow",
        HTTP_ACCEPT="text/event-stream",
        HTTP_LAST_EVENT_ID="-3",
    )
    error = assert_json_error(response, 400)
    assert "last_event_id" in json.dumps(error["details"])


def test_anonymous_follow_is_a_json_error(anon: APIClient, alice: Any) -> None:
    sid = TreeStore().create_session("/w", owner=alice).id
    response = anon.get(f"{API}/sessions/{sid}/follow", HTTP_ACCEPT="text/event-stream")
    assert response.status_code in (401, 403)
    assert response["Content-Type"] == "application/json"
    assert set(response.json()["error"]) == {"code", "message", "details"}


# -- the pure tick --------------------------------------------------------------------------


def tick(cursor: Cursor, items: list[Followed], exists: bool, now: float) -> Any:
    return next_frames(cursor, items, exists, now, keepalive=15, max_seconds=60, session_id="s")


def test_next_frames_sends_items_waits_keeps_alive_and_ends() -> None:
    start = Cursor(after=0, started=100.0, quiet_since=100.0)
    item = Followed(7, "line", None)
    busy = next_frames(start, [], True, 100.0, keepalive=15, max_seconds=60, session_id="s")
    assert (busy.frames, busy.wait, busy.done) == (b"", True, False)
    idle = tick(start, [], True, 116.0)
    assert (idle.frames, idle.cursor.quiet_since, idle.wait) == (b": keep-alive\n\n", 116.0, True)
    gone = tick(start, [], False, 101.0)
    assert gone.done and gone.frames.startswith(b"event: deleted\n")
    expired = tick(Cursor(5, 100.0, 150.0), [], True, 160.0)
    assert expired.done and not expired.wait
    assert expired.frames == (
        b'id: 5\nevent: reconnect\ndata: {"after": 5, "reason": "FOLLOW_MAX_SECONDS"}\n\n'
    )
    # Items move the cursor and are framed by event_frame (no wait: read again at once).
    sent = Followed(3, "step", RunStep(session_id="s", step_type="user", content="x"))
    moved = tick(start, [sent], True, 101.0)
    assert moved.cursor.after == 3 and not moved.wait
    assert moved.frames == event_frame(sent) and moved.frames.startswith(b"id: 3\nevent: step\n")
    assert item.position == 7


@pytest.mark.django_db
def test_read_after_is_bounded_and_ordered(alice: Any) -> None:
    sid = SessionStore().create("loop", owner=alice).id
    store = LoopStore()
    for n in range(5):
        store.append(RunStep(session_id=sid, step_index=n, step_type="user", content=str(n)))
    first = read_after(sid, "loop", 0, 2)
    assert [f.item.content for f in first] == ["0", "1"]
    rest = read_after(sid, "loop", first[-1].position, 10)
    assert [f.item.content for f in rest] == ["2", "3", "4"]
    assert read_after(sid, "loop", rest[-1].position, 10) == []


@pytest.mark.django_db
def test_graph_positions_are_never_reused_after_the_newest_checkpoint_goes(alice: Any) -> None:
    """A follower holding the newest checkpoint's position still sees the next checkpoint
    when that one was deleted meanwhile — LangGraph's rollback: ``delete_for_runs`` of the
    last run, then a new run in the same thread. ``Checkpoint.id`` is never reused
    (``AUTOINCREMENT`` on SQLite, an identity on PostgreSQL; decision record 0022)."""
    store = CheckpointStore()
    ids = [f"1f000000-0000-6000-8000-{n:012d}" for n in range(3)]

    def put(n: int, run_id: str) -> None:
        store.put(
            "thread-r",
            "",
            ids[n],
            None,
            "json",
            b"{}",
            {"step": n, "run_id": run_id},
            {},
            owner_id=alice.pk,
        )

    put(0, "run-a")
    put(1, "run-b")
    seen = read_after("thread-r", "graph", 0, 10)
    assert [f.item.checkpoint_id for f in seen] == ids[:2]
    cursor = seen[-1].position
    assert store.delete_for_runs(["run-b"]) == 1  # the table's newest row goes
    put(2, "run-c")
    after = read_after("thread-r", "graph", cursor, 10)
    assert [f.item.checkpoint_id for f in after] == [ids[2]]
    assert after[0].position > cursor


def test_a_kind_without_a_follow_reader_is_the_shared_wrong_kind_409(
    api: APIClient, alice: Any, monkeypatch: Any
) -> None:
    from agentstore.selectors import follow

    sid = SessionStore().create("loop", owner=alice).id
    monkeypatch.setattr(follow, "EVENTS", {"log": "line", "tree": "entry"})
    monkeypatch.setattr("agentstore.api.views.session_extras.EVENTS", follow.EVENTS)
    response = api.get(f"{API}/sessions/{sid}/follow", HTTP_ACCEPT="text/event-stream")
    error = assert_json_error(response, 409)
    assert error["code"] == "wrong_session_kind"
    assert error["details"] == {"session_id": sid, "kind": "loop", "expected": "tree or log"}
    # The same body as any other request on a loop session that needs a tree or
    # log session (the context): one owner of the wrong-kind error (decision record 0053).
    other = api.get(f"{API}/sessions/{sid}/context")
    assert other.status_code == 409
    assert response.json() == other.json()
