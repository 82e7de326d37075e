"""Reading log sessions: whole, by page, the path to the leaf, lists, and following.

:class:`LogReads` adds the store's reads to its base
(:class:`~agentstore.stores.log_sessions.LogSessions`). None of them takes a
hold or writes, so a read-only store has every one of them. Each runs in one
read snapshot (``_snapshot``), which never holds the write lock.

Their cost is what tells them apart:

* :meth:`~LogReads.read` (and ``export_jsonl``) read every line and recompute
  every id: O(session length), the verifying read.
* :meth:`~LogReads.read_page` reads only the page's lines; the header and the
  leaf come from the session row's persisted head (``stores/log_open.py``).
* :meth:`~LogReads.tail` walks ``parent`` links up from the leaf: O(limit) plus
  the skipped lines. On a session this store has open it is the store's own
  view — the leaf the next append hangs from.
* :meth:`~LogReads.list` is one query over the session rows, the JSONL size
  summed in SQL; the header-level filters (harness, top level, ``extra``,
  nanosecond times) are applied to each parsed header afterwards.
* :meth:`~LogReads.follow` / :meth:`~LogReads.afollow` drive
  :func:`agentstore.stores.log_follow.steps` (snapshot, then every append) and
  only decide how to wait: same-store appends ring the store's hub, other
  processes' arrive as a PostgreSQL ``NOTIFY``, polling is the fallback.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import logging
import threading
from collections.abc import AsyncIterator, Collection, Iterator
from typing import Any

from django.db.models import OuterRef, Subquery, Sum, Value
from django.db.models.functions import Coalesce

from agentstore import db, exceptions, notify
from agentstore.formats.agentsession import Entry as LogEntry
from agentstore.formats.agentsession import Session, canonical_json, dumps, parse_json
from agentstore.models import Entry
from agentstore.models import Session as SessionRow
from agentstore.stores import log_follow
from agentstore.stores.log_open import StoredSession, read_page
from agentstore.stores.log_rows import LOG, OctetLength, time_ns
from agentstore.stores.log_sessions import LogSessions
from agentstore.types.log import Change, ListFilter, LogPage, Summary, Tail
from agentstore.validation import require_aware

__all__ = ["LogReads"]

logger = logging.getLogger("agentstore.stores.log")


class LogReads(LogSessions):
    """The reads of a ``LogStore``: no hold, nothing written (see the module docstring)."""

    # The Go ``Read(id)`` takes the name StoreBase gives its snapshot helper
    # ``read(fn)``; the store uses :meth:`_snapshot` for that instead.
    def read(self, session_id: str) -> Session:  # type: ignore[override]
        """A private copy of the session read afresh: no hold, nothing cached.

        Works on sessions held by this or another store and on ones this store
        refused. Sees an append once that append returned; an unrecorded
        ``branch`` of a writer is not there (the resume rule applies).
        """
        return self._load(session_id)

    def read_page(self, session_id: str, *, after: int = 0, limit: int = 100) -> LogPage:
        """Header, leaf and at most ``limit`` entries after position ``after`` (a ``LogPage``).

        The bounded :meth:`read`: one read snapshot, and only the page's lines
        are read (the leaf comes from the session's persisted head). Positions
        are the lines' ``seq`` (1-based, append order); page on with
        ``after=page.seqs[-1]`` while ``page.more``.
        """
        if limit < 1:
            raise exceptions.ValidationError("limit must be at least 1", field="limit")

        def read() -> LogPage:
            with db.cursor(self.using) as cursor:
                return read_page(cursor, session_id, using=self.using, after=after, limit=limit)

        return self._snapshot(read)

    # -- the path to the leaf ---------------------------------------------------

    def tail(
        self,
        session_id: str,
        limit: int | None = None,
        *,
        types: Collection[str] | None = None,
    ) -> Tail:
        """The last ``limit`` entries on the path to the leaf (oldest first), and the leaf.

        On a session this store has open (:meth:`open`, :meth:`append`) it is
        the store's own view — the leaf the next append hangs from — and the
        walk goes up ``parent`` links from the leaf, stopping after ``limit``
        kept entries: O(limit) plus the skipped entries, not O(session length).
        Otherwise the walk starts from the leaf the session's head row names
        (no hold; the same cost), in one read snapshot; a session without a
        trusted head is read whole first (as :meth:`read`). A store without holds
        uses its view once the head row shows it is current, else opens the
        session again (and keeps that view). ``types`` keeps only entries of those
        types (``{"item"}``: the conversation); ``limit=None`` walks the whole
        path. The entries may be the store's own (read-only). Raises ``NoSession``.
        """
        if limit is not None and (isinstance(limit, bool) or limit < 0):
            raise exceptions.ValidationError("limit must not be negative", field="limit")
        wanted = frozenset(types) if types is not None else None
        with self._lock:
            session: StoredSession | None
            if not self.holds and not self.read_only:
                session = self._current(session_id)  # a view checked against the head
            else:
                session = self._open.get(session_id)
            if session is not None:
                out, leaf = session.tail(limit, wanted), session.leaf
            else:
                out, leaf = self._snapshot(lambda: self._tail_stored(session_id, limit, wanted))
        out.reverse()
        return Tail(entries=out, leaf=leaf)

    def known_leaf(self, session_id: str) -> str | None:
        """The leaf of this store's own view of the session, as its last operation left it.

        No database read: after :meth:`append_many` it is the leaf that write
        left (what a conditional next write expects). ``None`` when the store
        has no view of the session (never opened, released, or dropped after
        a failed write).
        """
        with self._lock:
            session = self._open.get(session_id)
            return None if session is None else session.leaf

    def _tail_stored(
        self, session_id: str, limit: int | None, wanted: frozenset[str] | None
    ) -> tuple[builtins.list[LogEntry], str]:
        """:meth:`tail` of a session this store does not have open (inside one snapshot)."""
        stored = self._open_stored(session_id)
        if stored is None:
            # No trusted head: read it whole, as :meth:`read` does.
            stored = self._stored(self._load(session_id))
        return stored.tail(limit, wanted), stored.leaf

    # -- listing ----------------------------------------------------------------

    def list(self, filter: ListFilter | None = None) -> Iterator[Summary]:  # noqa: A002
        """Log sessions matching ``filter``, newest ``created_at`` first, names and sizes filled.

        ``size`` is the byte length of the session's JSONL file (what
        :meth:`export_jsonl` returns, UTF-8 encoded).
        """
        f = filter or ListFilter()
        if f.after is not None:
            require_aware(f.after, "filter.after")
        if f.before is not None:
            require_aware(f.before, "filter.before")
        if f.limit < 0:
            raise exceptions.ValidationError(
                "filter.limit must not be negative", field="filter.limit"
            )
        rows = SessionRow.objects.using(self.using).filter(kind=LOG)
        if f.cwd:
            rows = rows.filter(cwd=f.cwd)
        if f.parent_session:
            rows = rows.filter(parent_session=f.parent_session)
        # Columns hold microseconds, headers up to nanoseconds: the SQL bounds
        # are inclusive and coarse, the header's own time decides below.
        if f.after is not None:
            rows = rows.filter(created_at__gte=f.after)
        if f.before is not None:
            rows = rows.filter(created_at__lt=f.before)
        if f.current:
            rows = rows.filter(superseded_by="")
        lines = (
            Entry.objects.filter(session_id=OuterRef("pk"))
            .values("session_id")
            .annotate(total=Sum(OctetLength("line") + 1))
            .values("total")
        )
        rows = rows.annotate(
            lines_size=Coalesce(Subquery(lines), Value(0)), header_size=OctetLength("header")
        ).order_by("-created_at", "-id")
        header_level = bool(f.harness or f.top_level or f.extra or f.after or f.before)
        if f.limit > 0 and not header_level:
            rows = rows[: f.limit]
        values = self._snapshot(
            lambda: list(
                rows.values_list(  # type: ignore[misc]  # annotated names
                    "header", "name", "superseded_by", "updated_at", "lines_size", "header_size"
                )
            )
        )
        return self._summaries(values, f)

    def _summaries(
        self, values: builtins.list[tuple[Any, ...]], f: ListFilter
    ) -> Iterator[Summary]:
        after = time_ns(f.after) if f.after else None
        before = time_ns(f.before) if f.before else None
        extra = {k: canonical_json(v) for k, v in (f.extra or {}).items()}
        count = 0
        for header_line, name, successor, updated, lines_size, header_size in values:
            try:
                header = parse_json(header_line)
            except exceptions.ValidationError:
                logger.warning("skipping a log session whose header does not parse")
                continue
            if not isinstance(header, dict):
                continue
            try:
                created = time_ns(str(header.get("created_at", "")))
            except exceptions.ValidationError:
                created = 0
            if after is not None and not created > after:
                continue
            if before is not None and not created < before:
                continue
            if f.harness:
                harness = header.get("harness")
                if not isinstance(harness, dict) or harness.get("name") != f.harness:
                    continue
            if f.top_level and header.get("spawned_by"):
                continue
            if any(k not in header or canonical_json(header[k]) != v for k, v in extra.items()):
                continue
            yield Summary(
                header=header,
                name=name,
                superseded_by=successor,
                size=int(header_size) + int(lines_size) + 1,
                modified=updated,
            )
            count += 1
            if f.limit > 0 and count >= f.limit:
                return

    # -- follow -----------------------------------------------------------------

    def follow(
        self, session_id: str, cursor: str = "", *, stop: threading.Event | None = None
    ) -> Iterator[Change]:
        """A snapshot of the session, then a change for every append as it commits.

        Runs until the consumer stops iterating or ``stop`` is set (then it ends
        quietly); raises ``NoSession`` from the iterator when the session is
        missing, deleted, or replaced by another under its id. Resume with a
        change's ``cursor`` to get exactly what came after it. Takes no hold.
        """
        wake = threading.Event()
        key = self._hub.register(wake.set)
        # Other processes' appends (PostgreSQL NOTIFY; agentstore/notify.py).
        sub = notify.subscribe(self.using, notify.session_key(session_id), wake=wake.set)
        try:
            for step in log_follow.steps(self.using, session_id, cursor, self.follow_interval):
                if stop is not None and stop.is_set():
                    return
                if isinstance(step, Change):
                    yield step
                    continue
                # Wait for a same-store append, the poll timer, or ``stop``
                # (looked at in short slices: an Event cannot wait on two).
                remaining = step
                while remaining > 0 and not wake.is_set():
                    if stop is not None and stop.is_set():
                        return
                    chunk = min(remaining, 0.05) if stop is not None else remaining
                    wake.wait(chunk)
                    remaining -= chunk
                wake.clear()
        finally:
            self._hub.unregister(key)
            sub.close()

    async def afollow(self, session_id: str, cursor: str = "") -> AsyncIterator[Change]:
        """The async twin of :meth:`follow` for ASGI code.

        Database work runs in worker threads; waiting is on the event loop.
        Cancelling the consuming task ends the follow (cleanly: nothing is
        left registered).
        """
        loop = asyncio.get_running_loop()
        woken = asyncio.Event()

        def wake() -> None:
            loop.call_soon_threadsafe(woken.set)

        key = self._hub.register(wake)
        sub = notify.subscribe(self.using, notify.session_key(session_id), wake=wake)
        gen = log_follow.steps(self.using, session_id, cursor, self.follow_interval)
        done = object()
        # A cancelled consumer can leave a step running in its worker thread
        # (threads cannot be interrupted); closing the generator then would
        # fail with "generator already executing". Steps hold this lock, and
        # the close below waits for it off the event loop.
        stepping = threading.Lock()

        def step_once() -> object:
            with stepping:
                return next(gen, done)

        def close_when_idle() -> None:
            with stepping:
                gen.close()

        try:
            while True:
                step = await asyncio.to_thread(step_once)
                if step is done:
                    return
                if isinstance(step, Change):
                    yield step
                    continue
                assert isinstance(step, float)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(woken.wait(), timeout=step)
                woken.clear()
        finally:
            self._hub.unregister(key)
            sub.close()
            if stepping.acquire(blocking=False):
                try:
                    gen.close()
                finally:
                    stepping.release()
            else:
                threading.Thread(target=close_when_idle, daemon=True).start()

    # -- export -------------------------------------------------------------------

    def export_jsonl(self, session_id: str) -> str:
        """The session as its JSONL file, byte for byte (``dumps`` of :meth:`read`)."""
        return dumps(self._load(session_id))
