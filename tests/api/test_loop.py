"""Loop sessions over HTTP: steps, last-n, grants, finalize, snapshot."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from agentstore.models import Grant, Step
from agentstore.stores import LoopStore
from tests.api.conftest import API, assert_error, create_session


@pytest.fixture
def loop(api: APIClient) -> str:
    return str(create_session(api, kind="loop", model="gpt-x")["id"])


def add_step(client: APIClient, sid: str, **body: Any) -> Any:
    body.setdefault("step_type", "user")
    return client.post(f"{API}/sessions/{sid}/steps", body, format="json")


def test_append_and_list_steps_in_insertion_order(api: APIClient, loop: str) -> None:
    response = add_step(api, loop, step_index=0, content="hi", tool_args={"code": "1+1"})
    assert response.status_code == 201, response.content
    step = response.json()
    assert step["tool_args"] == {"code": "1+1"} and step["created_at"]
    for i in range(4):
        add_step(api, loop, step_index=0, step_type="response", content=f"r{i}")
    # step_index repeats by design; insertion order is the order.
    stored = LoopStore().steps(loop)
    assert [s.content for s in stored] == ["hi", "r0", "r1", "r2", "r3"]
    assert stored[0].tool_args == b'{"code":"1+1"}'
    page = api.get(f"{API}/sessions/{loop}/steps?limit=2").json()
    seen = [s["content"] for s in page["results"]]
    while page["next"]:
        page = api.get(page["next"]).json()
        seen += [s["content"] for s in page["results"]]
    assert seen == ["hi", "r0", "r1", "r2", "r3"]


def test_last_n_is_oldest_first(api: APIClient, loop: str) -> None:
    for i in range(5):
        add_step(api, loop, step_index=i, content=f"s{i}")
    last = api.get(f"{API}/sessions/{loop}/steps/last?n=2").json()
    assert [s["content"] for s in last] == ["s3", "s4"]
    assert_error(api.get(f"{API}/sessions/{loop}/steps/last?n=0"), 400, "validation_error")


def test_bad_steps_are_400_and_write_nothing(api: APIClient, loop: str) -> None:
    assert_error(add_step(api, loop, step_type=""), 400, "validation_error")
    assert_error(add_step(api, loop, duration_ms=-1), 400, "validation_error")
    assert_error(add_step(api, loop, step_index=2**31), 400, "validation_error")
    assert Step.objects.count() == 0


def test_loop_actions_on_a_tree_session_are_wrong_session_kind(api: APIClient) -> None:
    tree = create_session(api)["id"]
    error = assert_error(add_step(api, tree), 409, "wrong_session_kind")
    assert error["details"] == {"session_id": tree, "kind": "tree", "expected": "loop"}
    assert tree in error["message"]
    # Reads too: a tree session has no steps, grants or snapshot to show.
    for path in ("steps", "steps/last", "grants", "snapshot"):
        response = api.get(f"{API}/sessions/{tree}/{path}")
        assert_error(response, 409, "wrong_session_kind")


def test_steps_of_someone_elses_session_are_404(
    api: APIClient, bob_api: APIClient, loop: str
) -> None:
    add_step(api, loop, content="mine")
    assert_error(bob_api.get(f"{API}/sessions/{loop}/steps"), 404, "no_session")
    assert_error(bob_api.get(f"{API}/sessions/{loop}/steps/last"), 404, "no_session")
    assert_error(add_step(bob_api, loop), 404, "no_session")
    assert Step.objects.count() == 1


def test_grants(api: APIClient, bob_api: APIClient, loop: str) -> None:
    url = f"{API}/sessions/{loop}/grants"
    empty = api.get(url).json()
    assert empty == {"count": 0, "next": None, "previous": None, "results": []}
    first = api.post(url, {"prompt": "rm -rf build"}, format="json")
    assert first.status_code == 201
    assert set(first.json()) == {"prompt", "granted_at"}
    assert first.json()["prompt"] == "rm -rf build"
    assert api.post(url, {"prompt": "ls"}, format="json").status_code == 201
    listed = api.get(url).json()
    assert listed["count"] == 2
    assert [g["prompt"] for g in listed["results"]] == ["rm -rf build", "ls"]
    # Paged like every collection (docs/api.md, "Lists").
    page = api.get(url, {"page_size": 1, "page": 2}).json()
    assert [g["prompt"] for g in page["results"]] == ["ls"] and page["next"] is None
    assert page["previous"] is not None
    check = f"{url}/check"
    assert api.post(check, {"prompt": "ls"}, format="json").json() == {"granted": True}
    assert api.post(check, {"prompt": "ls "}, format="json").json() == {"granted": False}
    assert_error(bob_api.get(url), 404, "no_session")
    assert_error(bob_api.post(url, {"prompt": "x"}, format="json"), 404, "no_session")
    assert_error(bob_api.delete(url), 404, "no_session")
    assert_error(api.post(url, {}, format="json"), 400, "validation_error")
    assert api.delete(url).json() == {"revoked": 2}
    assert Grant.objects.count() == 0


def test_approving_again_is_a_200_replay_that_refreshes_the_grant(
    api: APIClient, loop: str
) -> None:
    url = f"{API}/sessions/{loop}/grants"
    first = api.post(url, {"prompt": "rm -rf build"}, format="json")
    api.post(url, {"prompt": "ls"}, format="json")
    again = api.post(url, {"prompt": "rm -rf build"}, format="json")
    assert (first.status_code, again.status_code) == (201, 200)
    assert again.json()["prompt"] == "rm -rf build"
    assert again.json()["granted_at"] >= first.json()["granted_at"]
    # The answer is the grant as stored: the listing shows the same object, and
    # the refreshed grant is now the newest.
    assert api.get(url).json()["results"] == [api.get(url).json()["results"][0], again.json()]
    assert Grant.objects.count() == 2


def test_finalize_and_snapshot(api: APIClient, bob_api: APIClient, loop: str) -> None:
    response = api.post(
        f"{API}/sessions/{loop}/finalize",
        {"status": "completed", "step_count": 3, "prompt_tokens": 7},
        format="json",
    )
    assert response.status_code == 200, response.content
    assert (response.json()["status"], response.json()["step_count"]) == ("completed", 3)
    url = f"{API}/sessions/{loop}/snapshot"
    assert api.get(url).json() == {"data": None}
    assert api.put(url, {"data": {"notes": ["a"]}}, format="json").status_code == 200
    assert api.get(url).json() == {"data": {"notes": ["a"]}}
    assert LoopStore().get(loop).data == b'{"notes":["a"]}'
    assert_error(bob_api.get(url), 404, "no_session")
    assert_error(bob_api.put(url, {"data": 1}, format="json"), 404, "no_session")
    assert_error(
        bob_api.post(f"{API}/sessions/{loop}/finalize", {"status": "x"}, format="json"),
        404,
        "no_session",
    )
    assert_error(
        api.post(f"{API}/sessions/{loop}/finalize", {"step_count": -1}, format="json"),
        400,
        "validation_error",
    )
