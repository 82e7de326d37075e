"""The usage page's numbers: tokens and cost per model per day, sessions and tasks per day.

    from agentstore.selectors.usage import usage

    report = usage(now, days=7)
    report.days            # the dates of the period, oldest first
    report.tokens          # UsageRow(day, model, tokens_in, tokens_out, cost) per model and day
    report.sessions        # {day: {kind: n}}
    report.outcomes        # {state: n} of tasks that finished in the period

Every query is bounded by the period and grouped in the database, except the
agentsession responses, whose token usage sits in their JSON line: at most
:data:`RESPONSES_READ` of them are read (the report says when it stopped).
Sources of tokens: loop sessions (their finalize totals, on the day they were
last updated) and agentsession ``response`` entries (their ``usage``, on the
day of the entry). Costs come from ``AGENTSTORE["MODEL_PRICES"]``
(docs/operations.md), never guessed.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from django.db import DEFAULT_DB_ALIAS
from django.db.models import Count, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from agentstore.conf import agentstore_settings
from agentstore.models import Entry, Session, Task

__all__ = ["PERIODS", "RESPONSES_READ", "Usage", "UsageRow", "usage"]

#: The periods the page offers, in days.
PERIODS = (1, 7, 30, 90)
#: agentsession response lines read for their usage, at most.
RESPONSES_READ = 20_000


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageRow:
    day: date
    model: str
    tokens_in: int
    tokens_out: int
    cost: float | None  # USD; None without a price for the model


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    start: datetime
    days: tuple[date, ...]
    tokens: tuple[UsageRow, ...]
    sessions: dict[date, dict[str, int]]
    tasks: dict[date, int]
    outcomes: dict[str, int]
    responses_capped: bool

    @property
    def by_model(self) -> list[tuple[str, int, int, float | None]]:
        """(model, tokens in, tokens out, cost) over the whole period, most tokens first."""
        totals: dict[str, list[Any]] = {}
        for row in self.tokens:
            t = totals.setdefault(row.model, [0, 0, None])
            t[0] += row.tokens_in
            t[1] += row.tokens_out
            if row.cost is not None:
                t[2] = (t[2] or 0.0) + row.cost
        return sorted(
            ((m, a, b, c) for m, (a, b, c) in totals.items()), key=lambda r: -(r[1] + r[2])
        )


def _price(model: str) -> tuple[float, float] | None:
    prices = agentstore_settings.MODEL_PRICES or {}
    value = prices.get(model)
    if isinstance(value, list | tuple) and len(value) == 2:
        return float(value[0]), float(value[1])
    return None


def usage(now: datetime, days: int = 7, *, using: str = DEFAULT_DB_ALIAS) -> Usage:
    """The numbers of the last ``days`` days up to ``now`` (days in the current time zone)."""
    today = timezone.localdate(now)
    first = today - timedelta(days=days - 1)
    start = timezone.make_aware(datetime.combine(first, datetime.min.time()))
    period = tuple(first + timedelta(days=i) for i in range(days))

    sessions: dict[date, dict[str, int]] = defaultdict(dict)
    for day, kind, n in (
        Session.objects.using(using)
        .filter(created_at__gte=start)
        .annotate(day=TruncDate("created_at"))
        .values_list("day", "kind")
        .annotate(n=Count("id"))
        .order_by()
    ):
        sessions[day][kind] = n
    tasks = dict(
        Task.objects.using(using)
        .filter(created_at__gte=start)
        .annotate(day=TruncDate("created_at"))
        .values_list("day")
        .annotate(n=Count("id"))
        .order_by()
    )
    outcomes = dict(
        Task.objects.using(using)
        .filter(finished_at__gte=start)
        .values_list("state")
        .annotate(n=Count("id"))
        .order_by()
    )

    tokens: dict[tuple[date, str], list[int]] = defaultdict(lambda: [0, 0])
    for day, model, tin, tout in (
        Session.objects.using(using)
        .filter(kind="loop", updated_at__gte=start)
        .annotate(day=TruncDate("updated_at"))
        .values_list("day", "model")
        .annotate(tin=Sum("prompt_tokens"), tout=Sum("completion_tokens"))
        .order_by()
    ):
        if tin or tout:
            tokens[(day, model or "(unknown)")][0] += tin or 0
            tokens[(day, model or "(unknown)")][1] += tout or 0
    responses = list(
        Entry.objects.using(using)
        .filter(type="response", created_at__gte=start, entry_id__startswith="sha256:")
        .values_list("created_at", "model", "line")[: RESPONSES_READ + 1]
    )
    for at, model, line in responses[:RESPONSES_READ]:
        try:
            data = json.loads(line)
        except ValueError:
            continue
        used = data.get("usage") if isinstance(data, dict) else None
        if not isinstance(used, dict):
            continue
        key = (timezone.localdate(at), model or str(data.get("model") or "(unknown)"))
        tokens[key][0] += int(used.get("input_tokens") or 0)
        tokens[key][1] += int(used.get("output_tokens") or 0)

    rows = []
    for (day, model), (tin, tout) in sorted(tokens.items()):
        price = _price(model)
        cost = None if price is None else (tin * price[0] + tout * price[1]) / 1_000_000
        rows.append(UsageRow(day=day, model=model, tokens_in=tin, tokens_out=tout, cost=cost))
    return Usage(
        start=start,
        days=period,
        tokens=tuple(rows),
        sessions=dict(sessions),
        tasks=tasks,
        outcomes=outcomes,
        responses_capped=len(responses) > RESPONSES_READ,
    )
