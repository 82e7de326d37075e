"""One conversation kept as a LogStore session: what every integration shares.

    log = ConversationLog("conv-1", owner=user, harness="my-framework")
    entries = log.read(50, types={"item"})      # remembers the leaf it saw
    log.write([{"type": "item", "item": {...}}])  # creates if new, one transaction
    log.close()                                 # optional: forget the cached view

A framework's memory object (``openai_agents.AgentStoreSession``,
``pydantic_ai.MessageHistory``) maps its own calls onto these few:

* **No lasting hold.** A conversation is served by whichever process gets
  its next message — several gunicorn workers, several objects in one
  process — and none of them is ever closed. So the object's own store is a
  ``LogStore(holds=False)``: it keeps a view of the session that one indexed
  read of the session row shows current (or reopens), and each write is
  fenced by that row instead of a hold. A store passed in that does take
  holds is held for the one write only (claimed and released around it).
  A session another store *does* hold (a harness that opened it) refuses
  the write with ``SessionLocked``, as before.
* **Reads** (:meth:`ConversationLog.read`, via :meth:`LogStore.tail`) are
  O(limit): from the view when it is current, else from the head row and a
  walk of the newest lines.
* **Writes** are one transaction each (:meth:`LogStore.append_many`), and **a
  write after a read is conditional** on the leaf that read saw
  (``append_many(expected_leaf=...)``): a turn computed from history another
  writer has since extended is refused with ``ConcurrentWriter`` instead of
  being hung after a conversation the agent never saw. Read again and retry.
* **Ownership**: with an ``owner`` (a Django user) a session this object
  creates is that user's from its first transaction (the API and the admin
  scope it), and a session the owner may not see is ``NoSession`` — the
  API's rule (decision record 0049).

The session id is the framework's conversation id, so the admin, ``manage.py
agentstore export`` and the API find it under the name the application already
uses. It follows the rule of every session id (``validation.require_name``: at
most 255 characters, no ``/``, ``\\``, control character or lone surrogate, not
``.`` or ``..``), checked when the object is made, as the API checks the ids it
is sent; entries are checked by the API's body rules before anything is written
(:func:`checked`), and the database's own errors reach the caller as agentstore's
(:mod:`agentstore.integrations.errors`).
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Sequence
from datetime import datetime
from typing import Any

from agentstore import exceptions
from agentstore.formats.agentsession import Entry, entry_id, format_ts
from agentstore.integrations.errors import mapped
from agentstore.models.sessions import SessionKind
from agentstore.selectors.sessions import visible_session
from agentstore.stores.hold_context import run_for
from agentstore.stores.log import LogStore
from agentstore.stores.sessions import SessionStore
from agentstore.validation import require_json_value, require_name

__all__ = ["RUN_MEMBER", "ConversationLog", "checked", "checked_limit"]

#: The member that names the run an entry was written for (absent outside runs).
RUN_MEMBER = "agentstore_run"


def checked(entry: dict[str, Any], field: str) -> dict[str, Any]:
    """``entry`` if the API would take it as a body, else ``ValidationError`` naming ``field``.

    The rules of ``validation.require_json_value``: nesting within
    ``JSON_MAX_DEPTH``, JSON values only, finite numbers, no NUL or lone
    surrogate in a string or key — what the HTTP door refuses before a store
    sees it, refused here before anything is written.
    """
    return require_json_value(entry, field)  # type: ignore[no-any-return]


def checked_limit(limit: object, field: str = "limit") -> int | None:
    """``limit`` if it is ``None`` or an integer (not a boolean), else ``ValidationError``."""
    if limit is None or (isinstance(limit, int) and not isinstance(limit, bool)):
        return limit
    raise exceptions.ValidationError(f"{field} must be an integer or None", field=field)


class ConversationLog:
    """A conversation stored as the log session ``session_id`` (see the module docstring).

    ``store`` shares a :class:`LogStore` (default: one of this object's own on
    ``using``, without holds; best shared as ``LogStore(holds=False)``).
    ``harness`` names the framework in the
    header of a session this object creates (``harness.name``); ``header``
    adds members to it (``cwd``, …).
    """

    def __init__(
        self,
        session_id: str,
        *,
        harness: str,
        owner: Any = None,
        store: LogStore | None = None,
        using: str = "default",
        header: dict[str, Any] | None = None,
    ) -> None:
        require_name(session_id, "session_id")
        if header is not None:
            if not isinstance(header, dict):
                raise exceptions.ValidationError("header must be a JSON object", field="header")
            require_json_value(header, "header")
        self.session_id = session_id
        self.owner = owner
        self.store = store if store is not None else LogStore(using=using, holds=False)
        self._own_store = store is None
        self._header = {"harness": {"name": harness}, **(header or {}), "id": session_id}
        # One operation at a time per object (a read-then-write must not interleave).
        self.lock = threading.RLock()
        #: The owner was checked against the session row (once per object).
        self._owner_checked = False
        #: The leaf the last read or write of this object saw (None: none yet).
        self.seen_leaf: str | None = None

    # -- the session row ------------------------------------------------------

    def _exists(self) -> bool:
        # Tells "no row yet" (an empty conversation) from a session of another
        # kind or another owner (NoSession).
        return SessionStore(using=self.store.using).kind_of(self.session_id) is not None

    def _visible(self) -> bool:
        """Whether there is a session to read (``NoSession``: someone else's)."""
        if self.owner is None:
            return True
        if visible_session(self.owner, self.session_id, using=self.store.using) is not None:
            return True
        if self._exists():
            raise exceptions.NoSession(f"no such session: {self.session_id}")
        return False

    def _check_owner(self) -> None:
        """``NoSession`` for a session the owner may not see (checked once per object)."""
        if self._owner_checked or self.owner is None:
            return
        if visible_session(self.owner, self.session_id, using=self.store.using) is None:
            if self._exists():
                raise exceptions.NoSession(f"no such session: {self.session_id}")
            return  # none yet: the write creates it, owned
        self._owner_checked = True

    def _create(self) -> None:
        """Create the session, owned from its first transaction (a race lost is fine)."""
        try:
            self.store.create(dict(self._header), owner=self.owner)
        except exceptions.SessionExists:
            # Created meanwhile by another process — or a session of another
            # kind under this id, which the append then refuses (NoSession).
            pass
        else:
            self._owner_checked = True
        finally:
            if self.store.holds:
                self.store.release(self.session_id)

    # -- reading and writing --------------------------------------------------

    @mapped
    def read(self, limit: int | None, *, types: Collection[str]) -> list[Entry]:
        """The newest ``limit`` entries of ``types`` on the branch, oldest first (no hold).

        An absent session reads as empty. The leaf seen is remembered for the
        next :meth:`write`.
        """
        entries: list[Entry] = []
        leaf = ""
        if self._visible():
            try:
                tail = self.store.tail(self.session_id, limit, types=types)
            except exceptions.NoSession:
                # No log session in the read's snapshot. A log session there
                # now was created since by another process: the read came
                # first and saw it empty (the next write, conditional on an
                # empty leaf, then refuses as ConcurrentWriter if it moved on).
                # Any other kind under this id stays NoSession.
                kind = SessionStore(using=self.store.using).kind_of(self.session_id)
                if kind is not None and kind != SessionKind.LOG:
                    raise
            else:
                entries, leaf = tail.entries, tail.leaf
        self.seen_leaf = leaf
        return entries

    @mapped
    def write(self, entries: Sequence[dict[str, Any]], *, create: bool = True) -> list[str]:
        """Append ``entries`` in one transaction (creating the session if new and ``create``).

        Conditional on the leaf of this object's last read or write: if another
        writer moved the session on since, ``ConcurrentWriter`` and nothing is
        written. ``SessionLocked`` if another store holds the session.
        """
        if not entries:
            return []
        sid = self.session_id
        self._check_owner()
        entries = self._marked(entries)
        try:
            try:
                ids = self.store.append_many(sid, entries, expected_leaf=self.seen_leaf)
            except exceptions.NoSession:
                # No row at all (another kind is WrongSessionKind): create it.
                if not create:
                    raise
                self._create()
                self._check_owner()
                ids = self.store.append_many(sid, entries, expected_leaf=self.seen_leaf)
            self.seen_leaf = self.store.known_leaf(sid)
        finally:
            if self.store.holds:
                # Held for this write only: the next one may come from anywhere.
                self.store.release(sid)
        return ids

    def empty_root(self, reason: str, mark: str) -> list[dict[str, Any]]:
        """Entries that start an empty branch: an ``info`` root and a ``leaf`` label onto it.

        The label must name the root's id before either is stored; with its
        ``ts`` fixed here, the root's id is known (the format's ``entry_id``).
        ``{mark: reason}`` on the root says who started the branch and why.
        """
        now: datetime = self.store.now()
        # Marked before its id is taken: write() leaves a marked entry as it is.
        root = self._marked([{"type": "info", "parent": None, "ts": format_ts(now), mark: reason}])[
            0
        ]
        return [root, {"type": "label", "target": entry_id(root), "label": "leaf"}]

    def _marked(self, entries: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
        """``entries``, each marked with the run it is written for (if any: a run's code).

        ``{RUN_MEMBER: run id}`` on every entry a run writes lets the run's next
        attempt tell what an earlier one stored (agentstore.runs: a rerun after
        a crash continues the turn instead of repeating it).
        """
        run_id = run_for(self.session_id)
        if not run_id:
            return list(entries)
        return [
            entry if RUN_MEMBER in entry else {**entry, RUN_MEMBER: run_id} for entry in entries
        ]

    @mapped
    def close(self) -> None:
        """Forget this object's view of the session (it holds nothing between writes)."""
        self._owner_checked = False
        if self._own_store:
            self.store.close()
        else:
            self.store.release(self.session_id)
