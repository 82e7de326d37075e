"""A session's entries over HTTP: every append kind, paging and tailing, readers, races."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from rest_framework.test import APIClient

from agentstore.models import Entry
from agentstore.stores import TreeStore
from tests.api.conftest import API, append_message, assert_error, create_session


@pytest.fixture
def sid(api: APIClient) -> str:
    return str(create_session(api)["id"])


def post(client: APIClient, sid: str, kind: str, body: dict[str, Any]) -> Any:
    return client.post(f"{API}/sessions/{sid}/append/{kind}", body, format="json")


def test_append_message_with_parts_usage_and_flags(api: APIClient, sid: str) -> None:
    png = b"\x89PNG\r\n\x1a\nrest"
    response = post(
        api,
        sid,
        "message",
        {
            "parent_id": None,
            "message": {
                "role": "assistant",
                "content": "look",
                "provider": "p",
                "model": "m",
                "parts": [
                    {"type": "text", "text": "look"},
                    {
                        "type": "image",
                        "mime_type": "image/png",
                        "data": base64.b64encode(png).decode(),
                        "width": 3,
                        "height": 4,
                    },
                ],
                "timestamp": "2026-05-31T12:00:00Z",
            },
            "display": False,
            "usage": {"input_tokens": 10, "output_tokens": 5},
        },
    )
    assert response.status_code == 201, response.content
    entry = response.json()
    assert entry["seq"] == 1 and entry["parent_id"] is None
    assert entry["created_at"] == "2026-05-31T12:00:00Z"
    assert entry["display"] is False
    assert entry["data"]["usage"] == {"input_tokens": 10, "output_tokens": 5}
    image = entry["message"]["parts"][1]
    assert base64.b64decode(image["data"]) == png
    # What the API returned is what the store reads back.
    stored = TreeStore().entry(sid, entry["id"])
    assert stored is not None and stored.message.parts[1].data == png
    fetched = api.get(f"{API}/sessions/{sid}/entries/{entry['id']}").json()
    assert fetched == entry


def test_message_whitespace_is_kept(api: APIClient, sid: str) -> None:
    entry = append_message(api, sid, "  padded\n")
    assert entry["message"]["content"] == "  padded\n"


def test_every_entry_kind_appends(api: APIClient, sid: str) -> None:
    root = append_message(api, sid, "hi")["id"]
    cases = [
        ("custom", {"custom_type": "ext", "data": {"keep": [1, {"x": None}]}}, "custom"),
        (
            "custom-message",
            {"custom_type": "note", "content": "ctx", "display": True, "details": {"a": 1}},
            "custom_message",
        ),
        ("model-change", {"provider": "openai", "model": "gpt"}, "model_change"),
        ("thinking-level-change", {"thinking_level": "high"}, "thinking_level_change"),
        ("branch-summary", {"from_id": root, "summary": "tried X"}, "branch_summary"),
        ("label", {"target_id": root, "label": "start"}, "label"),
        ("session-info", {"name": "renamed"}, "session_info"),
        ("compaction", {"summary": "s", "operation_id": "op-1", "tokens_before": 9}, "compaction"),
    ]
    parent = root
    for kind, body, entry_type in cases:
        response = post(api, sid, kind, {"parent_id": parent, **body})
        assert response.status_code == 201, (kind, response.content)
        entry = response.json()
        assert entry["type"] == entry_type and entry["parent_id"] == parent
        parent = entry["id"]
    seen = api.get(f"{API}/sessions/{sid}/entries").json()["results"]
    assert [e["type"] for e in seen] == ["message"] + [c[2] for c in cases]
    assert seen[1]["data"]["keep"] == [1, {"x": None}]
    assert TreeStore().label(sid, root) == "start"
    assert api.get(f"{API}/sessions/{sid}").json()["name"] == "renamed"
    cleared = post(api, sid, "label", {"parent_id": parent, "target_id": root, "label": None})
    assert cleared.status_code == 201
    assert TreeStore().label(sid, root) is None


def test_append_to_someone_elses_or_a_missing_session_is_404(
    api: APIClient, bob_api: APIClient, sid: str
) -> None:
    body = {"parent_id": None, "message": {"role": "user", "content": "sneaky"}}
    assert_error(post(bob_api, sid, "message", body), 404, "no_session")
    assert_error(post(api, "missing", "message", body), 404, "no_session")
    assert Entry.objects.count() == 0


def test_appending_tree_entries_to_a_loop_session_is_wrong_session_kind(api: APIClient) -> None:
    loop = create_session(api, kind="loop")["id"]
    body = {"parent_id": None, "message": {"role": "user", "content": "x"}}
    error = assert_error(post(api, loop, "message", body), 409, "wrong_session_kind")
    assert error["details"] == {"session_id": loop, "kind": "loop", "expected": "tree"}
    assert loop in error["message"] and "loop session" in error["message"]


def test_compaction_race_answers_409_with_the_winner(api: APIClient, sid: str) -> None:
    root = append_message(api, sid, "hi")["id"]
    first = post(
        api, sid, "compaction", {"parent_id": root, "summary": "a", "operation_id": "op-a"}
    )
    assert first.status_code == 201
    winner = first.json()["id"]
    replay = post(
        api, sid, "compaction", {"parent_id": root, "summary": "a", "operation_id": "op-a"}
    )
    # One rule for idempotent creates: 201 when written, 200 with the stored one.
    assert replay.status_code == 200 and replay.json() == first.json()
    lost = post(api, sid, "compaction", {"parent_id": root, "summary": "b", "operation_id": "op-b"})
    error = assert_error(lost, 409, "stale_compaction_parent")
    assert error["details"]["winner_entry_id"] == winner
    elsewhere = post(
        api, sid, "compaction", {"parent_id": None, "summary": "c", "operation_id": "op-a"}
    )
    assert_error(elsewhere, 409, "compaction_operation_mismatch")


def test_compaction_requires_an_operation_id(api: APIClient, sid: str) -> None:
    body = {"parent_id": None, "summary": "s"}
    error = assert_error(post(api, sid, "compaction", body), 400, "validation_error")
    assert error["details"]["field"] == "operation_id"


def test_entries_page_by_cursor_and_tail_with_after(api: APIClient, sid: str) -> None:
    parent = None
    for i in range(5):
        parent = append_message(api, sid, f"m{i}", parent)["id"]
    page = api.get(f"{API}/sessions/{sid}/entries?limit=2").json()
    assert [e["seq"] for e in page["results"]] == [1, 2] and page["last_seq"] == 2
    seen = [e["seq"] for e in page["results"]]
    while page["next"]:
        page = api.get(page["next"]).json()
        seen += [e["seq"] for e in page["results"]]
    assert seen == [1, 2, 3, 4, 5]
    tail = api.get(f"{API}/sessions/{sid}/entries?after=5").json()
    assert tail == {"next": None, "last_seq": 5, "results": []}
    append_message(api, sid, "m5", parent)
    tail = api.get(f"{API}/sessions/{sid}/entries?after=5").json()
    assert [e["message"]["content"] for e in tail["results"]] == ["m5"]
    assert tail["last_seq"] == 6


def test_entry_read_and_delete_branch(api: APIClient, bob_api: APIClient, sid: str) -> None:
    a = append_message(api, sid, "a")["id"]
    b = append_message(api, sid, "b", a)["id"]
    keep = append_message(api, sid, "keep")["id"]
    assert_error(api.get(f"{API}/sessions/{sid}/entries/nope"), 404, "no_entry")
    assert_error(bob_api.get(f"{API}/sessions/{sid}/entries/{a}"), 404, "no_session")
    assert_error(bob_api.delete(f"{API}/sessions/{sid}/entries/{a}"), 404, "no_session")
    assert api.delete(f"{API}/sessions/{sid}/entries/{a}").status_code == 204
    left = [e["id"] for e in api.get(f"{API}/sessions/{sid}/entries").json()["results"]]
    assert left == [keep]
    assert_error(api.get(f"{API}/sessions/{sid}/entries/{b}"), 404, "no_entry")


def test_tree_branch_context_messages_transcript(api: APIClient, sid: str) -> None:
    u = append_message(api, sid, "question")["id"]
    a1 = append_message(api, sid, "answer one", u, role="assistant")["id"]
    a2 = append_message(api, sid, "answer two", u, role="assistant")["id"]
    change = post(api, sid, "model-change", {"parent_id": a2, "provider": "p", "model": "m"})
    hidden = post(
        api,
        sid,
        "custom-message",
        {"parent_id": a1, "custom_type": "t", "content": "secret", "display": False},
    )
    assert hidden.status_code == 201

    tree = api.get(f"{API}/sessions/{sid}/tree").json()
    assert tree["next"] is None
    rows = [(row["entry"]["id"], row["depth"], row["child_count"]) for row in tree["results"]]
    hidden_id = hidden.json()["id"]
    change_id = change.json()["id"]
    assert rows == [(u, 0, 2), (a1, 1, 1), (hidden_id, 2, 0), (a2, 1, 1), (change_id, 2, 0)]

    branch = api.get(f"{API}/sessions/{sid}/branch?entry_id={a1}").json()
    assert [e["id"] for e in branch["results"]] == [u, a1]
    assert branch["next"] is None
    assert_error(api.get(f"{API}/sessions/{sid}/branch?entry_id=nope"), 404, "no_entry")

    context = api.get(f"{API}/sessions/{sid}/context?entry_id={a2}").json()
    assert [m["content"] for m in context["messages"]] == ["question", "answer two"]
    at_change = api.get(f"{API}/sessions/{sid}/context?entry_id={change.json()['id']}").json()
    assert at_change["model"] == "m"
    # Without entry_id: the most recent leaf, the hidden custom message under a1.
    latest = api.get(f"{API}/sessions/{sid}/context").json()
    assert [m["content"] for m in latest["messages"]] == ["question", "answer one"]
    assert_error(api.get(f"{API}/sessions/{sid}/context?entry_id=nope"), 404, "no_entry")

    page = api.get(f"{API}/sessions/{sid}/messages").json()
    assert page["next"] is None
    messages = [m["content"] for m in page["results"]]
    assert messages == ["question", "answer one", "answer two", "secret"]
    page = api.get(f"{API}/sessions/{sid}/transcript").json()
    transcript = [m["content"] for m in page["results"]]
    assert transcript == ["question", "answer one", "answer two"]


def test_context_of_an_empty_session(api: APIClient, sid: str) -> None:
    context = api.get(f"{API}/sessions/{sid}/context").json()
    assert context["messages"] == [] and context["usage_anchor"] is None


@pytest.mark.parametrize(
    "reader", ["entries", "tree", "branch", "context", "messages", "transcript"]
)
def test_readers_of_someone_elses_session_are_404(
    api: APIClient, bob_api: APIClient, sid: str, reader: str
) -> None:
    append_message(api, sid, "private")
    response = bob_api.get(f"{API}/sessions/{sid}/{reader}")
    error = assert_error(response, 404, "no_session")
    assert "private" not in response.content.decode()
    assert error["details"] == {}


def test_entry_fast_path_matches_the_declared_fields(api: APIClient, sid: str) -> None:
    from rest_framework import serializers

    from agentstore.api.serializers import EntrySerializer

    root = append_message(api, sid, "hi")["id"]
    png = base64.b64encode(b"img").decode()
    post(
        api,
        sid,
        "message",
        {
            "parent_id": root,
            "message": {
                "role": "user",
                "content": "",
                "parts": [{"type": "image", "mime_type": "image/png", "data": png}],
            },
        },
    )
    post(api, sid, "label", {"parent_id": root, "target_id": root, "label": "x"})
    for entry in TreeStore().entries(sid):
        fast = EntrySerializer(entry).data
        generic = serializers.Serializer.to_representation(EntrySerializer(), entry)
        assert fast == dict(generic)
