"""``agentstore show`` for every kind, and short ids from any output accepted back."""

from __future__ import annotations

import json

import pytest
from django.core.management.base import CommandError

from agentstore.demo import log as demo_log
from agentstore.exceptions import ValidationError
from agentstore.ids import short_id
from agentstore.models import Entry, Session, Task
from agentstore.selectors.short_ids import resolve
from agentstore.stores import LoopStore, TreeStore
from agentstore.types import MessageEntity, RunStep
from tests.commands.test_agentstore_command import fails, run

pytestmark = pytest.mark.django_db


def test_show_log_session_reads_like_a_conversation() -> None:
    demo_log.seed(None)
    out, _ = run("show", demo_log.SESSION_ID)
    assert "user: Plan one day in Lisbon." in out
    assert 'get_weather({"city":"Lisbon","day":"Saturday"}) [call_weather]' in out
    assert "[call_weather] → Sunny, 24 °C" in out
    assert "hash verified" in out and "hash not recorded" in out
    assert "LEAF" in out and '{"type"' not in out  # no raw JSON lines


def test_show_log_context_at_a_short_entry_id() -> None:
    demo_log.seed(None)
    question = Entry.objects.get(session_id=demo_log.SESSION_ID, seq=2).entry_id
    document = json.loads(
        run("show", demo_log.SESSION_ID, "--leaf", short_id(question), "--json")[0]
    )
    assert document["context"]["entry_id"] == question
    assert [i["summary"] for i in document["context"]["items"]] == ["user: Plan one day in Lisbon."]


def test_show_loop_session_has_model_and_totals() -> None:
    store = LoopStore()
    store.append(RunStep(session_id="loop-s", step_index=0, step_type="user", content="hi"))
    Session.objects.filter(pk="loop-s").update(model="gpt-5", prompt_tokens=12)
    out, _ = run("show", "loop-s")
    assert "model           gpt-5" in out and "prompt_tokens   12" in out


def test_short_session_ids_resolve_by_tail_and_head() -> None:
    store = TreeStore()
    # UUIDv7s made in one millisecond share their head: the tail tells them apart.
    a, b = store.create_session("/r").id, store.create_session("/r").id
    assert a[:8] == b[:8] and short_id(a) != short_id(b)
    store.append_message(a, None, MessageEntity(role="user", content="only in a"))
    out, _ = run("show", short_id(a))
    assert "only in a" in out
    assert resolve(Session.objects.all(), "id", short_id(b)) == b
    with pytest.raises(ValidationError, match="ambiguous"):  # the shared head names both
        resolve(Session.objects.all(), "id", a[:8])
    fails("show", "zzzzzzzzzzzz")


def test_ambiguous_short_id_names_the_candidates() -> None:
    for sid in ("abcdef-one", "abcdef-two"):
        LoopStore().append(RunStep(session_id=sid, step_index=0, step_type="user"))
    message = fails("show", "abcdef")
    assert "ambiguous" in message and "abcdef-one" in message and "abcdef-two" in message


def test_task_accepts_its_short_id() -> None:
    from agentstore.tasks import TaskRepository
    from agentstore.types.tasks import TaskEntity

    owner = TreeStore().create_session("/r")
    task = TaskRepository().create(TaskEntity(kind="agent", owner_session_id=owner.id))
    out, _ = run("task", short_id(task.id))
    assert task.id in out
    with pytest.raises(CommandError):
        run("task", "ffffffffffff")
    assert Task.objects.count() == 1
