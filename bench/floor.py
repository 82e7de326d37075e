"""The schema floor: stdlib ``sqlite3`` sending agentstore's own statements on its own schema.

    from bench import floor
    con = floor.connect(path)                       # the project's pragmas
    append = floor.tree_appender(con, "s1", text=TEXT)
    parent = append(0, None)                        # BEGIN IMMEDIATE … COMMIT

A benchmark's raw baseline runs the *narrowest sensible* schema: what a
hand-written store of the same logical work would write. A floor row runs
agentstore's migrated schema instead — every column, index, trigger and
foreign key the app declares — with the very statements the store sends
(built by :mod:`agentstore.sql` from the models' ``_meta``, parameters from
``sql.row``), and nothing else: no validation, hashing, writer queue or Django.
It is the least any code on that schema can cost, so the ratio of a floor to
the narrow baseline bounds the ratio the store itself can reach
(decision record 0077; docs/operations.md, "Performance").

Django must be set up first (the statements come from the models); the writes
go through the ``sqlite3`` connection given.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

Append = Callable[[int, "str | None"], "str | None"]


def stamp() -> str:
    """Now, as SQLite's datetime text (what Django stores)."""
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")


def connect(path: str | Path) -> sqlite3.Connection:
    """A connection to ``path`` with the project's SQLite pragmas and foreign keys on.

    The pragmas are ``project.database_url.SQLITE_INIT_COMMAND`` (as every
    agentstore connection of the demo project); Django turns foreign keys on too.
    """
    from project.database_url import SQLITE_INIT_COMMAND

    con = sqlite3.connect(path, isolation_level=None, timeout=30)
    for pragma in SQLITE_INIT_COMMAND.split(";"):
        if pragma.strip():
            con.execute(pragma)
    con.execute("PRAGMA foreign_keys=ON")
    return con


def _create_session(con: sqlite3.Connection, session_id: str, kind: str) -> None:
    from agentstore import db, sql
    from agentstore.models import Session
    from agentstore.sql import sessions as session_sql

    now = stamp()
    con.execute(
        db.qmark(session_sql.INSERT),
        sql.row(Session, id=session_id, kind=kind, created_at=now, updated_at=now),
    )


def message_line(text: str) -> str:
    """The ``line`` ``TreeStore`` stores for a plain message of ``text``: its metadata.

    A tree entry's text lives in the ``content`` column (and the search index),
    not in its line; ``tests/test_bench_floor.py`` compares this with the
    store's own row.
    """
    import json

    from agentstore.stores.tree_metadata import estimate_tokens

    meta = {"token_estimate": estimate_tokens(text, ""), "model_facing": True, "display": True}
    return json.dumps(meta, separators=(",", ":"))


def tree_appender(con: sqlite3.Connection, session_id: str, *, text: str) -> Append:
    """Create tree session ``session_id``; return its append (a message of ``text``).

    Per append, as ``TreeStore.append_message``'s bare path: ``BEGIN IMMEDIATE``,
    the session's ``updated_at`` moved forward, the entry ``INSERT`` (the row
    the store writes for such a message: :func:`message_line`, the text in
    ``content``) that computes its ``seq`` and checks its parent, ``COMMIT``.
    Returns the new id.
    """
    from agentstore.stores.tree_metadata import estimate_tokens

    line, estimate = message_line(text), estimate_tokens(text, "")
    from agentstore import db, sql
    from agentstore.ids import new_id
    from agentstore.models import Entry
    from agentstore.sql import sessions as session_sql
    from agentstore.sql import tree as tree_sql

    _create_session(con, session_id, "tree")
    touch = db.qmark(session_sql.TOUCH_FORWARD)
    root, child = db.qmark(tree_sql.INSERT_ENTRY), db.qmark(tree_sql.INSERT_CHILD_ENTRY)

    def append(n: int, parent: str | None) -> str | None:
        now, entry_id = stamp(), new_id()
        values = sql.row(
            Entry,
            exclude=("seq",),
            session_id=session_id,
            entry_id=entry_id,
            parent_id=parent,
            type="message",
            line=line,
            created_at=now,
            role="user" if n % 2 == 0 else "assistant",
            content=text,
            token_estimate=estimate,
            model_facing=True,
            display=True,
        )
        con.execute("BEGIN IMMEDIATE")
        con.execute(touch, (now, now, session_id, "tree"))
        if parent is None:
            cursor = con.execute(root, [*values, session_id])
        else:
            cursor = con.execute(child, [*values, session_id, session_id, parent])
        if cursor.fetchone() is None:
            con.execute("ROLLBACK")
            raise RuntimeError(f"parent {parent} missing")
        con.execute("COMMIT")
        return entry_id

    return append


def loop_appender(con: sqlite3.Connection, session_id: str, *, text: str) -> Append:
    """Create loop session ``session_id``; return its append (step ``n``).

    Per append, as ``LoopStore.append``'s bare path once the session exists:
    ``BEGIN IMMEDIATE``, the session's ``updated_at``, the step ``INSERT``, ``COMMIT``.
    """
    from agentstore import db, sql
    from agentstore.models import Step
    from agentstore.sql import sessions as session_sql
    from agentstore.sql import steps as steps_sql

    _create_session(con, session_id, "loop")
    touch, insert = db.qmark(session_sql.TOUCH), db.qmark(steps_sql.INSERT)

    def append(n: int, parent: str | None) -> str | None:
        now = stamp()
        values = sql.row(
            Step,
            session_id=session_id,
            step_index=n,
            step_type="response",
            content=text,
            created_at=now,
        )
        con.execute("BEGIN IMMEDIATE")
        if con.execute(touch, (now, session_id, "loop")).rowcount != 1:
            con.execute("ROLLBACK")
            raise RuntimeError(f"session {session_id} missing")
        con.execute(insert, values)
        con.execute("COMMIT")
        return None

    return append


def snapshot(path: str | Path, using: str = "default") -> None:
    """A consistent copy of Django's SQLite database ``using`` at ``path`` (``sqlite3`` backup)."""
    from django.db import connections

    connection = connections[using]
    connection.ensure_connection()
    with sqlite3.connect(path) as copy:
        connection.connection.backup(copy)
    copy.close()


def log_replay(
    path: str | Path, session_id: str, count: int, using: str = "default"
) -> tuple[list[float], float]:
    """Replay the last ``count`` appends of log session ``session_id`` on the copy at ``path``.

    The copy was taken (:func:`snapshot`) just before those appends, while the
    session was held. Per append, as ``LogStore``'s: ``BEGIN IMMEDIATE``, the
    fenced session update (the hold's check and the head), the entry row's
    ``INSERT`` (every column, as read back from the live database), ``COMMIT``.
    Returns each transaction's seconds and the process CPU seconds per append.
    """
    import time

    from django.db import connections

    from agentstore.db import qmark
    from agentstore.sql import ENTRY, HOLDER, SESSION
    from agentstore.sql import sessions as session_sql

    with connections[using].cursor() as cursor:
        cursor.execute(
            f"SELECT * FROM {ENTRY} WHERE session_id = %s ORDER BY seq DESC LIMIT %s",
            [session_id, count],
        )
        names = [d[0] for d in cursor.description]
        rows: Sequence[Sequence[Any]] = cursor.fetchall()[::-1]
        cursor.execute(f"SELECT log_head FROM {SESSION} WHERE id = %s", [session_id])
        (head,) = cursor.fetchone()
    keep = [i for i, name in enumerate(names) if name != "id"]  # the rowid is SQLite's to pick
    insert = (
        f"INSERT INTO {ENTRY} ({', '.join(names[i] for i in keep)}) "
        f"VALUES ({', '.join('?' for _ in keep)})"
    )
    fence = qmark(session_sql.update_held(("log_head",), "sqlite"))
    con = connect(path)
    found = con.execute(f"SELECT token FROM {HOLDER} WHERE session_id = ?", (session_id,))
    (token,) = found.fetchone()
    seconds: list[float] = []
    cpu = time.process_time()
    for row in rows:
        params = [row[i] for i in keep]
        start = time.perf_counter()
        con.execute("BEGIN IMMEDIATE")
        fenced = con.execute(fence, (head, session_id, session_id, token)).rowcount
        con.execute(insert, params)
        con.execute("COMMIT")
        seconds.append(time.perf_counter() - start)
        if fenced != 1:
            raise RuntimeError("the fence matched no session row")
    cpu_each = (time.process_time() - cpu) / max(len(rows), 1)
    con.close()
    return seconds, cpu_each
