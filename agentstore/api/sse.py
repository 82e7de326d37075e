"""Live follow: a session's appended entries as Server-Sent Events.

    GET /sessions/{id}/follow            Accept: text/event-stream
    Last-Event-ID: 42                    (or ?after=42) resume after seq 42

Each entry is one event whose ``id`` is its ``seq``, so a browser's
``EventSource`` (or any client that echoes ``Last-Event-ID``) resumes after a
dropped connection with no gap and no duplicate::

    id: 43
    event: entry
    data: {"id": "0197…", "seq": 43, "type": "message", …}

A comment line (``: keep-alive``) goes out when nothing happened for a while,
so proxies keep the connection and the server notices a client that left; when
the session is deleted the stream sends ``event: deleted`` and ends.

Bounded: a follower holds a server thread for as long as it follows under WSGI,
so followers are capped per user (``FOLLOW_MAX_PER_USER``, past it ``429
too_many_followers``) and per process (``FOLLOW_MAX_PER_PROCESS``, past it
``503 follow_capacity``), and every stream ends after ``FOLLOW_MAX_SECONDS``
with an ``event: reconnect`` carrying ``id: <last seq>``; ``EventSource``
reconnects on its own and resumes with ``Last-Event-ID``, so nothing is missed
(docs/operations.md, "Following live: ASGI and caps").

How it follows: by polling ``TreeStore.entries_after(session, last_seq)`` — one
index range scan per tick — rather than by notifications. That works the same on
SQLite (no LISTEN/NOTIFY) and PostgreSQL, in any number of server processes, and
never holds a transaction open between ticks (which on SQLite would pin the WAL
and stop checkpoints). The same loop runs as a plain generator under WSGI (the
dev server, gunicorn with threads) and as an async generator under ASGI, where
each database call is handed to Django's sync thread.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

from asgiref.sync import sync_to_async
from django.http import StreamingHttpResponse
from rest_framework.renderers import BaseRenderer
from rest_framework.utils.encoders import JSONEncoder

from agentstore.api.serializers import EntrySerializer
from agentstore.conf import agentstore_settings
from agentstore.models import Session
from agentstore.stores import TreeStore

__all__ = [
    "EventStreamRenderer",
    "FollowLimitReached",
    "FollowResponse",
    "FollowSlot",
    "FollowStream",
    "take_follow_slot",
]

#: Entries read per tick: bounds one tick's work while catching up a long session.
BATCH = 200


class EventStreamRenderer(BaseRenderer):
    """Lets DRF negotiate ``text/event-stream``; errors still go out as JSON text."""

    media_type = "text/event-stream"
    format = "sse"
    charset = "utf-8"

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: Mapping[str, Any] | None = None,
    ) -> bytes:
        return b"" if data is None else json.dumps(data, cls=JSONEncoder).encode()


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
        per_process = int(agentstore_settings.FOLLOW_MAX_PER_PROCESS)
        with self._lock:
            if per_user > 0 and self.by_user[user_key] >= per_user:
                raise FollowLimitReached(
                    429,
                    "too_many_followers",
                    f"you already follow {per_user} stream(s) on this server process "
                    f"(FOLLOW_MAX_PER_USER); close one, or read /entries?after=<seq> pages",
                    per_user,
                )
            if per_process > 0 and self.total >= per_process:
                raise FollowLimitReached(
                    503,
                    "follow_capacity",
                    f"this server process already serves {per_process} follower(s) "
                    f"(FOLLOW_MAX_PER_PROCESS); retry later",
                    per_process,
                )
            self.total += 1
            self.by_user[user_key] += 1
        return FollowSlot(self, user_key)

    def give_back(self, user_key: str) -> None:
        with self._lock:
            self.total -= 1
            self.by_user[user_key] -= 1
            if self.by_user[user_key] <= 0:
                del self.by_user[user_key]


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


class FollowStream:
    """The events of one follower: what it has seen (``after``) and how it waits.

    ``max_seconds`` (default ``FOLLOW_MAX_SECONDS``; ``0``: no limit) ends the
    stream with a ``reconnect`` event; ``slot`` is released when it ends.
    """

    def __init__(
        self,
        session_id: str,
        after: int,
        *,
        poll_interval: float = 0.25,
        keepalive: float = 15.0,
        max_seconds: float | None = None,
        slot: FollowSlot | None = None,
        using: str = "default",
    ) -> None:
        self.session_id = session_id
        self.after = after
        self.poll_interval = poll_interval
        self.keepalive = keepalive
        if max_seconds is None:
            max_seconds = float(agentstore_settings.FOLLOW_MAX_SECONDS)
        self.max_seconds = max_seconds
        self.slot = slot
        self.store = TreeStore(using=using)
        self.using = using

    # -- one tick, shared by both loops ---------------------------------------------

    def _tick(self) -> tuple[list[bytes], bool]:
        """Read what was appended since ``after``: (events, session still exists)."""
        entries = self.store.entries_after(self.session_id, self.after, BATCH)
        if entries:
            self.after = entries[-1].seq
            return [self._event(entry) for entry in entries], True
        # Only an idle tick asks whether the session is gone: a deleted session
        # has no new entries, and a busy one is certainly still there.
        exists = Session.objects.using(self.using).filter(pk=self.session_id).exists()
        return [], exists

    @staticmethod
    def _event(entry: Any) -> bytes:
        data = json.dumps(EntrySerializer(entry).data, cls=JSONEncoder, separators=(",", ":"))
        return f"id: {entry.seq}\nevent: entry\ndata: {data}\n\n".encode()

    def _deleted(self) -> bytes:
        payload = json.dumps({"session_id": self.session_id})
        return f"event: deleted\ndata: {payload}\n\n".encode()

    @staticmethod
    def _opening() -> bytes:
        # ``retry`` tells EventSource how soon to reconnect after a drop.
        return b"retry: 1000\n: follow\n\n"

    def _reconnect(self) -> bytes:
        # The ``id`` line sets EventSource's last event id even if no entry came
        # in this stream, so its automatic reconnect resumes at the right seq.
        payload = json.dumps({"after": self.after, "reason": "FOLLOW_MAX_SECONDS"})
        return f"id: {self.after}\nevent: reconnect\ndata: {payload}\n\n".encode()

    def _expired(self, started: float) -> bool:
        return self.max_seconds > 0 and time.monotonic() - started >= self.max_seconds

    def _release(self) -> None:
        if self.slot is not None:
            self.slot.release()

    # -- WSGI ----------------------------------------------------------------------

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield self._opening()
            started = quiet_since = time.monotonic()
            while True:
                events, exists = self._tick()
                if events:
                    yield b"".join(events)
                    quiet_since = time.monotonic()
                elif not exists:
                    yield self._deleted()
                    return
                elif time.monotonic() - quiet_since >= self.keepalive:
                    yield b": keep-alive\n\n"
                    quiet_since = time.monotonic()
                if self._expired(started):
                    yield self._reconnect()
                    return
                if not events:
                    time.sleep(self.poll_interval)
        finally:
            self._release()

    # -- ASGI ----------------------------------------------------------------------

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            yield self._opening()
            tick = sync_to_async(self._tick)
            started = quiet_since = time.monotonic()
            while True:
                events, exists = await tick()
                if events:
                    yield b"".join(events)
                    quiet_since = time.monotonic()
                elif not exists:
                    yield self._deleted()
                    return
                elif time.monotonic() - quiet_since >= self.keepalive:
                    yield b": keep-alive\n\n"
                    quiet_since = time.monotonic()
                if self._expired(started):
                    yield self._reconnect()
                    return
                if not events:
                    await asyncio.sleep(self.poll_interval)
        finally:
            self._release()
