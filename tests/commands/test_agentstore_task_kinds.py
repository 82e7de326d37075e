"""``manage.py agentstore tasks`` and ``task``: a django.tasks job shows its function and runs."""

from __future__ import annotations

import json
from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command

from agentstore.tasks import TaskRepository
from tests.tasks import jobs

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command("agentstore", *args, stdout=out, stderr=StringIO())
    return out.getvalue()


def test_tasks_show_the_function_queue_and_runs() -> None:
    mail = jobs.add.using(queue_name="mail", priority=5).enqueue(1, 2)
    crashed = jobs.noop.enqueue()
    tasks = TaskRepository()
    now = tasks.now()
    tasks.claim_ready(["default"], ["function"], "dead", now - timedelta(seconds=1))
    assert tasks.requeue_expired(now) == [crashed.id]

    table = run("tasks").splitlines()
    header = table[0].split()
    assert header[:6] == ["ID", "KIND", "WHAT", "STATE", "QUEUE", "RUNS"]
    rows = {line.split()[0]: line for line in table[1:]}
    assert "tests.tasks.jobs.add" in rows[mail.id] and " mail " in rows[mail.id]
    assert " 0/1 " in rows[mail.id]
    assert "tests.tasks.jobs.noop" in rows[crashed.id] and "0/1 +1 crashed" in rows[crashed.id]

    lines = [json.loads(x) for x in run("tasks", "--json", "--kind", "function").splitlines()]
    by_id = {row["id"]: row for row in lines}
    assert by_id[mail.id]["function"] == "tests.tasks.jobs.add"
    assert (by_id[mail.id]["queue_name"], by_id[mail.id]["priority"]) == ("mail", 5)
    assert (by_id[crashed.id]["attempts"], by_id[crashed.id]["crashes"]) == (1, 1)
    assert by_id[crashed.id]["max_attempts"] == 1


def test_task_shows_the_call() -> None:
    result = jobs.add.enqueue(20, 22)
    document = json.loads(run("task", result.id, "--json"))
    assert document["function"]["function"] == "tests.tasks.jobs.add"
    assert json.loads(document["function"]["arguments_json"]) == {"args": [20, 22], "kwargs": {}}
    assert document["task"]["queue_name"] == "default"
    assert document["task"]["max_attempts"] == 1
    text = run("task", result.id)
    assert "tests.tasks.jobs.add" in text and "[20, 22]" in text


@pytest.mark.parametrize("queue", ["a\x00b", "a/b", "", "q" * 65])
def test_worker_refuses_a_queue_no_task_can_be_on(queue: str) -> None:
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="--queue") as info:
        run("worker", "--once", "--queue", queue)
    assert info.value.returncode == 2
