"""Short ids back to full ids: a unique prefix or suffix resolves, as git resolves abbreviations.

    from agentstore.selectors.short_ids import resolve

    resolve(Session.objects.all(), "id", "3f2a9c01be77")       # → the full session id
    resolve(Entry.objects.filter(session_id=sid), "entry_id", "9b1aa7339b40")

The admin and every command print ids in the short form of
:func:`agentstore.ids.short_id` — the *tail* of a UUID (its random part: the
head is a millisecond timestamp that a whole session's ids share), the head of
a ``sha256:`` hash. Whatever a person copies from that output must work as
input, so :func:`resolve` tries, in order: the exact id; ids starting with the
text (a ``sha256:`` hash also without its prefix); ids ending with it. It reads
at most two rows per try, so "ambiguous" is told apart from "unique" without
counting. A suffix match cannot use an index: give it a queryset already
narrowed (one session's entries) where the table is big.

A search that takes ids *and* words (the admin's changelists) finds both: the
rows an id names and the rows whose text matches, never one instead of the
other. :func:`mark_id_matches` lists the rows found by id first (marked by
the annotation :data:`ID_MATCH`), then the others, each group in the
listing's own order.
"""

from __future__ import annotations

from typing import Any

from django.db.models import Case, IntegerField, Q, QuerySet, Value, When

from agentstore import exceptions

__all__ = ["ID_MATCH", "MIN_SHORT", "mark_id_matches", "resolve"]

#: The shortest abbreviation accepted (git's default is 7; ours print 12).
MIN_SHORT = 6

#: The annotation :func:`mark_id_matches` adds: 1 on a row a search found by id, else 0.
ID_MATCH = "search_id_match"


def _first_two(queryset: QuerySet[Any], field: str, **lookup: str) -> list[str]:
    return [str(v) for v in queryset.filter(**lookup).values_list(field, flat=True)[:2]]


def resolve(queryset: QuerySet[Any], field: str, text: str, *, what: str = "id") -> str | None:
    """The one full value of ``field`` that ``text`` names in ``queryset``.

    ``None`` when nothing matches (shorter abbreviations than :data:`MIN_SHORT`
    only match exactly); ``ValidationError`` naming the candidates when the
    abbreviation is ambiguous.
    """
    text = text.strip()
    if not text:
        return None
    if queryset.filter(**{field: text}).exists():
        return text
    if len(text) < MIN_SHORT:
        return None
    prefixes = [text] if text.startswith("sha256:") else [text, f"sha256:{text}"]
    for lookups in (
        [{f"{field}__startswith": p} for p in prefixes],
        [{f"{field}__endswith": text}],
    ):
        found: list[str] = []
        for lookup in lookups:
            found += _first_two(queryset, field, **lookup)
        found = sorted(set(found))
        if len(found) == 1:
            return found[0]
        if len(found) > 1:
            raise exceptions.ValidationError(
                f"{what} {text!r} is ambiguous: {', '.join(found)} …", field=what
            )
    return None


def mark_id_matches(queryset: QuerySet[Any], by_id: Q) -> QuerySet[Any]:
    """``queryset`` with the rows ``by_id`` matches first, then the rest, each in its order.

    The rows are marked with :data:`ID_MATCH` (1 on an id match, else 0) and
    ordered by it before ``queryset``'s own ordering (an admin changelist
    orders its rows before it searches them).
    """
    marked = Case(When(by_id, then=Value(1)), default=Value(0), output_field=IntegerField())
    ordering = [*queryset.query.order_by] or [*queryset.model._meta.ordering]
    listed: QuerySet[Any] = queryset.annotate(**{ID_MATCH: marked})
    return listed.order_by(f"-{ID_MATCH}", *ordering)
