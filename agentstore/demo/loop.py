"""Demo data of the agent-loop store: one loop session with a trace, a summary, a grant.

    from agentstore.demo import loop
    for line in loop.seed(owner):
        print(line)

Everything goes through :class:`agentstore.stores.LoopStore` (the session row,
with its name, model and system prompt, through its ``SessionStore``). The
store's clock is scripted: the session starts at :data:`START` and every write
is stamped with the time of the step it records, so the steps fall within the
session's lifetime and the demo reads the same on every machine. Safe to run
again: the trace is written only when the session does not exist yet; the
snapshot, the finalize summary and the grant are upserts.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from agentstore.stores import LoopStore
from agentstore.types import FinalizeSummary, RunStep

SESSION_ID = "demo-loop-weather"
NAME = "Demo: Lisbon weather (agent loop)"
MODEL = "gpt-5-mini"
SYSTEM_PROMPT = "You answer weather questions. Use execute_js to fetch forecasts."
PROMPT = "Allow fetch from api.open-meteo.com?"
#: When the demo loop session starts; its steps follow 5 seconds apart.
START = datetime(2026, 5, 31, 9, 0, tzinfo=UTC)


class _Clock:
    """The store's clock, set to the moment being recorded (a scripted run)."""

    def __init__(self, at: datetime) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at


def _steps() -> list[RunStep]:
    trace: list[tuple[str, str, dict[str, Any] | None, int, int, int]] = [
        ("user", "What's the weather in Lisbon tomorrow?", None, 0, 0, 0),
        (
            "execute_js",
            "Fetching the forecast.",
            {"code": "await fetch('https://api.open-meteo.com/v1/forecast?city=Lisbon')"},
            820,
            412,
            38,
        ),
        ("execute_js_result", '{"max_c": 24, "min_c": 16, "rain_mm": 0}', None, 310, 0, 0),
        ("response", "Tomorrow in Lisbon: 16–24 °C and dry.", None, 640, 530, 21),
        ("user", "And the day after?", None, 0, 0, 0),
        (
            "summary",
            "[summary] The user asked for Lisbon's forecast; tomorrow is 16–24 °C, dry.",
            {"retain_from_step": 4},
            0,
            0,
            0,
        ),
        ("response", "The day after: 17–23 °C with light rain in the evening.", None, 700, 610, 24),
    ]
    return [
        RunStep(
            session_id=SESSION_ID,
            step_index=index,
            step_type=step_type,
            content=content,
            tool_args=None if args is None else json.dumps(args).encode(),
            duration_ms=duration,
            prompt_tokens=prompt,
            completion_tokens=completion,
            created_at=START + timedelta(seconds=5 * index),
        )
        for index, (step_type, content, args, duration, prompt, completion) in enumerate(trace)
    ]


def seed(owner: Any) -> list[str]:
    """Create the demo loop session (once) and return lines describing it."""
    clock = _Clock(START)
    store = LoopStore(clock=clock)
    created = not store.exists(SESSION_ID)
    steps = _steps()
    if created:
        store.sessions.create(
            "loop",
            session_id=SESSION_ID,
            owner=owner,
            name=NAME,
            model=MODEL,
            system_prompt=SYSTEM_PROMPT,
        )
        for step in steps:
            clock.at = step.created_at or START
            store.append(step)
    # The run ends a second after its last step: snapshot, summary, approval.
    clock.at = (steps[-1].created_at or START) + timedelta(seconds=1)
    store.update_data(SESSION_ID, b'{"city":"Lisbon","units":"metric"}')
    store.finalize(
        SESSION_ID,
        FinalizeSummary(
            status="completed",
            prompt_tokens=sum(s.prompt_tokens for s in steps),
            completion_tokens=sum(s.completion_tokens for s in steps),
            step_count=len(steps),
            duration_ms=sum(s.duration_ms for s in steps),
            data_bytes_carried=34,
        ),
    )
    store.grant(SESSION_ID, PROMPT)
    if owner is not None:
        # Ownership is the SessionStore's concern, not the loop store's; only
        # when nobody owns the session yet.
        store.sessions.transfer(SESSION_ID, owner, only_unowned=True)
    verb = "Created" if created else "Kept"
    return [
        f"{verb} loop session {SESSION_ID} ({NAME!r}, {MODEL}: "
        f"{len(store.steps(SESSION_ID))} steps, 1 summary step, approved: {PROMPT!r})",
    ]
