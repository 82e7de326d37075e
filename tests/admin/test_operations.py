"""Admin operations call the stores and repositories and say what they did."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.contrib.messages import get_messages
from django.http import HttpResponse
from django.test import Client
from django.urls import reverse

from agentstore import exceptions
from agentstore.models import Document, Entry, Grant, Holder, Session, Step, Task
from agentstore.stores.documents import DocumentStore
from agentstore.stores.log import LogStore
from agentstore.tasks import TaskRepository, ToolTaskRepository
from agentstore.types import DocumentEntity
from tests.admin.seed import World

pytestmark = pytest.mark.django_db


def said(response: HttpResponse) -> list[str]:
    return [str(m) for m in get_messages(response.wsgi_request)]


YES = {"confirm": "yes"}


def action(
    client: Client, model: str, name: str, ids: list[str], *, confirm: bool = True
) -> HttpResponse:
    return client.post(
        reverse(f"admin:agentstore_{model}_changelist"),
        {"action": name, "_selected_action": ids, **(YES if confirm else {})},
        follow=True,
    )


def test_break_lock_asks_first_and_says_what_will_happen(
    admin_client: Client, world: World
) -> None:
    url = reverse("admin:agentstore_session_break_lock", args=[world.tree_id])
    page = admin_client.post(url).content.decode()
    assert 'id="confirm"' in page and "SessionLocked" in page
    assert "pid 4242 on build-7" in page
    assert Holder.objects.filter(session_id=world.tree_id).exists()  # nothing happened yet
    assert 'name="confirm" value="yes"' in page


def test_unconfirmed_actions_change_nothing(admin_client: Client, world: World) -> None:
    grant = Grant.objects.get(session_id=world.loop_id)
    page = action(admin_client, "grant", "revoke_sessions", [str(grant.pk)], confirm=False)
    assert "asks again" in page.content.decode() and Grant.objects.exists()
    page = action(
        admin_client, "task", "recover_selected_kinds", [world.tool_task_id], confirm=False
    )
    html = page.content.decode()
    assert world.tool_task_id in html and "interrupted" in html
    assert TaskRepository().get(world.tool_task_id).state == "running"  # type: ignore[union-attr]
    page = admin_client.post(reverse("admin:agentstore_task_recover_expired"))
    assert world.tool_task_id in page.content.decode()
    page = admin_client.post(reverse("admin:agentstore_session_grants", args=[world.loop_id]))
    assert "Allow fetch from api.example.com?" in page.content.decode() and Grant.objects.exists()


def test_holds_page_explains_holds_when_there_are_none(admin_client: Client, db: None) -> None:
    page = admin_client.get(reverse("admin:agentstore_holder_changelist")).content.decode()
    assert "No session is held right now." in page and "SessionLocked" in page


def test_break_lock_from_the_session_page(admin_client: Client, world: World) -> None:
    response = admin_client.post(
        reverse("admin:agentstore_session_break_lock", args=[world.tree_id]), YES, follow=True
    )
    assert not Holder.objects.filter(session_id=world.tree_id).exists()
    assert any("Broke the hold of pid 4242 on build-7" in m for m in said(response))
    assert "Not held." in response.content.decode()
    # Breaking again is harmless and says so.
    again = admin_client.post(
        reverse("admin:agentstore_session_break_lock", args=[world.tree_id]), YES, follow=True
    )
    assert any("was not held" in m for m in said(again))


def test_break_lock_makes_a_log_store_holder_fail(admin_client: Client, db: None) -> None:
    writer = LogStore()
    session = writer.create({"id": "held-log", "cwd": "/repo"})
    assert LogStore().lock_holder(session.id).pid == writer.pid  # type: ignore[union-attr]
    response = action(admin_client, "holder", "break_locks", [session.id])
    assert any("Broke the hold" in m for m in said(response))
    with pytest.raises(exceptions.SessionLocked, match="lost"):
        writer.append(session.id, {"type": "info", "name": "late"})


def test_break_lock_needs_the_change_permission(client: Client, world: World) -> None:
    viewer = User.objects.create_user("viewer", password="pw", is_staff=True)
    viewer.user_permissions.add(
        *Permission.objects.filter(codename__in=["view_session", "view_holder", "view_task"])
    )
    client.force_login(viewer)
    page = client.get(reverse("admin:agentstore_session_change", args=[world.tree_id]))
    assert page.status_code == 200 and 'id="break-lock"' not in page.content.decode()
    post = client.post(reverse("admin:agentstore_session_break_lock", args=[world.tree_id]), YES)
    assert post.status_code == 404
    assert Holder.objects.filter(session_id=world.tree_id).exists()
    tasks = client.get(reverse("admin:agentstore_task_changelist")).content.decode()
    assert "cancel_selected" not in tasks and 'id="recover-expired"' not in tasks


def test_revoke_grants_through_the_loop_store(admin_client: Client, world: World) -> None:
    response = admin_client.post(
        reverse("admin:agentstore_session_grants", args=[world.loop_id]), YES, follow=True
    )
    assert not Grant.objects.filter(session_id=world.loop_id).exists()
    assert f"Revoked 1 grant(s) of session {world.loop_id}." in said(response)


def test_revoke_action_on_grants(admin_client: Client, world: World) -> None:
    grant = Grant.objects.get(session_id=world.loop_id)
    response = action(admin_client, "grant", "revoke_sessions", [str(grant.pk)])
    assert "Revoked 1 grant(s) of 1 session(s) through LoopStore." in said(response)
    assert not Grant.objects.exists()


def test_delete_sessions_through_their_stores(admin_client: Client, world: World) -> None:
    log = LogStore()
    log.create({"id": "log-1", "cwd": "/repo"})
    log.close()
    response = action(
        admin_client, "session", "delete_through_store", [world.tree_id, world.loop_id, "log-1"]
    )
    assert "Deleted 3 session(s) through their stores." in said(response)
    assert not Session.objects.filter(pk__in=[world.tree_id, world.loop_id, "log-1"]).exists()
    assert not Entry.objects.filter(session_id=world.tree_id).exists()
    # The loop store purges steps *and* grants (no foreign key on grants).
    assert not Step.objects.exists() and not Grant.objects.exists()
    # Child sessions survive their parent; the owned tasks went with the owner session.
    assert Session.objects.filter(parent_session=world.tree_id).count() == 2
    assert not Task.objects.filter(owner_session_id=world.tree_id).exists()


def test_cancel_action(admin_client: Client, world: World) -> None:
    response = action(
        admin_client,
        "task",
        "cancel_selected",
        [world.queued_tool_task_id, world.tool_task_id, world.agent_task_id],
    )
    messages = said(response)
    assert f"Task {world.queued_tool_task_id}: queued → canceled." in messages
    assert f"Task {world.tool_task_id}: running → canceling." in messages
    assert f"Task {world.agent_task_id}: queued → canceled." in messages
    tool = ToolTaskRepository().get(world.queued_tool_task_id)
    assert tool is not None and "task canceled" in (tool.outcome_json or "")
    kinds = [e.event.kind for e in TaskRepository().list_events(world.agent_task_id)]
    assert kinds == ["task_queued", "task_canceled"]
    # Cancelling again changes nothing, and says so.
    again = action(admin_client, "task", "cancel_selected", [world.agent_task_id])
    assert f"Task {world.agent_task_id} is canceled: nothing to cancel." in said(again)


def test_cancel_button_on_the_task_page(admin_client: Client, world: World) -> None:
    page = admin_client.get(reverse("admin:agentstore_task_change", args=[world.agent_task_id]))
    html = page.content.decode()
    assert 'id="cancel-task"' in html
    assert html.index('id="cancel-task"') < html.index('id="task_form"')
    response = admin_client.post(
        reverse("admin:agentstore_task_cancel", args=[world.agent_task_id]), follow=True
    )
    assert f"Task {world.agent_task_id}: queued → canceled." in said(response)


def test_recover_expired_leases(admin_client: Client, world: World) -> None:
    response = admin_client.post(reverse("admin:agentstore_task_recover_expired"), YES, follow=True)
    assert f"Recovered 1 expired task(s) (tool): {world.tool_task_id}." in said(response)
    task = TaskRepository().get(world.tool_task_id)
    assert task is not None and task.state == "interrupted" and task.error_code == "lease_expired"
    again = admin_client.post(reverse("admin:agentstore_task_recover_expired"), YES, follow=True)
    assert "No expired leases to recover (no kinds)." in said(again)


def test_recover_action_covers_the_selected_kinds(admin_client: Client, world: World) -> None:
    response = action(admin_client, "task", "recover_selected_kinds", [world.agent_task_id])
    assert "No expired leases to recover (agent)." in said(response)
    assert TaskRepository().get(world.tool_task_id).state == "running"  # type: ignore[union-attr]
    response = action(admin_client, "task", "recover_selected_kinds", [world.queued_tool_task_id])
    assert any(world.tool_task_id in m for m in said(response))


def test_recover_is_post_only(admin_client: Client, world: World) -> None:
    assert admin_client.get(reverse("admin:agentstore_task_recover_expired")).status_code == 405


def test_delete_documents_through_the_store(admin_client: Client, db: None) -> None:
    store = DocumentStore()
    store.put(DocumentEntity(namespace="ns", key="k", value_json='{"a": 1}'))
    pk = str(Document.objects.get(namespace="ns", key="k").pk)
    response = action(admin_client, "document", "delete_through_store", [pk])
    assert "Deleted 1 document(s)." in said(response)
    assert store.get("ns", "k") is None
