"""A run as its readers see it: :func:`agentstore.runs.get_run` and the API return these.

run = runs.get_run(run_id)
run.state      # "queued" → "running" → "succeeded" / "failed" / "canceled" …
run.output     # the runner's return value (decoded JSON) once succeeded, else None
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

__all__ = ["Run"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Run:
    """One run: a runner continuing one session by one agent turn, as a durable task."""

    id: str
    runner: str
    session_id: str
    #: The task's state: queued, running, canceling, succeeded, failed, canceled, interrupted.
    state: str
    input: Any = None
    overrides: dict[str, Any] = field(default_factory=dict)
    #: What the runner returned (decoded JSON) once the run succeeded, else ``None``.
    output: Any = None
    error_code: str = ""
    error_message: str = ""
    queue_name: str = "default"
    #: Attempts started (a rerun after a crash counts) and allowed (failures).
    attempts: int = 0
    max_attempts: int = 1
    created_at: datetime | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    updated_at: datetime | None = None
    run_after: datetime | None = None

    @property
    def finished(self) -> bool:
        """Whether the run has ended (succeeded, failed, canceled or interrupted)."""
        return self.state in ("succeeded", "failed", "canceled", "interrupted")
