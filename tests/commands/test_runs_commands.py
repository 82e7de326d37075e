"""``manage.py agentstore start-run``, ``runs`` and ``run``: runs from the shell."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import pytest
from django.conf import settings
from django.test import override_settings

from agentstore import runs as run_api
from agentstore.models import Session
from agentstore.tasks.worker import TaskWorker
from tests.commands.test_agentstore_logs_tasks import fails, run
from tests.runs.names import RUNNERS

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _runners() -> Iterator[None]:
    with override_settings(AGENTSTORE={**settings.AGENTSTORE, "RUNNERS": RUNNERS}):
        yield


def test_start_a_run_then_list_and_show_it() -> None:
    out, err = run("start-run", "echo", "--input", "hi", "--override", "model=m-2", "--json")
    started = json.loads(out)
    assert started["state"] == "queued" and started["input"] == "hi"
    assert started["overrides"] == {"model": "m-2"}
    assert "Queued run" in err
    TaskWorker(once=True).run()
    shown = json.loads(run("run", started["id"], "--json")[0])
    assert shown["state"] == "succeeded"
    assert shown["output"] == {"text": "echo hi", "attempt": 1, "overrides": {"model": "m-2"}}
    text = run("run", started["id"][-8:])[0]  # a short id, as listings print
    assert "succeeded" in text and '"echo hi"' in text
    listed = run("runs", "--session", started["session_id"])[0]
    assert started["id"] in listed and "succeeded" in listed
    lines = run("runs", "--state", "succeeded", "--json")[0].splitlines()
    assert [json.loads(line)["id"] for line in lines] == [started["id"]]
    assert "No runs." in run("runs", "--state", "failed")[1]


def test_start_on_a_named_session_json_input_and_wait() -> None:
    waiter = threading.Thread(target=lambda: _work_when_queued("conv-7"))
    waiter.start()
    out, _ = run(
        "start-run",
        "say",
        "--input-json",
        '"from the shell"',
        "--session",
        "conv-7",
        "--wait",
        "60",
    )
    waiter.join()
    assert "succeeded" in out
    assert Session.objects.get(pk="conv-7").kind == "log"


def _work_when_queued(session_id: str) -> None:
    from django.db import connections

    try:
        for _ in range(600):  # bounded: until the run is there
            if (
                run_api.list_runs(session_id)
                if Session.objects.filter(pk=session_id).exists()
                else []
            ):
                TaskWorker(once=True).run()
                return
            threading.Event().wait(0.05)
    finally:
        connections.close_all()


def test_a_run_that_failed_makes_wait_fail() -> None:
    waiter = threading.Thread(target=lambda: _work_when_queued("conv-8"))
    waiter.start()
    message = fails("start-run", "fails", "--session", "conv-8", "--wait", "60")
    waiter.join()
    assert "failed: runner failed on attempt 1" in message


def test_bad_arguments_are_refused_before_anything_is_written() -> None:
    before = Session.objects.count()
    assert "no runner named 'nope'" in fails("start-run", "nope")
    assert "--input-json is not JSON" in fails("start-run", "echo", "--input-json", "{", code=2)
    assert "KEY=VALUE" in fails("start-run", "echo", "--override", "model", code=2)
    assert "still queued after 0.2 s" in fails("start-run", "echo", "--wait", "0.2")
    assert Session.objects.count() == before + 1  # only the last one started
    assert "no such run" in fails("run", "01a2524c-0000-7000-8000-000000000000")


def test_cancel_a_run_and_refuse_one_on_a_busy_session() -> None:
    started = json.loads(run("start-run", "say", "--input", "one", "--json")[0])
    busy = fails("start-run", "say", "--session", started["session_id"], "--if-busy", "reject")
    assert "(if_busy=reject)" in busy
    canceled = json.loads(run("cancel-run", started["id"], "--json")[0])
    assert canceled["state"] == "canceled"
    TaskWorker(once=True).run()
    assert run_api.get_run(started["id"]).state == "canceled"  # type: ignore[union-attr]
    done = json.loads(run("start-run", "echo", "--json")[0])
    TaskWorker(once=True).run()
    assert "can no longer be canceled" in fails("cancel-run", done["id"])
