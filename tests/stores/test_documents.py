"""DocumentStore and DocumentSource (docs/tree-store.md, "Documents")."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from agentstore import exceptions
from agentstore.models import Document
from agentstore.stores.documents import DocumentSource, DocumentStore
from agentstore.types.tree import DocumentEntity

pytestmark = pytest.mark.django_db


def test_stores_runtime_documents(documents: DocumentStore) -> None:
    stored = documents.put(
        DocumentEntity(namespace="settings", key="global", value_json='{"ok":true}')
    )

    found = documents.get("settings", "global")
    assert found == stored
    assert found is not None and found.updated_at is not None
    content, ok = DocumentSource(documents, "settings", "global").read()
    assert ok and json.loads(content) == {"ok": True}

    documents.delete("settings", "global")
    assert documents.get("settings", "global") is None
    assert DocumentSource(documents, "settings", "global").read() == (b"", False)
    documents.delete("settings", "global")  # missing: no error


def test_put_replaces_value_and_keeps_exact_text(documents: DocumentStore) -> None:
    documents.put(DocumentEntity(namespace="n", key="k", value_json="[1, 2]"))
    stamp = datetime(2026, 1, 1, tzinfo=UTC)
    documents.put(
        DocumentEntity(namespace="n", key="k", value_json='{ "b": 1,  "a": 2 }', updated_at=stamp)
    )

    found = documents.get("n", "k")
    assert found is not None
    assert found.value_json == '{ "b": 1,  "a": 2 }'
    assert found.updated_at == stamp
    assert Document.objects.count() == 1


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (DocumentEntity(namespace=" ", key="k"), "document.namespace is required"),
        (DocumentEntity(namespace="n", key=" "), "document.key is required"),
        (
            DocumentEntity(namespace="n", key="k", value_json="{"),
            "document.value_json must be valid JSON",
        ),
        (
            DocumentEntity(namespace="n", key="k", value_json=""),
            "document.value_json must be valid JSON",
        ),
        (DocumentEntity(namespace="n", key="x" * 256), "document.key is longer"),
    ],
)
def test_rejects_invalid_documents(
    documents: DocumentStore, document: DocumentEntity, message: str
) -> None:
    with pytest.raises(exceptions.ValidationError, match=message):
        documents.put(document)
    assert not Document.objects.exists()


def test_none_document_is_refused(documents: DocumentStore) -> None:
    with pytest.raises(exceptions.ValidationError, match="document is required"):
        documents.put(None)  # type: ignore[arg-type]


@pytest.mark.django_db(transaction=True)  # outside a test transaction, as served
def test_a_put_is_one_statement_in_autocommit(documents: DocumentStore) -> None:
    """The upsert is its own transaction: no BEGIN/COMMIT around it (one round trip)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    documents.put(DocumentEntity(namespace="n", key="k", value_json="1"))
    with CaptureQueriesContext(connection) as queries:
        documents.put(DocumentEntity(namespace="n", key="k", value_json="2"))
    sent = [q["sql"] for q in queries.captured_queries]
    assert len(sent) == 1 and sent[0].startswith("INSERT INTO agentstore_document"), sent
    found = documents.get("n", "k")
    assert found is not None and found.value_json == "2"
