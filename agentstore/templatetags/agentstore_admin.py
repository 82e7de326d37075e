"""Template tags for agentstore's admin: the dashboard block and small formatting filters.

    {% load agentstore_admin %}
    {% agentstore_dashboard %}

The dashboard reads its counts through ``agentstore.selectors.admin_views.dashboard``
(four grouped queries), so any admin template can show it.
"""

from __future__ import annotations

from typing import Any

from django import template

from agentstore.ids import short_id
from agentstore.selectors.admin_views import dashboard
from agentstore.stores.base import utc_now

register = template.Library()


@register.inclusion_tag("admin/agentstore/dashboard.html")
def agentstore_dashboard() -> dict[str, Any]:
    """Counts of sessions, active holds, tasks by state and expired leases."""
    return {"board": dashboard(utc_now())}


@register.filter
def as_text(value: bytes | memoryview | str | None) -> str:
    """Bytes shown as UTF-8 text (invalid sequences replaced)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return bytes(value).decode("utf-8", "replace")


@register.filter
def get_item(mapping: Any, key: Any) -> Any:
    """``mapping[key]``, or ``None`` when absent (a dict lookup by a variable key)."""
    if not mapping:
        return None
    return mapping.get(key)


@register.filter
def short(value: str | None) -> str:
    """The short form of an id the command line accepts back (``agentstore.ids.short_id``)."""
    return short_id(value or "")


@register.filter
def nbytes(value: bytes | memoryview | None) -> int:
    """The size of a binary value in bytes (0 for none)."""
    return 0 if value is None else len(bytes(value))
