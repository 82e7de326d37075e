"""The OpenAI Agents SDK's session memory, kept as an agentsession log in agentstore.

    from agents import Agent, Runner
    from agentstore.integrations.openai_agents import AgentStoreSession

    session = AgentStoreSession("conv-1", owner=request.user)   # owner optional
    result = await Runner.run(agent, "What is 2+2?", session=session)
    # Never closed, as the SDK documents: the next turn may be served by this
    # object or by another one in any process (no hold is kept between writes).

:class:`AgentStoreSession` implements the SDK's session protocol
(``agents.memory.SessionABC``: ``session_id``, ``session_settings``,
``get_items(limit)``, ``add_items``, ``pop_item``, ``clear_session``) and is a
drop-in for the SDK's ``SQLiteSession``. The SDK's items are OpenAI Responses
input items — what the agentsession format's ``item`` entries carry — so the
conversation is a :class:`~agentstore.stores.LogStore` session whose id is the
SDK's ``session_id``: one ``item`` entry per item, in order, the item kept
exactly (the admin shows it, ``manage.py agentstore export`` writes it as
agentsession JSONL, ``verify()`` checks it, ``follow`` streams it).

How the protocol maps onto the log (docs/integrations/openai-agents.md has the
whole story; decision record 0062 the reasons):

* ``get_items(limit)`` is the item entries on the path from the root to the
  leaf (:meth:`LogStore.tail`, O(limit) once the session is open).
* ``add_items(items)`` appends one entry per item in **one** transaction
  (:meth:`LogStore.append_many`): all are stored or none.
* ``pop_item()`` destroys nothing: it moves the leaf back to the popped item's
  parent with a durable ``leaf`` label, leaving the item on an abandoned
  branch; the next ``add_items`` continues from the new leaf.
* ``clear_session()`` starts a new, empty root (an ``info`` entry) and moves the
  leaf onto it: the caller sees no items, the store keeps every old item.

An item without ``type`` (the SDK's ``{"role": "user", "content": "hi"}``) is
stored with ``"type": "message"`` — the format requires a type — and the entry
records ``"openai_agents": {"typeless": true}`` so ``get_items`` gives back the
item exactly as it was added.

The methods are coroutines, as the SDK wants; each runs its database work off
the event loop (:func:`agentstore.db.thread.run`: the thread of a
waiting synchronous caller or of a Django request, as ``sync_to_async`` would
choose; else one thread of agentstore's own), so the event loop never blocks.
The ``*_sync`` twins serve synchronous code.
No hold is kept between writes (:class:`.ConversationLog`): any number of
objects in any number of processes serve one conversation turn after turn,
none of them closed, and a turn computed from stale history is refused with
``ConcurrentWriter``. Different conversations never contend beyond SQLite's
writer queue.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar, cast

from agents.items import TResponseInputItem
from agents.memory import SessionABC, SessionSettings
from agents.memory.session_settings import coerce_session_settings, resolve_session_limit

from agentstore import exceptions
from agentstore.db.thread import async_twin
from agentstore.formats.agentsession import Entry
from agentstore.integrations.conversation import ConversationLog, checked, checked_limit
from agentstore.stores.log import LogStore

__all__ = ["HARNESS", "MARK", "AgentStoreSession", "entry_item", "item_entry"]

T = TypeVar("T")

#: ``harness.name`` of the sessions this module creates (``ListFilter(harness=...)``).
HARNESS = "openai-agents"
#: The entry member this module writes: ``{"typeless": true}`` on item entries
#: whose item had no ``type``; ``"clear_session"``/``"pop_item"`` on the
#: ``info`` roots that start an empty branch.
MARK = "openai_agents"
_ITEM_TYPES = frozenset({"item"})


def _copy_json(value: Any) -> Any:
    """A deep copy of decoded JSON (the store's entries are shared; callers may mutate).

    ``copy.deepcopy`` keeps a memo for cycles JSON cannot have; this was most of
    a ``get_items(50)``.
    """
    if type(value) is dict:
        return {k: _copy_json(v) for k, v in value.items()}
    if type(value) is list:
        return [_copy_json(v) for v in value]
    return value


def item_entry(item: Any, *, index: int = 0) -> dict[str, Any]:
    """The ``item`` entry (a dict to append) that stores one SDK item.

    An item without ``type`` is stored as a ``message`` and marked so that
    :func:`entry_item` gives it back without. ``index`` names the item in errors.
    The entry must pass the API's body rules (:func:`.conversation.checked`:
    depth, JSON values, finite numbers, no NUL or lone surrogate), else
    ``ValidationError`` — before anything is written.
    """
    field = f"items[{index}]"
    if not isinstance(item, dict):
        raise exceptions.ValidationError(
            f"{field} must be a JSON object (a Responses input item)", field=field
        )
    if "type" in item:
        return checked({"type": "item", "item": item}, field)
    return checked(
        {"type": "item", "item": {"type": "message", **item}, MARK: {"typeless": True}}, field
    )


def entry_item(entry: Entry) -> TResponseInputItem:
    """The SDK item a stored ``item`` entry holds (a fresh copy, equal to what was added)."""
    item = _copy_json(entry.data["item"])
    mark = entry.data.get(MARK)
    if isinstance(mark, dict) and mark.get("typeless") is True:
        item.pop("type", None)
    return cast(TResponseInputItem, item)


class AgentStoreSession(SessionABC):
    """An OpenAI Agents SDK session stored as an agentstore log session.

    ``session_id`` is the log session's id (at most 255 characters). ``owner``
    (a Django user, optional) becomes the owner of a session this object
    creates, so the API and the admin scope it; an existing session the owner
    may not see is ``NoSession``. ``store`` shares a :class:`LogStore` between
    sessions (default: one of its own on ``using``); ``header`` adds members to
    the header of a session this object creates (``cwd``, …).
    ``session_settings`` is the SDK's (its ``limit`` is the default of
    :meth:`get_items`). The storage rules are :class:`.ConversationLog`'s.
    """

    def __init__(
        self,
        session_id: str,
        *,
        owner: Any = None,
        store: LogStore | None = None,
        using: str = "default",
        header: dict[str, Any] | None = None,
        session_settings: SessionSettings | dict[str, Any] | None = None,
    ) -> None:
        self.log = ConversationLog(
            session_id, harness=HARNESS, owner=owner, store=store, using=using, header=header
        )
        self.session_id = session_id
        self.session_settings = (
            coerce_session_settings(session_settings)
            if session_settings is not None
            else SessionSettings()
        )

    @property
    def store(self) -> LogStore:
        """The :class:`LogStore` this session writes through."""
        return self.log.store

    # -- the protocol, synchronously ------------------------------------------

    def get_items_sync(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The items on the current branch, oldest first; the newest ``limit`` if given.

        ``limit=None`` uses ``session_settings.limit``; 0 gives none, a negative
        limit all (the SDK's SQLite semantics). An unknown session has no items
        (nothing is created). Takes no hold.
        """
        wanted = resolve_session_limit(checked_limit(limit), self.session_settings)
        if wanted is not None and wanted < 0:
            wanted = None
        if wanted == 0:
            return []
        with self.log.lock:
            entries = self.log.read(wanted, types=_ITEM_TYPES)
        return [entry_item(e) for e in entries]

    def add_items_sync(self, items: Sequence[TResponseInputItem]) -> None:
        """Append the items, in order, in one transaction (creating the session if new).

        If this object read the session (``get_items``) and another writer has
        moved it on since — a turn computed from stale history — the append is
        refused with ``ConcurrentWriter`` and nothing is written, rather than
        hung after a conversation the agent never saw.
        """
        entries = [item_entry(item, index=i) for i, item in enumerate(items)]
        with self.log.lock:
            self.log.write(entries)

    def pop_item_sync(self) -> TResponseInputItem | None:
        """Take back the newest item: the leaf moves to its parent; the item stays stored.

        ``None`` when the branch has no item. The popped item remains in the
        session as an abandoned branch (the admin's tree view shows it).
        """
        with self.log.lock:
            last = self.log.read(1, types=_ITEM_TYPES)
            if not last:
                return None
            popped = last[0]
            if popped.parent:
                moves = [{"type": "label", "target": popped.parent, "label": "leaf"}]
            else:
                moves = self.log.empty_root("pop_item", MARK)  # it was a root
            self.log.write(moves, create=False)
        return entry_item(popped)

    def clear_session_sync(self) -> None:
        """Start an empty branch: no items are seen any more, none is deleted.

        Writes an ``info`` root (``"openai_agents": "clear_session"``) and a
        ``leaf`` label onto it, in one transaction; a session without items
        (or without a row) is left alone. To delete the rows, use
        ``LogStore.delete(session_id)``.
        """
        with self.log.lock:
            if self.log.read(1, types=_ITEM_TYPES):
                self.log.write(self.log.empty_root("clear_session", MARK), create=False)

    def close(self) -> None:
        """Forget this object's cached view of the session (optional: it holds nothing)."""
        with self.log.lock:
            self.log.close()

    # -- the protocol, as the SDK calls it ---------------------------------------
    # Each the same body as its synchronous twin, run once off the event loop
    # (agentstore.db.thread: the thread that should own Django's connection — a
    # waiting sync caller's, a request's, else agentstore's own), awaited to its
    # end even if the caller is cancelled.

    get_items = async_twin(get_items_sync)
    add_items = async_twin(add_items_sync)
    pop_item = async_twin(pop_item_sync)
    clear_session = async_twin(clear_session_sync)
    aclose = async_twin(close)

    def __enter__(self) -> AgentStoreSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> AgentStoreSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
