"""DocumentStore: small JSON documents by (namespace, key) — runtime settings and state.

    store = DocumentStore()
    store.put(DocumentEntity(namespace="settings", key="global", value_json='{"ok":true}'))
    doc = store.get("settings", "global")          # None when absent
    DocumentSource(store, "settings", "global").read()   # (b'{"ok":true}', True)

The value is kept as the exact JSON text given (any JSON shape), so a reader gets
back what was written. ``put`` is one upsert statement.
"""

from __future__ import annotations

from django.db import connections

from agentstore import sql
from agentstore.exceptions import ValidationError
from agentstore.models import Document
from agentstore.sql import documents as documents_sql
from agentstore.stores.base import StoreBase
from agentstore.types.tree import DocumentEntity
from agentstore.validation import require_aware, require_json, require_name

__all__ = ["DocumentSource", "DocumentStore"]


def _require_names(namespace: str, key: str) -> None:
    # One rule for names (decision record 0079): a NUL in a key was stored
    # on SQLite and refused (a 500) by PostgreSQL.
    require_name(namespace, "document.namespace")
    require_name(key, "document.key")


class DocumentStore(StoreBase):
    """Runtime documents (the librecode ``DocumentRepository`` behaviour)."""

    def get(self, namespace: str, key: str) -> DocumentEntity | None:
        """Return the document, or ``None``; an impossible name raises ``ValidationError``."""
        _require_names(namespace, key)
        row = (
            Document.objects.using(self.using)
            .filter(namespace=namespace, key=key)
            .values_list("value_json", "updated_at")
            .first()
        )
        if row is None:
            return None
        return DocumentEntity(namespace=namespace, key=key, value_json=row[0], updated_at=row[1])

    def put(self, document: DocumentEntity) -> DocumentEntity:
        """Store or replace a document; ``updated_at`` defaults to now. Returns what was stored."""
        if document is None:
            raise ValidationError("document is required", field="document")
        _require_names(document.namespace, document.key)
        require_json(document.value_json, "document.value_json")
        stamp = (
            require_aware(document.updated_at, "document.updated_at")
            if document.updated_at is not None
            else self.now()
        )
        connection = connections[self.using]

        params = sql.row(
            Document,
            namespace=document.namespace,
            key=document.key,
            value_json=document.value_json,
            updated_at=connection.ops.adapt_datetimefield_value(stamp),
        )
        # One statement, its own transaction (PostgreSQL: one round trip, not three).
        self.write(lambda cursor: cursor.execute(documents_sql.UPSERT, params), single=True)
        return DocumentEntity(
            namespace=document.namespace,
            key=document.key,
            value_json=document.value_json,
            updated_at=stamp,
        )

    def delete(self, namespace: str, key: str) -> None:
        """Delete the document; a missing one is not an error."""
        _require_names(namespace, key)
        rows = Document.objects.using(self.using).filter(namespace=namespace, key=key)
        self.write(lambda cursor: rows.delete(), orm=True)


class DocumentSource:
    """A read-only view of one document for code that reads JSON sources."""

    def __init__(self, store: DocumentStore, namespace: str, key: str) -> None:
        self.store = store
        self.namespace = namespace
        self.key = key

    def read(self) -> tuple[bytes, bool]:
        """Return ``(value bytes, found)``."""
        document = self.store.get(self.namespace, self.key)
        if document is None:
            return b"", False
        return document.value_json.encode(), True
