"""Many conversations, each served turn after turn by whichever gunicorn worker gets it.

The SDK's documented use is one session object per conversation, never
closed; a server has one in every worker process that ever served the
conversation (``tests/workers/sdk_turn_urls.py``). gunicorn runs 4 gthread
workers; 200 conversations take 10 turns each, a conversation's turns one
after another (a user waits for the answer) and the conversations at once,
each request on a new connection so the kernel hands it to any worker.

Every turn must succeed — no ``SessionLocked``, no ``ConcurrentWriter`` —
the model must see the whole history each time (it can only come from the
database, whoever wrote it), and each conversation must hold every item
once, in order, with a chain that verifies.
"""

from __future__ import annotations

import http.client
import json
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from agentstore.integrations.openai_agents import AgentStoreSession
from agentstore.models import Holder
from agentstore.stores import LogStore
from tests.processes import Launcher

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

CONVERSATIONS = 200
TURNS = 10
CITIES = ("Paris", "Oslo", "Rome", "Lima", "Pune")
#: Items one turn adds: the user's message, the tool call, its output, the answer.
PER_TURN = 4


def post(port: int, conversation: str, prompt: str) -> tuple[int, dict[str, Any]]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request(
            "POST",
            f"/turn/{conversation}",
            body=json.dumps({"prompt": prompt}),
            headers={"Content-Type": "application/json", "Connection": "close"},
        )
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


def test_objects_never_closed_in_four_workers_serve_every_turn(test_database_url: str) -> None:
    settings = {"DJANGO_SETTINGS_MODULE": "tests.workers.sdk_turn_settings"}
    with Launcher(test_database_url, env=settings) as launcher:
        server = launcher.spawn(
            "-m", "tests.workers.server", "--kind", "gunicorn",
            "--database-url", test_database_url, "--workers", "4", "--threads", "4",
        )  # fmt: skip
        port = launcher.read_line(server)["port"]
        launcher.release()

        def conversation(number: int) -> list[tuple[int, dict[str, Any]]]:
            name = f"conv-{number}"
            return [
                post(port, name, f"Weather in {CITIES[(number + turn) % len(CITIES)]}?")
                for turn in range(TURNS)
            ]

        with ThreadPoolExecutor(max_workers=8) as pool:
            answers = list(pool.map(conversation, range(CONVERSATIONS)))

    failures = [a for turns in answers for a in turns if a[0] != 200]
    assert failures == [], failures[:5]
    servers: dict[int, set[int]] = defaultdict(set)
    for number, turns in enumerate(answers):
        for turn, (_status, body) in enumerate(turns):
            # The model's first call saw every earlier item and the new message.
            assert body["seen"] == PER_TURN * turn + 1, (number, turn, body)
            servers[number].add(body["pid"])
    # The kernel spread the turns: conversations moved between worker processes.
    assert len(set().union(*servers.values())) == 4
    assert sum(len(pids) > 1 for pids in servers.values()) > CONVERSATIONS // 2

    assert not Holder.objects.exists()  # no object kept a hold
    store = LogStore()
    for number in range(CONVERSATIONS):
        name = f"conv-{number}"
        items = AgentStoreSession(name).get_items_sync()
        assert len(items) == PER_TURN * TURNS, name
        users = [i["content"] for i in items if i.get("role") == "user"]
        expected = [f"Weather in {CITIES[(number + t) % len(CITIES)]}?" for t in range(TURNS)]
        assert users == expected, name  # each turn's message once, in order
        session = store.read(name)
        session.verify()
        assert len(session.entries) == PER_TURN * TURNS  # nothing stored twice
