"""A loop session's approvals (reads only), oldest grant first, for paging.

    from agentstore.selectors.grants import grants_of

    page = grants_of(session_id)[:50]      # Grant rows: prompt, granted_at

The order is :meth:`LoopStore.grants`'s — ``granted_at``, ties by the prompt in
code-point order — computed by the database so a page is one bounded read
(``(session_id, granted_at)`` index) however many prompts a session approved.
Code-point order is SQLite's ``BINARY`` collation and PostgreSQL's ``"C"``
(the database's default collation may be a locale's).
"""

from __future__ import annotations

from typing import Any

from django.db import connections
from django.db.models import F, QuerySet
from django.db.models.functions import Collate

from agentstore.models import Grant

__all__ = ["grants_of"]


def grants_of(session_id: str, *, using: str = "default") -> QuerySet[Grant]:
    """The grants of ``session_id``, oldest first (ties by prompt, code-point order)."""
    prompt: Any = F("prompt")
    if connections[using].vendor == "postgresql":
        prompt = Collate("prompt", "C")
    found = Grant.objects.using(using).filter(session_id=session_id)
    return found.order_by("granted_at", prompt, "id")
