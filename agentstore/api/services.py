"""The writes the API needs that no store offers yet: sessions with an owner.

``LoopStore`` creates its session rows implicitly (the first step upserts one,
ownerless), which is right for an agent loop in-process but would leave an API
caller's session visible to nobody. So the API creates the row first, owned by
the caller, in one short write transaction; the ``LoopStore`` then upserts into
it like into any loop session::

    sid = create_loop_session(owner=request.user, model="gpt-x")
    LoopStore().append(RunStep(session_id=sid, step_type="user", content="hi"))
"""

from __future__ import annotations

from typing import Any

from agentstore.db import atomic_write
from agentstore.ids import new_id
from agentstore.models import Session
from agentstore.models.sessions import SessionKind
from agentstore.stores.base import utc_now
from agentstore.validation import require_max_length

__all__ = ["claim_session_owner", "create_loop_session"]


def create_loop_session(
    *,
    owner: Any,
    model: str = "",
    system_prompt: str = "",
    cwd: str = "",
    name: str = "",
    using: str = "default",
) -> str:
    """Create an empty loop session owned by ``owner`` and return its (UUIDv7) id."""
    require_max_length(model, 255, "model")
    require_max_length(name, 500, "name")
    session_id = new_id()
    stamp = utc_now()  # made before the transaction: a retried write reuses it

    def write() -> None:
        Session.objects.using(using).create(
            id=session_id,
            kind=SessionKind.LOOP,
            owner=owner,
            cwd=cwd,
            name=name,
            model=model,
            system_prompt=system_prompt,
            created_at=stamp,
            updated_at=stamp,
        )

    atomic_write(write, using=using)
    return session_id


def claim_session_owner(session_id: str, owner: Any, *, using: str = "default") -> bool:
    """Give an ownerless session (one a store just created) to ``owner``; ``False`` if it had one.

    The LogStore creates its sessions without an owner; the API hands the new
    session to the caller right after. The ``owner IS NULL`` guard makes this a
    compare-and-set: it can never take a session away from someone.
    """
    return bool(
        atomic_write(
            lambda: (
                Session.objects.using(using)
                .filter(pk=session_id, owner__isnull=True)
                .update(owner=owner)
            ),
            using=using,
        )
    )
