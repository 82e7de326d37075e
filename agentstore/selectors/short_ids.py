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
"""

from __future__ import annotations

from typing import Any

from django.db.models import QuerySet

from agentstore import exceptions

__all__ = ["MIN_SHORT", "resolve"]

#: The shortest abbreviation accepted (git's default is 7; ours print 12).
MIN_SHORT = 6


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
