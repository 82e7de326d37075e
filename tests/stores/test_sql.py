"""The raw SQL's table names and column lists match the models' ``_meta``.

Every hand-written INSERT in agentstore takes its columns from
``agentstore.stores.sql``; these tests parse each statement back and compare
it with the model, so a field added, renamed or reordered cannot leave a
statement writing the wrong column (or leaving a NOT NULL column out).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from django.db import connection, models

from agentstore import models as m
from agentstore.stores import documents, log_rows, loop, sessions, sql, tree
from agentstore.stores.loop import _Statements
from agentstore.tasks import repository

# Words SQLite or PostgreSQL reserve that would need quoting as a column name.
RESERVED = {
    "all", "and", "as", "asc", "between", "by", "case", "check", "column", "constraint",
    "create", "default", "delete", "desc", "distinct", "else", "end", "from", "group",
    "having", "in", "index", "insert", "into", "is", "join", "key", "limit", "not", "null",
    "offset", "on", "or", "order", "primary", "references", "select", "set", "table",
    "then", "to", "union", "unique", "update", "user", "using", "values", "when", "where",
}  # fmt: skip


def meta_columns(model: type[models.Model]) -> list[str]:
    """What raw SQL must write: every concrete column but an auto-incremented key."""
    return [
        str(f.column)
        for f in model._meta.concrete_fields
        if not isinstance(f, models.AutoField | models.BigAutoField)
    ]


def inserted_columns(statement: str) -> list[str]:
    match = re.match(r"INSERT INTO (\w+) \(([^)]*)\)", statement)
    assert match is not None, statement
    return [c.strip() for c in match.group(2).split(",")]


def inserted_table(statement: str) -> str:
    match = re.match(r"INSERT INTO (\w+) ", statement)
    assert match is not None, statement
    return match.group(1)


MODELS = {
    sql.DOCUMENT: m.Document,
    sql.SESSION: m.Session,
    sql.ENTRY: m.Entry,
    sql.GRANT: m.Grant,
    sql.PART: m.MessagePart,
    sql.HOLDER: m.Holder,
    sql.REF: m.Ref,
    sql.REF_LOG: m.RefLog,
    sql.STEP: m.Step,
    sql.TASK: m.Task,
    sql.TASK_EVENT: m.TaskEvent,
    sql.WORKFLOW_RUN: m.WorkflowRun,
}


def test_table_names_come_from_meta() -> None:
    for table, model in MODELS.items():
        assert table == model._meta.db_table
    assert m.Session._meta.db_table == log_rows.SESSION_TABLE
    assert m.Entry._meta.db_table == log_rows.ENTRY_TABLE
    assert (
        m.Task._meta.db_table,
        m.TaskEvent._meta.db_table,
    ) == (repository.TASK_TABLE, repository.EVENT_TABLE)


@pytest.mark.parametrize("model", list(MODELS.values()), ids=lambda model: model.__name__)
def test_column_lists_are_the_models_columns(model: type[models.Model]) -> None:
    assert sql.column_names(model) == meta_columns(model)
    for column in sql.column_names(model):
        # Unquoted names must be plain, unreserved identifiers on both backends.
        assert re.fullmatch(r"[a-z_][a-z0-9_]*", column), column
        assert column not in RESERVED, column


@pytest.mark.parametrize(
    ("statement", "model"),
    [
        (sessions._INSERT, m.Session),
        (documents._UPSERT, m.Document),
        (tree._INSERT_ENTRY, m.Entry),
        (tree._INSERT_PART, m.MessagePart),
        (loop._INSERT_GRANT, m.Grant),
        (log_rows.INSERT_ENTRY, m.Entry),
        (repository._INSERT_EVENT, m.TaskEvent),
        (repository._INSERT_NEXT_EVENT, m.TaskEvent),
    ],
    ids=[
        "session",
        "document",
        "tree-entry",
        "tree-part",
        "grant",
        "log-entry",
        "task-event",
        "next-task-event",
    ],
)
def test_every_insert_writes_every_column_once(statement: str, model: type[models.Model]) -> None:
    assert inserted_table(statement) == model._meta.db_table
    assert sorted(inserted_columns(statement)) == sorted(meta_columns(model))


@pytest.mark.django_db
def test_the_step_insert_and_reads_follow_the_model() -> None:
    statements = _Statements(connection)
    assert inserted_table(statements.insert_step) == m.Step._meta.db_table
    assert inserted_columns(statements.insert_step) == meta_columns(m.Step)
    selected = statements.last_n.split(" FROM ")[0].removeprefix("SELECT ")
    names = [re.sub(r"CAST\((\w+) AS TEXT\)", r"\1", c.strip()) for c in selected.split(",")]
    assert names == [c for c in meta_columns(m.Step) if c != "session_id"]


def test_the_tree_select_list_is_the_primary_key_then_every_other_column() -> None:
    names = [c.strip().removeprefix("e.") for c in tree._E_COLUMNS.split(",")]
    # call_id is the log store's column; compaction_settings is read by build_context
    # alone (_CONTEXT_COLUMNS).
    skipped = ("session_id", "call_id", "compaction_settings")
    assert names == ["id", *(c for c in meta_columns(m.Entry) if c not in skipped)]
    # The positions the readers use point at the columns they mean (session_id first).
    selected = ["session_id", *names]
    assert selected[tree._PK] == "id"
    assert selected[tree._PART_COUNT] == "part_count"
    assert (selected[tree._ROLE], selected[tree._CONTENT]) == ("role", "content")


def test_row_fills_the_models_defaults() -> None:
    stamp = datetime(2026, 1, 1, tzinfo=UTC)
    values = dict(
        zip(
            sql.column_names(m.Entry),
            sql.row(m.Entry, session_id="s", seq=1, entry_id="e", type="t", created_at=stamp),
            strict=True,
        )
    )
    for f in m.Entry._meta.concrete_fields:
        if f.column in ("session_id", "seq", "entry_id", "type", "created_at", "id"):
            continue
        assert values[str(f.column)] == f.get_default(), f.column
    with pytest.raises(KeyError, match="created_at"):
        sql.row(m.Entry, session_id="s", seq=1, entry_id="e", type="t")


def test_the_timestamp_fast_path_reads_both_backends_forms() -> None:
    expected = datetime(2026, 5, 31, 12, 0, 1, 250000, tzinfo=UTC)
    assert sql.utc("2026-05-31 12:00:01.250000") == expected
    assert sql.utc("2026-05-31 12:00:01.25+00:00") == expected
    assert sql.utc(expected.replace(tzinfo=None)) == expected
    assert sql.timestamp_column("created_at", "sqlite") == "CAST(created_at AS TEXT)"
    assert sql.timestamp_column("created_at", "postgresql") == "created_at"
