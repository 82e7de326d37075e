"""Telling database errors apart: "busy, try again" and "that key exists".

Two questions the stores ask of a ``django.db`` error, answered from the
driver's own codes (SQLite's extended result codes, PostgreSQL's SQLSTATE)
rather than from message texts, which differ between versions::

    except DatabaseError as exc:
        if is_busy_error(exc): ...        # SQLite's lock: the write driver retries
    except IntegrityError as exc:
        if is_unique_violation(exc): ...  # insert-first idempotency: look the row up
"""

from __future__ import annotations

import sqlite3

from agentstore.exceptions import DatabaseBusy

__all__ = ["SQLITE_BUSY", "is_busy_error", "is_unique_violation"]

#: SQLite's primary result code for "the database file is locked by another connection".
SQLITE_BUSY = 5

#: SQLite extended result codes of uniqueness failures.
_SQLITE_UNIQUE_CODES = frozenset({2067, 1555})  # CONSTRAINT_UNIQUE, CONSTRAINT_PRIMARYKEY
#: PostgreSQL's SQLSTATE for unique_violation.
_PG_UNIQUE_VIOLATION = "23505"


def is_busy_error(exc: BaseException) -> bool:
    """Tell whether ``exc`` (or what it wraps) is SQLite's SQLITE_BUSY.

    Only the *primary* result code counts (``code & 0xFF``), so BUSY_SNAPSHOT
    and BUSY_RECOVERY are busy too, while SQLITE_LOCKED (a conflict inside one
    connection, which waiting cannot fix) is not.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, DatabaseBusy):
            return True
        code = getattr(current, "sqlite_errorcode", None)
        if isinstance(code, int):
            return code & 0xFF == SQLITE_BUSY
        if isinstance(current, sqlite3.OperationalError):
            message = str(current).lower()
            if message.startswith(("database is locked", "database is busy")):
                return True
        current = current.__cause__ or current.__context__
    return False


def is_unique_violation(exc: BaseException) -> bool:
    """Tell whether ``exc`` is a UNIQUE/PRIMARY KEY failure (not NOT NULL, CHECK, FK …).

    Insert-first idempotency ("insert, and on a duplicate look the row up") must
    swallow only this kind of failure; every other constraint error is a bug or
    bad input and has to surface.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        code = getattr(current, "sqlite_errorcode", None)
        if isinstance(code, int):
            return code in _SQLITE_UNIQUE_CODES
        sqlstate = getattr(current, "sqlstate", None) or getattr(current, "pgcode", None)
        if isinstance(sqlstate, str):
            return sqlstate == _PG_UNIQUE_VIOLATION
        current = current.__cause__ or current.__context__
    return "unique constraint" in str(exc).lower()
