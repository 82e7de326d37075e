"""The raw SQL of bulk seeding (:mod:`agentstore.demo.seeding`): set-based, never per row.

The demo, the benchmarks and the tests that need a big session fill tables
with these instead of the stores' one-row-per-call writes. Tasks and their
events use the task family's own INSERTs (:mod:`agentstore.sql.tasks`);
entries here use a plain multi-row-friendly INSERT (the tree store's computes
``seq`` in the statement, which a seeder gives explicitly).

:func:`generate` makes a whole run of rows inside the database with one
recursive ``INSERT … SELECT``: its column list is every column of ``_meta``
(:func:`agentstore.sql.columns`), the computed ones as SQL expressions over
``n.i`` and every other one a parameter, so the caller fills the model's
defaults with :func:`agentstore.sql.row`.
"""

from __future__ import annotations

from collections.abc import Mapping

from django.db import models

from agentstore.models import Entry
from agentstore.sql import ENTRY, column_names, columns, marks

#: One entry row, every column given. Params: ``row(Entry, …)``.
INSERT_ENTRY = f"INSERT INTO {ENTRY} ({columns(Entry)}) VALUES ({marks(Entry)})"

#: Turn every chain entry whose seq is ``offset`` modulo ``every`` into a
#: compaction keeping the ``keep`` entries before it (``e<seq - keep>``).
#: Params: model_facing (False), keep, session id, every, every, offset.
COMPACT_EVERY = (
    f"UPDATE {ENTRY} SET type = 'compaction', role = '', content = '',"
    " model_facing = %s, summary = 'summary ' || entry_id,"
    " compaction_first_kept_entry_id = 'e' || CAST(seq - %s AS TEXT)"
    " WHERE session_id = %s AND seq - %s * (seq / %s) = %s"
)


def generate(model: type[models.Model], computed: Mapping[str, str]) -> str:
    """``count`` rows of ``model`` from one recursive ``INSERT … SELECT`` (``n.i`` = 1…count).

    ``computed`` maps a column to an SQL expression over ``n.i`` (no
    parameters; a key that is not a column raises ``LookupError``). Params:
    ``count``, then one value per other column in :func:`agentstore.sql.columns`
    order.
    """
    names = column_names(model)
    unknown = set(computed) - set(names)
    if unknown:
        raise LookupError(f"{model.__name__} has no column {sorted(unknown)}")
    select = ", ".join(computed.get(name, "%s") for name in names)
    return (
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < %s) "
        f"INSERT INTO {model._meta.db_table} ({columns(model)}) SELECT {select} FROM n"
    )
