"""Pictures the admin draws: timelines (a trace waterfall) and the workflow graph, as SVG geometry.

    from agentstore.selectors.pictures import step_timeline, task_timeline, workflow_graph

    timeline = step_timeline(session_id)   # a loop session's steps as bars on a time axis
    timeline = task_timeline(task_id)      # a task's events: how long it sat in each phase
    graph = workflow_graph(workflow_id)    # workflow → node keys → agent tasks

Each function reads a bounded number of rows (:data:`MAX_BARS`, :data:`MAX_AGENTS`)
and returns plain geometry in a fixed 1000-unit-wide coordinate space; the
templates (``admin/agentstore/_timeline.html``, ``_workflow_graph.html``) draw
it as inline SVG — server-rendered, no script and no external asset, so the
pictures work offline and in a screenshot (docs/admin.md "Pictures").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from django.db import DEFAULT_DB_ALIAS

from agentstore.ids import short_id
from agentstore.models import Step, Task, TaskEvent, WorkflowAgentTask
from agentstore.stores.base import utc_now

__all__ = [
    "MAX_AGENTS",
    "MAX_BARS",
    "Bar",
    "Column",
    "DayChart",
    "Graph",
    "GraphBox",
    "Timeline",
    "day_chart",
    "step_timeline",
    "task_timeline",
    "workflow_graph",
]

#: Bars one timeline draws (the first ones; the page says how many were left out).
MAX_BARS = 300
#: Agent tasks one workflow graph draws.
MAX_AGENTS = 200

WIDTH = 1000
LABEL_W = 230  # the label column
VALUE_W = 170  # room right of the bars for "1.2 s · 412/38 tok"
ROW_H = 22
AXIS_H = 28


@dataclass(frozen=True, slots=True, kw_only=True)
class Bar:
    """One bar: a label, where it starts and how long it is, in SVG units, and its numbers."""

    y: float
    label: str
    x: float
    width: float
    css: str  # a class: the step type or the event kind
    value: str  # "850 ms · 412/38 tok"
    title: str  # the tooltip: exact times


@dataclass(frozen=True, slots=True, kw_only=True)
class Timeline:
    """Bars on a shared time axis."""

    bars: tuple[Bar, ...]
    ticks: tuple[tuple[float, str], ...]  # (x, label) of the axis
    height: float
    span_ms: float
    total: int  # rows read: one more than ``len(bars)`` when there are more
    label_w: int = LABEL_W
    plot_right: int = WIDTH - VALUE_W


def _ms(delta: Any) -> float:
    return float(delta.total_seconds() * 1000.0)


def _duration(ms: float) -> str:
    if ms < 1000:
        return f"{ms:.0f} ms"
    if ms < 120_000:
        return f"{ms / 1000:.1f} s"
    if ms < 7_200_000:
        return f"{ms / 60_000:.1f} min"
    return f"{ms / 3_600_000:.1f} h"


def _layout(rows: list[tuple[str, datetime, float, str, str, str]], total: int) -> Timeline:
    """``rows``: (label, start, length ms, css, value, title) → bars on one axis."""
    if not rows:
        return Timeline(bars=(), ticks=(), height=AXIS_H, span_ms=0, total=total)
    t0 = min(start for _, start, _, _, _, _ in rows)
    end = max(_ms(start - t0) + length for _, start, length, _, _, _ in rows)
    span = max(end, 1.0)
    plot = WIDTH - VALUE_W - LABEL_W
    bars = []
    for i, (label, start, length, css, value, title) in enumerate(rows):
        x = LABEL_W + plot * _ms(start - t0) / span
        bars.append(
            Bar(
                y=AXIS_H + i * ROW_H,
                label=label,
                x=round(x, 1),
                width=round(max(plot * length / span, 2.0), 1),
                css=css,
                value=value,
                title=title,
            )
        )
    ticks = tuple(
        (round(LABEL_W + plot * k / 4, 1), _duration(span * k / 4) if k else "0") for k in range(5)
    )
    return Timeline(
        bars=tuple(bars),
        ticks=ticks,
        height=AXIS_H + len(bars) * ROW_H + 4,
        span_ms=span,
        total=total,
    )


def step_timeline(session_id: str, *, using: str = DEFAULT_DB_ALIAS) -> Timeline:
    """A loop session's steps, in insertion order, as a waterfall.

    A step is recorded when it is done, so its bar ends at ``created_at`` and
    is ``duration_ms`` long (a step without a duration is drawn as a tick).
    """
    steps = Step.objects.using(using).filter(session_id=session_id).order_by("id")
    # One row past the bound tells "there are more" without counting them.
    picked = list(
        steps.values_list(
            "step_index",
            "step_type",
            "created_at",
            "duration_ms",
            "prompt_tokens",
            "completion_tokens",
        )[: MAX_BARS + 1]
    )
    total = len(picked)
    rows = []
    for index, kind, at, ms, tokens_in, tokens_out in picked[:MAX_BARS]:
        start = at - timedelta(milliseconds=ms)
        value = _duration(ms) if ms else ""
        if tokens_in or tokens_out:
            value = f"{value} · {tokens_in}/{tokens_out} tok".lstrip(" ·")
        rows.append(
            (
                f"#{index} {kind}",
                start,
                float(ms),
                f"step-{kind}",
                value,
                f"{kind}: ended {at.isoformat(' ', 'milliseconds')}",
            )
        )
    return _layout(rows, total)


def task_timeline(task_id: str, *, using: str = DEFAULT_DB_ALIAS) -> Timeline:
    """A task's events, each drawn until the next one (the last until it finished, or now)."""
    events = TaskEvent.objects.using(using).filter(task_id=task_id).order_by("sequence")
    picked = list(events.values_list("sequence", "kind", "created_at")[: MAX_BARS + 1])
    task = Task.objects.using(using).filter(pk=task_id).values_list("finished_at").first()
    finished = task[0] if task else None
    total = len(picked)  # MAX_BARS + 1: there are more
    rows = []
    for i, (sequence, kind, at) in enumerate(picked[:MAX_BARS]):
        if i + 1 < len(picked):
            until = picked[i + 1][2]
        else:
            until = finished if finished is not None and finished >= at else at
            if finished is None:
                until = max(at, utc_now())
        length = max(_ms(until - at), 0.0)
        rows.append(
            (
                f"#{sequence} {kind}",
                at,
                length,
                f"event-{kind}",
                _duration(length) if length else "",
                f"{kind} at {at.isoformat(' ', 'milliseconds')}",
            )
        )
    return _layout(rows, total)


@dataclass(frozen=True, slots=True, kw_only=True)
class GraphBox:
    """A box of the workflow graph: the run, a node key, or an agent task."""

    x: float
    y: float
    w: float
    h: float
    label: str
    sub: str
    css: str
    href_task: str = ""  # the task id the box links to ("" for node boxes)


@dataclass(frozen=True, slots=True, kw_only=True)
class Graph:
    boxes: tuple[GraphBox, ...]
    edges: tuple[tuple[float, float, float, float], ...]  # (x1, y1, x2, y2)
    height: float
    total: int  # agent tasks read: one more than drawn when there are more
    more: bool = False  # not every agent task is drawn


def workflow_graph(
    workflow_id: str, name: str, state: str, *, using: str = DEFAULT_DB_ALIAS
) -> Graph:
    """The workflow run, its node keys and the agent tasks each launched, as boxes and edges.

    Three columns: the run; one box per node key (in first-launch order); the
    agent tasks of the node (by invocation, then sequence), coloured by state.
    """
    links = WorkflowAgentTask.objects.using(using).filter(workflow_id=workflow_id)
    rows = list(
        links.order_by("sequence").values_list(
            "node_key",
            "invocation_index",
            "agent_task_id",
            "agent_task__agent_name",
            "agent_task__task__state",
        )[: MAX_AGENTS + 1]
    )
    total = len(rows)  # MAX_AGENTS + 1: there are more
    rows = rows[:MAX_AGENTS]
    nodes: dict[str, list[tuple[int, str, str, str]]] = {}
    for node, invocation, task_id, agent, agent_state in rows:
        nodes.setdefault(node or "(no node)", []).append(
            (invocation, task_id, agent or "", agent_state or "")
        )
    box_h, gap = 34.0, 10.0
    boxes: list[GraphBox] = []
    edges: list[tuple[float, float, float, float]] = []
    y = 10.0
    node_boxes: list[GraphBox] = []
    for node, agents in nodes.items():
        top = y
        for invocation, task_id, agent, agent_state in agents:
            boxes.append(
                GraphBox(
                    x=640,
                    y=y,
                    w=340,
                    h=box_h,
                    label=agent or short_id(task_id),
                    sub=f"invocation {invocation} · {agent_state}",
                    css=f"state-{agent_state}",
                    href_task=task_id,
                )
            )
            y += box_h + gap
        middle = (top + y - gap) / 2 - box_h / 2
        node_box = GraphBox(
            x=330,
            y=middle,
            w=220,
            h=box_h,
            label=node,
            sub=f"{len(agents)} agent task(s)",
            css="node",
        )
        node_boxes.append(node_box)
        for box in boxes[-len(agents) :]:
            edges.append((550, middle + box_h / 2, 640, box.y + box_h / 2))
        y += gap
    height = max(y, 60.0)
    run = GraphBox(
        x=10,
        y=height / 2 - box_h / 2,
        w=240,
        h=box_h,
        label=name or short_id(workflow_id),
        sub=f"workflow · {state}",
        css=f"state-{state}",
        href_task=workflow_id,
    )
    for node_box in node_boxes:
        edges.append((250, run.y + box_h / 2, 330, node_box.y + box_h / 2))
    return Graph(
        boxes=(run, *node_boxes, *boxes),
        edges=tuple(edges),
        height=height,
        total=total,
        more=total > MAX_AGENTS,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Column:
    """One day of a day chart: its stacked segments (y, height, css, value) and its label."""

    x: float
    width: float
    label: str
    total: int
    segments: tuple[tuple[float, float, str, str], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DayChart:
    columns: tuple[Column, ...]
    height: float
    peak: int
    legend: tuple[tuple[str, str], ...]  # (css, name)


def day_chart(
    days: Sequence[date], values: dict[date, dict[str, int]], *, height: float = 120
) -> DayChart:
    """Stacked columns, one per day, of ``values[day][series]`` (an empty day is a gap)."""
    names = sorted({name for per in values.values() for name in per})
    css = {name: f"series-{i % 6}" for i, name in enumerate(names)}
    peak = max((sum(per.values()) for per in values.values()), default=0)
    plot_h = height - 20
    slot = (WIDTH - 10) / max(len(days), 1)
    columns = []
    for i, day in enumerate(days):
        per = values.get(day, {})
        y = plot_h
        segments = []
        for name in names:
            n = per.get(name, 0)
            if not n:
                continue
            h = plot_h * n / peak if peak else 0
            y -= h
            segments.append((round(y, 1), round(h, 1), css[name], f"{name}: {n}"))
        columns.append(
            Column(
                x=round(5 + i * slot + slot * 0.15, 1),
                width=round(slot * 0.7, 1),
                label=day.strftime("%m-%d"),
                total=sum(per.values()),
                segments=tuple(segments),
            )
        )
    return DayChart(
        columns=tuple(columns),
        height=height,
        peak=peak,
        legend=tuple((css[n], n) for n in names),
    )
