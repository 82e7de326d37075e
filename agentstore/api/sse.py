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
import time
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

from asgiref.sync import sync_to_async
from rest_framework.renderers import BaseRenderer
from rest_framework.utils.encoders import JSONEncoder

from agentstore.api.serializers import EntrySerializer
from agentstore.models import Session
from agentstore.stores import TreeStore

__all__ = ["EventStreamRenderer", "FollowStream"]

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


class FollowStream:
    """The events of one follower: what it has seen (``after``) and how it waits."""

    def __init__(
        self,
        session_id: str,
        after: int,
        *,
        poll_interval: float = 0.25,
        keepalive: float = 15.0,
        using: str = "default",
    ) -> None:
        self.session_id = session_id
        self.after = after
        self.poll_interval = poll_interval
        self.keepalive = keepalive
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

    # -- WSGI ----------------------------------------------------------------------

    def __iter__(self) -> Iterator[bytes]:
        yield self._opening()
        quiet_since = time.monotonic()
        while True:
            events, exists = self._tick()
            if events:
                yield b"".join(events)
                quiet_since = time.monotonic()
                continue
            if not exists:
                yield self._deleted()
                return
            if time.monotonic() - quiet_since >= self.keepalive:
                yield b": keep-alive\n\n"
                quiet_since = time.monotonic()
            time.sleep(self.poll_interval)

    # -- ASGI ----------------------------------------------------------------------

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self._opening()
        tick = sync_to_async(self._tick)
        quiet_since = time.monotonic()
        while True:
            events, exists = await tick()
            if events:
                yield b"".join(events)
                quiet_since = time.monotonic()
                continue
            if not exists:
                yield self._deleted()
                return
            if time.monotonic() - quiet_since >= self.keepalive:
                yield b": keep-alive\n\n"
                quiet_since = time.monotonic()
            await asyncio.sleep(self.poll_interval)
