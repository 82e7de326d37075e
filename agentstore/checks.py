"""System checks: warn when a SQLite database is configured in a way agentstore can't rely on.

* ``agentstore.W001`` — the database is SQLite but ``OPTIONS["init_command"]`` does
  not set ``PRAGMA journal_mode=WAL``. Without WAL, readers block writers and the
  read snapshots of the stores can stall appends.
* ``agentstore.W002`` — the database is SQLite but ``OPTIONS["transaction_mode"]``
  is not ``"IMMEDIATE"``. A deferred transaction that reads and then writes fails
  at once with "database is locked" when another writer is active, ignoring the
  timeout.

Both read settings only (no connection is opened), so they run on every
``manage.py`` command. Silence one with ``SILENCED_SYSTEM_CHECKS`` if you know why.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from django.conf import settings
from django.core.checks import CheckMessage, Tags, register
from django.core.checks import Warning as CheckWarning

_WAL = re.compile(r"(^|;)\s*PRAGMA\s+(\w+\.)?journal_mode\s*=\s*['\"]?wal['\"]?\s*(;|$)", re.I)

RECOMMENDED_OPTIONS = (
    '{"transaction_mode": "IMMEDIATE", "timeout": 20, '
    '"init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL"}'
)


def check_sqlite_databases(databases: Mapping[str, Mapping[str, Any]]) -> list[CheckMessage]:
    """Return W001/W002 warnings for every SQLite database in ``databases``."""
    messages: list[CheckMessage] = []
    for alias, config in databases.items():
        if not str(config.get("ENGINE", "")).endswith("sqlite3"):
            continue
        options = config.get("OPTIONS") or {}
        init_command = str(options.get("init_command") or "")
        if not _WAL.search(init_command):
            messages.append(
                CheckWarning(
                    f"SQLite database {alias!r} is not put in WAL mode.",
                    hint=(
                        "Add 'PRAGMA journal_mode=WAL' to DATABASES"
                        f"[{alias!r}]['OPTIONS']['init_command'], e.g. OPTIONS = "
                        f"{RECOMMENDED_OPTIONS}."
                    ),
                    obj=f"DATABASES[{alias!r}]",
                    id="agentstore.W001",
                )
            )
        mode = str(options.get("transaction_mode") or "DEFERRED").upper()
        if mode != "IMMEDIATE":
            messages.append(
                CheckWarning(
                    f"SQLite database {alias!r} begins transactions {mode}, not IMMEDIATE.",
                    hint=(
                        f"Set DATABASES[{alias!r}]['OPTIONS']['transaction_mode'] = "
                        "'IMMEDIATE' so write transactions wait for the lock instead of "
                        "failing with 'database is locked'."
                    ),
                    obj=f"DATABASES[{alias!r}]",
                    id="agentstore.W002",
                )
            )
    return messages


@register(Tags.compatibility)
def sqlite_settings_check(
    app_configs: Sequence[Any] | None = None, **kwargs: Any
) -> list[CheckMessage]:
    return check_sqlite_databases(settings.DATABASES)
