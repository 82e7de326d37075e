"""The hand-written SQL: every raw statement agentstore sends, derived from ``_meta``.

This package is the one home of raw SQL (``docs/development.md``, "Where each
kind of change goes"). This module is the vocabulary — table names, column
lists, defaults, the timestamp fast path; the statements live beside it, one
module per table family: :mod:`agentstore.sql.tasks` (tasks, task events,
function tasks, workflow runs), :mod:`agentstore.sql.tree` (tree entries,
message parts, the walks), :mod:`agentstore.sql.sessions` (session rows and
their cascades), :mod:`agentstore.sql.log` (holders, refs, the ref log),
:mod:`agentstore.sql.steps` (loop steps), :mod:`agentstore.sql.documents`,
:mod:`agentstore.sql.checkpoints` (LangGraph), :mod:`agentstore.sql.seeding`
(bulk seeding) and :mod:`agentstore.sql.auth` (the API's token look-up).
Stores import the statement they send; none writes SQL text of its own
(``tests/stores/test_sql.py`` checks).

The hot paths (appends, claims, last-N, branch walks) bypass the ORM and run
hand-written SQL through Django's connection cursor (``docs/development.md``,
"Hot paths"). Such SQL must name tables and columns, and an INSERT must name
every NOT NULL column with its value, because Django's field defaults live in
Python, not in the table. Copying those lists by hand lets them drift from the
models; so every table name, column list and default used by raw SQL comes
from here, computed once from the models::

    from agentstore import sql

    f"INSERT INTO {sql.ENTRY} ({sql.columns(Entry)}) VALUES ({sql.marks(Entry)})"
    params = sql.row(Entry, session_id=sid, seq=1, entry_id=eid, ...)   # defaults filled

``tests/stores/test_sql.py`` compares every list here, and every table name and
INSERT column list in the statement modules, with ``_meta``.

Column names are written unquoted: every agentstore column is a lowercase
identifier that is not reserved on SQLite or PostgreSQL (the test selects each
column unquoted on the backend it runs on), which keeps the statements identical on both backends.

Executing: the statements are sent on :mod:`agentstore.db`'s one cursor (inside
:func:`agentstore.db.write` for a write), never on a cursor of a store's own.

Timestamps: Django stores SQLite datetimes as naive-UTC text and registers a
converter that runs a regex per value; reading the column ``CAST … AS TEXT``
(:func:`timestamp_column`) and parsing it with :func:`utc` is several times
cheaper on long reads. PostgreSQL returns aware datetimes. This is the one copy
of that fast path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from django.db import models
from django.db.backends.base.base import BaseDatabaseWrapper
from django.utils.dateparse import parse_datetime

from agentstore import exceptions
from agentstore.models import (
    Document,
    Entry,
    Grant,
    Holder,
    MessagePart,
    Ref,
    RefLog,
    Session,
    Step,
    Task,
    TaskEvent,
    WorkflowRun,
)

__all__ = [
    "DOCUMENT",
    "ENTRY",
    "GRANT",
    "HOLDER",
    "PART",
    "REF",
    "REF_LOG",
    "SESSION",
    "STEP",
    "TASK",
    "TASK_EVENT",
    "WORKFLOW_RUN",
    "adapt_datetime",
    "column_names",
    "column_types",
    "columns",
    "for_update",
    "marks",
    "names",
    "placeholders",
    "require_columns",
    "row",
    "row_builder",
    "skip_locked",
    "timestamp_column",
    "utc",
]

SESSION = Session._meta.db_table
DOCUMENT = Document._meta.db_table
ENTRY = Entry._meta.db_table
GRANT = Grant._meta.db_table
PART = MessagePart._meta.db_table
HOLDER = Holder._meta.db_table
REF = Ref._meta.db_table
REF_LOG = RefLog._meta.db_table
STEP = Step._meta.db_table
TASK = Task._meta.db_table
TASK_EVENT = TaskEvent._meta.db_table
WORKFLOW_RUN = WorkflowRun._meta.db_table


def _writable_fields(model: type[models.Model]) -> list[models.Field[Any, Any]]:
    """Concrete fields in declaration order, without an auto-incremented primary key."""
    return [
        f
        for f in model._meta.concrete_fields
        if not isinstance(f, models.AutoField | models.BigAutoField | models.SmallAutoField)
    ]


def column_types(
    model: type[models.Model], connection: Any, *, exclude: Iterable[str] = ()
) -> list[str]:
    """The database types of :func:`column_names`' columns on ``connection`` (for casts)."""
    skip = set(exclude)
    return [str(f.db_type(connection)) for f in _writable_fields(model) if f.name not in skip]


def column_names(model: type[models.Model], *, exclude: Iterable[str] = ()) -> list[str]:
    """The model's writable column names in declaration order (``exclude``: field names)."""
    skip = set(exclude)
    return [str(f.column) for f in _writable_fields(model) if f.name not in skip]


def columns(model: type[models.Model], *, exclude: Iterable[str] = (), prefix: str = "") -> str:
    """``column, column, …`` of :func:`column_names` (each with ``prefix``, e.g. ``"e."``)."""
    return ", ".join(prefix + name for name in column_names(model, exclude=exclude))


def names(model: type[models.Model], *fields: str, prefix: str = "") -> str:
    """``column, column, …`` of the named fields, in the order given.

    For the SELECT lists that read a subset: each name is looked up in
    ``_meta`` (at import, since statements are module constants), so a renamed
    or removed field fails loudly instead of leaving a stale column name.
    """
    found = [model._meta.get_field(name) for name in fields]
    for name, f in zip(fields, found, strict=True):
        if not isinstance(f, models.Field) or not f.concrete:
            raise LookupError(f"{model.__name__}.{name} is not a column")
    return ", ".join(prefix + str(f.column) for f in found if isinstance(f, models.Field))


def require_columns(model: type[models.Model], attnames: tuple[str, ...]) -> None:
    """Refuse (``ImportError``) a model whose writable columns are no longer ``attnames``.

    For a hot path that builds an INSERT's parameters positionally, in
    :func:`columns` order, instead of through :func:`row`'s keyword mapping: a
    column added, removed or moved must fail loudly at import, not shift every
    value by one (as :func:`agentstore.types.frozen.require_fields` pins a
    dataclass's field order).
    """
    found = tuple(str(f.attname) for f in _writable_fields(model))
    if found != attnames:
        raise ImportError(
            f"{model.__name__} columns changed: {found} (the positional rows expect {attnames})"
        )


def placeholders(count: int) -> str:
    """``%s, %s, …``: ``count`` placeholders (an ``IN (…)`` list)."""
    return ", ".join(["%s"] * count)


def for_update(vendor: str, *, skip_locked: bool = False, of: str = "") -> str:
    """A SELECT's row-lock suffix: none on SQLite (``BEGIN IMMEDIATE`` serialises writers)."""
    if vendor == "sqlite":
        return ""
    target = f" OF {of}" if of else ""
    return f" FOR UPDATE{target}" + (" SKIP LOCKED" if skip_locked else "")


def skip_locked(vendor: str) -> str:
    """``FOR UPDATE SKIP LOCKED`` on PostgreSQL: claimers pass rows another claimer holds."""
    return for_update(vendor, skip_locked=True)


def marks(model: type[models.Model], *, exclude: Iterable[str] = ()) -> str:
    """``%s, %s, …``: one placeholder per column of :func:`columns`."""
    return ", ".join(["%s"] * len(column_names(model, exclude=exclude)))


class _Plan:
    """How :func:`row` fills a model's columns, prepared once (it runs once per append).

    ``template`` holds the constant defaults in column order; callable defaults
    (``Session.incarnation``) are called per row, like the ORM does; a column
    with no default must be given.
    """

    __slots__ = ("callables", "index", "required", "template")

    def __init__(self, model: type[models.Model], exclude: frozenset[str]) -> None:
        self.template: list[Any] = []
        self.index: dict[str, int] = {}
        self.callables: list[tuple[int, Any]] = []
        self.required: dict[str, int] = {}
        for f in _writable_fields(model):
            if f.name in exclude:
                continue
            position = len(self.template)
            self.index[f.attname] = position
            if f.has_default() and callable(f.default):
                self.callables.append((position, f.default))
                self.template.append(None)
            elif f.has_default() or f.null:
                self.template.append(f.get_default())
            else:
                self.required[f.attname] = position
                self.template.append(None)


_PLANS: dict[tuple[type[models.Model], frozenset[str]], _Plan] = {}


def row(model: type[models.Model], /, *, exclude: Iterable[str] = (), **values: Any) -> list[Any]:
    """Parameters for ``INSERT INTO <table> (columns(model)) VALUES (marks(model))``.

    ``exclude`` (field names) matches :func:`columns`. ``values`` are keyed by
    attribute name (``session_id``, not ``session``) and must already be
    adapted for the database where the backend needs it
    (datetimes through ``connection.ops.adapt_datetimefield_value``). Every
    column missing from ``values`` gets the model's default; a column without
    one raises ``KeyError`` — a raw INSERT must not silently write NULL — and
    so does a name that is not a column.
    """
    skip = exclude if isinstance(exclude, frozenset) else frozenset(exclude)
    plan = _PLANS.get((model, skip))
    if plan is None:
        plan = _PLANS[(model, skip)] = _Plan(model, skip)
    params = plan.template.copy()
    index = plan.index
    for name, value in values.items():
        params[index[name]] = value
    for position, default in plan.callables:
        if params[position] is None:
            params[position] = default()
    for name in plan.required:
        if name not in values:
            raise KeyError(f"{model.__name__}.{name} has no default: pass a value")
    return params


def row_builder(
    model: type[models.Model], names: Sequence[str], *, exclude: Iterable[str] = ()
) -> Callable[..., list[Any]]:
    """``build(*values)``: :func:`row`'s parameters, the values of ``names`` given in order.

    ``build(a, b)`` equals ``row(model, exclude=exclude, **{names[0]: a, names[1]: b})``
    for every input. An append builds the same columns every time; ``row``
    matches them by keyword on each call (a dict of the values, a look-up and
    a store per name, the required check: most of a log row's parameters).
    Here that matching is done once, when the builder is made, and each call
    is one list display. A name that is not a column, or a column without a
    default left out of ``names``, raises ``KeyError`` here, at import —
    where ``row`` would raise it on every call.
    """
    skip = exclude if isinstance(exclude, frozenset) else frozenset(exclude)
    plan = _PLANS.get((model, skip))
    if plan is None:
        plan = _PLANS[(model, skip)] = _Plan(model, skip)
    given = {plan.index[name]: i for i, name in enumerate(names)}  # KeyError: not a column
    if len(given) != len(names):
        raise ValueError(f"{model.__name__}: a name is given twice in {tuple(names)}")
    for name in plan.required:
        if name not in names:
            raise KeyError(f"{model.__name__}.{name} has no default: pass a value")
    callables = dict(plan.callables)
    scope: dict[str, Any] = {}
    items = []
    for position, default in enumerate(plan.template):
        value = given.get(position)
        if position in callables:
            scope[f"d{position}"] = callables[position]
            # row() calls the default for a column left out or given as None.
            items.append(
                f"d{position}()"
                if value is None
                else f"(v{value} if v{value} is not None else d{position}())"
            )
        elif value is not None:
            items.append(f"v{value}")
        else:
            scope[f"t{position}"] = default
            items.append(f"t{position}")
    params = ", ".join(f"v{i}" for i in range(len(names)))
    source = f"def build({params}):\n    return [{', '.join(items)}]\n"
    exec(source, scope)  # noqa: S102 - built from column positions, not from data
    build: Callable[..., list[Any]] = scope["build"]
    return build


def timestamp_column(column: str, vendor: str) -> str:
    """A datetime column as selected by the fast path (text on SQLite; see :func:`utc`)."""
    return f"CAST({column} AS TEXT)" if vendor == "sqlite" else column


def utc(value: Any) -> datetime:
    """A timestamp read back through :func:`timestamp_column`, as an aware UTC datetime.

    SQLite gives Django's text form (``YYYY-MM-DD HH:MM:SS[.ffffff]``, naive
    UTC); PostgreSQL an aware datetime in the connection's zone.
    """
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value + "+00:00")
        except ValueError:
            stamp = parse_datetime(value)
            if stamp is None:
                raise exceptions.ValidationError(
                    f"unreadable timestamp {value!r}", field="created_at"
                ) from None
            value = stamp
    if not isinstance(value, datetime):
        raise exceptions.ValidationError(f"unreadable timestamp {value!r}", field="created_at")
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def adapt_datetime(connection: BaseDatabaseWrapper, value: datetime) -> Any:
    """``connection.ops.adapt_datetimefield_value(value)``, without its settings look-ups on SQLite.

    On a SQLite connection in UTC (``USE_TZ`` on, no ``TIME_ZONE`` of its own:
    Django's ``connection.timezone`` is then ``datetime.UTC``) Django's adapter
    makes the value naive UTC and returns ``str()`` of it; this does the same
    directly, about four times cheaper — it runs twice per loop step
    (decision record 0036). Anywhere else it *is* Django's adapter.
    """
    if connection.vendor == "sqlite" and connection.timezone is UTC:
        if value.tzinfo is UTC:
            # timezone.now()'s value: str() of it ends in "+00:00", and is
            # otherwise str() of the naive UTC value — half the cost of
            # astimezone() and replace() (the LangGraph saver, decision record 0069).
            return str(value)[:-6]
        if value.utcoffset() is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)
        return str(value)
    return connection.ops.adapt_datetimefield_value(value)
