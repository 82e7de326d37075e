"""What a follower reads: the next items of a session of any kind, after a position.

    from agentstore.selectors.follow import read_after, session_exists, wait_for_change

    items = read_after(session_id, kind, after=0, limit=200)   # oldest first
    after = items[-1].position if items else after
    if not items:
        wait_for_change(session_id, 0.25)                       # then read again

Every session kind has one insertion-ordered log, and each item carries the
integer *position* a follower resumes after (the SSE ``id:`` line,
``Last-Event-ID``, the command's last row):

===========  ==============  ==============================================
kind         event           position and item
===========  ==============  ==============================================
``tree``     ``entry``       ``seq``; an :class:`~agentstore.types.tree.EntryEntity`
``loop``     ``step``        the step's row id; a :class:`~agentstore.types.loop.RunStep`
``log``      ``line``        ``seq``; a :class:`LogLine` (the exact stored line)
``graph``    ``checkpoint``  the checkpoint's row id; a :class:`CheckpointItem`
===========  ==============  ==============================================

Positions only grow within a session (``seq`` and auto-increment ids), so a
follower that remembers the last one it saw never misses or repeats an item.
Each read is one bounded index range scan (``limit`` rows) and no transaction
is kept open between reads — on SQLite an open read would pin the WAL.

Both surfaces that follow — the SSE endpoint (:mod:`agentstore.api.sse`) and
``manage.py agentstore follow`` — read through here and wait through
:func:`wait_for_change` / :func:`await_change`, the one place that decides how
a follower waits for the next write (docs/api.md, "Follow").
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agentstore import notify
from agentstore.models import Checkpoint, Entry, Session, Step
from agentstore.stores import TreeStore
from agentstore.types.loop import RunStep

__all__ = [
    "EVENTS",
    "CheckpointItem",
    "Followed",
    "LogLine",
    "await_change",
    "read_after",
    "session_exists",
    "subscribe",
    "wait_for_change",
]

#: The SSE event name of each session kind's items.
EVENTS = {"tree": "entry", "loop": "step", "log": "line", "graph": "checkpoint"}


@dataclass(frozen=True, slots=True)
class Followed:
    """One item of a followed session: where it is, what kind of event, the item."""

    position: int
    event: str
    item: Any


@dataclass(frozen=True, slots=True, kw_only=True)
class LogLine:
    """One line of a log session, exactly as stored (its bytes are what its id commits to)."""

    seq: int
    id: str
    parent_id: str | None
    type: str
    line: str
    created_at: datetime


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointItem:
    """One saved LangGraph checkpoint: its address and plain-JSON metadata (no channel values)."""

    checkpoint_ns: str
    checkpoint_id: str
    parent_checkpoint_id: str | None
    metadata: Any
    created_at: datetime


def _entries(session_id: str, after: int, limit: int, using: str) -> list[Followed]:
    found = TreeStore(using=using).entries_after(session_id, after, limit)
    return [Followed(entry.seq, "entry", entry) for entry in found]


def _steps(session_id: str, after: int, limit: int, using: str) -> list[Followed]:
    rows = Step.objects.using(using).filter(session_id=session_id, id__gt=after).order_by("id")
    return [
        Followed(
            row.id,
            "step",
            RunStep(
                session_id=session_id,
                step_index=row.step_index,
                step_type=row.step_type,
                content=row.content,
                tool_args=None if row.tool_args is None else bytes(row.tool_args),
                duration_ms=row.duration_ms,
                prompt_tokens=row.prompt_tokens,
                completion_tokens=row.completion_tokens,
                created_at=row.created_at,
            ),
        )
        for row in rows[:limit]
    ]


def _lines(session_id: str, after: int, limit: int, using: str) -> list[Followed]:
    rows = (
        Entry.objects.using(using)
        .filter(session_id=session_id, seq__gt=after)
        .order_by("seq")
        .values_list("seq", "entry_id", "parent_id", "type", "line", "created_at")
    )
    return [
        Followed(
            seq,
            "line",
            LogLine(
                seq=seq, id=entry_id, parent_id=parent, type=kind, line=line, created_at=created
            ),
        )
        for seq, entry_id, parent, kind, line, created in rows[:limit]
    ]


def _checkpoints(session_id: str, after: int, limit: int, using: str) -> list[Followed]:
    rows = (
        Checkpoint.objects.using(using)
        .filter(session_id=session_id, id__gt=after)
        .order_by("id")
        .values_list(
            "id",
            "checkpoint_ns",
            "checkpoint_id",
            "parent_checkpoint_id",
            "metadata",
            "created_at",
        )
    )
    return [
        Followed(
            pk,
            "checkpoint",
            CheckpointItem(
                checkpoint_ns=ns,
                checkpoint_id=checkpoint_id,
                parent_checkpoint_id=parent,
                metadata=metadata,
                created_at=created,
            ),
        )
        for pk, ns, checkpoint_id, parent, metadata, created in rows[:limit]
    ]


_READERS: dict[str, Callable[[str, int, int, str], list[Followed]]] = {
    "tree": _entries,
    "loop": _steps,
    "log": _lines,
    "graph": _checkpoints,
}


def read_after(
    session_id: str, kind: str, after: int, limit: int, *, using: str = "default"
) -> list[Followed]:
    """The session's items with a position ``> after``, oldest first, at most ``limit``."""
    if kind not in _READERS:
        raise ValueError(f"no follow reader for session kind {kind!r}")
    return _READERS[kind](session_id, after, max(1, limit), using)


def session_exists(session_id: str, *, using: str = "default") -> bool:
    """Whether the session row is still there (a follower ends when it is deleted)."""
    return Session.objects.using(using).filter(pk=session_id).exists()


# -- waiting for the next write ------------------------------------------------------
#
# The one place a follower waits between reads that found nothing. Today it
# sleeps ``timeout`` (polling works alike on SQLite and PostgreSQL, in any number
# of processes); a PostgreSQL LISTEN/NOTIFY wake-up replaces the body of these
# two twins and nothing else. Returning early is always safe: the caller reads
# again and finds what is there.


def subscribe(session_id: str, *, using: str = "default") -> notify.Subscription:
    """A follower's wake-up for ``session_id``: take it before the first read, close it at the end.

    On PostgreSQL a write to the session (committed in any process) wakes
    :func:`wait_for_change` at once (``NOTIFY``, :mod:`agentstore.notify`);
    elsewhere the wait is the poll interval.
    """
    return notify.subscribe(using, notify.session_key(session_id))


def wait_for_change(
    session_id: str, timeout: float, wakeup: notify.Subscription | None = None
) -> None:
    """Block until ``session_id`` may have changed, at most ``timeout`` seconds.

    ``wakeup`` (from :func:`subscribe`) ends the wait when a write commits.
    """
    if wakeup is None:
        time.sleep(timeout)
    else:
        wakeup.wait(timeout)


async def await_change(
    session_id: str, timeout: float, wakeup: notify.Subscription | None = None
) -> None:
    """The async twin of :func:`wait_for_change` (an ASGI follower never blocks its loop)."""
    if wakeup is None:
        await asyncio.sleep(timeout)
    else:
        await wakeup.wait_async(timeout)
