"""The raw SQL's table names and column lists match the models' ``_meta``.

Every hand-written INSERT in agentstore takes its columns from
``agentstore.sql``; these tests parse each statement back and compare
it with the model, so a field added, renamed or reordered cannot leave a
statement writing the wrong column (or leaving a NOT NULL column out).
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

import pytest
from django.apps import apps
from django.core.exceptions import FieldDoesNotExist
from django.db import models

from agentstore import models as m
from agentstore import sql
from agentstore.sql import auth as auth_sql
from agentstore.sql import checkpoints as checkpoint_sql
from agentstore.sql import seeding as seeding_sql
from agentstore.sql import sessions as session_sql
from agentstore.sql import steps as steps_sql
from agentstore.sql import tasks as task_sql
from agentstore.sql import tree as tree_sql


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


MODELS: dict[str, type[models.Model]] = {
    model._meta.db_table: model for model in apps.get_app_config("agentstore").get_models()
}
#: Names a statement may select FROM that are not tables: its own CTEs and subqueries.
NOT_TABLES = {"chain", "doomed", "n", "x"}


def statement_modules() -> list[ModuleType]:
    """agentstore.sql and every module of the package."""
    found = [sql]
    for info in pkgutil.iter_modules(sql.__path__):
        found.append(importlib.import_module(f"agentstore.sql.{info.name}"))
    return found


def built_statements() -> list[str]:
    """The statements the cached builders make, for each backend and a few shapes."""
    out: list[str] = []
    for vendor in ("sqlite", "postgresql"):
        out += [
            task_sql.lock_task(vendor),
            task_sql.lock_tool_task(vendor),
            task_sql.lock_workflow_owner(vendor),
            task_sql.running_fence(vendor),
            task_sql.claim_ready(2, 1, 5, vendor),
            task_sql.claim_ready(1, 0, 1, vendor),
            task_sql.claim_next(vendor),
            task_sql.expired_of_kind(vendor),
            task_sql.expired_requeueable(2, vendor),
            session_sql.lock_kind(vendor),
            *steps_sql.reads(vendor),
            tree_sql.select_entries(vendor, "e.session_id = %s", "e.seq"),
            tree_sql.sort_key(vendor),
            tree_sql.branch(vendor, tree_sql.E_COLUMNS, True),
            tree_sql.branch(vendor, "e.id", False),
            tree_sql.has_image_part(vendor),
            tree_sql.descendants(vendor),
            tree_sql.climb(vendor, tree_sql.context_select_list(vendor), "", False),
            tree_sql.climb(vendor, "e.id", "type", True),
            tree_sql.walk_one(vendor, tree_sql.WALK_NEXT_SIBLING, True),
            tree_sql.walk_climb(vendor),
        ]
    out += [
        task_sql.finish(2, True),
        task_sql.finish(1, False),
        task_sql.transition(("state = %s", "updated_at = %s"), 2, " AND lease_owner IS NULL"),
        task_sql.ready(1, 2),
        session_sql.update(("name", "updated_at")),
        session_sql.upsert("loop", ("model",)),
        session_sql.upsert("tree", ()),
        tree_sql.load_parts(3),
        tree_sql.child_counts(2),
        tree_sql.delete_parts(2),
        tree_sql.delete_entries(2),
        *checkpoint_sql.COPY_THREAD,
        checkpoint_sql.blobs_of(2),
        checkpoint_sql.many(checkpoint_sql.INSERT_WRITE, 3),
        checkpoint_sql.many(checkpoint_sql.UPSERT_WRITE, 2),
        checkpoint_sql.put(0),
        checkpoint_sql.put(2),
        seeding_sql.generate(m.Entry, {"seq": "n.i", "entry_id": "'e' || CAST(n.i AS TEXT)"}),
        seeding_sql.generate(m.Step, {"step_index": "n.i"}),
        checkpoint_sql.many(checkpoint_sql.UPSERT_WRITE, 3),
    ]
    return out


def module_statements() -> list[str]:
    """Every SQL string constant of the package's modules."""
    out = []
    for module in statement_modules():
        for name, value in vars(module).items():
            if name.isupper() and isinstance(value, str) and SQL_WORD.match(value):
                out.append(value)
    return out


SQL_WORD = re.compile(r"^\s*(SELECT|INSERT|UPDATE|DELETE|WITH)\b")
TABLE_AFTER = re.compile(r"(?<!DISTINCT )\b(?:FROM|JOIN|INTO|UPDATE)\s+([a-z_][a-z0-9_]*)")
SELECT_LIST = re.compile(r"^SELECT ((?:[a-z_.]+, )*[a-z_.]+) FROM ([a-z_]+)(?: ([a-z]))?\b")
JOINED = re.compile(r"(?:FROM|JOIN) ([a-z_]+) ([a-z])\b")
SET_LIST = re.compile(r"^UPDATE ([a-z_]+) SET (.*?) WHERE")


def all_statements() -> list[str]:
    return module_statements() + built_statements()


def test_the_package_holds_statements() -> None:
    # The collector finds what it checks: a broken collector must not pass vacuously.
    assert len(module_statements()) >= 40
    assert task_sql.INSERT_EVENT in module_statements()
    assert session_sql.INSERT in module_statements()


@pytest.mark.parametrize("statement", all_statements())
def test_every_table_name_is_a_models_table(statement: str) -> None:
    for table in TABLE_AFTER.findall(statement):
        assert table in MODELS or table in NOT_TABLES, (table, statement)


@pytest.mark.parametrize("statement", [s for s in all_statements() if s.startswith("INSERT INTO")])
def test_every_insert_writes_every_column_once(statement: str) -> None:
    model = MODELS[inserted_table(statement)]
    assert sorted(inserted_columns(statement)) == sorted(meta_columns(model))
    assert len(set(inserted_columns(statement))) == len(inserted_columns(statement))


@pytest.mark.parametrize("statement", all_statements())
def test_every_plain_select_and_set_list_names_the_tables_columns(statement: str) -> None:
    """A SELECT of plain columns from one table, and an UPDATE's SET list, name real columns."""
    selected = SELECT_LIST.match(statement)
    if selected is not None:
        # A joined table's columns are named through its alias (``w.task_id``).
        tables = {alias: table for table, alias in JOINED.findall(statement)}
        for item in selected.group(1).split(", "):
            alias, _, column = item.rpartition(".")
            model = MODELS[tables.get(alias, selected.group(2))]
            known = {str(f.column) for f in model._meta.concrete_fields}
            assert column in known, (item, statement)
    updated = SET_LIST.match(statement)
    if updated is not None:
        known = {str(f.column) for f in MODELS[updated.group(1)]._meta.concrete_fields}
        for assignment in updated.group(2).split(", "):
            column = assignment.split(" = ")[0].strip()
            if re.fullmatch(r"[a-z_]+", column):
                assert column in known, (column, statement)


def test_a_field_added_to_a_model_reaches_the_insert() -> None:
    """The lists are computed, not copied: a new field shows in columns() and row()."""
    extra = models.CharField(max_length=8, default="x")
    extra.set_attributes_from_name("zz_probe")
    extra.model = m.Holder
    fields = m.Holder._meta.concrete_fields
    try:
        m.Holder._meta.concrete_fields = (*fields, extra)  # type: ignore[misc]
        # A plan cached by an earlier test in this process predates the field.
        sql._PLANS.clear()
        assert sql.column_names(m.Holder)[-1] == "zz_probe"
        assert (
            sql.row(m.Holder, session_id="s", pid=1, host="h", token="t", since=1, heartbeat=1)[-1]
            == "x"
        )
    finally:
        m.Holder._meta.concrete_fields = fields  # type: ignore[misc]
        sql._PLANS.clear()


def test_the_generated_insert_names_every_column_and_computes_only_what_it_is_told() -> None:
    statement = seeding_sql.generate(m.Step, {"step_index": "n.i"})
    match = re.search(r"INSERT INTO (\w+) \(([^)]*)\) SELECT (.*) FROM n$", statement)
    assert match is not None, statement
    assert match.group(1) == m.Step._meta.db_table
    inserted = [c.strip() for c in match.group(2).split(",")]
    assert inserted == meta_columns(m.Step)
    selected = [c.strip() for c in match.group(3).split(",")]
    assert dict(zip(inserted, selected, strict=True))["step_index"] == "n.i"
    assert selected.count("%s") == len(inserted) - 1
    with pytest.raises(LookupError):
        seeding_sql.generate(m.Step, {"no_such_column": "n.i"})


def test_the_checkpoint_statements_follow_the_models() -> None:
    # Statements prefixed by a CTE or joined by UNION ALL escape the generic checks.
    cte = checkpoint_sql.put(2).removeprefix("WITH blobs AS (")
    assert inserted_table(cte) == m.CheckpointBlob._meta.db_table
    assert sorted(inserted_columns(cte)) == sorted(meta_columns(m.CheckpointBlob))
    for select in checkpoint_sql.blobs_of(2).split(" UNION ALL "):
        table = re.search(r" FROM (\w+) ", select)
        assert table is not None and table.group(1) in MODELS
        known = {str(f.column) for f in MODELS[table.group(1)]._meta.concrete_fields}
        listed = select.split(" FROM ")[0].removeprefix("SELECT ").split(", ")
        assert {c for c in listed if re.fullmatch(r"[a-z_]+", c)} <= known, select
    read = [c.strip() for c in checkpoint_sql.READ_COLUMNS.split(",")]
    assert set(read) <= set(meta_columns(m.Checkpoint))


def test_the_token_lookup_names_the_token_and_user_models_columns() -> None:
    from django.contrib.auth import get_user_model
    from rest_framework.authtoken.models import Token

    user = get_user_model()
    statement, loaded = auth_sql.token_lookup(Token, user)
    quoted = set(re.findall(r'"([^"]+)"', statement))
    user_columns = {str(f.column) for f in user._meta.concrete_fields}
    token_columns = {str(f.column) for f in Token._meta.concrete_fields}
    tables = {Token._meta.db_table, user._meta.db_table}
    assert quoted <= user_columns | token_columns | tables, quoted - user_columns - token_columns
    assert tables <= quoted
    # The loaded names are the user's, in the model's field order (Model.from_db needs it).
    order = [f.attname for f in user._meta.concrete_fields]
    assert loaded == sorted(loaded, key=order.index)
    assert {"is_active", "is_staff", user._meta.pk.attname} <= set(loaded)


def test_names_refuses_a_field_that_is_not_a_column() -> None:
    assert sql.names(m.Entry, "seq", "entry_id", prefix="e.") == "e.seq, e.entry_id"
    assert sql.names(m.Session, "owner") == "owner_id"
    with pytest.raises(FieldDoesNotExist):
        sql.names(m.Entry, "no_such_field")
    with pytest.raises(LookupError):
        sql.names(m.Session, "entries")  # a reverse relation, not a column


def test_the_step_reads_follow_the_model() -> None:
    for vendor in ("sqlite", "postgresql"):
        statements = steps_sql.reads(vendor)
        selected = statements.last_n.split(" FROM ")[0].removeprefix("SELECT ")
        names = [re.sub(r"CAST\((\w+) AS TEXT\)", r"\1", c.strip()) for c in selected.split(",")]
        assert names == [c for c in meta_columns(m.Step) if c != "session_id"]


def test_the_tree_select_list_is_the_primary_key_then_every_other_column() -> None:
    names = [c.strip().removeprefix("e.") for c in tree_sql.E_COLUMNS.split(",")]
    # call_id is the log store's column; compaction_settings is read by build_context
    # alone (_CONTEXT_COLUMNS).
    skipped = ("session_id", "call_id", "compaction_settings")
    assert names == ["id", *(c for c in meta_columns(m.Entry) if c not in skipped)]
    # The positions the readers use point at the columns they mean (session_id first).
    selected = ["session_id", *names]
    assert selected[tree_sql.PK] == "id"
    assert selected[tree_sql.PART_COUNT] == "part_count"
    assert (selected[tree_sql.ROLE], selected[tree_sql.CONTENT]) == ("role", "content")


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


def test_the_timestamp_adapter_writes_what_djangos_writes() -> None:
    # Decision record 0069: a UTC value takes str() minus its "+00:00" on SQLite.
    from datetime import timedelta, timezone

    from django.db import connection

    for stamp in (
        datetime(2026, 5, 31, 12, 0, 1, 250000, tzinfo=UTC),
        datetime(2026, 5, 31, 12, 0, 1, tzinfo=UTC),  # no microseconds: none printed
        datetime(2026, 5, 31, 14, 0, 1, 5, tzinfo=timezone(timedelta(hours=2))),
    ):
        assert sql.adapt_datetime(connection, stamp) == (
            connection.ops.adapt_datetimefield_value(stamp)
        )


# -- raw SQL lives in agentstore/sql/ ---------------------------------------------------

STATEMENT = re.compile(
    r"^\s*(SELECT\b|INSERT INTO\b|UPDATE \S+ SET\b|DELETE FROM\b|WITH RECURSIVE\b)|"
    r"\b(FROM|JOIN|INTO) \{"
)
#: Modules outside agentstore/sql/ that may still hold SQL text, and why.
ELSEWHERE = {
    # The owner of the search index: its FTS5 table, triggers and tsvector index.
    "search.py": "the search index's own DDL and match queries",
    # Connection set-up and server commands, no table names.
    "db.py": "PRAGMAs and transaction modes",
    "notify.py": "pg_notify / LISTEN",
    "maintenance.py": "VACUUM",
}


def sql_strings(path: Path) -> list[str]:
    """The literal text of every string (f-strings' literal parts too) that looks like SQL."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.JoinedStr):
            text = "".join(v.value if isinstance(v, ast.Constant) else "{x}" for v in node.values)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            text = node.value
        else:
            continue
        if STATEMENT.search(text):
            found.append(text)
    return found


def test_raw_sql_lives_in_the_sql_package() -> None:
    root = Path(sql.__file__).resolve().parent.parent
    offenders = {}
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        if relative.startswith(("sql/", "migrations/")) or relative in ELSEWHERE:
            continue
        # Docstrings may quote a statement; only code counts.
        texts = [t for t in sql_strings(path) if "\n" not in t.strip() or t.lstrip()[:6].isupper()]
        if texts:
            offenders[relative] = texts[:2]
    assert offenders == {}


def test_the_scan_sees_sql() -> None:
    # A broken scanner must not pass: the package itself is full of statements.
    assert len(sql_strings(Path(task_sql.__file__))) > 10
    assert sql_strings(Path(sql.__file__).parent / "tree.py")


@pytest.mark.django_db
def test_every_column_works_unquoted() -> None:
    # The statements write column names bare (agentstore/sql/__init__.py): each
    # must be a lowercase identifier the database reads as that column, which
    # only the database itself can say (its reserved words differ by backend).
    from django.db import connection

    with connection.cursor() as cursor:
        for model in apps.get_app_config("agentstore").get_models():
            for field in model._meta.concrete_fields:
                column = str(field.column)
                assert re.fullmatch(r"[a-z_][a-z0-9_]*", column), (model.__name__, column)
                cursor.execute(f"SELECT {column} FROM {model._meta.db_table} WHERE 1 = 0")


def test_require_columns_refuses_another_column_order() -> None:
    """Positional rows (the checkpoint store's) fail at import, not by a shift.

    Decision record 0036.
    """
    own = tuple(sql.column_names(m.CheckpointBlob))
    assert own == ("session_id", "checkpoint_ns", "channel", "version", "type", "blob")
    sql.require_columns(m.CheckpointBlob, own)
    with pytest.raises(ImportError, match="CheckpointBlob"):
        sql.require_columns(m.CheckpointBlob, ("session_id", "checkpoint_ns", "version", "channel"))
