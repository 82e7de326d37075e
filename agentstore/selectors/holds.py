"""Holds: who has a session open for writing, and breaking a stale hold.

A :class:`~agentstore.models.Holder` row says which process (pid on host) holds a
session. Both questions go to the SessionStore, which owns session rows and
their holds: breaking a hold has consequences (the holder's next append finds
its hold gone and fails with ``SessionLocked``), so there is exactly one
implementation of it::

    from agentstore.selectors.holds import hold_of, break_hold

    info = hold_of(session_id)          # LockInfo(pid, host, since, heartbeat) or None
    broken = break_hold(session_id)     # True when a hold was removed

The holder's fencing token is never part of the answer: whoever knows it could
write as the holder.
"""

from __future__ import annotations

from agentstore.stores.sessions import SessionStore
from agentstore.types.log import LockInfo

__all__ = ["HoldInfo", "break_hold", "hold_of"]

#: What :func:`hold_of` returns: the LogStore's ``LockInfo`` (pid, host, since, heartbeat).
HoldInfo = LockInfo


def hold_of(session_id: str, *, using: str = "default") -> HoldInfo | None:
    """Return who holds ``session_id`` (any kind of session), or ``None`` when nobody does."""
    return SessionStore(using=using).hold(session_id)


def break_hold(session_id: str, *, using: str = "default") -> bool:
    """Remove whatever hold ``session_id`` has; ``True`` if there was one."""
    return SessionStore(using=using).break_hold(session_id)
