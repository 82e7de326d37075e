"""FilterSets of the list endpoints (django-filter), applied to owner-scoped querysets.

Filters narrow what the viewset's queryset already allows; they never widen it,
so ``?owner=someone-else`` on a non-staff request finds nothing rather than
another user's sessions::

    GET /sessions?cwd=/repo&current=true&search=flaky
"""

from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import QuerySet

from agentstore.models import Session, Task
from agentstore.selectors.sessions import search_sessions

__all__ = ["SessionFilter", "TaskFilter"]


class SessionFilter(django_filters.FilterSet):  # type: ignore[misc]
    """Filters of ``GET /sessions``."""

    kind = django_filters.ChoiceFilter(
        choices=[("tree", "tree"), ("loop", "loop"), ("log", "log"), ("graph", "graph")]
    )
    cwd = django_filters.CharFilter(field_name="cwd", help_text="Exact working directory.")
    parent = django_filters.CharFilter(
        field_name="parent_session", help_text="Child sessions of this session id."
    )
    top_level = django_filters.BooleanFilter(
        method="filter_top_level", help_text="Only sessions without a parent (true) or with one."
    )
    owner = django_filters.CharFilter(
        field_name="owner__username", help_text="Owner's username (staff see every owner)."
    )
    current = django_filters.BooleanFilter(
        method="filter_current", help_text="Only sessions not continued in a successor."
    )
    search = django_filters.CharFilter(
        method="filter_search", help_text="Text in the name or the opening user message."
    )

    class Meta:
        model = Session
        fields = ["kind", "cwd", "parent", "owner", "current", "search"]

    def filter_top_level(
        self, queryset: QuerySet[Any], name: str, value: bool | None
    ) -> QuerySet[Any]:
        if value is None:
            return queryset
        return queryset.filter(parent_session="") if value else queryset.exclude(parent_session="")

    def filter_current(
        self, queryset: QuerySet[Any], name: str, value: bool | None
    ) -> QuerySet[Any]:
        if value is None:
            return queryset
        return queryset.filter(superseded_by="") if value else queryset.exclude(superseded_by="")

    def filter_search(self, queryset: QuerySet[Any], name: str, value: str) -> QuerySet[Any]:
        return search_sessions(queryset, value)  # type: ignore[arg-type]


class TaskFilter(django_filters.FilterSet):  # type: ignore[misc]
    """Filters of ``GET /tasks``."""

    kind = django_filters.CharFilter(field_name="kind")
    state = django_filters.MultipleChoiceFilter(
        field_name="state",
        choices=[
            (s, s)
            for s in (
                "queued",
                "running",
                "canceling",
                "succeeded",
                "failed",
                "canceled",
                "interrupted",
            )
        ],
        help_text="One or more states (repeat the parameter).",
    )
    session = django_filters.CharFilter(field_name="owner_session_id", help_text="Owner session.")
    parent_task = django_filters.CharFilter(field_name="parent_task_id")
    concurrency_key = django_filters.CharFilter(field_name="concurrency_key")

    class Meta:
        model = Task
        fields = ["kind", "state", "session", "parent_task", "concurrency_key"]
