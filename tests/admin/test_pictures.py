"""Timelines and the workflow graph: geometry from the rows, drawn as inline SVG."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from agentstore.models import Session
from agentstore.selectors.pictures import step_timeline, task_timeline, workflow_graph
from agentstore.stores.loop import LoopStore
from agentstore.types import RunStep
from tests.admin.seed import World

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def _steps(session_id: str) -> None:
    store = LoopStore()
    # (type, ends at second, lasts ms, tokens in, tokens out)
    for index, (kind, end, ms, tin, tout) in enumerate(
        [("user", 1, 0, 0, 0), ("execute_js", 3, 2000, 0, 0), ("response", 7, 4000, 412, 38)]
    ):
        store.append(
            RunStep(
                session_id=session_id,
                step_index=index,
                step_type=kind,
                duration_ms=ms,
                prompt_tokens=tin,
                completion_tokens=tout,
                created_at=T0 + timedelta(seconds=end),
            )
        )


def test_step_bars_end_when_the_step_was_recorded() -> None:
    _steps("loop-t")
    timeline = step_timeline("loop-t")
    user, tool, reply = timeline.bars
    assert timeline.span_ms == 6000  # from the first start (1 s) to the last end (7 s)
    # execute_js ran from 1 s to 3 s, the reply from 3 s to 7 s: they touch.
    assert tool.x == user.x and abs((tool.x + tool.width) - reply.x) < 0.2
    assert reply.width == pytest.approx(2 * tool.width, abs=0.2)
    assert reply.value == "4.0 s · 412/38 tok" and user.width == 2.0  # a tick
    assert [label for _, label in timeline.ticks] == ["0", "1.5 s", "3.0 s", "4.5 s", "6.0 s"]


def test_steps_page_draws_the_timeline(admin_client: Client) -> None:
    _steps("loop-t")
    page = admin_client.get(reverse("admin:agentstore_session_steps", args=["loop-t"]))
    html = page.content.decode()
    svg = html[html.index('id="step-timeline"') :]
    assert svg.count("<rect") == 3 and "412/38 tok" in svg
    assert "http" not in svg[: svg.index("</svg>")]  # no external asset


def test_task_timeline_and_workflow_graph(admin_client: Client, world: World) -> None:
    timeline = task_timeline(world.tool_task_id)
    assert [b.label for b in timeline.bars] == ["#1 task_queued", "#2 task_started"]
    graph = workflow_graph(world.workflow_id, "review", "queued")
    labels = [b.label for b in graph.boxes]
    assert labels == ["review", "review", "reviewer"]  # run, node key, agent task
    assert len(graph.edges) == 2
    page = admin_client.get(
        reverse("admin:agentstore_workflowrun_change", args=[world.workflow_id])
    ).content.decode()
    assert 'id="workflow-graph"' in page
    assert reverse("admin:agentstore_task_change", args=[world.workflow_agent_id]) in page


def test_usage_counts_tokens_per_model_and_prices_them(admin_client: Client, settings: Any) -> None:
    from agentstore.selectors.usage import usage
    from agentstore.stores.log import LogStore

    settings.AGENTSTORE = {"MODEL_PRICES": {"gpt-5": [1.0, 10.0]}}
    store = LogStore()
    now = datetime.now(UTC)
    store.create({"id": "usage-log", "cwd": "/r"})
    for tokens_in, tokens_out in ((1000, 100), (2000, 300)):
        store.append(
            "usage-log",
            {
                "type": "response",
                "model": "gpt-5",
                "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out},
            },
        )
    store.close()
    _steps("loop-u")
    Session.objects.filter(pk="loop-u").update(
        model="small", prompt_tokens=50, completion_tokens=5, updated_at=now
    )
    report = usage(now, 7)
    assert report.by_model == [("gpt-5", 3000, 400, pytest.approx(0.007)), ("small", 50, 5, None)]
    assert sum(report.sessions[timezone.localdate(now)].values()) == 2
    page = admin_client.get(reverse("admin:agentstore_usage")).content.decode()
    assert "0.0070" in page and 'class="agentstore-chart"' in page
