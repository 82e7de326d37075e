"""The subcommands of ``manage.py agentstore``, one module per area.

Each area module defines :class:`Subcommand` objects: ``register`` adds their
argparse subparsers, ``run`` executes one. Handlers parse options, call the
stores and print; they hold no storage logic of their own. Failures raise
``CommandError(message, returncode=…)``: 1 for a failure, 2 for bad usage.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import import_module
from typing import Any, TextIO

from django.core.management.base import CommandError, OutputWrapper
from django.core.management.color import Style

from agentstore import ids

__all__ = [
    "EXIT_FAILURE",
    "EXIT_USAGE",
    "SUBCOMMANDS",
    "Context",
    "Subcommand",
    "fail",
    "truncate",
    "usage",
]

#: Exit codes of ``manage.py agentstore``.
EXIT_FAILURE = 1
EXIT_USAGE = 2


@dataclass
class Context:
    """What a handler gets: the output streams, the style and the parsed options."""

    stdout: OutputWrapper | TextIO
    stderr: OutputWrapper | TextIO
    style: Style
    options: dict[str, Any]

    def opt(self, name: str, default: Any = None) -> Any:
        return self.options.get(name, default)

    def out(self, text: str = "") -> None:
        self.stdout.write(text)

    def raw(self, text: str) -> None:
        """Write ``text`` to stdout exactly (no newline added): file contents."""
        if isinstance(self.stdout, OutputWrapper):
            self.stdout.write(text, ending="")
        else:
            self.stdout.write(text)

    def note(self, text: str) -> None:
        """A line for people (stderr): progress, hints, per-item reports."""
        self.stderr.write(text)

    def json(self, value: Any) -> None:
        """One JSON document (or one line of a JSON-lines listing) on stdout."""
        self.stdout.write(json.dumps(value, ensure_ascii=False, default=_json_default))


def _json_default(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat().replace("+00:00", "Z")
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


def fail(message: str) -> CommandError:
    return CommandError(message, returncode=EXIT_FAILURE)


def usage(message: str) -> CommandError:
    return CommandError(message, returncode=EXIT_USAGE)


def truncate(text: str, width: int = 48) -> str:
    """Collapse whitespace and cut to ``width`` characters with an ellipsis."""
    text = re.sub(r"\s+", " ", text or "").strip()
    return text if len(text) <= width else text[: width - 1] + "…"


def short_id(value: str | None) -> str:
    """The short id of ``agentstore.ids.short_id`` (``-`` for none): accepted back as input."""
    return ids.short_id(value) if value else "-"


def stamp(value: datetime | None) -> str:
    """A UTC time to the second for tables."""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S") if value else "-"


def table(ctx: Context, headers: list[str], rows: list[list[str]]) -> None:
    """Print ``rows`` as left-aligned columns separated by two spaces."""
    widths = [len(h) for h in headers]
    for row in rows:
        widths = [max(w, len(cell)) for w, cell in zip(widths, row, strict=True)]
    for row in [headers, *rows]:
        ctx.out("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


@dataclass
class Subcommand:
    """One subcommand: its names, how to add its arguments, and its handler."""

    names: tuple[str, ...]
    help: str
    arguments: Callable[[Any], None]
    handler: Callable[[str, Context], None]
    extra: dict[str, Any] = field(default_factory=dict)

    def register(self, subparsers: Any) -> None:
        name, *aliases = self.names
        parser = subparsers.add_parser(name, aliases=aliases, help=self.help, description=self.help)
        self.arguments(parser)

    def run(self, name: str, ctx: Context) -> None:
        self.handler(name, ctx)


#: The area modules, in the order their subcommands are listed in ``--help``.
AREAS = ("sessions", "locks", "refs", "tasks", "runs", "worker", "transfer", "maintenance")


def _load() -> list[Subcommand]:
    commands: list[Subcommand] = []
    for area in AREAS:
        commands.extend(import_module(f"agentstore.cli.{area}").COMMANDS)
    return commands


class _Lazy(list[Subcommand]):
    """The subcommand list, built on first use (after Django's app registry is ready)."""

    def _fill(self) -> None:
        if not super().__len__():
            super().extend(_load())

    def __iter__(self) -> Any:
        self._fill()
        return super().__iter__()

    def __len__(self) -> int:
        self._fill()
        return super().__len__()


SUBCOMMANDS: list[Subcommand] = _Lazy()
