"""The OpenAI Agents SDK across real OS processes (``tests/workers/openai_agents_turn.py``).

* a three-turn conversation with tool calls, each turn a new interpreter: the
  model sees the whole history (it can only come from the database), the items
  are stored in order, the admin shows the session, the command exports it as
  agentsession JSONL that verifies;
* processes writing different conversations at once all succeed; two writing
  the same conversation are serialised or refused (``SessionLocked``, or
  ``ConcurrentWriter`` for a turn computed from history that moved on), never
  interleaved.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from agentstore.formats.agentsession import loads
from agentstore.integrations.openai_agents import AgentStoreSession
from agentstore.stores import LogStore
from tests.conftest import REPO_ROOT
from tests.processes import run_together

pytestmark = pytest.mark.slow

WORKER = ["-m", "tests.workers.openai_agents_turn"]


def turn(database_url: str, session: str, prompt: str, owner: str = "") -> dict[str, Any]:
    """Run one turn in a fresh interpreter and return its JSON result."""
    env = {**os.environ, "DATABASE_URL": database_url, "DJANGO_SETTINGS_MODULE": "project.settings"}
    args = [sys.executable, *WORKER, "--session", session, "--prompt", prompt]
    if owner:
        args += ["--owner", owner]
    done = subprocess.run(args, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    import json

    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_a_conversation_survives_process_restarts(test_database_url: str) -> None:
    alice = User.objects.create_user("alice")
    results = [
        turn(test_database_url, "restarts", f"Weather in {city}?", owner="alice")
        for city in ("Paris", "Oslo", "Rome")
    ]
    assert [r["output"] for r in results] == [
        "The weather: sunny, 21°C.",
        "The weather: snow, -3°C.",
        "The weather: fog, 9°C.",
    ]
    # Each new process's model saw every earlier item: history came from the database.
    assert [r["inputs"] for r in results] == [[1, 3], [5, 7], [9, 11]]
    assert len({r["pid"] for r in results}) == 3

    items = AgentStoreSession("restarts", owner=alice).get_items_sync()
    assert [i.get("type") for i in items] == [
        None,
        "function_call",
        "function_call_output",
        "message",
    ] * 3
    assert [i["content"] for i in items[::4]] == [
        "Weather in Paris?",
        "Weather in Oslo?",
        "Weather in Rome?",
    ]
    assert [i["call_id"] for i in items[1::4]] == ["call_1", "call_5", "call_9"]
    assert items[10]["output"] == "fog, 9°C"
    assert LogStore().lock_holder("restarts") is None  # every turn let go of its hold

    # The admin shows the session and its conversation.
    admin = User.objects.create_superuser("root", password="pw")
    client = Client()
    client.force_login(admin)
    page = client.get(reverse("admin:agentstore_session_change", args=["restarts"]))
    assert page.status_code == 200
    html = page.content.decode()
    assert "restarts" in html and "alice" in html
    tree = client.get(reverse("admin:agentstore_session_tree", args=["restarts"]))
    assert tree.status_code == 200
    tree_html = tree.content.decode()
    assert "Weather in Oslo?" in tree_html and "get_weather" in tree_html

    # The command exports agentsession JSONL, byte for byte the store's, and it verifies.
    out = io.StringIO()
    call_command("agentstore", "export", "restarts", "--format", "agentsession", stdout=out)
    text = out.getvalue()
    assert text == LogStore().export_jsonl("restarts")
    exported = loads(text)
    exported.verify()
    assert len(exported) == 12
    assert [e.data["item"].get("call_id") for e in exported.entries][1:3] == ["call_1", "call_1"]


def test_processes_on_different_sessions_and_one_shared_session(test_database_url: str) -> None:
    sessions = ["own-0", "own-1", "own-2", "shared", "shared"]
    commands = [
        [*WORKER, "--session", sid, "--prompt", f"Weather in City{i}?"]
        for i, sid in enumerate(sessions)
    ]
    results = run_together(test_database_url, commands)
    for result, sid in zip(results[:3], sessions[:3], strict=True):
        assert result["output"] == "The weather: fog, 9°C.", result
        assert len(AgentStoreSession(sid).get_items_sync()) == 4
    shared = results[3:]
    done = [r for r in shared if "output" in r]
    refused = [r for r in shared if "error" in r]
    assert done, shared  # at least one writer got the conversation
    assert all(r["error"] in ("session_locked", "concurrent_writer") for r in refused), refused
    # Serialised turns each saw everything stored before it; nothing interleaved. The SDK
    # stores a turn's input before the turn, so a process refused at its turn's save
    # (another wrote meanwhile) may leave its user message behind: a lone message,
    # never inside another turn.
    items = AgentStoreSession("shared").get_items_sync()
    kinds = [i.get("type") for i in items]
    calls = [k for k, kind in enumerate(kinds) if kind == "function_call"]
    assert len(calls) == len(done), kinds
    for k in calls:
        assert kinds[k - 1] is None and kinds[k + 1 : k + 3] == ["function_call_output", "message"]
    assert sorted(r["inputs"] for r in done) == [[k, k + 2] for k in calls]
    lone = len(items) - 4 * len(done)
    assert 0 <= lone <= len(refused), kinds
    assert kinds.count(None) == len(done) + lone  # the lone ones are user messages
    LogStore().read("shared").verify()
