"""The text-search index of entries: SQLite FTS5 or PostgreSQL full text, kept in step on write.

    from agentstore.search import ensure_search_index, match_sql

    ensure_search_index("default")      # after migrate (agentstore's post_migrate does it)
    sql, params = match_sql("default", "flaky parser", session_id="")   # matching entry pks

What is indexed: each entry's text, held once (decision record 0090). An
agentsession *item* line (what the OpenAI Agents SDK and Pydantic AI append) is
indexed from the stored line itself — the string members named ``text``,
``content``, ``arguments``, ``input``, ``name``, ``output`` and ``refusal`` at
any depth of its ``item`` (message and reasoning text, tool calls with their
arguments, tool outputs) — so its row keeps only a short preview in ``content``.
Every other row is indexed from its ``content`` and ``summary`` columns: the
text the tree store keeps with its messages (compaction and branch summaries
included) and what ``formats.agentsession.describe.searchable`` projects of the
log's other lines. Words match whole or, for the last word typed, by prefix
(``flak`` finds "flaky"); every word must match.

* **SQLite**: an external-content FTS5 table ``agentstore_entry_fts`` over the
  view ``agentstore_entry_text`` (each entry's indexed text, computed by SQL
  from its row: ``json_tree`` over an item's line), filled in *batches*
  rather than on every insert (decision record 0023). A one-row table
  ``agentstore_entry_fts_mark`` holds ``upto``: every entry with ``id <= upto``
  (and some text) is in the index, none above it is.
  An insert trigger indexes the tail ``(upto, new.id]`` in one go once it spans
  :data:`TAIL_IDS` ids and moves the mark; the update and delete triggers keep
  indexed rows in step and leave the tail alone. All of it runs inside the
  writing transaction — the stores' hand-written SQL included — and is plain
  SQL, so any connection (the ``sqlite3`` shell included) keeps it in step. A
  search matches FTS5 over the indexed rows and the same FTS5 query, through
  the SQL function ``agentstore_fts_match``, over the at most ``TAIL_IDS - 1``
  tail rows — one statement, one snapshot, so results are exact. The function
  runs the query in a private in-memory FTS5 table with the same tokenizer:
  the same engine, so both halves agree by construction (tests/test_search.py
  checks it too). Rows without text are not indexed.
* **PostgreSQL**: a GIN index on the ``to_tsvector('simple', …)`` of the same
  text (:data:`PG_VECTOR`: ``jsonb_path_query_array`` over an item's line, else
  ``content || ' ' || summary``); the planner keeps it in step like any index.

These are created by :func:`ensure_search_index` (idempotent; ``IF NOT
EXISTS``), which the app runs on ``post_migrate`` rather than in the migration:
an FTS5 virtual table and its triggers are SQLite-only DDL that one migration
for both databases cannot state as model ``Meta`` (decision record 0023).
Creating the index fills it from the rows already there; a database indexed by
an earlier design (its FTS5 table over the entry table, or the GIN index on the
columns alone) is re-indexed by the next ``migrate``.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from typing import Any

from django.db import connections

from agentstore import db
from agentstore.db import SqlCursor
from agentstore.models import Entry

__all__ = [
    "FTS_TABLE",
    "ensure_search_index",
    "flush_search_index",
    "has_search_index",
    "match_sql",
    "register_functions",
    "terms",
]

ENTRY_TABLE = Entry._meta.db_table
FTS_TABLE = "agentstore_entry_fts"
#: SQLite: each entry's indexed text (id, session_id, content, summary); the FTS5
#: table's external content.
TEXT_VIEW = "agentstore_entry_text"
#: Named for its expression: another expression is another name (and the old
#: index is dropped: :data:`_PG_OLD_INDEXES`).
PG_INDEX = "agentstore_entry_text_search"
#: Names of earlier designs' objects, dropped when the index is rebuilt.
_PG_OLD_INDEXES = ("agentstore_entry_search",)

#: The members of an item whose string values are its words, at any depth
#: (``describe.item_text`` reads the same ones: message parts' ``text``, a user
#: message's ``content`` string, a call's ``name`` and ``arguments`` or
#: ``input``, an output's ``output``, a ``refusal``).
ITEM_WORD_KEYS = ("text", "content", "arguments", "input", "name", "output", "refusal")
_SQLITE_KEYS = ", ".join(f"'{k}'" for k in ITEM_WORD_KEYS)
_PG_KEYS = " || ".join(f'@.key == "{k}"' for k in ITEM_WORD_KEYS)


def _sqlite_text(row: str) -> str:
    """SQLite: the indexed text of entry row ``row`` (an item's from its line)."""
    return (
        f"CASE WHEN {row}.type = 'item' AND json_valid({row}.line) THEN "
        f"COALESCE((SELECT group_concat(j.value, ' ') FROM json_tree({row}.line, '$.item') j "
        f"WHERE j.type = 'text' AND j.key IN ({_SQLITE_KEYS})), '') "
        f"ELSE {row}.content END"
    )


# The indexed expression on PostgreSQL; queries must repeat it exactly to use the
# index. jsonb cannot hold a NUL (``\u0000``) nor a lone surrogate: a line that
# escapes one is indexed as plain text rather than refused.
PG_VECTOR = (
    "(CASE WHEN type <> 'item' "
    "THEN to_tsvector('simple'::regconfig, content || ' ' || summary) "
    "WHEN line ~ '\\\\u(0000|[dD][89a-fA-F])' THEN to_tsvector('simple'::regconfig, line) "
    "ELSE to_tsvector('simple'::regconfig, jsonb_path_query_array((line::jsonb) -> 'item', "
    '\'strict $.** ? (@.type() == "object").keyvalue() ? '
    f'(@.value.type() == "string" && ({_PG_KEYS})).value\')) END)'
)
_WORD = re.compile(r"\w+", re.UNICODE)
#: At most this many words of a query are used.
MAX_TERMS = 8

#: The insert trigger indexes the unindexed tail once it spans this many entry
#: ids: an append writes no index pages until then (one FTS5 segment per batch
#: instead of per row), and a search matches at most ``TAIL_IDS - 1`` rows
#: outside the index.
TAIL_IDS = 64
MARK_TABLE = f"{FTS_TABLE}_mark"
#: The SQL function matching one row against an FTS5 query (SQLite only).
MATCH_FUNCTION = "agentstore_fts_match"
_TOKENIZE = "tokenize='unicode61 remove_diacritics 2'"
_HAS_TEXT = "(content != '' OR summary != '')"  # over TEXT_VIEW
_UPTO = f"(SELECT upto FROM {MARK_TABLE} WHERE id = 1)"
_TRIGGERS = [f"{FTS_TABLE}_{t}" for t in ("tail", "below", "del", "upd")]
# Triggers of the first design (every insert indexed at once).
_OLD_TRIGGERS = [f"{FTS_TABLE}_ai", f"{FTS_TABLE}_ad", f"{FTS_TABLE}_au"]
# What the FTS5 table's definition says when it reads the view (this design).
_OVER_VIEW = f"content='{TEXT_VIEW}'"


def _index_row(row: str, command: str = "") -> str:
    """``INSERT`` one trigger row's text into the FTS5 table (or ``'delete'`` it)."""
    head = f"{FTS_TABLE}, " if command else ""
    value = f"'{command}', " if command else ""
    return (
        f"INSERT INTO {FTS_TABLE}({head}rowid, content, summary) "
        f"SELECT {value}{row}.id, t.content, {row}.summary "
        f"FROM (SELECT {_sqlite_text(row)} AS content) t "
        f"WHERE t.content != '' OR {row}.summary != ''"
    )


_SQLITE_DDL = [
    f"CREATE VIEW IF NOT EXISTS {TEXT_VIEW} AS SELECT e.id AS id, e.session_id AS session_id, "
    f"{_sqlite_text('e')} AS content, e.summary AS summary FROM {ENTRY_TABLE} e",
    f"CREATE VIRTUAL TABLE IF NOT EXISTS {FTS_TABLE} USING fts5("
    f"content, summary, {_OVER_VIEW}, content_rowid='id', "
    f"{_TOKENIZE}, columnsize=0)",
    f"CREATE TABLE IF NOT EXISTS {MARK_TABLE} "
    "(id INTEGER PRIMARY KEY CHECK (id = 1), upto INTEGER NOT NULL)",
    # The tail reached TAIL_IDS ids: index it as one batch and move the mark.
    f"CREATE TRIGGER IF NOT EXISTS {FTS_TABLE}_tail AFTER INSERT ON {ENTRY_TABLE} "
    f"WHEN new.id - {_UPTO} >= {TAIL_IDS} BEGIN "
    f"INSERT INTO {FTS_TABLE}(rowid, content, summary) "
    f"SELECT id, content, summary FROM {TEXT_VIEW} WHERE id > {_UPTO} AND id <= new.id "
    f"AND {_HAS_TEXT}; "
    f"UPDATE {MARK_TABLE} SET upto = new.id WHERE id = 1; END",
    # A row inserted below the mark (an explicit id; AUTOINCREMENT never gives
    # one) is indexed at once, so "id <= upto" stays "indexed".
    f"CREATE TRIGGER IF NOT EXISTS {FTS_TABLE}_below AFTER INSERT ON {ENTRY_TABLE} "
    f"WHEN new.id <= {_UPTO} BEGIN {_index_row('new')}; END",
    # 'delete' must be given the text that was indexed: the same expression
    # over the old row gives it (a line is never changed in place but by an
    # UPDATE, which this trigger's sibling sees).
    f"CREATE TRIGGER IF NOT EXISTS {FTS_TABLE}_del AFTER DELETE ON {ENTRY_TABLE} "
    f"WHEN old.id <= {_UPTO} BEGIN {_index_row('old', 'delete')}; END",
    f"CREATE TRIGGER IF NOT EXISTS {FTS_TABLE}_upd AFTER UPDATE OF type, line, content, summary "
    f"ON {ENTRY_TABLE} WHEN old.id <= {_UPTO} BEGIN "
    f"{_index_row('old', 'delete')}; {_index_row('new')}; END",
]
# Index every row there is and put the mark after it (creation, upgrade, flush).
_SQLITE_FLUSH = [
    f"INSERT OR IGNORE INTO {MARK_TABLE} (id, upto) VALUES (1, 0)",
    f"INSERT INTO {FTS_TABLE}(rowid, content, summary) "
    f"SELECT id, content, summary FROM {TEXT_VIEW} WHERE id > {_UPTO} AND {_HAS_TEXT}",
    f"UPDATE {MARK_TABLE} SET upto = (SELECT COALESCE(MAX(id), 0) FROM {ENTRY_TABLE}) "
    "WHERE id = 1 AND EXISTS (SELECT 1 FROM {ENTRY_TABLE} WHERE id > upto)".replace(
        "{ENTRY_TABLE}", ENTRY_TABLE
    ),
]


class _TailMatcher:
    """``agentstore_fts_match(query, id, content, summary)``: FTS5's verdict on one row.

    The rows are put into a private in-memory FTS5 table with the index's
    tokenizer, keyed by entry id and kept while their text is unchanged, so a
    search over the same tail indexes each row once; a query's matching ids are
    computed once per query and table state. One per thread (sqlite3
    connections belong to their thread).
    """

    #: Rows kept before the private table is emptied (several databases may
    #: share a thread; the tail of each is below TAIL_IDS).
    LIMIT = 4 * TAIL_IDS

    def __init__(self) -> None:
        self.db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=True)
        self.db.execute(f"CREATE VIRTUAL TABLE t USING fts5(content, summary, {_TOKENIZE})")
        self.rows: dict[int, tuple[str, str]] = {}
        self.matches: dict[str, set[int]] = {}

    def __call__(self, query: str, pk: int, content: str, summary: str) -> int:
        row = (content or "", summary or "")
        if self.rows.get(pk) != row:
            if len(self.rows) >= self.LIMIT:
                self.db.execute("DELETE FROM t")
                self.rows.clear()
                self.matches.clear()
            elif pk in self.rows:
                self.db.execute("DELETE FROM t WHERE rowid = ?", (pk,))
            self.db.execute("INSERT INTO t(rowid, content, summary) VALUES (?, ?, ?)", (pk, *row))
            self.rows[pk] = row
            for known, hits in self.matches.items():
                hits.discard(pk)
                if self._one(known, pk):
                    hits.add(pk)
        found = self.matches.get(query)
        if found is None:
            if len(self.matches) >= 16:
                self.matches.clear()
            found = self.matches[query] = {
                r[0] for r in self.db.execute("SELECT rowid FROM t WHERE t MATCH ?", (query,))
            }
        return 1 if pk in found else 0

    def _one(self, query: str, pk: int) -> bool:
        sql = "SELECT 1 FROM t WHERE t MATCH ? AND rowid = ?"
        return self.db.execute(sql, (query, pk)).fetchone() is not None


_local = threading.local()


def _tail_match(query: str, pk: int, content: str, summary: str) -> int:
    matcher = getattr(_local, "matcher", None)
    if matcher is None:
        matcher = _local.matcher = _TailMatcher()
    return matcher(query, pk, content, summary)


def register_functions(connection: Any) -> None:
    """Register :data:`MATCH_FUNCTION` on a new SQLite connection (``connection_created``)."""
    if connection.vendor == "sqlite":
        connection.connection.create_function(MATCH_FUNCTION, 4, _tail_match, deterministic=True)


#: Databases known to have the index (it is never dropped by agentstore): one
#: catalogue query per database and process instead of one per search.
_KNOWN: set[tuple[str, str]] = set()


def has_search_index(using: str = "default") -> bool:
    """Does the database have this design's search index (FTS5 over the view and its mark, or
    the GIN index)?"""
    connection = connections[using]
    key = (using, str(connection.settings_dict.get("NAME")))
    if key in _KNOWN:
        return True
    with db.cursor_on(connection) as cursor:
        if connection.vendor == "sqlite":
            # The mark is created last; an earlier design has no view, or a view
            # computing other words (or its FTS5 table reads the entry table).
            cursor.execute(
                "SELECT COUNT(*) FROM sqlite_master WHERE (type = 'table' AND name = %s) "
                "OR (type = 'view' AND name = %s AND instr(sql, %s) > 0) "
                "OR (type = 'table' AND name = %s AND instr(sql, %s) > 0)",
                [MARK_TABLE, TEXT_VIEW, _sqlite_text("e"), FTS_TABLE, _OVER_VIEW],
            )
            found = int(cursor.fetchone()[0]) == 3
        elif connection.vendor == "postgresql":
            cursor.execute("SELECT 1 FROM pg_indexes WHERE indexname = %s", [PG_INDEX])
            found = cursor.fetchone() is not None
        else:
            return False
    if found:
        _KNOWN.add(key)
    return found


def ensure_search_index(using: str = "default") -> bool:
    """Create the search index if it is missing and fill it; ``True`` when it was created.

    A database indexed by an earlier design (triggers indexing every insert,
    an FTS5 table over the entry table's columns, the GIN index on the columns
    alone) loses that index and gets this one, filled from its rows.
    """
    connection = connections[using]
    if connection.vendor not in ("sqlite", "postgresql") or has_search_index(using):
        return False

    def create(cursor: SqlCursor) -> None:
        if connection.vendor == "sqlite":
            for trigger in (*_OLD_TRIGGERS, *_TRIGGERS):
                cursor.execute(f"DROP TRIGGER IF EXISTS {trigger}")
            for table in (FTS_TABLE, MARK_TABLE):
                cursor.execute(f"DROP TABLE IF EXISTS {table}")
            cursor.execute(f"DROP VIEW IF EXISTS {TEXT_VIEW}")
            for statement in (*_SQLITE_DDL, *_SQLITE_FLUSH):
                cursor.execute(statement)
        else:
            for old in _PG_OLD_INDEXES:
                cursor.execute(f"DROP INDEX IF EXISTS {old}")
            cursor.execute(
                f"CREATE INDEX IF NOT EXISTS {PG_INDEX} ON {ENTRY_TABLE} USING gin ({PG_VECTOR})"
            )

    db.write(create, using=using)
    return True


def flush_search_index(using: str = "default") -> int:
    """Index the SQLite tail now (``maintenance``, tests); the entry ids it covered.

    Searches are exact either way; a flush only moves work from later appends
    and searches to now. Nothing to do on PostgreSQL (``0``).
    """
    connection = connections[using]
    if connection.vendor != "sqlite" or not has_search_index(using):
        return 0

    def flush(cursor: SqlCursor) -> int:
        cursor.execute(f"SELECT upto FROM {MARK_TABLE} WHERE id = 1")
        before = int(cursor.fetchone()[0])
        for statement in _SQLITE_FLUSH:
            cursor.execute(statement)
        cursor.execute(f"SELECT upto FROM {MARK_TABLE} WHERE id = 1")
        return int(cursor.fetchone()[0]) - before

    return db.write(flush, using=using)


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
        query = (" ".join(f'"{w}"' for w in words[:-1]) + f' "{words[-1]}"*').strip()
        indexed_where = tail_where = ""
        if session_id:
            # "+rowid": the session's ids filter FTS5's matches; as a plain
            # "rowid IN" SQLite would hand them to FTS5 as one look-up per id
            # (a 100,000-entry session: seconds instead of milliseconds).
            indexed_where = f" AND +rowid IN (SELECT id FROM {ENTRY_TABLE} WHERE session_id = %s)"
            tail_where = " AND session_id = %s"
        scope = [session_id] if session_id else []
        # Both halves in one statement, so one snapshot: the index holds
        # exactly the rows up to the mark, the tail is matched row by row
        # with the same query (module docstring).
        sql = (
            f"SELECT id FROM (SELECT rowid AS id FROM {FTS_TABLE} WHERE {FTS_TABLE} MATCH %s"
            f"{indexed_where} ORDER BY rowid DESC LIMIT %s) "
            f"UNION ALL SELECT id FROM (SELECT id FROM {TEXT_VIEW} "
            f"WHERE id > {_UPTO}{tail_where} AND {_HAS_TEXT} "
            f"AND {MATCH_FUNCTION}(%s, id, content, summary)) "
            "ORDER BY id DESC LIMIT %s"
        )
        params = [query, *scope, limit, *scope, query, limit]
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
