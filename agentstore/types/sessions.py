"""The session row as the stores return it (``SessionStore``), whatever its kind.

``SessionRow`` is the row as an export file carries it from one database to
another (``manage.py agentstore export``/``import``, docs/commands.md "Files").
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

__all__ = ["SessionRecord", "SessionRow"]


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionRecord:
    """One ``Session`` row: identity, kind, owner and the columns every kind shares.

    Kind-specific views stay with their stores (``TreeStore`` returns
    ``SessionEntity``, ``LoopStore`` ``LoopSession``, ``LogStore`` the format's
    ``Session``); this is what listing, ownership and deletion work with.
    """

    id: str
    kind: str
    created_at: datetime
    updated_at: datetime
    #: The owner's primary key (``None``: nobody's; only staff see it).
    owner_id: Any = None
    cwd: str = ""
    name: str = ""
    parent_session: str = ""
    #: The header line (log sessions; tree sessions imported from a file).
    header: str = ""
    superseded_by: str = ""
    model: str = ""
    system_prompt: str = ""
    incarnation: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionRow:
    """The columns of a session an export moves: everything but its owner and bookkeeping.

    The owner is a user of one database (``import --owner`` names one of the
    other); ``incarnation`` is drawn anew by every insert (a ref compares it to
    tell a session from one re-created under the same id); the log columns
    (``header``, ``superseded_by``, ``log_head``) travel in agentsession files.
    ``data`` is the loop snapshot's exact bytes (JSON text) or ``None``.
    """

    id: str
    kind: str
    created_at: datetime
    updated_at: datetime
    cwd: str = ""
    name: str = ""
    parent_session: str = ""
    model: str = ""
    system_prompt: str = ""
    data: bytes | None = None
    message_id: str = ""
    status: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    step_count: int = 0
    duration_ms: int = 0
    data_bytes_carried: int = 0
