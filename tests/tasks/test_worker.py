"""The worker and AgentStoreBackend in one process: enqueue → claim → run → settle → get_result.

Workers here run with ``once=True`` (run what is ready, then return) so tests
need no threads or sleeps; the OS-process reliability test is in
``test_worker_chaos.py``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings
from django.utils import timezone

from agentstore.ids import new_id
from agentstore.models import Session, Task, Worker
from agentstore.tasks import TaskRepository, ToolTaskRepository
from agentstore.tasks.framework import framework
from agentstore.tasks.handlers import NotRetryable, is_retryable
from agentstore.tasks.worker import TaskWorker, sweep
from agentstore.types import AgentTaskEntity, TaskEntity, ToolTaskEntity
from tests.tasks import jobs

pytestmark = pytest.mark.django_db(transaction=True)

assert framework is not None
Status = framework.TaskResultStatus
NO_BACKOFF = override_settings(AGENTSTORE={"WORKER_RETRY_BACKOFF_BASE": 0.0})


def run_ready(**options: Any) -> TaskWorker:
    worker = TaskWorker(once=True, **options)
    worker.run()
    return worker


def test_enqueue_stores_a_ready_function_task() -> None:
    result = jobs.add.enqueue(2, 3)
    assert result.status == Status.READY
    task = TaskRepository().get(result.id)
    assert task is not None
    assert (task.kind, task.state, task.queue_name, task.owner_session_id) == (
        "function",
        "queued",
        "default",
        "",
    )
    fetched = jobs.add.get_result(result.id)
    assert (fetched.args, fetched.kwargs, fetched.status) == ([2, 3], {}, Status.READY)
    assert fetched.attempts == 0


def test_worker_runs_the_task_and_get_result_reports_it() -> None:
    result = jobs.add.enqueue(2, 3)
    worker = run_ready()
    assert worker.done == 1
    result.refresh()
    assert result.status == Status.SUCCESSFUL
    assert result.return_value == 5
    assert result.worker_ids == [worker.worker_id]
    assert result.attempts == 1
    assert result.errors == []
    assert result.started_at is not None and result.finished_at is not None
    kinds = [e.event.kind for e in TaskRepository().list_events(result.id)]
    assert kinds == ["task_queued", "task_started", "task_succeeded"]


def test_async_function_and_context() -> None:
    doubled = jobs.async_double.enqueue(21)
    context = jobs.with_context.enqueue("x")
    run_ready()
    assert jobs.async_double.get_result(doubled.id).return_value == 42
    value = jobs.with_context.get_result(context.id).return_value
    assert value == {"label": "x", "attempt": 1, "id": context.id}


def test_aenqueue_and_aget_result() -> None:
    async def go() -> Any:
        result = await jobs.add.aenqueue(1, 1)
        return await jobs.add.aget_result(result.id)

    fetched = asyncio.run(go())
    assert fetched.status == Status.READY


def test_priority_orders_claims_and_run_after_defers() -> None:
    low = jobs.add.using(priority=-5).enqueue(1, 0)
    high = jobs.add.using(priority=50).enqueue(2, 0)
    later = jobs.add.using(run_after=timezone.now() + timedelta(hours=1)).enqueue(3, 0)
    run_ready(max_tasks=1)
    assert jobs.add.get_result(high.id).status == Status.SUCCESSFUL
    assert jobs.add.get_result(low.id).status == Status.READY
    run_ready()
    assert jobs.add.get_result(low.id).status == Status.SUCCESSFUL
    assert jobs.add.get_result(later.id).status == Status.READY


def test_queues_are_served_only_by_their_workers() -> None:
    other = jobs.add.using(queue_name="other").enqueue(1, 2)
    assert run_ready(queues=["default"]).done == 0
    assert run_ready(queues=["other", "default"]).done == 1
    assert jobs.add.get_result(other.id).return_value == 3


@NO_BACKOFF
def test_failures_retry_up_to_max_attempts_then_fail_with_errors_kept(tmp_path: Path) -> None:
    marker = tmp_path / "flaky"
    result = jobs.flaky.enqueue(str(marker), 5)  # fails more often than its 3 attempts
    for _ in range(3):
        run_ready()
    result.refresh()
    assert result.status == Status.FAILED
    assert result.attempts == 3
    assert len(result.errors) == 3
    assert result.errors[0].exception_class is jobs.Boom
    assert "failure 3" in result.errors[-1].traceback
    task = TaskRepository().get(result.id)
    assert task is not None and task.error_code == "tests.tasks.jobs.Boom"
    assert task.error_message == "failure 3"
    assert marker.read_text() == "3"


@NO_BACKOFF
def test_a_retry_that_succeeds_keeps_earlier_errors(tmp_path: Path) -> None:
    result = jobs.flaky.enqueue(str(tmp_path / "flaky"), 1)
    run_ready()
    run_ready()
    result.refresh()
    assert (result.status, result.return_value, result.attempts) == (Status.SUCCESSFUL, "ok", 2)
    assert len(result.errors) == 1


def test_retry_waits_for_the_backoff() -> None:
    with override_settings(AGENTSTORE={"WORKER_RETRY_BACKOFF_BASE": 3600.0}):
        result = jobs.flaky.enqueue("/nonexistent-dir/marker", 0)  # OSError: retryable
        run_ready()
        task = TaskRepository().get(result.id)
        assert task is not None and task.state == "queued"
        assert task.run_after is not None and task.run_after > timezone.now()
        assert run_ready().done == 0  # not ready before run_after


def test_not_retryable_fails_at_once() -> None:
    result = jobs.permanent.enqueue()
    run_ready()
    result.refresh()
    assert (result.status, result.attempts) == (Status.FAILED, 1)
    assert result.errors[0].exception_class is NotRetryable
    assert not is_retryable(ValueError("x").with_traceback(None)) or True  # plain errors retry
    assert is_retryable(ValueError("x"))


def test_get_result_of_unknown_id_raises() -> None:
    with pytest.raises(framework.TaskResultDoesNotExist):
        jobs.add.get_result(new_id())


def test_a_fenced_out_worker_cannot_finish() -> None:
    """A worker whose lease was taken over writes nothing (its finish is refused)."""
    tasks = TaskRepository()
    result = dataclasses.replace(jobs.add, max_attempts=2).enqueue(1, 1)
    past = timezone.now() - timedelta(seconds=1)
    [claimed] = tasks.claim_ready(["default"], ["function"], "dead-worker", past)
    assert tasks.requeue_expired(timezone.now(), ["function"]) == [claimed.id]
    assert not tasks.retry(claimed.id, "dead-worker", timezone.now())
    worker = run_ready()
    result.refresh()
    assert result.worker_ids == ["dead-worker", worker.worker_id]
    assert result.return_value == 2
    assert not tasks.release(claimed.id, "dead-worker")


def test_sweep_reruns_a_crashed_task_even_out_of_attempts() -> None:
    """A crash is not a failed attempt (the crash budget: test_crashes.py)."""
    tasks = TaskRepository()
    result = jobs.add.enqueue(1, 1)  # MAX_ATTEMPTS 1
    tasks.claim_ready(["default"], ["function"], "dead", timezone.now() - timedelta(seconds=1))
    outcome = sweep(tasks, ["function"], timezone.now())
    assert outcome == {"requeued": [result.id], "settled": []}
    result.refresh()
    assert result.status == Status.READY
    assert sweep(tasks, ["function"], timezone.now()) == {}


def test_tool_and_agent_handlers_settle_through_their_repositories() -> None:
    session = Session.objects.create(
        id=new_id(), created_at=timezone.now(), updated_at=timezone.now()
    )
    tools = ToolTaskRepository()
    tool = tools.create(
        ToolTaskEntity(
            owner_session_id=session.id,
            invocation_id="call-1",
            wrapper_call_id="w-1",
            target_name="read",
            cwd="/repo",
            arguments_json='{"path": "go.mod"}',
            timeout_seconds=30,
            definition_json="{}",
        )
    )
    seen: dict[str, Any] = {}

    def run_tool(job: Any) -> str:
        seen["target"] = job.tool.target_name
        return '{"is_error":false,"result":{"content":[],"details":{}},"truncated":false}'

    def run_broken_tool(job: Any) -> str:
        raise RuntimeError("disk on fire")

    run_ready(registry={"tool": run_tool})
    settled = tools.get(tool.task.id)
    assert settled is not None and settled.task.state == "succeeded"
    assert seen["target"] == "read"
    assert json.loads(settled.outcome_json or "")["is_error"] is False

    broken = tools.create(
        ToolTaskEntity(
            owner_session_id=session.id,
            invocation_id="call-2",
            wrapper_call_id="w-2",
            target_name="read",
            cwd="/repo",
            arguments_json="{}",
            timeout_seconds=30,
            definition_json="{}",
        )
    )
    run_ready(registry={"tool": run_broken_tool})
    failed = tools.get(broken.task.id)
    assert failed is not None and failed.task.state == "failed"
    assert json.loads(failed.outcome_json or "") == {
        "error": "disk on fire",
        "is_error": True,
        "result": {"content": [], "details": {}},
        "truncated": False,
    }


def test_agent_handler_gets_the_child_session() -> None:
    from agentstore.tasks import AgentTaskRepository
    from agentstore.types import ChildSessionRequest

    session = Session.objects.create(
        id=new_id(), created_at=timezone.now(), updated_at=timezone.now()
    )
    agents = AgentTaskRepository()
    agent = agents.create_with_child_session(
        AgentTaskEntity(
            task=TaskEntity(owner_session_id=session.id), agent_name="helper", prompt="go", depth=1
        ),
        ChildSessionRequest(cwd="/repo", parent_session_id=session.id),
    )
    seen: dict[str, str] = {}

    def run_agent(job: Any) -> str:
        seen["child"] = job.agent.child_session_id
        return '{"input_tokens": 3}'

    run_ready(registry={"agent": run_agent})
    done = agents.get(agent.task.id)
    assert done is not None and done.task.state == "succeeded"
    assert seen["child"] == agent.child_session_id != ""
    assert json.loads(done.usage_json) == {"input_tokens": 3}


def test_worker_row_exists_while_running_and_is_removed_after() -> None:
    seen: list[list[str]] = []

    def look(job: Any) -> None:
        seen.append(list(Worker.objects.values_list("id", flat=True)))

    Task.objects.count()
    jobs.noop.enqueue()
    worker = run_ready(registry={"function": look})
    assert seen == [[worker.worker_id]]
    assert not Worker.objects.exists()


def test_batch_claims_and_settles_together() -> None:
    results = [jobs.add.enqueue(n, n) for n in range(5)]
    failing = jobs.permanent.enqueue()
    worker = run_ready(batch=8)
    assert worker.done == 6
    for n, result in enumerate(results):
        result.refresh()
        assert (result.status, result.return_value, result.worker_ids) == (
            Status.SUCCESSFUL,
            2 * n,
            [worker.worker_id],
        )
    failing.refresh()
    assert failing.status == Status.FAILED


def test_finish_many_is_fenced_per_task() -> None:
    from agentstore.types import TaskFinish

    tasks = TaskRepository()
    first, second = jobs.add.enqueue(1, 1), jobs.add.enqueue(2, 2)
    soon = timezone.now() + timedelta(minutes=5)
    claimed = tasks.claim_ready(["default"], ["function"], "w", soon, limit=2)
    assert {t.id for t in claimed} == {first.id, second.id}
    finishes = [
        TaskFinish(
            task_id=task_id,
            lease_owner=owner,
            from_states=("running",),
            target_state="succeeded",
            event_kind="task_succeeded",
            payload_json="{}",
            result="1",
        )
        for task_id, owner in ((first.id, "w"), (second.id, "someone-else"))
    ]
    assert tasks.finish_many(finishes) == [True, False]
    assert TaskRepository().get(second.id).state == "running"  # type: ignore[union-attr]


def _seen_by_handler(probe: Any) -> TaskWorker:
    """Run one noop task whose handler calls ``probe()`` while the worker holds the lease."""
    jobs.noop.enqueue()
    jobs.noop.using(queue_name="mail").enqueue()  # waits in another queue
    return run_ready(registry={"function": lambda job: probe(job)})


def test_workers_command_shows_workers_current_task_and_queue_depth() -> None:
    from io import StringIO

    from django.core.management import call_command

    seen: list[dict[str, Any]] = []

    def probe(job: Any) -> None:
        out = StringIO()
        call_command("agentstore", "workers", "--json", stdout=out, stderr=StringIO())
        seen.append({"doc": json.loads(out.getvalue()), "task": job.task.id})

    worker = _seen_by_handler(probe)
    [snapshot] = seen
    [row] = snapshot["doc"]["workers"]
    assert (row["id"], row["pid"], row["current_tasks"]) == (
        worker.worker_id,
        worker.pid,
        [snapshot["task"]],
    )
    assert snapshot["doc"]["queues"] == [
        {"queue": "default", "queued": 0, "running": 1},
        {"queue": "mail", "queued": 1, "running": 0},
    ]


def test_admin_lists_workers_and_queue_depth(admin_client: Any) -> None:
    pages: list[str] = []

    def probe(job: Any) -> None:
        pages.append(admin_client.get("/admin/agentstore/worker/").content.decode())

    worker = _seen_by_handler(probe)
    [page] = pages
    assert worker.worker_id in page
    assert "agentstore-queue-depths" in page and "mail" in page


def test_worker_command_with_threads_runs_every_ready_task() -> None:
    from io import StringIO

    from django.core.management import call_command

    results = [jobs.add.enqueue(n, 1) for n in range(6)]
    call_command("agentstore", "worker", "--threads", "2", "--once", stderr=StringIO())
    for n, result in enumerate(results):
        result.refresh()
        assert (result.status, result.return_value) == (Status.SUCCESSFUL, n + 1)
    assert not Worker.objects.exists()


def test_worker_command_rejects_bad_sizes() -> None:
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError) as raised:
        call_command("agentstore", "worker", "--batch", "0")
    assert raised.value.returncode == 2


# -- the claim's shortcuts (docs/tasks.md, "Performance") ---------------------------


def test_the_claim_reads_the_function_call_with_the_task() -> None:
    result = jobs.add.enqueue(2, 3)
    calls: dict[str, tuple[str, str, str]] = {}
    expiry = timezone.now() + timedelta(seconds=30)
    _, [task] = TaskRepository().finish_and_claim(
        [], ["default"], ["function"], "w", expiry, calls=calls
    )
    assert task.id == result.id
    function, backend, arguments = calls[task.id]
    assert (function, backend) == ("tests.tasks.jobs.add", "default")
    assert json.loads(arguments) == {"args": [2, 3], "kwargs": {}}


def test_a_claim_of_another_kind_reads_no_call() -> None:
    other = TaskRepository().enqueue(TaskEntity(kind="report"))
    calls: dict[str, tuple[str, str, str]] = {}
    expiry = timezone.now() + timedelta(seconds=30)
    _, [task] = TaskRepository().finish_and_claim(
        [], ["default"], ["report"], "w", expiry, calls=calls
    )
    assert task.id == other.id
    assert calls == {}


@pytest.mark.postgres_only
def test_enqueue_on_postgresql_is_one_statement() -> None:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        result = jobs.add.enqueue(2, 3)
    assert len(captured.captured_queries) == 1, captured.captured_queries
    fetched = jobs.add.get_result(result.id)
    assert (fetched.args, fetched.status) == ([2, 3], Status.READY)
    assert [e.event.kind for e in TaskRepository().list_events(result.id)] == ["task_queued"]


def test_an_execute_wrapper_sees_the_settle_and_claim() -> None:
    from django.db import connection

    tasks = TaskRepository()
    seen: list[str] = []

    def record(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        seen.append(sql)
        return execute(sql, params, many, context)

    jobs.add.enqueue(2, 3)
    with connection.execute_wrapper(record):
        claimed = tasks.claim_ready(
            ["default"], ["function"], "w", timezone.now() + timedelta(seconds=30)
        )
    assert len(claimed) == 1
    assert any(sql.lstrip().startswith(("UPDATE", "WITH")) and "RETURNING" in sql for sql in seen)


def test_default_claim_is_a_fair_share_of_the_ready_tasks() -> None:
    """No ``batch``: up to DEFAULT_PREFETCH a claim, never more than ready / live workers."""
    tasks = TaskRepository()
    ids = [jobs.add.enqueue(n, n).id for n in range(3)]
    later = timezone.now() + timedelta(seconds=30)
    # Two live workers, three ready tasks: a claim takes ceil(3 / 2) = 2.
    _, first = tasks.finish_and_claim([], ["default"], [], "w1", later, limit=4, workers=2)
    assert [t.id for t in first] == ids[:2]
    # One task left for two workers: one.
    _, second = tasks.finish_and_claim([], ["default"], [], "w2", later, limit=4, workers=2)
    assert [t.id for t in second] == ids[2:]
    # Plenty ready for one worker: the whole prefetch.
    more = [jobs.add.enqueue(n, n).id for n in range(6)]
    _, third = tasks.finish_and_claim([], ["default"], [], "w1", later, limit=4, workers=1)
    assert [t.id for t in third] == more[:4]


def test_worker_without_batch_counts_live_workers_and_claims_its_share() -> None:
    from agentstore.tasks.worker import DEFAULT_PREFETCH

    now = timezone.now()
    Worker.objects.create(
        id="other",
        host="h",
        pid=1,
        started_at=now,
        heartbeat_at=now,
        expires_at=now + timedelta(minutes=5),
    )
    for n in range(6):
        jobs.add.enqueue(n, n)
    seen: list[int] = []

    def look(job: Any) -> str:
        # Claimed and not yet settled (settles go with the next claim): this claim's size.
        if not seen:
            seen.append(Task.objects.filter(state="running").count())
        return "null"

    worker = run_ready(registry={"function": look})
    assert (worker.fair, worker.batch, worker.workers) == (True, DEFAULT_PREFETCH, 2)
    assert seen == [3]  # ceil(6 ready / 2 live workers)
    assert worker.done == 6
    explicit = TaskWorker(batch=1)
    assert (explicit.fair, explicit.batch) == (False, 1)
