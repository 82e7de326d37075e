"""LogStore sessions and refs over HTTP: create, append, read, export, refs with CAS."""

from __future__ import annotations

import json
from typing import Any

import pytest
from rest_framework.test import APIClient

from agentstore.models import Holder, Session
from tests.api.conftest import API, assert_error


def new_log(client: APIClient, **header: Any) -> dict[str, Any]:
    response = client.post(f"{API}/log-sessions", {"header": header}, format="json")
    assert response.status_code == 201, response.content
    return response.json()  # type: ignore[no-any-return]


def append(client: APIClient, sid: str, entry: dict[str, Any]) -> Any:
    return client.post(f"{API}/log-sessions/{sid}/entries", {"entry": entry}, format="json")


MESSAGE = {"type": "info", "name": "first"}


def test_create_append_read_export(api: APIClient, bob_api: APIClient, alice: Any) -> None:
    created = new_log(api, cwd="/repo")
    sid = created["id"]
    assert created["header"]["cwd"] == "/repo"
    assert Session.objects.get(pk=sid).owner == alice
    assert not Holder.objects.filter(session_id=sid).exists()  # the API keeps no hold
    appended = append(api, sid, MESSAGE)
    assert appended.status_code == 201, appended.content
    entry_id = appended.json()["id"]
    assert entry_id.startswith("sha256:")
    read = api.get(f"{API}/log-sessions/{sid}").json()
    assert read["leaf"] == entry_id
    assert [e["id"] for e in read["entries"]] == [entry_id]
    exported = api.get(f"{API}/log-sessions/{sid}/export")
    assert exported.status_code == 200
    assert exported["Content-Type"] == "application/x-ndjson"
    lines = exported.content.decode().splitlines()
    assert len(lines) == 2
    assert json.loads(lines[0])["id"] == sid
    assert json.loads(lines[1])["name"] == "first"
    # It is a session like any other: listed, and someone else's is a 404.
    assert api.get(f"{API}/sessions?kind=log").json()["count"] == 1
    assert_error(bob_api.get(f"{API}/log-sessions/{sid}"), 404, "no_session")
    assert_error(append(bob_api, sid, MESSAGE), 404, "no_session")
    assert_error(bob_api.get(f"{API}/log-sessions/{sid}/export"), 404, "no_session")
    assert api.delete(f"{API}/sessions/{sid}").status_code == 204
    assert not Session.objects.filter(pk=sid).exists()


def test_create_refuses_client_ids_and_forks(api: APIClient) -> None:
    body = {"header": {"id": "01900000-0000-7000-8000-000000000000"}}
    assert_error(api.post(f"{API}/log-sessions", body, format="json"), 400, "validation_error")
    body = {"header": {"base": "sha256:abc"}}
    assert_error(api.post(f"{API}/log-sessions", body, format="json"), 400, "validation_error")
    assert Session.objects.count() == 0


def test_append_to_a_session_held_elsewhere_is_423(api: APIClient) -> None:
    from django.utils import timezone

    sid = new_log(api)["id"]
    now = timezone.now()
    Holder.objects.create(
        session_id=sid, pid=999_999, host="elsewhere", token="t", since=now, heartbeat=now
    )
    assert_error(append(api, sid, MESSAGE), 423, "session_locked")


def test_an_append_is_one_fenced_write_without_a_hold(api: APIClient) -> None:
    """The request reads the session's head and newest line in one statement and writes
    once, fenced on that head: no hold is claimed or released around it."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    sid = new_log(api)["id"]
    assert append(api, sid, MESSAGE).status_code == 201
    with CaptureQueriesContext(connection) as queries:
        second = append(api, sid, {"type": "info", "name": "second"})
    assert second.status_code == 201, second.content
    # (The test runs in a transaction: PostgreSQL's autocommitted write gets a savepoint.)
    statements = [q["sql"] for q in queries.captured_queries if "SAVEPOINT" not in q["sql"]]
    # The fence reads the holder table (someone else's hold refuses the write);
    # nothing writes it.
    writes = (
        "INSERT INTO agentstore_holder",
        "UPDATE agentstore_holder",
        'FROM "agentstore_holder"',
    )
    assert not [s for s in statements if any(w in s for w in writes)]
    # Token, the session's visibility, its head, then the write: two statements
    # in a transaction on SQLite (BEGIN, UPDATE, INSERT, COMMIT), one on PostgreSQL.
    assert len(statements) <= (7 if connection.vendor == "sqlite" else 4), statements
    assert not Holder.objects.filter(session_id=sid).exists()
    read = api.get(f"{API}/log-sessions/{sid}").json()
    assert [e["data"]["name"] for e in read["entries"]] == ["first", "second"]
    assert read["leaf"] == second.json()["id"]


@pytest.mark.django_db(transaction=True)
def test_appends_racing_on_one_session_are_ordered_not_refused(api: APIClient) -> None:
    """Requests on one session from several threads: each 201, every line kept, one chain."""
    import threading

    from django.db import connections

    sid = new_log(api)["id"]
    statuses: list[int] = []
    gate = threading.Barrier(4)

    def client(number: int) -> None:
        try:
            gate.wait()
            for k in range(5):
                statuses.append(
                    append(api, sid, {"type": "info", "name": f"{number}.{k}"}).status_code
                )
        finally:
            connections.close_all()

    threads = [threading.Thread(target=client, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert statuses == [201] * 20
    entries = api.get(f"{API}/log-sessions/{sid}?limit=100").json()["entries"]
    assert sorted(e["data"]["name"] for e in entries) == sorted(
        f"{n}.{k}" for n in range(4) for k in range(5)
    )
    # One chain: each line's parent is the line before it.
    assert [e["parent"] for e in entries[1:]] == [e["id"] for e in entries[:-1]]


def test_refs_compare_and_swap(api: APIClient, bob_api: APIClient, staff_api: APIClient) -> None:
    a = new_log(api)["id"]
    b = new_log(api)["id"]
    theirs = new_log(bob_api)["id"]
    url = f"{API}/refs/agents/main"
    made = api.put(url, {"expected": None, "next": {"session": a}}, format="json")
    assert made.status_code == 200, made.content
    assert api.get(url).json() == {"session": a, "entry": ""}
    moved = api.put(url, {"expected": {"session": b}, "next": {"session": b}}, format="json")
    error = assert_error(moved, 409, "ref_moved")
    assert error["details"]["current"] == {"session": a, "entry": ""}
    ok = api.put(
        url, {"expected": {"session": a}, "next": {"session": b}, "reason": "switch"}, format="json"
    )
    assert ok.status_code == 200
    listed = api.get(f"{API}/refs?prefix=agents/").json()
    assert listed["count"] == 1
    assert [(r["name"], r["target"]["session"]) for r in listed["results"]] == [("agents/main", b)]
    log = api.get(f"{API}/ref-log/agents/main").json()
    assert [x["reason"] for x in log["results"]] == ["switch", ""]

    # Bob sees none of it and cannot point a ref at Alice's session.
    assert bob_api.get(f"{API}/refs").json()["results"] == []
    assert_error(bob_api.get(url), 404, "no_ref")
    assert_error(bob_api.get(f"{API}/ref-log/agents/main"), 404, "no_ref")
    steal = bob_api.put(
        url, {"expected": {"session": b}, "next": {"session": theirs}}, format="json"
    )
    assert_error(steal, 404, "no_ref")
    aim = bob_api.put(
        f"{API}/refs/bob/x", {"expected": None, "next": {"session": a}}, format="json"
    )
    # The session it names is not Bob's: "no such session", naming what he sent.
    error = assert_error(aim, 404, "no_session")
    assert a in error["message"] and "next.session" in error["message"]
    assert staff_api.get(f"{API}/refs").json()["count"] == 1

    bad = api.put(f"{API}/refs/../bad", {"expected": None, "next": {"session": a}}, format="json")
    assert bad.status_code in (400, 404)
    assert bad.json()["error"]["code"] in ("ref_name", "not_found")
    gone = api.put(url, {"expected": {"session": b}, "next": None}, format="json")
    assert gone.status_code == 204
    assert_error(api.get(url), 404, "no_ref")


def test_form_encoded_bodies_are_415(api: APIClient) -> None:
    # Found by the schemathesis run: a form field "null" decoded to None. Bodies
    # are JSON only now, so a form body is refused before it is read.
    response = api.post(f"{API}/log-sessions", {"header": "null"})
    assert_error(response, 415, "unsupported_media_type")
    assert api.get(f"{API}/log-sessions").json()["count"] == 0
    null = api.post(f"{API}/log-sessions", {"header": None}, format="json")
    assert_error(null, 400, "validation_error")


def test_a_ref_moved_to_someone_elses_session_does_not_say_where(
    api: APIClient, bob_api: APIClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from agentstore.exceptions import RefMoved
    from agentstore.stores import LogStore
    from agentstore.types import RefTarget

    a = new_log(api)["id"]
    theirs = new_log(bob_api)["id"]
    url = f"{API}/refs/shared/main"
    assert (
        api.put(url, {"expected": None, "next": {"session": a}}, format="json").status_code == 200
    )

    # Bob moves the ref between Alice's visibility check and her update.
    def moved(*args: object, **kwargs: object) -> None:
        raise RefMoved("moved", name="shared/main", current=RefTarget(session=theirs))

    monkeypatch.setattr(LogStore, "update_ref", moved)
    response = api.put(url, {"expected": {"session": a}, "next": {"session": a}}, format="json")

    error = assert_error(response, 409, "ref_moved")
    assert theirs not in response.content.decode()
    assert error["details"].get("current") is None


def test_reading_a_log_session_is_paged_and_bounded(api: APIClient, bob_api: APIClient) -> None:
    # A probe's report: 30k entries came back in one 23 MB answer, whatever
    # ?limit= said. Now one page (default 100, at most 1000), continued by cursor.
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from agentstore.api.pagination import MAX_LOG_PAGE
    from agentstore.sql import log as log_sql
    from agentstore.stores import LogStore

    sid = new_log(api)["id"]
    total = MAX_LOG_PAGE + 203
    store = LogStore()
    ids = store.append_many(sid, [{"type": "info", "name": f"n{i}"} for i in range(total)])
    store.close()

    with CaptureQueriesContext(connection) as queries:
        first = api.get(f"{API}/log-sessions/{sid}")
    assert first.status_code == 200, first.content
    body = first.json()
    assert [e["id"] for e in body["entries"]] == ids[:100]
    assert body["leaf"] == ids[-1]  # the whole session's leaf, not the page's
    assert body["header"]["id"] == sid
    assert body["last_seq"] == 100 and body["next"]
    # Only the page's lines are read: never every line of the session.
    assert not any(log_sql.LINES in q["sql"] or "ORDER BY seq\n" in q["sql"] for q in queries)
    assert any("LIMIT" in q["sql"] and "line" in q["sql"] for q in queries)

    error = assert_error(
        api.get(f"{API}/log-sessions/{sid}?limit={MAX_LOG_PAGE + 1}"), 400, "validation_error"
    )
    assert error["details"]["field"] == "limit"
    assert_error(api.get(f"{API}/log-sessions/{sid}?cursor=nope"), 400, "validation_error")

    seen: list[str] = []
    url: str | None = f"{API}/log-sessions/{sid}?limit={MAX_LOG_PAGE}"
    pages = 0
    while url:
        page = api.get(url).json()
        assert len(page["entries"]) <= MAX_LOG_PAGE
        seen += [e["id"] for e in page["entries"]]
        url, pages = page["next"], pages + 1
    assert seen == ids and pages == 2

    tail = api.get(f"{API}/log-sessions/{sid}?after={total - 3}").json()
    assert [e["id"] for e in tail["entries"]] == ids[-3:]
    assert tail["next"] is None and tail["last_seq"] == total
    past = api.get(f"{API}/log-sessions/{sid}?after={total}").json()
    assert past["entries"] == [] and past["last_seq"] == total and past["next"] is None
    assert_error(bob_api.get(f"{API}/log-sessions/{sid}?limit=5"), 404, "no_session")
