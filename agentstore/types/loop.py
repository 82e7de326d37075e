"""Value objects of the agent-loop store: one step of a trace, a run's summary, a listing row.

    from agentstore.types import RunStep, FinalizeSummary

    store.append(RunStep(session_id=sid, step_index=0, step_type="user", content="hi"))
    store.finalize(sid, FinalizeSummary(status="completed", step_count=2))

They mirror agentloop's Go structs field for field (snake_case), and every
field defaults to the Go zero value, so ``RunStep(session_id=sid)`` is valid
input. Go's zero ``time.Time`` is ``None`` here. Go's ``json.RawMessage``
fields (``RunStep.tool_args``, ``LoopSession.data``) are ``bytes``: the store
keeps them byte for byte, never re-encoding them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

__all__ = [
    "FinalizeSummary",
    "GrantInfo",
    "LoopSession",
    "RunStep",
    "SessionInfo",
    "TokenUsage",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStep:
    """One recorded step of an agent loop (a user turn, a tool call, its result, a reply…).

    ``step_type`` is one of the loop's types (``user``, ``execute_js``,
    ``execute_js_result``, ``response``, ``error``, ``summary``) — the store treats
    them all alike. ``step_index`` may repeat within a session; insertion order
    is the order. ``created_at`` ``None`` means "stamp it with the store's clock".
    """

    session_id: str = ""
    step_index: int = 0
    step_type: str = ""
    content: str = ""
    tool_args: bytes | None = None
    duration_ms: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    created_at: datetime | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class FinalizeSummary:
    """What one finished run reports about itself; the latest run's summary wins."""

    status: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    step_count: int = 0
    duration_ms: int = 0
    data_bytes_carried: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenUsage:
    """Prompt and completion token counts."""

    prompt: int = 0
    completion: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionInfo:
    """One row of :meth:`LoopStore.list`: enough for a person to recognise a session.

    ``steps`` is the last finalize's ``step_count`` (not a count of stored
    steps); ``opening`` is the content of the session's first ``user`` step.
    """

    id: str = ""
    model: str = ""
    status: str = ""
    steps: int = 0
    tokens: TokenUsage = field(default_factory=TokenUsage)
    created_at: datetime | None = None
    updated_at: datetime | None = None
    opening: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class LoopSession:
    """The session snapshot a loop loads before each run.

    :meth:`LoopStore.get` returns ``LoopSession()`` (``id == ""``) for an unknown
    session; ``data`` is the exact snapshot bytes, or ``None`` when never set.
    """

    id: str = ""
    model: str = ""
    system_prompt: str = ""
    data: bytes | None = None
    message_id: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class GrantInfo:
    """One approval as stored: the exact prompt and when it was (last) approved.

    :meth:`LoopStore.grant_created` returns it; approving a prompt again
    refreshes ``granted_at``.
    """

    session_id: str = ""
    prompt: str = ""
    granted_at: datetime | None = None
