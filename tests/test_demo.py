"""The demo project: its set-up command, home page and admin login."""

from __future__ import annotations

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from rest_framework.authtoken.models import Token

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
