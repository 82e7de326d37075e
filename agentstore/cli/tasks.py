"""Task subcommands: ``tasks`` (list), ``task ID`` (details and events), ``recover``.

    manage.py agentstore tasks --state running --state canceling
    manage.py agentstore task TASK_ID --json
    manage.py agentstore recover            # expire dead leases now

``recover`` applies the one recovery policy (``agentstore.tasks.recovery``) to
every running or canceling task whose lease has expired (or that has none): a
``django.tasks`` function (or any kind but agent, tool and workflow) is queued
to run again while its crash budget lasts, then fails (error ``crashed``);
agent, tool and workflow tasks end ``interrupted`` — tool tasks through the tool
repository, so they get their canonical outcome.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.utils import timezone

from agentstore import exceptions
from agentstore.cli import Context, Subcommand, fail, stamp, table, usage
from agentstore.models import Task, TaskState
from agentstore.selectors.short_ids import resolve

if TYPE_CHECKING:
    from agentstore.tasks.recovery import Recovered

__all__ = ["COMMANDS", "recover_all"]


def _tasks_arguments(parser: Any) -> None:
    parser.add_argument("--kind", help="only tasks of this kind (agent, tool, workflow, …)")
    parser.add_argument(
        "--state", action="append", choices=TaskState.values, help="only these states (repeatable)"
    )
    parser.add_argument("--session", help="only tasks owned by this session")
    parser.add_argument(
        "--limit", type=int, default=50, help="at most N rows, 0 = all (default: %(default)r)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON lines on stdout")


def _lease(task: Any, now: Any) -> str:
    if not task.lease_owner:
        return "-"
    expired = task.lease_expires_at is not None and task.lease_expires_at <= now
    return f"{task.lease_owner} until {stamp(task.lease_expires_at)}" + (
        " EXPIRED" if expired else ""
    )


def _runs(task: Any) -> str:
    """Runs against ``max_attempts`` (failed or running), and the crashes among them."""
    text = f"{task.attempts - task.crashes}/{task.max_attempts}"
    return f"{text} +{task.crashes} crashed" if task.crashes else text


def _what(task: Any) -> str:
    """What a task runs: a django.tasks function's path, else its kind."""
    call = getattr(task, "function", None) if task.kind == "function" else None
    return str(call.function if call is not None else task.kind)


def _tasks(name: str, ctx: Context) -> None:
    # The function row rides along (one LEFT JOIN): a django.tasks job shows its path.
    tasks = Task.objects.newest_first().select_related("function")
    if ctx.opt("kind"):
        tasks = tasks.filter(kind=ctx.opt("kind"))
    if ctx.opt("state"):
        tasks = tasks.filter(state__in=ctx.opt("state"))
    if ctx.opt("session"):
        from agentstore.cli.sessions import session_id_of

        tasks = tasks.owned_by_session(session_id_of(ctx.opt("session")))
    if ctx.opt("limit") < 0:
        raise usage("--limit must be 0 or more")
    rows = list(tasks[: ctx.opt("limit") or None])
    now = timezone.now()
    if ctx.opt("json"):
        for task in rows:
            ctx.json(
                {
                    "id": task.id,
                    "kind": task.kind,
                    "state": task.state,
                    "owner_session_id": task.owner_session_id,
                    "parent_task_id": task.parent_task_id or "",
                    "lease_owner": task.lease_owner or "",
                    "lease_expires_at": task.lease_expires_at,
                    "created_at": task.created_at,
                    "updated_at": task.updated_at,
                    "function": _what(task) if task.kind == "function" else "",
                    "queue_name": task.queue_name,
                    "priority": task.priority,
                    "attempts": task.attempts,
                    "max_attempts": task.max_attempts,
                    "crashes": task.crashes,
                    "error_code": task.error_code,
                }
            )
        return
    if not rows:
        ctx.note("No tasks.")
        return
    table(
        ctx,
        ["ID", "KIND", "WHAT", "STATE", "QUEUE", "RUNS", "OWNER SESSION", "UPDATED (UTC)", "LEASE"],
        [
            [
                t.id,
                t.kind,
                _what(t) if t.kind == "function" else "-",
                t.state,
                t.queue_name,
                _runs(t),
                t.owner_session_id or "-",
                stamp(t.updated_at),
                _lease(t, now),
            ]
            for t in rows
        ],
    )


def _task_arguments(parser: Any) -> None:
    parser.add_argument("task", help="task id")
    parser.add_argument("--json", action="store_true", help="print JSON on stdout")


def _task(name: str, ctx: Context) -> None:
    from agentstore.selectors.tasks import function_call
    from agentstore.tasks import TaskRepository

    repository = TaskRepository()
    try:
        task_id = resolve(Task.objects.all(), "id", ctx.opt("task"), what="task")
    except exceptions.ValidationError as exc:
        raise fail(str(exc)) from None
    task = repository.get(task_id) if task_id else None
    if task is None:
        raise fail(f"no such task: {ctx.opt('task')}")
    events = repository.list_events(task.id, 0, 1_000_000)
    document: dict[str, Any] = {
        "task": {
            field: getattr(task, field)
            for field in (
                "id",
                "kind",
                "state",
                "owner_session_id",
                "parent_task_id",
                "concurrency_key",
                "result",
                "error_code",
                "error_message",
                "created_at",
                "started_at",
                "finished_at",
                "updated_at",
                "lease_owner",
                "lease_expires_at",
                "queue_name",
                "priority",
                "run_after",
                "attempts",
                "max_attempts",
                "crashes",
            )
        },
        "events": [
            {
                "sequence": e.sequence,
                "kind": e.event.kind,
                "payload_json": e.event.payload_json,
                "created_at": e.event.created_at,
            }
            for e in events
        ],
    }
    call = function_call(task.id) if task.kind == "function" else None
    if call is not None:
        document["function"] = {
            "function": call.function,
            "backend": call.backend,
            "arguments_json": call.arguments_json,
        }
    if ctx.opt("json"):
        ctx.json(document)
        return
    shown = {**document["task"], **document.get("function", {})}
    for key, value in shown.items():
        if value not in ("", None):
            ctx.out(f"{key:<17} {stamp(value) if key.endswith('_at') else value}")
    ctx.out("")
    table(
        ctx,
        ["SEQ", "TIME (UTC)", "KIND", "PAYLOAD"],
        [
            [str(e["sequence"]), stamp(e["created_at"]), e["kind"], e["payload_json"]]
            for e in document["events"]
        ],
    )


def recover_all(kinds: list[str] | None = None) -> Recovered:
    """Rerun or settle every running/canceling task whose lease expired.

    ``agentstore.tasks.recovery.rescue_expired`` (every kind by default).
    """
    from agentstore.tasks.recovery import rescue_expired

    return rescue_expired(kinds or None)


def _recover_arguments(parser: Any) -> None:
    parser.add_argument("--kind", action="append", help="only this kind (repeatable)")
    parser.add_argument("--json", action="store_true", help="print JSON on stdout")


def _recover(name: str, ctx: Context) -> None:
    done = recover_all(ctx.opt("kind"))
    recovered = done.by_kind()
    if ctx.opt("json"):
        ctx.json(recovered)  # every recovered id by kind, requeued or settled
        return
    total = sum(len(ids) for ids in recovered.values())
    for kind, ids in done.requeued.items():
        for task_id in ids:
            ctx.note(f"· queued {kind} task {task_id} to run again (its worker went away)")
    states = dict(
        Task.objects.filter(pk__in=[i for ids in done.settled.values() for i in ids]).values_list(
            "id", "state"
        )
    )
    for kind, ids in done.settled.items():
        for task_id in ids:
            ctx.note(f"· {states.get(task_id, 'settled')} {kind} task {task_id}")
    ctx.out(f"Recovered {total} task(s) with expired leases.")


COMMANDS = [
    Subcommand(("tasks",), "List tasks, most recently updated first.", _tasks_arguments, _tasks),
    Subcommand(("task",), "Show a task and its event timeline.", _task_arguments, _task),
    Subcommand(
        ("recover",),
        "Rerun or settle tasks whose worker lease expired.",
        _recover_arguments,
        _recover,
    ),
]
