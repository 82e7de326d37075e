"""Maintenance subcommands: ``stats``, ``prune`` and ``demo``.

    manage.py agentstore stats --json
    manage.py agentstore prune --before 2026-01-01 --tasks-older-than 30 --dry-run
    manage.py agentstore prune --before 2026-01-01 --vacuum
    manage.py agentstore demo --owner admin

The work is done by ``agentstore.maintenance`` and ``agentstore.demo``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from agentstore.cli import Context, Subcommand, fail, usage

__all__ = ["COMMANDS"]


def _stats_arguments(parser: Any) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON on stdout")


def _stats(name: str, ctx: Context) -> None:
    from agentstore.maintenance import stats

    ctx.note("counting rows …")
    numbers = stats()
    if ctx.opt("json"):
        ctx.json(numbers)
        return
    for key, value in numbers.items():
        if isinstance(value, dict):
            detail = ", ".join(f"{k} {v}" for k, v in value.items()) or "none"
            ctx.out(f"{key:<15} {sum(value.values()):>9}  ({detail})")
        else:
            ctx.out(f"{key:<15} {value:>9}")


def _date(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise usage(f"--before {text!r} is not a date (YYYY-MM-DD or ISO 8601)") from None
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


def _prune_arguments(parser: Any) -> None:
    parser.add_argument("--before", help="delete sessions not updated since this date (UTC)")
    parser.add_argument(
        "--tasks-older-than", type=int, metavar="DAYS", help="delete tasks finished that long ago"
    )
    parser.add_argument("--dry-run", action="store_true", help="report, delete nothing")
    parser.add_argument("--vacuum", action="store_true", help="VACUUM the database afterwards")
    parser.add_argument("--json", action="store_true", help="print JSON on stdout")


def _prune(name: str, ctx: Context) -> None:
    from agentstore import maintenance

    if not ctx.opt("before") and ctx.opt("tasks_older_than") is None:
        raise usage("prune needs --before DATE and/or --tasks-older-than DAYS")
    if ctx.opt("tasks_older_than") is not None and ctx.opt("tasks_older_than") < 0:
        raise usage("--tasks-older-than must be 0 or more")
    dry_run = ctx.opt("dry_run")

    def progress(done: int, total: int) -> None:
        ctx.note(f"  {done}/{total}")

    report: dict[str, Any] = {"dry_run": dry_run}
    if ctx.opt("before"):
        sessions = maintenance.prune_sessions(
            _date(ctx.opt("before")), dry_run=dry_run, progress=progress
        )
        report["sessions"] = sessions
    if ctx.opt("tasks_older_than") is not None:
        report["tasks"] = maintenance.prune_tasks(
            timedelta(days=ctx.opt("tasks_older_than")), dry_run=dry_run, progress=progress
        )
    if ctx.opt("vacuum") and not dry_run:
        ctx.note("VACUUM …")
        try:
            maintenance.vacuum()
        except RuntimeError as exc:
            raise fail(str(exc)) from None
        report["vacuumed"] = True
    if ctx.opt("json"):
        ctx.json(report)
        return
    verb = "would delete" if dry_run else "deleted"
    if "sessions" in report:
        for session_id in report["sessions"]:
            ctx.note(f"· {verb} session {session_id}")
        ctx.out(f"Sessions: {verb} {len(report['sessions'])}.")
    if "tasks" in report:
        ctx.out(f"Tasks: {verb} {report['tasks']}.")


def _demo_arguments(parser: Any) -> None:
    parser.add_argument("--owner", help="username that owns the demo sessions")


def _demo(name: str, ctx: Context) -> None:
    from django.contrib.auth import get_user_model

    from agentstore.demo import seed_all

    owner = None
    if ctx.opt("owner"):
        owner = get_user_model().objects.filter(username=ctx.opt("owner")).first()
        if owner is None:
            raise usage(f"no such user: {ctx.opt('owner')}")
    for line in seed_all(owner):
        ctx.out(line)


COMMANDS = [
    Subcommand(("stats",), "Count what is stored.", _stats_arguments, _stats),
    Subcommand(("prune",), "Delete old sessions and finished tasks.", _prune_arguments, _prune),
    Subcommand(("demo",), "Seed the demo data (idempotent).", _demo_arguments, _demo),
]
