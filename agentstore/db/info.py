"""What a database connection is set up with: for the system checks, the docs and tests."""

from __future__ import annotations

from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections

from agentstore.db.cursors import cursor_on
from agentstore.db.queue import sqlite_lock_path

__all__ = ["describe_connection"]


def describe_connection(using: str = DEFAULT_DB_ALIAS) -> dict[str, Any]:
    """Return the live SQLite pragmas of ``using`` (for checks, docs and tests)."""
    connection = connections[using]
    if connection.vendor != "sqlite":
        return {"vendor": connection.vendor}
    with cursor_on(connection) as cursor:
        cursor.execute("PRAGMA journal_mode")
        journal_mode = cursor.fetchone()[0]
        cursor.execute("PRAGMA synchronous")
        synchronous = cursor.fetchone()[0]
        cursor.execute("PRAGMA busy_timeout")
        busy_timeout = cursor.fetchone()[0]
        cursor.execute("PRAGMA foreign_keys")
        foreign_keys = cursor.fetchone()[0]
    return {
        "vendor": "sqlite",
        "journal_mode": str(journal_mode).lower(),
        "synchronous": int(synchronous),
        "busy_timeout_ms": int(busy_timeout),
        "foreign_keys": bool(foreign_keys),
        "transaction_mode": getattr(connection, "transaction_mode", None),
        "write_lock": sqlite_lock_path(connection),
    }
