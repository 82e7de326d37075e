"""The demo project: its set-up command, home page and admin login."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import timedelta
from io import StringIO
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import connection
from django.test import Client
from rest_framework.authtoken.models import Token

from agentstore.stores.checkpoints import TOUCH_EVERY
from agentstore.stores.log import HEARTBEAT_EVERY
from tests.conftest import REPO_ROOT, database_url_of_test_db

pytestmark = pytest.mark.django_db


def test_demo_setup_creates_a_superuser_and_prints_its_credentials() -> None:
    out = StringIO()
    call_command("demo_setup", stdout=out)

    user = get_user_model().objects.get(username="demo")
    assert user.is_superuser and user.is_staff
    assert user.check_password("agentstore-demo")
    text = out.getvalue()
    assert "username:  demo" in text
    assert "password:  agentstore-demo" in text
    assert f"API token: {Token.objects.get(user=user).key}" in text
    assert "start-run weather" in text  # how to try the demo's runner


def test_demo_setup_can_run_twice() -> None:
    call_command("demo_setup", stdout=StringIO())
    out = StringIO()
    call_command("demo_setup", stdout=out)

    assert get_user_model().objects.filter(username="demo").count() == 1
    assert "Reset demo superuser" in out.getvalue()


def test_home_and_admin_login_are_served(client: Client) -> None:
    assert client.get("/").status_code == 200
    response = client.get("/admin/login/")
    assert response.status_code == 200
    assert b"Username" in response.content

    call_command("demo_setup", stdout=StringIO())
    assert client.login(username="demo", password="agentstore-demo")
    assert client.get("/admin/").status_code == 200


def test_demo_setup_seeds_data_through_the_stores_once() -> None:
    from agentstore.demo import tree
    from agentstore.models import Entry, MessagePart, Session, Step
    from agentstore.stores import LoopStore, TreeStore

    call_command("demo_setup", stdout=StringIO())
    call_command("demo_setup", stdout=StringIO())

    session = Session.objects.get(kind="tree", name=tree.NAME)
    assert session.owner is not None and session.owner.username == "demo"
    entries = Entry.objects.filter(session=session)
    assert entries.filter(type="compaction").count() == 1
    assert entries.filter(type="branch_summary").count() == 1
    assert MessagePart.objects.filter(entry__session=session, type="image").count() == 1
    store = TreeStore()
    assert len(store.list_child_sessions(session.id)) == 1
    # Two branches: more than one childless entry.
    parents = set(entries.exclude(parent_id=None).values_list("parent_id", flat=True))
    leaves = entries.exclude(entry_id__in=parents)
    assert leaves.count() >= 2
    loop = LoopStore()
    assert Step.objects.filter(session_id="demo-loop-weather").count() == 7
    assert loop.grants("demo-loop-weather")


# -- the integrations' conversations, and dates within each session -------------------


@pytest.fixture
def _integration_connections() -> Iterator[None]:
    """Close the connections the integrations keep on their own (PostgreSQL drops the DB)."""
    yield
    from agentstore.db import thread as db_thread
    from agentstore.integrations.langgraph import close_connections

    db_thread.close_connections()
    close_connections()


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("_integration_connections")
def test_demo_seeds_a_conversation_of_each_integration_through_its_own_api() -> None:
    from langchain_core.messages import AIMessage, ToolMessage
    from pydantic_ai.messages import ToolReturnPart

    from agentstore.demo import integrations as demo
    from agentstore.integrations.langgraph import AgentStoreSaver
    from agentstore.integrations.openai_agents import AgentStoreSession
    from agentstore.integrations.pydantic_ai import MessageHistory
    from agentstore.models import Session

    out = StringIO()
    call_command("demo_setup", stdout=out)
    user = get_user_model().objects.get(username="demo")
    for sid in (demo.OPENAI_AGENTS_ID, demo.PYDANTIC_AI_ID, demo.LANGGRAPH_ID):
        assert sid in out.getvalue()
        assert Session.objects.get(pk=sid).owner == user

    # The SDK's own view of its session: two turns, each a question, a tool call,
    # its output and an answer.
    items: list[Any] = list(AgentStoreSession(demo.OPENAI_AGENTS_ID).get_items_sync())
    assert [item.get("type", "user input") for item in items] == [
        "user input",
        "function_call",
        "function_call_output",
        "message",
    ] * 2
    assert items[0] == {"role": "user", "content": demo.QUESTIONS[0]}
    assert items[2]["output"] == demo.WEATHER["Lisbon"]
    header = json.loads(Session.objects.get(pk=demo.OPENAI_AGENTS_ID).header)
    assert header["harness"]["name"] == "openai-agents"

    messages = MessageHistory(demo.PYDANTIC_AI_ID).load()
    assert len(messages) == 8
    returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
    assert [r.content for r in returns] == [demo.WEATHER["Lisbon"], demo.WEATHER["Oslo"]]

    thread = Session.objects.get(pk=demo.LANGGRAPH_ID)
    assert (thread.kind, thread.name) == ("graph", demo.LANGGRAPH_NAME)
    state = AgentStoreSaver().get_tuple({"configurable": {"thread_id": demo.LANGGRAPH_ID}})
    assert state is not None
    said = state.checkpoint["channel_values"]["messages"]
    assert [type(m) for m in said[-2:]] == [ToolMessage, AIMessage]
    assert said[-1].content == demo.answer(demo.WEATHER["Oslo"])

    again = StringIO()
    call_command("demo_setup", stdout=again)  # kept, not written twice
    assert "Kept LangGraph thread" in again.getvalue()
    assert len(AgentStoreSession(demo.OPENAI_AGENTS_ID).get_items_sync()) == 8


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("_integration_connections")
def test_every_demo_item_is_dated_within_its_sessions_lifetime() -> None:
    from agentstore.demo import loop
    from agentstore.models import Checkpoint, Entry, Session, Step

    call_command("demo_setup", stdout=StringIO())
    kinds = set()
    for session in Session.objects.all():
        kinds.add(session.kind)
        # A log session's and a LangGraph thread's updated_at move at most once
        # a second (log.HEARTBEAT_EVERY, decision records 0031 and 0021; checkpoints.TOUCH_EVERY).
        slack = {"log": HEARTBEAT_EVERY, "graph": timedelta(seconds=TOUCH_EVERY)}.get(
            session.kind, timedelta(0)
        )
        for model in (Entry, Step, Checkpoint):
            for stamp in model.objects.filter(session_id=session.id).values_list(
                "created_at", flat=True
            ):
                assert session.created_at <= stamp <= session.updated_at + slack, (
                    session.id,
                    model,
                )
    assert kinds == {"tree", "loop", "log", "graph"}
    run = Session.objects.get(pk=loop.SESSION_ID)
    assert (run.name, run.model) == (loop.NAME, loop.MODEL)
    assert run.system_prompt and run.owner is not None


def test_an_integration_that_is_not_installed_is_skipped_with_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from agentstore.demo import integrations

    monkeypatch.setattr(integrations, "find_spec", lambda name: None)
    lines = integrations.seed(None)
    assert lines == [
        'Skipped the OpenAI Agents SDK session: pip install "agentstore[openai-agents]" to seed it',
        'Skipped the Pydantic AI conversation: pip install "agentstore[pydantic-ai]" to seed it',
        'Skipped the LangGraph thread: pip install "agentstore[langgraph]" to seed it',
    ]


# -- the demo's database: created when missing, or one line saying what to do ----------


def _demo_database(database_url: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": database_url, "DJANGO_SETTINGS_MODULE": "project.settings"}
    return subprocess.run(
        [sys.executable, "manage.py", "demo_database"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _server_url(name: str, user: str = "") -> str:
    """A DATABASE_URL on the test database's PostgreSQL server, naming database ``name``."""
    base, _, _ = database_url_of_test_db().rpartition("/")
    if user:
        base = "postgres://" + user + "@" + base.split("@", 1)[1]
    return f"{base}/{name}"


def _drop(name: str) -> None:
    with connection.cursor() as cursor:
        cursor.execute(f'DROP DATABASE IF EXISTS "{name}"')


def test_scripts_demo_makes_sure_of_the_database_before_migrating() -> None:
    script = (REPO_ROOT / "scripts" / "demo").read_text()
    assert script.index("manage.py demo_database") < script.index("manage.py migrate")


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_missing_postgresql_database_is_created() -> None:
    name = f"agentstore_demo_{uuid.uuid4().hex[:12]}"
    try:
        made = _demo_database(_server_url(name))
        assert made.returncode == 0, made.stderr
        assert (
            made.stdout.strip()
            == f"Created PostgreSQL database {name!r} on "
            + (made.stdout.strip().rsplit(" on ", 1)[1])
        )
        again = _demo_database(_server_url(name))
        assert again.returncode == 0 and again.stdout.strip().endswith(": exists")
    finally:
        _drop(name)


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_user_who_cannot_create_it_gets_one_line_saying_what_to_do() -> None:
    role = f"agentstore_nocreate_{uuid.uuid4().hex[:8]}"
    name = f"agentstore_demo_{uuid.uuid4().hex[:12]}"
    with connection.cursor() as cursor:
        cursor.execute(f'CREATE ROLE "{role}" LOGIN NOCREATEDB')
    try:
        refused = _demo_database(_server_url(name, user=role))
    finally:
        with connection.cursor() as cursor:
            cursor.execute(f'DROP ROLE "{role}"')
    assert refused.returncode == 1
    assert refused.stdout == ""
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in refused.stderr, refused.stderr
    assert f"PostgreSQL database {name!r} does not exist" in lines[0]
    assert f"{role} cannot create it" in lines[0] and "createdb" in lines[0]


def test_an_unreachable_postgresql_server_gets_one_line_saying_what_to_do() -> None:
    with socket.socket() as sock:  # a loopback port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        failed = _demo_database(f"postgres://postgres@127.0.0.1:{port}/nonexistent")
    assert failed.returncode == 1
    lines = failed.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in failed.stderr, failed.stderr
    assert f"cannot connect to PostgreSQL on 127.0.0.1:{port} as postgres" in lines[0]
    assert "Start the server or fix DATABASE_URL" in lines[0]
