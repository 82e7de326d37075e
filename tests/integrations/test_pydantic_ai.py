"""MessageHistory: Pydantic AI's message_history kept in an agentstore log session.

Runs real Pydantic AI agents offline (``FunctionModel``, ``TestModel``).
Transactional: the async variants do their database work in another thread.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

import pytest
from django.contrib.auth.models import User
from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel

from agentstore import exceptions
from agentstore.integrations.pydantic_ai import ENTRY_TYPE, HARNESS, MessageHistory
from agentstore.models import Entry
from agentstore.models import Session as SessionRow
from agentstore.stores import LogStore
from tests.conftest import REPO_ROOT
from tests.integrations.pydantic_fakes import weather_agent

pytestmark = pytest.mark.django_db(transaction=True)


def stored(session_id: str) -> int:
    return Entry.objects.filter(session_id=session_id, type=ENTRY_TYPE).count()


def test_test_model_run_round_trips_exactly() -> None:
    agent: Agent[None, str] = Agent(TestModel(), instructions="Be brief.")

    @agent.tool_plain
    def lookup(key: str, n: int = 3) -> dict[str, object]:
        """Look something up."""
        return {"key": key, "values": list(range(n)), "ratio": 0.25, "text": "é ☀"}

    history = MessageHistory("tm")
    assert history.load() == []
    result = agent.run_sync("Hello", message_history=history.load())
    assert history.save(result) == len(result.new_messages()) == 4
    history.close()
    # Another object with its own store (a restarted process, in effect).
    again = MessageHistory("tm", store=LogStore())
    assert again.load() == result.all_messages()
    assert again.load(limit=2) == result.all_messages()[-2:]
    row = SessionRow.objects.get(pk="tm")
    assert row.kind == "log" and f'"name":"{HARNESS}"' in row.header
    LogStore().read("tm").verify()


def test_a_conversation_continues_with_its_history() -> None:
    seen: list[int] = []
    first = MessageHistory("chat")
    result = weather_agent(seen).run_sync("Weather in Paris?", message_history=first.load())
    first.save(result)
    first.close()
    second = MessageHistory("chat", store=LogStore())
    result = weather_agent(seen).run_sync("Weather in Oslo?", message_history=second.load())
    assert result.output == "The weather: snow, -3°C."
    assert seen == [1, 3, 5, 7]  # the second run was sent the first run's four messages
    assert second.save(result) == 4
    second.close()
    assert stored("chat") == 8
    assert MessageHistory("chat").load() == result.all_messages()


def test_async_load_and_save() -> None:
    seen: list[int] = []

    async def main() -> str:
        async with MessageHistory("async-chat") as history:
            result = await weather_agent(seen).run(
                "Weather in Paris?", message_history=await history.aload()
            )
            await history.asave(result.new_messages())
            return result.output

    assert asyncio.run(main()) == "The weather: sunny, 21°C."
    assert stored("async-chat") == 4


def test_a_save_after_someone_else_saved_is_refused() -> None:
    seen: list[int] = []
    mine = MessageHistory("race")
    theirs = MessageHistory("race")
    history = mine.load()
    theirs.save(weather_agent(seen).run_sync("Weather in Oslo?", message_history=theirs.load()))
    theirs.close()
    result = weather_agent(seen).run_sync("Weather in Paris?", message_history=history)
    with pytest.raises(exceptions.ConcurrentWriter):
        mine.save(result)
    assert stored("race") == 4
    mine.close()


def test_owner_scopes_the_history() -> None:
    alice = User.objects.create_user("alice")
    bob = User.objects.create_user("bob")
    seen: list[int] = []
    history = MessageHistory("owned-chat", owner=alice)
    history.save(weather_agent(seen).run_sync("Weather in Paris?"))
    history.close()
    assert SessionRow.objects.get(pk="owned-chat").owner_id == alice.pk
    with pytest.raises(exceptions.NoSession):
        MessageHistory("owned-chat", owner=bob).load()


@pytest.mark.slow
def test_history_survives_process_restarts(test_database_url: str) -> None:
    env = {**os.environ, "DATABASE_URL": test_database_url}
    results = []
    for prompt in ("Weather in Paris?", "Weather in Oslo?"):
        done = subprocess.run(
            [sys.executable, "-m", "tests.workers.pydantic_ai_turn", "--session", "p"]
            + ["--prompt", prompt],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    assert [r["output"] for r in results] == [
        "The weather: sunny, 21°C.",
        "The weather: snow, -3°C.",
    ]
    assert [r["seen"] for r in results] == [[1, 3], [5, 7]]
    assert stored("p") == 8
    LogStore().read("p").verify()
