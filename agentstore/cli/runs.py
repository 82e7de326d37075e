"""Run subcommands: ``start-run`` (queue, maybe wait), ``runs``, ``run ID``, ``cancel-run ID``.

    manage.py agentstore start-run support --input "Where is my order?"
    manage.py agentstore start-run support --input "And now?" --session SESSION --wait 60
    manage.py agentstore start-run planner --input-json '{"messages": []}' --override model=gpt-5
    manage.py agentstore runs --session SESSION
    manage.py agentstore run RUN_ID --json
    manage.py agentstore cancel-run RUN_ID

A run is executed by ``manage.py agentstore worker`` (``--once`` included);
``--wait`` polls until the run is over and prints its output, failing (exit 1)
when the run did not succeed. docs/runs.md.
"""

from __future__ import annotations

import json
import time
from typing import Any

from agentstore import exceptions
from agentstore.cli import Context, Subcommand, fail, stamp, table, truncate, usage
from agentstore.models import Task, TaskState
from agentstore.runs import RUN_KIND, Run, RunRepository
from agentstore.selectors.short_ids import resolve

__all__ = ["COMMANDS"]

#: Seconds between two reads of a run ``--wait`` is waiting for.
POLL = 0.1


def _document(run: Run) -> dict[str, Any]:
    return {
        "id": run.id,
        "runner": run.runner,
        "session_id": run.session_id,
        "state": run.state,
        "input": run.input,
        "overrides": run.overrides,
        "output": run.output,
        "error_code": run.error_code,
        "error_message": run.error_message,
        "queue": run.queue_name,
        "attempts": run.attempts,
        "max_attempts": run.max_attempts,
        "created_at": run.created_at,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
    }


def _start_arguments(parser: Any) -> None:
    parser.add_argument("runner", help="the runner's name (AGENTSTORE['RUNNERS'])")
    given = parser.add_mutually_exclusive_group()
    given.add_argument("--input", help="the run's input as text (the next user message)")
    given.add_argument("--input-json", help="the run's input as JSON (items, a graph's input)")
    parser.add_argument("--session", help="continue this session (default: a new one)")
    parser.add_argument(
        "--override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="change KEY for this run (model, instructions …; repeatable)",
    )
    parser.add_argument(
        "--if-busy",
        choices=["enqueue", "reject", "interrupt"],
        default="enqueue",
        help="another run of the session is going on: run after it (default), fail, "
        "or cancel it and continue from where it stops",
    )
    parser.add_argument("--queue", default="default", help="queue (default: %(default)s)")
    parser.add_argument("--max-attempts", type=int, default=1, help="failed attempts allowed")
    parser.add_argument(
        "--wait", type=float, default=0, metavar="SECONDS", help="wait for the run's end"
    )
    parser.add_argument("--json", action="store_true", help="print JSON on stdout")


def _start(name: str, ctx: Context) -> None:
    if ctx.opt("input_json") is not None:
        try:
            value: Any = json.loads(ctx.opt("input_json"))
        except ValueError as error:
            raise usage(f"--input-json is not JSON: {error}") from None
    else:
        value = ctx.opt("input")
    overrides: dict[str, str] = {}
    for pair in ctx.opt("override"):
        key, sep, text = pair.partition("=")
        if not sep or not key:
            raise usage(f"--override wants KEY=VALUE, not {pair!r}")
        overrides[key] = text
    if ctx.opt("wait") < 0:
        raise usage("--wait must be 0 or more")
    session = ""
    if ctx.opt("session"):
        from agentstore.cli.sessions import session_id_or_text

        # A new id is a new session (an SDK conversation's own id, say).
        session = session_id_or_text(ctx.opt("session"))
    repository = RunRepository()
    try:
        run = repository.start(
            ctx.opt("runner"),
            value,
            session_id=session,
            overrides=overrides,
            queue=ctx.opt("queue"),
            max_attempts=ctx.opt("max_attempts"),
            if_busy=ctx.opt("if_busy"),
        )
    except (exceptions.ValidationError, exceptions.SessionBusy) as error:
        raise fail(str(error)) from None
    ctx.note(f"Queued run {run.id} of {run.runner} on session {run.session_id}.")
    if ctx.opt("wait"):
        run = _wait(repository, run, ctx.opt("wait"))
    _show(ctx, run)
    if ctx.opt("wait") and run.state != TaskState.SUCCEEDED:
        raise fail(f"run {run.id} {run.state}: {run.error_message or 'no error recorded'}")


def _wait(repository: RunRepository, run: Run, seconds: float) -> Run:
    deadline = time.monotonic() + seconds
    while not run.finished and time.monotonic() < deadline:
        time.sleep(POLL)
        found = repository.get(run.id)
        if found is None:
            raise fail(f"run {run.id} is gone (its session was deleted)")
        run = found
    if not run.finished:
        raise fail(f"run {run.id} is still {run.state} after {seconds:g} s")
    return run


def _show(ctx: Context, run: Run) -> None:
    document = _document(run)
    if ctx.opt("json"):
        ctx.json(document)
        return
    for key, value in document.items():
        if value in ("", None, {}):
            continue
        if key.endswith("_at"):
            value = stamp(value)
        elif key in ("input", "output", "overrides"):
            value = json.dumps(value, ensure_ascii=False)
        ctx.out(f"{key:<14} {value}")


def _runs_arguments(parser: Any) -> None:
    parser.add_argument("--session", help="only the runs of this session")
    parser.add_argument(
        "--state", action="append", choices=TaskState.values, help="only these states (repeatable)"
    )
    parser.add_argument(
        "--limit", type=int, default=50, help="at most N rows, 0 = all (default: %(default)r)"
    )
    parser.add_argument("--json", action="store_true", help="print JSON lines on stdout")


def _runs(name: str, ctx: Context) -> None:
    if ctx.opt("limit") < 0:
        raise usage("--limit must be 0 or more")
    found = Task.objects.filter(kind=RUN_KIND).newest_first()
    if ctx.opt("session"):
        from agentstore.cli.sessions import session_id_of

        found = found.owned_by_session(session_id_of(ctx.opt("session")))
    if ctx.opt("state"):
        found = found.filter(state__in=ctx.opt("state"))
    ids = list(found.values_list("id", flat=True)[: ctx.opt("limit") or None])
    runs = RunRepository().get_many(ids)
    if ctx.opt("json"):
        for run in runs:
            ctx.json(_document(run))
        return
    if not runs:
        ctx.note("No runs.")
        return
    table(
        ctx,
        ["ID", "RUNNER", "STATE", "SESSION", "INPUT", "UPDATED (UTC)"],
        [
            [
                run.id,
                run.runner,
                run.state,
                run.session_id,
                truncate(json.dumps(run.input, ensure_ascii=False), 40),
                stamp(run.updated_at),
            ]
            for run in runs
        ],
    )


def _run_arguments(parser: Any) -> None:
    parser.add_argument("run", help="run id (or a unique short id)")
    parser.add_argument("--json", action="store_true", help="print JSON on stdout")


def _found(text: str) -> Run:
    """The run ``text`` names (its id or a unique short id), or the command fails."""
    try:
        run_id = resolve(Task.objects.filter(kind=RUN_KIND), "id", text, what="run")
    except exceptions.ValidationError as exc:
        raise fail(str(exc)) from None
    run = RunRepository().get(run_id) if run_id else None
    if run is None:
        raise fail(f"no such run: {text}")
    return run


def _run(name: str, ctx: Context) -> None:
    _show(ctx, _found(ctx.opt("run")))


def _cancel_arguments(parser: Any) -> None:
    parser.add_argument("run", help="run id (or a unique short id)")
    parser.add_argument("--json", action="store_true", help="print JSON on stdout")


def _cancel(name: str, ctx: Context) -> None:
    run = _found(ctx.opt("run"))
    canceled = RunRepository().cancel(run.id, by="command")
    assert canceled is not None
    _show(ctx, canceled)
    if canceled.state not in ("canceled", "canceling"):
        raise fail(f"run {run.id} is {canceled.state}: it can no longer be canceled")


COMMANDS = [
    Subcommand(
        ("start-run",), "Queue a run of a runner (and wait for it).", _start_arguments, _start
    ),
    Subcommand(("runs",), "List runs, most recently updated first.", _runs_arguments, _runs),
    Subcommand(("run",), "Show a run: state, input, output or error.", _run_arguments, _run),
    Subcommand(
        ("cancel-run",),
        "Cancel a queued run, or ask a running one to stop at its next step.",
        _cancel_arguments,
        _cancel,
    ),
]
