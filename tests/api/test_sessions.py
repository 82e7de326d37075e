"""Sessions over HTTP: listing with filters, create, read, delete, rename, owner scoping."""

from __future__ import annotations

from typing import Any

from rest_framework.test import APIClient

from agentstore.models import Session
from agentstore.stores import TreeStore
from tests.api.conftest import API, append_message, assert_error, create_session


def ids(response: Any) -> list[str]:
    assert response.status_code == 200, response.content
    return [row["id"] for row in response.json()["results"]]


def test_create_makes_a_tree_session_owned_by_the_caller(api: APIClient, alice: Any) -> None:
    body = create_session(api, cwd="/repo", name="fix tests")
    assert body["kind"] == "tree"
    assert body["owner"] == "alice"
    assert (body["cwd"], body["name"]) == ("/repo", "fix tests")
    row = Session.objects.get(pk=body["id"])
    assert row.owner == alice
    stored = TreeStore().get_session(body["id"])
    assert stored is not None and (stored.cwd, stored.name) == ("/repo", "fix tests")


def test_create_requires_cwd_for_a_tree_session(api: APIClient) -> None:
    error = assert_error(api.post(f"{API}/sessions", {}, format="json"), 400, "validation_error")
    # The body's key, as every validation error names it (docs/api.md, "One error shape").
    assert error["details"]["field"] == "cwd"
    assert Session.objects.count() == 0


def test_create_a_loop_session(api: APIClient) -> None:
    body = create_session(api, kind="loop", model="gpt-x", cwd="")
    assert body["kind"] == "loop"
    assert body["model"] == "gpt-x"


def test_list_shows_only_your_sessions_and_staff_sees_all(
    api: APIClient, bob_api: APIClient, staff_api: APIClient
) -> None:
    mine = create_session(api)["id"]
    theirs = create_session(bob_api)["id"]
    assert ids(api.get(f"{API}/sessions")) == [mine]
    assert ids(bob_api.get(f"{API}/sessions")) == [theirs]
    assert set(ids(staff_api.get(f"{API}/sessions"))) == {mine, theirs}
    # The count does not reveal other users' sessions either.
    assert api.get(f"{API}/sessions").json()["count"] == 1


def test_filters_never_widen_what_you_see(api: APIClient, bob_api: APIClient) -> None:
    create_session(bob_api, cwd="/shared")
    assert ids(api.get(f"{API}/sessions?owner=bob")) == []
    assert ids(api.get(f"{API}/sessions?cwd=/shared")) == []
    assert api.get(f"{API}/sessions?owner=bob").json()["count"] == 0


def test_filters(api: APIClient, staff_api: APIClient) -> None:
    a = create_session(api, cwd="/a", name="alpha")["id"]
    b = create_session(api, cwd="/b", name="beta")["id"]
    child = create_session(api, cwd="/a", parent_session=a)["id"]
    loop = create_session(api, kind="loop")["id"]
    append_message(api, b, "Investigate the FLAKY test")
    assert set(ids(api.get(f"{API}/sessions?cwd=/a"))) == {a, child}
    assert ids(api.get(f"{API}/sessions?parent={a}")) == [child]
    assert set(ids(api.get(f"{API}/sessions?top_level=true&kind=tree"))) == {a, b}
    assert ids(api.get(f"{API}/sessions?kind=loop")) == [loop]
    assert ids(api.get(f"{API}/sessions?search=flaky")) == [b]
    assert ids(api.get(f"{API}/sessions?search=ALPH")) == [a]
    Session.objects.filter(pk=a).update(superseded_by=b)
    assert a not in ids(api.get(f"{API}/sessions?current=true"))
    assert ids(api.get(f"{API}/sessions?current=false")) == [a]
    assert set(ids(staff_api.get(f"{API}/sessions?owner=alice"))) == {a, b, child, loop}


def test_list_is_newest_first_and_paged(api: APIClient) -> None:
    made = [create_session(api, name=f"s{i}")["id"] for i in range(3)]
    append_message(api, made[0], "bump")  # the most recently updated comes first
    page = api.get(f"{API}/sessions?page_size=2").json()
    assert [row["id"] for row in page["results"]] == [made[0], made[2]]
    assert page["count"] == 3 and page["next"]
    assert [row["id"] for row in api.get(page["next"]).json()["results"]] == [made[1]]


def test_retrieve_and_someone_elses_session_is_a_404(api: APIClient, bob_api: APIClient) -> None:
    sid = create_session(api)["id"]
    assert api.get(f"{API}/sessions/{sid}").json()["id"] == sid
    theirs = assert_error(bob_api.get(f"{API}/sessions/{sid}"), 404, "no_session")
    missing = assert_error(bob_api.get(f"{API}/sessions/nope"), 404, "no_session")
    # Indistinguishable from a missing session apart from the id echoed back.
    assert theirs["message"].replace(sid, "X") == missing["message"].replace("nope", "X")


def test_staff_reads_any_session(api: APIClient, staff_api: APIClient) -> None:
    sid = create_session(api)["id"]
    assert staff_api.get(f"{API}/sessions/{sid}").status_code == 200


def test_delete(api: APIClient, bob_api: APIClient) -> None:
    sid = create_session(api)["id"]
    append_message(api, sid, "hi")
    assert_error(bob_api.delete(f"{API}/sessions/{sid}"), 404, "no_session")
    assert Session.objects.filter(pk=sid).exists()
    assert api.delete(f"{API}/sessions/{sid}").status_code == 204
    assert not Session.objects.filter(pk=sid).exists()
    assert_error(api.delete(f"{API}/sessions/{sid}"), 404, "no_session")


def test_delete_a_loop_session_purges_its_steps(api: APIClient) -> None:
    sid = create_session(api, kind="loop")["id"]
    api.post(f"{API}/sessions/{sid}/steps", {"step_type": "user", "content": "hi"}, format="json")
    assert api.delete(f"{API}/sessions/{sid}").status_code == 204
    assert not Session.objects.filter(pk=sid).exists()


def test_rename_records_session_info_under_the_leaf(api: APIClient, bob_api: APIClient) -> None:
    sid = create_session(api, name="old")["id"]
    first = append_message(api, sid, "hi")
    response = api.post(f"{API}/sessions/{sid}/rename", {"name": "new"}, format="json")
    assert response.status_code == 201
    entry = response.json()
    assert (entry["type"], entry["parent_id"], entry["data"]["name"]) == (
        "session_info",
        first["id"],
        "new",
    )
    assert api.get(f"{API}/sessions/{sid}").json()["name"] == "new"
    assert_error(
        bob_api.post(f"{API}/sessions/{sid}/rename", {"name": "x"}, format="json"),
        404,
        "no_session",
    )
    assert api.get(f"{API}/sessions/{sid}").json()["name"] == "new"


def test_rename_with_an_explicit_root_parent(api: APIClient) -> None:
    sid = create_session(api)["id"]
    append_message(api, sid, "hi")
    response = api.post(
        f"{API}/sessions/{sid}/rename", {"name": "n", "parent_id": None}, format="json"
    )
    assert response.json()["parent_id"] is None
