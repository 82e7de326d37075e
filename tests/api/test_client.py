"""``agentstore.client`` against a live server: a whole agent conversation, and every error typed.

The server is a real uvicorn process on the test database (``tests.processes.serve``),
so the client speaks HTTP exactly as a client author's code would; nothing here
reaches into the server's process.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from rest_framework.authtoken.models import Token

from agentstore.client import (
    ApiError,
    BadRequest,
    Client,
    Conflict,
    NotFound,
    Unauthorized,
)
from tests.conftest import REPO_ROOT
from tests.processes import API, serve

pytestmark = pytest.mark.slow


@pytest.fixture
def client(test_database_url: str) -> Iterator[Client]:
    user = get_user_model().objects.create_user("agent", password="pw-agent-123")
    token = Token.objects.create(user=user).key
    with serve(test_database_url, "uvicorn") as port:
        yield Client(f"http://127.0.0.1:{port}{API}", token, timeout=30)


def test_a_whole_conversation_through_the_client(client: Client) -> None:
    session = client.create_session(cwd="/repo", name="chat")
    sid = session["id"]
    assert session["kind"] == "tree"
    assert client.session(sid)["name"] == "chat"
    assert sid in [s["id"] for s in client.sessions(kind="tree")]

    # A conversation: every append names its parent (None only for the root).
    turns = [
        ("user", "list the files"),
        ("assistant", "README.md and setup.py"),
        ("user", "open README.md"),
        ("assistant", "It says: hello"),
    ]
    parent: str | None = None
    ids = []
    for role, content in turns:
        entry = client.append_message(sid, parent, {"role": role, "content": content})
        assert entry["parent_id"] == parent and entry["type"] == "message"
        parent = entry["id"]
        ids.append(parent)

    context = client.context(sid)
    assert [(m["role"], m["content"]) for m in context["messages"]] == turns

    # Compaction: the first two turns become a summary, the last two are kept.
    compaction = client.append_compaction(
        sid, parent, "The user asked for the files.", "op-1", first_kept_entry_id=ids[2]
    )
    assert compaction["type"] == "compaction"
    # Replaying the operation returns the stored entry, not a second one.
    again = client.append_compaction(
        sid, parent, "The user asked for the files.", "op-1", first_kept_entry_id=ids[2]
    )
    assert again["id"] == compaction["id"]
    after = client.append_message(sid, compaction["id"], {"role": "user", "content": "thanks"})

    context = client.context(sid)
    contents = [m["content"] for m in context["messages"]]
    assert "list the files" not in contents  # compacted away
    assert contents[-3:] == ["open README.md", "It says: hello", "thanks"]
    assert any("The user asked for the files." in c for c in contents[:-3])
    # The context at an earlier entry is still the whole branch up to it.
    assert [m["content"] for m in client.context(sid, ids[1])["messages"]] == [
        "list the files",
        "README.md and setup.py",
    ]

    entries = list(client.entries(sid, limit=2))  # three pages of two
    assert [e["id"] for e in entries] == [*ids, compaction["id"], after["id"]]
    message = client.entry(sid, ids[0])["message"]
    assert message is not None
    assert (message["role"], message["content"]) == ("user", "list the files")

    # Follow: what is there comes first, then what is appended live, then the end.
    stream = client.follow(sid)
    seen = [next(stream) for _ in entries]
    assert [(e.event, e.data["id"]) for e in seen] == [("entry", e["id"]) for e in entries]
    assert [e.id for e in seen] == [str(n) for n in range(1, 7)]
    live = client.append_message(sid, after["id"], {"role": "assistant", "content": "welcome"})
    event = next(stream)
    assert (event.event, event.id, event.data["id"]) == ("entry", "7", live["id"])
    client.delete_session(sid)
    assert next(stream).event == "deleted"
    assert list(stream) == []
    with pytest.raises(NotFound):
        client.session(sid)


def test_errors_are_typed_from_the_one_error_shape(client: Client) -> None:
    with pytest.raises(NotFound) as missing:
        client.session("no-such-session")
    assert missing.value.status == 404
    assert missing.value.code and "no-such-session" in missing.value.message

    sid = client.create_session(cwd="/repo")["id"]
    with pytest.raises(BadRequest) as bad:
        client.append_message(sid, None, {"role": "user", "content": "x"}, display="maybe")
    assert bad.value.status == 400 and bad.value.details  # names the field, however it spells it
    assert "display" in str(bad.value.details)

    with pytest.raises(NotFound):
        list(client.follow("no-such-session"))  # before the stream starts: JSON, typed

    stranger = Client(client.base_url, "not-a-token")
    with pytest.raises(Unauthorized) as denied:
        stranger.session(sid)
    assert isinstance(denied.value, ApiError) and denied.value.code


def test_steps_log_lines_tasks_and_refs(client: Client) -> None:
    loop = client.create_session(kind="loop")["id"]
    client.append_step(loop, "user", "go", step_index=0)
    step = client.append_step(loop, "execute_js", "1+1", step_index=1, tool_args={"code": "1+1"})
    assert step["tool_args"] == {"code": "1+1"}
    assert [s["content"] for s in client.steps(loop)] == ["go", "1+1"]
    assert [s["content"] for s in client.last_steps(loop, 1)] == ["1+1"]
    followed = client.follow(loop)
    assert [(e.event, e.data["content"]) for e in (next(followed), next(followed))] == [
        ("step", "go"),
        ("step", "1+1"),
    ]
    followed.close()  # type: ignore[attr-defined]

    granted = client.grant(loop, "rm -rf build")
    assert granted["prompt"] == "rm -rf build" and granted["granted_at"]
    client.grant(loop, "ls")
    again = client.grant(loop, "rm -rf build")  # a replay: 200, the grant as stored now
    assert [g["prompt"] for g in client.grants(loop)] == ["ls", "rm -rf build"]
    assert list(client.grants(loop))[-1] == again
    assert client.is_granted(loop, "ls") and not client.is_granted(loop, "ls ")
    assert client.revoke_grants(loop) == 2 and list(client.grants(loop)) == []

    log = client.create_log_session({"cwd": "/repo"})
    line_id = client.append_line(log["id"], {"type": "info", "name": "first"})
    assert client.log_session(log["id"])["leaf"] == line_id
    lines = client.follow(log["id"])
    first = next(lines)
    assert (first.event, first.id, first.data["id"]) == ("line", "1", line_id)
    lines.close()  # type: ignore[attr-defined]

    task = client.create_task("build", loop)
    assert task["state"] == "queued"
    claimed = client.claim_task(task["id"], "worker-1", 60)
    assert (claimed["state"], claimed["lease_owner"]) == ("running", "worker-1")
    with pytest.raises(Conflict) as taken:
        client.claim_task(task["id"], "worker-2", 60)
    assert taken.value.details  # the task as it is now
    done = client.finish_task(task["id"], "worker-1", "succeeded", result="ok")
    assert (done["state"], done["result"]) == ("succeeded", "ok")
    assert client.task(task["id"])["state"] == "succeeded"
    assert len(list(client.task_events(task["id"]))) >= 2

    target = {"session": log["id"], "entry": line_id}
    client.update_ref("notes/main", None, target, reason="start")
    assert client.ref("notes/main") == target
    assert "notes/main" in [r["name"] for r in client.refs("notes/")]
    with pytest.raises(Conflict) as moved:
        client.update_ref("notes/main", None, target)  # expected "absent", but it exists
    assert moved.value.details


def test_the_documented_example_runs(client: Client, capsys: Any) -> None:
    """The example of docs/api.md, "Python client", as written, against the live server."""
    text = (REPO_ROOT / "docs" / "api.md").read_text()
    section = text[text.index("### Python client") :]
    code = section[section.index("```python\n") + len("```python\n") :]
    code = code[: code.index("```")]
    opening = 'Client("http://127.0.0.1:8000/api/v1", token="…")'
    assert opening in code
    code = code.replace(opening, f"Client({client.base_url!r}, token={client.token!r})")
    exec(compile(code, "docs/api.md", "exec"), {})  # noqa: S102 (our own documentation)
    out = capsys.readouterr().out.splitlines()
    assert "The user asked for the files." in out[0] and "thanks" in out[0]
    assert "list the files" not in out[0]
    assert out[1] == "1 entry message"
    assert out[2].startswith("404 ") and "no-such-session" in out[2]
