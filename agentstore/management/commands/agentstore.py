"""``manage.py agentstore <subcommand>``: one git-style command for operators and scripts.

    python manage.py agentstore ls --cwd /repo --limit 10
    python manage.py agentstore show SESSION_ID --leaf ENTRY_ID
    python manage.py agentstore export SESSION_ID --format pi > session.jsonl
    python manage.py agentstore prune --before 2026-01-01 --dry-run

Exit codes: 0 success; 1 a failure (unknown session, a check failed, some ids of
a batch failed); 2 bad usage. ``--json`` prints exactly JSON (one document, or
one object per line for listings) on stdout; progress and notes go to stderr.
Each subcommand lives in ``agentstore/cli/`` and calls the stores; this module
only builds the parser and dispatches.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agentstore.cli import EXIT_USAGE, SUBCOMMANDS, Context


class _Parser(CommandParser):
    """Bad usage is exit code 2 from ``call_command`` too, as it is from the shell."""

    def error(self, message: str) -> Any:
        if self.called_from_command_line:
            super().error(message)
        raise CommandError(f"Error: {message}", returncode=EXIT_USAGE)


class Command(BaseCommand):
    help = "Inspect and maintain agentstore data: sessions, holds, refs, tasks, files."

    def get_version(self) -> str:
        # ``--version`` names agentstore's version, not Django's (what a bug report needs).
        from agentstore import __version__

        return __version__

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        # Django builds a CommandParser; ours differs only in its usage errors.
        # (add_arguments ran already, so the subparsers get _Parser explicitly.)
        parser.__class__ = _Parser
        return parser

    def add_arguments(self, parser: CommandParser) -> None:
        subparsers = parser.add_subparsers(
            dest="subcommand",
            required=True,
            metavar="SUBCOMMAND",
            title="subcommands",
            parser_class=_Parser,
        )
        for subcommand in SUBCOMMANDS:
            subcommand.register(subparsers)

    def handle(self, *args: Any, subcommand: str, **options: Any) -> None:
        context = Context(stdout=self.stdout, stderr=self.stderr, style=self.style, options=options)
        for candidate in SUBCOMMANDS:
            if subcommand in candidate.names:
                candidate.run(subcommand, context)
                return
        raise AssertionError(f"unhandled subcommand {subcommand}")  # pragma: no cover
