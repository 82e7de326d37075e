"""Live follow: what is appended to a session, of any kind, as Server-Sent Events.

    GET /sessions/{id}/follow            Accept: text/event-stream
    Last-Event-ID: 42                    (or ?after=42) resume after position 42

Each item is one event whose ``id`` is its position, so a browser's
``EventSource`` (or any client that echoes ``Last-Event-ID``) resumes after a
dropped connection with no gap and no duplicate. The event names the kind of
item (:mod:`agentstore.selectors.follow` reads them): ``entry`` for tree
sessions (``id`` = seq), ``step`` for loop sessions (``id`` = the step's row
id), ``line`` for log sessions (``id`` = seq, the exact stored line) and
``checkpoint`` for graph threads (``id`` = the checkpoint's row id)::

    id: 43
    event: entry
    data: {"id": "0197…", "seq": 43, "type": "message", …}

A comment line (``: keep-alive``) goes out when nothing happened for a while,
so proxies keep the connection and the server notices a client that left; when
the session is deleted the stream sends ``event: deleted`` and ends. Anything
refused before the stream starts (404, 400, 401/403, 429, 503) is an ordinary
``application/json`` response in the API's one error shape.

Bounded: a follower holds a server thread for as long as it follows under WSGI,
so followers are capped per user (``FOLLOW_MAX_PER_USER``, past it ``429
too_many_followers``) and per process (past it ``503 follow_capacity``; the cap
is :func:`agentstore.serving.follow_cap`, which never lets followers take every
thread of a WSGI worker), and every stream ends after ``FOLLOW_MAX_SECONDS``
with an ``event: reconnect`` carrying ``id: <last position>``; ``EventSource``
reconnects on its own and resumes with ``Last-Event-ID``, so nothing is missed
(docs/operations.md, "Following live: ASGI and caps").

How it follows: one tick is a bounded read after the last position and the pure
:func:`next_frames`, which turns the cursor and what was read into the next
frames (events, a keep-alive, ``deleted``, ``reconnect``) or "wait". Two thin
drivers send them: a plain generator under WSGI, an async generator under ASGI
(each tick handed to Django's sync thread). Between idle ticks they wait in
``agentstore.selectors.follow.wait_for_change`` / ``await_change`` — the one
place that decides how a follower waits: the poll interval, ended at once on
PostgreSQL by the session's ``NOTIFY`` (:mod:`agentstore.notify`; the stream
subscribes before its first read). No transaction is held between ticks, which
on SQLite would pin the WAL and stop checkpoints.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any

from asgiref.sync import sync_to_async
from django.db import connections
from django.http import StreamingHttpResponse
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.utils.encoders import JSONEncoder

from agentstore import notify
from agentstore.api.serializers import EntrySerializer, StepSerializer
from agentstore.conf import agentstore_settings
from agentstore.selectors.follow import (
    Followed,
    await_change,
    read_after,
    session_exists,
    subscribe,
    wait_for_change,
)
from agentstore.serving import DOCS, FollowCap, follow_cap

__all__ = [
    "Cursor",
    "FollowLimitReached",
    "FollowNegotiation",
    "FollowResponse",
    "FollowSlot",
    "FollowStream",
    "Next",
    "event_frame",
    "next_frames",
    "take_follow_slot",
]

#: Items read per tick: bounds one tick's work while catching up a long session.
BATCH = 200


class FollowNegotiation(BaseContentNegotiation):
    """Every rendered answer of the follow endpoint is JSON, whatever ``Accept`` says.

    The stream itself is a ``StreamingHttpResponse`` that no renderer touches;
    what goes through a renderer is only an error before the stream starts
    (404, 400, 401/403, 429, 503). Negotiating ``text/event-stream`` for those
    sent a JSON body labelled as an event stream, which an ``EventSource`` or
    an SSE client cannot read as an error. So ``Accept: text/event-stream`` is
    honoured by the stream and never answered 406, and errors are
    ``application/json`` in the one error shape.
    """

    def select_parser(self, request: Any, parsers: Any) -> Any:
        return parsers[0] if parsers else None

    def select_renderer(
        self, request: Any, renderers: Any, format_suffix: str | None = None
    ) -> tuple[Any, str]:
        return renderers[0], renderers[0].media_type


# -- caps ----------------------------------------------------------------------------


class FollowLimitReached(Exception):
    """No follower slot: ``status`` 429 (this user's cap) or 503 (this process's cap)."""

    def __init__(self, status: int, code: str, message: str, limit: int) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.limit = limit


class _Followers:
    """Live followers of this process, in all and per user (thread-safe counters)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.total = 0
        self.by_user: Counter[str] = Counter()

    def take(self, user_key: str) -> FollowSlot:
        per_user = int(agentstore_settings.FOLLOW_MAX_PER_USER)
        # The process cap follows the server's capacity (agentstore.serving):
        # under a thread-bounded WSGI server it always leaves threads free.
        cap = follow_cap()
        with self._lock:
            if per_user > 0 and self.by_user[user_key] >= per_user:
                raise FollowLimitReached(
                    429,
                    "too_many_followers",
                    f"you already follow {per_user} stream(s) on this server process "
                    f"(FOLLOW_MAX_PER_USER); close one, or read /entries?after=<seq> pages",
                    per_user,
                )
            if cap.limit is not None and self.total >= cap.limit:
                raise FollowLimitReached(503, "follow_capacity", _capacity_message(cap), cap.limit)
            self.total += 1
            self.by_user[user_key] += 1
        return FollowSlot(self, user_key)

    def give_back(self, user_key: str) -> None:
        with self._lock:
            self.total -= 1
            self.by_user[user_key] -= 1
            if self.by_user[user_key] <= 0:
                del self.by_user[user_key]


def _capacity_message(cap: FollowCap) -> str:
    if cap.limit == 0:
        return (
            f"this server process serves no follow streams ({cap.why}): a stream would hold "
            f"its only request thread; follow through an ASGI server ({DOCS})"
        )
    return f"this server process already serves {cap.limit} follower(s) ({cap.why}); retry later"


#: This process's followers (a web process's threads or event loop share it).
followers = _Followers()


class FollowSlot:
    """One taken follower slot; :meth:`release` is idempotent (stream end and response close)."""

    def __init__(self, owner: _Followers, user_key: str) -> None:
        self._owner = owner
        self._user_key = user_key
        self._released = False
        self._lock = threading.Lock()

    def release(self) -> None:
        with self._lock:
            if self._released:
                return
            self._released = True
        self._owner.give_back(self._user_key)


def take_follow_slot(user_key: str) -> FollowSlot:
    """Take a follower slot for ``user_key`` or raise :class:`FollowLimitReached`."""
    return followers.take(user_key)


class FollowResponse(StreamingHttpResponse):
    """A streaming response that gives its follower slot back when the server closes it.

    WSGI and ASGI servers call ``close()`` however the stream ended (finished,
    client gone, server error), even when the body was never iterated — when a
    generator's own ``finally`` would not run.
    """

    def __init__(self, streaming_content: Any, slot: FollowSlot, **kwargs: Any) -> None:
        super().__init__(streaming_content, **kwargs)
        self.slot = slot

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.slot.release()


# -- the stream ----------------------------------------------------------------------


def event_frame(item: Followed) -> bytes:
    """One item as an SSE event: ``id: <position>``, ``event: <kind's event>``, JSON data."""
    data = json.dumps(_payload(item), cls=JSONEncoder, separators=(",", ":"))
    return f"id: {item.position}\nevent: {item.event}\ndata: {data}\n\n".encode()


def _payload(item: Followed) -> Any:
    if item.event == "entry":
        return EntrySerializer(item.item).data
    if item.event == "step":
        return {"position": item.position, **StepSerializer(item.item).data}
    value = item.item
    if item.event == "line":
        # ``line`` is the exact stored text: its id commits to those bytes.
        return {
            "seq": value.seq,
            "id": value.id,
            "parent_id": value.parent_id,
            "type": value.type,
            "line": value.line,
            "created_at": value.created_at,
        }
    return {
        "position": item.position,
        "checkpoint_ns": value.checkpoint_ns,
        "checkpoint_id": value.checkpoint_id,
        "parent_checkpoint_id": value.parent_checkpoint_id,
        "metadata": value.metadata,
        "created_at": value.created_at,
    }


OPENING = b"retry: 1000\n: follow\n\n"  # ``retry``: how soon EventSource reconnects
KEEPALIVE = b": keep-alive\n\n"


@dataclass(frozen=True, slots=True)
class Cursor:
    """A follower's state: the last position sent, when it started, when it last wrote."""

    after: int
    started: float
    quiet_since: float


@dataclass(frozen=True, slots=True)
class Next:
    """What a driver does next: send ``frames``, then stop (``done``) or ``wait`` and read again."""

    frames: bytes
    cursor: Cursor
    done: bool = False
    wait: bool = False


def next_frames(
    cursor: Cursor,
    items: list[Followed],
    exists: bool,
    now: float,
    *,
    keepalive: float,
    max_seconds: float,
    session_id: str,
) -> Next:
    """The one step of a follower, pure: from its cursor and one read, the next frames.

    ``items`` are what the read found after ``cursor.after``; ``exists`` is
    whether the session is still there (only asked when nothing was found: a
    busy session certainly exists). ``now`` is ``time.monotonic()``.
    """
    frames = b""
    done = False
    if items:
        frames = b"".join(event_frame(item) for item in items)
        cursor = Cursor(items[-1].position, cursor.started, now)
    elif not exists:
        payload = json.dumps({"session_id": session_id})
        return Next(f"event: deleted\ndata: {payload}\n\n".encode(), cursor, done=True)
    elif now - cursor.quiet_since >= keepalive:
        frames = KEEPALIVE
        cursor = Cursor(cursor.after, cursor.started, now)
    if max_seconds > 0 and now - cursor.started >= max_seconds:
        # The ``id`` line sets EventSource's last event id even if nothing came
        # in this stream, so its automatic reconnect resumes at the right place.
        payload = json.dumps({"after": cursor.after, "reason": "FOLLOW_MAX_SECONDS"})
        frames += f"id: {cursor.after}\nevent: reconnect\ndata: {payload}\n\n".encode()
        done = True
    return Next(frames, cursor, done=done, wait=not items and not done)


class FollowStream:
    """The events of one follower of a session of any kind, under WSGI or ASGI.

    ``max_seconds`` (default ``FOLLOW_MAX_SECONDS``; ``0``: no limit) ends the
    stream with a ``reconnect`` event; ``slot`` is released when it ends. The
    work of a tick is :meth:`tick` (a read and :func:`next_frames`); the two
    drivers below only send its frames and wait.
    """

    def __init__(
        self,
        session_id: str,
        after: int,
        *,
        kind: str = "tree",
        poll_interval: float = 0.25,
        keepalive: float = 15.0,
        max_seconds: float | None = None,
        slot: FollowSlot | None = None,
        using: str = "default",
    ) -> None:
        self.session_id = session_id
        self.kind = kind
        self.after = after
        self.poll_interval = poll_interval
        self.keepalive = keepalive
        if max_seconds is None:
            max_seconds = float(agentstore_settings.FOLLOW_MAX_SECONDS)
        self.max_seconds = max_seconds
        self.slot = slot
        self.using = using
        self._cursor: Cursor | None = None
        self._wakeup: notify.Subscription | None = None

    def tick(self) -> Next:
        """Read what came after the cursor and decide the next frames (database work only)."""
        now = time.monotonic()
        cursor = self._cursor or Cursor(self.after, now, now)
        try:
            items = read_after(self.session_id, self.kind, cursor.after, BATCH, using=self.using)
            exists = bool(items) or session_exists(self.session_id, using=self.using)
        finally:
            # With a pool (or CONN_MAX_AGE=0) the connection goes back between
            # ticks: a stream must not keep one for minutes while it waits
            # (docs/operations.md, "Scaling out"). Persistent ones stay.
            connection = connections[self.using]
            if not connection.in_atomic_block:
                connection.close_if_unusable_or_obsolete()
        step = next_frames(
            cursor,
            items,
            exists,
            now,
            keepalive=self.keepalive,
            max_seconds=self.max_seconds,
            session_id=self.session_id,
        )
        self._cursor = step.cursor
        self.after = step.cursor.after
        return step

    def _subscribe(self) -> notify.Subscription:
        # PostgreSQL: the session's NOTIFY ends a wait at once (agentstore/notify.py).
        self._wakeup = subscribe(self.session_id, using=self.using)
        return self._wakeup

    def _release(self) -> None:
        if self._wakeup is not None:
            self._wakeup.close()
            self._wakeup = None
        if self.slot is not None:
            self.slot.release()

    def __iter__(self) -> Iterator[bytes]:
        """The WSGI driver: a plain generator (a server thread per follower)."""
        try:
            wakeup = self._subscribe()
            yield OPENING
            while True:
                step = self.tick()
                if step.frames:
                    yield step.frames
                if step.done:
                    return
                if step.wait:
                    wait_for_change(self.session_id, self.poll_interval, wakeup)
        finally:
            self._release()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        """The ASGI driver: database ticks run in Django's sync thread; waits don't block."""
        try:
            wakeup = self._subscribe()
            yield OPENING
            tick = sync_to_async(self.tick)
            while True:
                step = await tick()
                if step.frames:
                    yield step.frames
                if step.done:
                    return
                if step.wait:
                    await await_change(self.session_id, self.poll_interval, wakeup)
        finally:
            self._release()
