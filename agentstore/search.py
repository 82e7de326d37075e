"""The text-search index of entries: SQLite FTS5 or PostgreSQL full text, kept in step on write.

    from agentstore.search import ensure_search_index, match_sql

    ensure_search_index("default")      # after migrate (agentstore's post_migrate does it)
    sql, params = match_sql("default", "flaky parser", session_id="")   # matching entry pks

What is indexed: each entry row's ``content`` and ``summary`` — the text both
tree stores project into the row (message text, compaction and branch
summaries) and, for agentsession entries, what
``formats.agentsession.describe.searchable`` projects (message and reasoning
text, tool calls with their arguments, tool outputs). Words match whole or, for
the last word typed, by prefix (``flak`` finds "flaky"); every word must match.

* **SQLite**: an external-content FTS5 table ``agentstore_entry_fts`` over the
  entry table (unicode61 tokenizer, diacritics folded) plus three triggers, so
  every insert, update and delete — the stores' hand-written SQL included —
  keeps it in step inside the same transaction. Rows without text are not
  indexed.
* **PostgreSQL**: a GIN index on ``to_tsvector('simple', content || ' ' ||
  summary)``; the planner keeps it in step like any index.

These are created by :func:`ensure_search_index` (idempotent; ``IF NOT
EXISTS``), which the app runs on ``post_migrate`` rather than in the migration:
an FTS5 virtual table and its triggers are SQLite-only DDL that one migration
for both databases cannot state as model ``Meta`` (docs/decisions.md
"inspection: the search index beside the migration"). Creating the index fills
it from the rows already there.
"""

from __future__ import annotations

import re
from typing import Any

from django.db import connections

from agentstore.models import Entry

__all__ = ["FTS_TABLE", "ensure_search_index", "has_search_index", "match_sql", "terms"]

ENTRY_TABLE = Entry._meta.db_table
FTS_TABLE = "agentstore_entry_fts"
PG_INDEX = "agentstore_entry_search"
# The indexed expression on PostgreSQL; queries must repeat it exactly to use the index.
PG_VECTOR = "to_tsvector('simple'::regconfig, content || ' ' || summary)"
_WORD = re.compile(r"\w+", re.UNICODE)
#: At most this many words of a query are used.
MAX_TERMS = 8

_HAS_TEXT = "{row}.content != '' OR {row}.summary != ''"
_SQLITE_DDL = [
    f"CREATE VIRTUAL TABLE IF NOT EXISTS {FTS_TABLE} USING fts5("
    f"content, summary, content='{ENTRY_TABLE}', content_rowid='id', "
    "tokenize='unicode61 remove_diacritics 2', columnsize=0)",
    f"CREATE TRIGGER IF NOT EXISTS {FTS_TABLE}_ai AFTER INSERT ON {ENTRY_TABLE} "
    f"WHEN {_HAS_TEXT.format(row='new')} BEGIN "
    f"INSERT INTO {FTS_TABLE}(rowid, content, summary) "
    "VALUES (new.id, new.content, new.summary); END",
    f"CREATE TRIGGER IF NOT EXISTS {FTS_TABLE}_ad AFTER DELETE ON {ENTRY_TABLE} "
    f"WHEN {_HAS_TEXT.format(row='old')} BEGIN "
    f"INSERT INTO {FTS_TABLE}({FTS_TABLE}, rowid, content, summary) "
    "VALUES ('delete', old.id, old.content, old.summary); END",
    f"CREATE TRIGGER IF NOT EXISTS {FTS_TABLE}_au AFTER UPDATE OF content, summary "
    f"ON {ENTRY_TABLE} BEGIN "
    f"INSERT INTO {FTS_TABLE}({FTS_TABLE}, rowid, content, summary) "
    f"SELECT 'delete', old.id, old.content, old.summary WHERE {_HAS_TEXT.format(row='old')}; "
    f"INSERT INTO {FTS_TABLE}(rowid, content, summary) "
    f"SELECT new.id, new.content, new.summary WHERE {_HAS_TEXT.format(row='new')}; END",
]
_SQLITE_FILL = (
    f"INSERT INTO {FTS_TABLE}(rowid, content, summary) "
    f"SELECT id, content, summary FROM {ENTRY_TABLE} WHERE {_HAS_TEXT.format(row=ENTRY_TABLE)}"
)


#: Databases known to have the index (it is never dropped by agentstore): one
#: catalogue query per database and process instead of one per search.
_KNOWN: set[tuple[str, str]] = set()


def has_search_index(using: str = "default") -> bool:
    """Does the database have the search index (FTS5 table or GIN index)?"""
    connection = connections[using]
    key = (using, str(connection.settings_dict.get("NAME")))
    if key in _KNOWN:
        return True
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = %s", [FTS_TABLE]
            )
        elif connection.vendor == "postgresql":
            cursor.execute("SELECT 1 FROM pg_indexes WHERE indexname = %s", [PG_INDEX])
        else:
            return False
        found = cursor.fetchone() is not None
    if found:
        _KNOWN.add(key)
    return found


def ensure_search_index(using: str = "default") -> bool:
    """Create the search index if it is missing and fill it; ``True`` when it was created."""
    connection = connections[using]
    if connection.vendor not in ("sqlite", "postgresql") or has_search_index(using):
        return False
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            for statement in _SQLITE_DDL:
                cursor.execute(statement)
            cursor.execute(_SQLITE_FILL)
        else:
            cursor.execute(
                f"CREATE INDEX IF NOT EXISTS {PG_INDEX} ON {ENTRY_TABLE} USING gin ({PG_VECTOR})"
            )
    return True


def terms(text: str) -> list[str]:
    """The words of a query (letters, digits, underscore), at most :data:`MAX_TERMS`."""
    return _WORD.findall(text or "")[:MAX_TERMS]


def match_sql(
    using: str, text: str, *, session_id: str = "", limit: int = 1000
) -> tuple[str, list[Any]] | None:
    """SQL selecting the pks of matching entries (newest first, at most ``limit``).

    ``None`` when ``text`` has no words or the database has no search index
    (the caller falls back to plain matching).
    """
    words = terms(text)
    connection = connections[using]
    if not words or not has_search_index(using):
        return None
    where = ""
    params: list[Any] = []
    if connection.vendor == "sqlite":
        # Every word quoted (no FTS5 syntax from users), the last one a prefix.
        query = " ".join(f'"{w}"' for w in words[:-1]) + f' "{words[-1]}"*'
        if session_id:
            where = f" AND rowid IN (SELECT id FROM {ENTRY_TABLE} WHERE session_id = %s)"
        sql = (
            f"SELECT rowid FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH %s{where} "
            "ORDER BY rowid DESC LIMIT %s"
        )
        params = [query.strip(), *([session_id] if session_id else []), limit]
        return sql, params
    query = " & ".join(words[:-1] + [f"{words[-1]}:*"])
    if session_id:
        where = " AND session_id = %s"
    sql = (
        f"SELECT id FROM {ENTRY_TABLE} WHERE {PG_VECTOR} @@ to_tsquery('simple', %s){where} "
        "ORDER BY id DESC LIMIT %s"
    )
    params = [query, *([session_id] if session_id else []), limit]
    return sql, params
