"""A key a request body does not define is a 400 naming it, never dropped silently.

A user's report: a misspelt key in an append body (``"usgae"``) vanished and
the entry was stored without it. Every append body — the tree's nine kinds,
loop steps, log lines — and the objects nested in them now refuse a key they
do not define, naming its path; free-form JSON values (``data``, ``details``,
a log ``entry``) keep their keys as given.
"""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from agentstore.models import Entry, Step
from agentstore.stores import TreeStore
from tests.api.conftest import API, assert_error, create_session

#: A valid body of every tree append kind.
TREE_APPENDS: dict[str, dict[str, Any]] = {
    "message": {"message": {"role": "user", "content": "hi"}},
    "custom": {"custom_type": "ext", "data": {"k": 1}},
    "custom-message": {"custom_type": "ext", "content": "c", "display": True},
    "model-change": {"provider": "p", "model": "m"},
    "thinking-level-change": {"thinking_level": "high"},
    "branch-summary": {"summary": "s"},
    "label": {"target_id": "TARGET", "label": "x"},
    "session-info": {"name": "n"},
    "compaction": {"summary": "s", "operation_id": "op-1"},
}


def _tree(api: APIClient) -> tuple[str, str]:
    sid = create_session(api)["id"]
    root = api.post(
        f"{API}/sessions/{sid}/append/message",
        {"parent_id": None, "message": {"role": "user", "content": "root"}},
        format="json",
    )
    return sid, str(root.json()["id"])


def _body(kind: str, root: str) -> dict[str, Any]:
    body = {"parent_id": root, **TREE_APPENDS[kind]}
    if kind == "label":
        body["target_id"] = root
    return body


@pytest.mark.parametrize("kind", list(TREE_APPENDS))
def test_every_tree_append_refuses_an_unknown_key(api: APIClient, kind: str) -> None:
    sid, root = _tree(api)
    body = _body(kind, root)
    url = f"{API}/sessions/{sid}/append/{kind}"
    before = Entry.objects.count()
    error = assert_error(
        api.post(url, {**body, "colour": "red"}, format="json"), 400, "validation_error"
    )
    assert error["details"]["fields"] == {"colour": ["Unknown field."]}
    assert error["details"]["field"] == "colour" and "colour" in error["message"]
    assert Entry.objects.count() == before
    # The same body without it is stored: the refusal is about the key alone.
    assert api.post(url, body, format="json").status_code == 201


def test_nested_objects_refuse_unknown_keys_by_path(api: APIClient) -> None:
    sid, root = _tree(api)
    url = f"{API}/sessions/{sid}/append/message"
    body = {
        "parent_id": root,
        "message": {
            "role": "assistant",
            "content": "x",
            "tone": "dry",
            "parts": [{"type": "text", "text": "t", "size": 1}],
        },
        "usage": {"input_tokens": 3, "cached_tokens": 1},
        "usgae": {},
    }
    error = assert_error(api.post(url, body, format="json"), 400, "validation_error")
    assert set(error["details"]["fields"]) == {
        "message.tone",
        "message.parts[0].size",
        "usage.cached_tokens",
        "usgae",
    }
    assert Entry.objects.filter(session_id=sid).count() == 1


def test_usage_is_stored_and_free_form_values_keep_their_keys(api: APIClient) -> None:
    sid, root = _tree(api)
    usage = {
        "context_window": 200000,
        "context_tokens": 1200,
        "input_tokens": 1000,
        "output_tokens": 200,
    }
    made = api.post(
        f"{API}/sessions/{sid}/append/message",
        {
            "parent_id": root,
            "message": {"role": "assistant", "content": "a", "provider": "p", "model": "m"},
            "usage": usage,
        },
        format="json",
    )
    assert made.status_code == 201, made.content
    anchor = TreeStore().build_context(sid, made.json()["id"]).usage_anchor
    assert anchor is not None and anchor.usage.input_tokens == 1000
    custom = api.post(
        f"{API}/sessions/{sid}/append/custom",
        {"parent_id": made.json()["id"], "custom_type": "ext", "data": {"anything": 1}},
        format="json",
    )
    assert custom.status_code == 201, custom.content


def test_loop_steps_refuse_an_unknown_key(api: APIClient) -> None:
    loop = create_session(api, kind="loop", model="m")["id"]
    url = f"{API}/sessions/{loop}/steps"
    body = {"step_index": 0, "step_type": "user", "content": "hi", "tool_args": {"free": 1}}
    error = assert_error(
        api.post(url, {**body, "stepindex": 1}, format="json"), 400, "validation_error"
    )
    assert error["details"]["fields"] == {"stepindex": ["Unknown field."]}
    assert Step.objects.count() == 0
    assert api.post(url, body, format="json").status_code == 201


def test_log_appends_refuse_an_unknown_envelope_key_but_keep_the_entrys(api: APIClient) -> None:
    log = api.post(f"{API}/log-sessions", {"header": {}}, format="json").json()["id"]
    url = f"{API}/log-sessions/{log}/entries"
    entry = {"type": "info", "anything": {"kept": True}}
    error = assert_error(
        api.post(url, {"entry": entry, "parent": "x"}, format="json"), 400, "validation_error"
    )
    assert error["details"]["fields"] == {"parent": ["Unknown field."]}
    assert Entry.objects.filter(session_id=log).count() == 0
    assert api.post(url, {"entry": entry}, format="json").status_code == 201
    [stored] = api.get(f"{API}/log-sessions/{log}").json()["entries"]
    assert stored["data"]["anything"] == {"kept": True}
