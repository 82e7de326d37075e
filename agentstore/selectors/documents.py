"""Document listings (reads only): the rows of one namespace, or of all, in a stable order.

    from agentstore.selectors.documents import documents_in

    page = documents_in("settings")[:50]

Documents have no owner, so listing them is for staff (the API's ``GET
/documents``); a row is the value the ``DocumentSerializer`` renders (``namespace``,
``key``, ``value_json``, ``updated_at``).
"""

from __future__ import annotations

from django.db.models import QuerySet

from agentstore.models import Document

__all__ = ["documents_in"]


def documents_in(namespace: str = "", *, using: str = "default") -> QuerySet[Document]:
    """Documents of ``namespace`` (every namespace when ``""``), by namespace then key.

    The order follows the ``(namespace, key)`` unique index, so a page is one
    index range scan.
    """
    found = Document.objects.using(using).all()
    if namespace:
        found = found.filter(namespace=namespace)
    return found.order_by("namespace", "key")
