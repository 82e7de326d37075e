"""The session row as the stores return it (``SessionStore``), whatever its kind."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

__all__ = ["SessionRecord"]


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
