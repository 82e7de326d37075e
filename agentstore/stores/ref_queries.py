"""The ref store's queries: refs and a ref's log, one bounded page at a time (reads only).

    from agentstore.stores.ref_queries import ref_log_rows, refs_under

    refs_under("team/", after="team/a")[:51]    # Ref rows, byte order, names > "team/a"
    ref_log_rows("team/main", after=812)[:51]   # RefLog rows, newest first, ids < 812

``RefStore.list_refs`` and ``RefStore.ref_log`` slice these querysets, so the
database orders and bounds every page (``LIMIT``) and no listing reads more
rows than it shows (docs/api.md, "Log sessions and refs"; decision record 0033).

*Refs* page by **keyset on the name**: a page is the names strictly greater
than the last one seen (``after``), in byte order. A prefix is a *range*,
``name >= prefix AND name < prefix_upper(prefix)``, not ``LIKE``: ``LIKE`` is
case-insensitive on SQLite and treats ``_`` and ``%`` as wildcards, and a range
is what the primary-key index answers. Byte order is SQLite's ``BINARY``
collation; on PostgreSQL the comparisons and the order say ``COLLATE "C"``
(the database's default collation may be a locale's, whose order is neither
byte order nor stable across ``glibc`` versions), and ``Ref.name`` is itself a
``"C"`` column there, so that expression is the primary key's own order and the
index serves the range and the order (decision record 0013).

The *ref log* pages by **keyset on the row id**, newest first: a page is the
rows with ``id < after`` of one name, through the ``(name, id)`` index. An
offset would repeat rows when the ref moves while someone reads its history.

``sessions`` restricts both to what a caller may see (a ``Session`` queryset,
e.g. :func:`agentstore.selectors.sessions.sessions_visible_to`): a ref whose
session is among them; a log row whose every named session is. ``None`` means
every row, dangling refs included.
"""

from __future__ import annotations

from typing import Any

from django.db import connections
from django.db.models import Exists, F, OuterRef, Q, QuerySet
from django.db.models.functions import Collate, Lower

from agentstore.models import Ref, RefLog

__all__ = ["clash_candidates", "count_refs_under", "prefix_upper", "ref_log_rows", "refs_under"]


def prefix_upper(prefix: str) -> str | None:
    """The least string greater than every string that starts with ``prefix``; ``None``: no bound.

    The last character that can be incremented is, and what follows it dropped
    (``"ab"`` → ``"ac"``). Code-point order is UTF-8 byte order, so the bound
    holds for SQLite's ``BINARY`` and PostgreSQL's ``"C"`` alike. ``""`` (or a
    prefix of nothing but the last code point) has no upper bound.
    """
    chars = list(prefix)
    while chars:
        last = ord(chars.pop())
        if last < 0x10FFFF:
            bumped = last + 1
            if 0xD800 <= bumped <= 0xDFFF:
                bumped = 0xE000  # surrogates are not characters a column holds
            return "".join(chars) + chr(bumped)
    return None


def _byte_order(field: str, using: str) -> Any:
    """``field`` in byte order: as it is on SQLite, ``COLLATE "C"`` on PostgreSQL."""
    if connections[using].vendor == "postgresql":
        return Collate(field, "C")
    return F(field)


def _in_range(prefix: str, after: str, using: str) -> QuerySet[Ref]:
    found = Ref.objects.using(using).alias(key=_byte_order("name", using))
    if prefix:
        found = found.filter(key__gte=prefix)
        upper = prefix_upper(prefix)
        if upper is not None:
            found = found.filter(key__lt=upper)
    if after:
        found = found.filter(key__gt=after)
    return found


def refs_under(
    prefix: str = "",
    *,
    after: str = "",
    sessions: QuerySet[Any] | None = None,
    using: str = "default",
) -> QuerySet[Ref]:
    """Refs named ``prefix…`` and greater than ``after``, in byte order (slice it for a page)."""
    found = _in_range(prefix, after, using)
    if sessions is not None:
        # EXISTS, not ``session_id IN (…)``: given an IN list, SQLite reads the
        # refs through the ``session_id`` index and sorts all of them, every
        # page; a correlated EXISTS leaves the name index as the only access
        # path, so a page stops after ``LIMIT`` visible names (decision record 0033).
        found = found.filter(Exists(sessions.filter(pk=OuterRef("session_id"))))
    return found.order_by(_byte_order("name", using))


def count_refs_under(
    prefix: str = "", *, sessions: QuerySet[Any] | None = None, using: str = "default"
) -> int:
    """How many refs :func:`refs_under` lists (no ``after``): one ``COUNT``.

    It reads every matching index entry — the one part of a ``/refs`` answer
    that grows with the refs (decision record 0033). Here the IN list is the better
    plan: the session index finds a user's refs without probing every name.
    """
    found = _in_range(prefix, "", using)
    if sessions is not None:
        found = found.filter(session_id__in=sessions.values("pk"))
    return found.count()


def clash_candidates(name: str, *, using: str = "default") -> list[str]:
    """The few existing names that could forbid creating ``name``: index probes, not a scan.

    The creation rules (:mod:`agentstore.stores.log_refs`) refuse a name that is a
    segment-prefix of an existing one, either way, or whose leading segments differ
    from one's only in ASCII case. Every clash shares a *folded* (lower-cased)
    segment-prefix with ``name`` — its first ``k + 1`` segments, for some ``k`` —
    and existing names never clash with each other, so all the names that share
    one folded prefix spell it the same way. One name per prefix therefore stands
    for all of them: for each ``k``, one name folded *equal to* ``name``'s first
    ``k + 1`` segments and one folded *under* them (``prefix/…``), each an
    ``ORDER BY … LIMIT 1`` seek in the ``LOWER(name)`` index
    (``agentstore_ref_folded``). The caller checks the candidates with the rules
    themselves (``log_refs.conflict``), so a candidate that does not clash costs
    nothing but its read. 2 × segments probes, whatever the number of refs
    (at most 100 segments fit in 200 bytes; typical names have 2–4).
    """
    refs = Ref.objects.using(using).alias(folded=Lower("name"))
    segments = name.lower().split("/")
    found: list[str] = []
    for k in range(len(segments)):
        folded = "/".join(segments[: k + 1])
        probes = (
            refs.filter(folded=folded),
            # "/" is followed by "0" in byte order: [prefix/, prefix0) is the subtree.
            refs.filter(folded__gte=folded + "/", folded__lt=folded + "0"),
        )
        for probe in probes:
            other = probe.order_by("folded").values_list("name", flat=True).first()
            if other is not None:
                found.append(other)
    return found


def ref_log_rows(
    name: str,
    *,
    after: int | None = None,
    sessions: QuerySet[Any] | None = None,
    using: str = "default",
) -> QuerySet[RefLog]:
    """``name``'s log rows, newest first, older than position ``after`` (slice it for a page)."""
    found = RefLog.objects.using(using).filter(name=name)
    if after is not None:
        found = found.filter(id__lt=after)
    if sessions is not None:
        # A name outlives its refs: a row is shown only when every session it
        # names is one the caller may see (an earlier holder's history is theirs).
        visible = sessions.values("pk")
        found = found.filter(Q(old_session="") | Q(old_session__in=visible)).filter(
            Q(new_session="") | Q(new_session__in=visible)
        )
    return found.order_by("-id")
