"""Seed huge sessions set-based (one INSERT … SELECT), for the bounded-work tests.

    insert_chain(session_id, 100_000)          # e1 ← e2 ← … ← e100000, one branch
    compact_every(session_id, 1000, 500, 20)   # e500, e1500, …: compactions keeping 20

Going through the stores' append path would take minutes for 100,000 entries;
a recursive ``SELECT`` generates the rows inside the database in a second or
two, on SQLite and PostgreSQL alike. Entry ids are ``e<n>``; every entry is a
user/assistant message whose parent is the previous one, all with one
timestamp (append order is then ``seq``).
"""

from __future__ import annotations

from datetime import UTC, datetime

from django.db import connection, transaction

__all__ = ["compact_every", "insert_chain"]

STAMP = datetime(2026, 1, 1, tzinfo=UTC)


def insert_chain(session_id: str, depth: int, *, content: str = "hello") -> None:
    """Append a ``depth``-long chain of messages to an empty session."""
    sql = (
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %s) "
        "INSERT INTO agentstore_entry (session_id, seq, entry_id, parent_id, type, line, "
        "created_at, role, content, provider, model, custom_type, summary, tool_name, "
        "tool_status, tool_args_json, token_estimate, model_facing, display, "
        "compaction_first_kept_entry_id, compaction_tokens_before, branch_from_entry_id, "
        "operation_id, part_count) "
        "SELECT %s, n.i, 'e' || CAST(n.i AS TEXT), "
        "CASE WHEN n.i = 1 THEN NULL ELSE 'e' || CAST(n.i - 1 AS TEXT) END, "
        "'message', '{}', %s, "
        "CASE WHEN n.i - 2 * (n.i / 2) = 1 THEN 'user' ELSE 'assistant' END, "
        "%s, '', '', '', '', '', '', '', 1, %s, %s, '', 0, '', '', 0 FROM n"
    )
    stamp = connection.ops.adapt_datetimefield_value(STAMP)
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(sql, [depth, session_id, stamp, content, True, True])


def compact_every(session_id: str, every: int, offset: int, keep: int) -> None:
    """Turn each entry whose seq is ``offset`` modulo ``every`` into a compaction.

    Each keeps the ``keep`` entries before it (its first-kept entry is
    ``e<seq - keep>``), as one set-based ``UPDATE``.
    """
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            "UPDATE agentstore_entry SET type = 'compaction', role = '', content = '',"
            " model_facing = %s, summary = 'summary ' || entry_id,"
            " compaction_first_kept_entry_id = 'e' || CAST(seq - %s AS TEXT)"
            " WHERE session_id = %s AND seq - %s * (seq / %s) = %s",
            [False, keep, session_id, every, every, offset],
        )
