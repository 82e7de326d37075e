"""The raw SQL of the document store: one race-free upsert (``docs/tree-store.md``).

``INSERT … ON CONFLICT (namespace, key) DO UPDATE`` is the same statement on
SQLite ≥ 3.24 and PostgreSQL, and two writers of one key cannot both insert.
"""

from __future__ import annotations

from agentstore.models import Document
from agentstore.sql import DOCUMENT, columns, marks, names

UPSERT = (
    f"INSERT INTO {DOCUMENT} ({columns(Document)}) VALUES ({marks(Document)}) "
    f"ON CONFLICT ({names(Document, 'namespace', 'key')}) "
    "DO UPDATE SET value_json = excluded.value_json, updated_at = excluded.updated_at"
)
