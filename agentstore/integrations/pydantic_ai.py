"""Pydantic AI's ``message_history``, kept as an agentsession log in agentstore.

    from pydantic_ai import Agent
    from agentstore.integrations.pydantic_ai import MessageHistory

    history = MessageHistory("chat-42", owner=request.user)     # owner optional
    result = agent.run_sync("And in Oslo?", message_history=history.load())
    history.save(result)        # the run's new messages, one transaction
    # No close needed: no hold is kept between saves, so the next request may
    # be served by any process.

Pydantic AI hands an agent its memory as ``message_history`` (a list of
``ModelMessage``) and gives back what a run added as ``result.new_messages()``.
:class:`MessageHistory` keeps that list in the database, so a conversation
survives restarts and moves between processes: :meth:`MessageHistory.load`
returns the messages, :meth:`MessageHistory.save` appends a run's new ones.

**Why the log store, not the tree store.** A ``ModelMessage`` is Pydantic AI's
own shape (requests and responses made of typed parts, with timestamps, usage,
provider details), not a librecode/pi message: the tree store would have to
re-shape it into its projection columns and could not give it back exactly.
The log store keeps each entry's JSON as written and hashes it, so one entry
per message — ``{"type": "pydantic_ai:message", "message": <the message as
ModelMessagesTypeAdapter dumps it>}``, an agentsession *extension* entry —
comes back through ``ModelMessagesTypeAdapter`` equal to what was saved. It also
brings what memory needs: a save refused rather than interleaved with
another writer's, one transaction per save, ``verify()``, export as JSONL and live ``follow``
(decision record 0065).

The storage rules (no hold kept between writes, one-transaction writes, a save after
a load refused with ``ConcurrentWriter`` if another writer moved the
conversation on meanwhile, the optional owner) are
:class:`~agentstore.integrations.conversation.ConversationLog`'s.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter, ModelRequest, ModelResponse
from pydantic_core import PydanticSerializationError

from agentstore import exceptions
from agentstore.db.thread import async_twin
from agentstore.formats.agentsession.describe import PYDANTIC_AI_MESSAGE
from agentstore.integrations.conversation import ConversationLog, checked, checked_limit
from agentstore.stores.log import LogStore

__all__ = ["ENTRY_TYPE", "HARNESS", "MessageHistory"]

#: ``harness.name`` of the sessions this module creates.
HARNESS = "pydantic-ai"
#: The entry type of one stored message (an agentsession extension entry; the
#: admin and ``manage.py agentstore show`` put it into words part by part).
ENTRY_TYPE = PYDANTIC_AI_MESSAGE
_TYPES = frozenset({ENTRY_TYPE})


class MessageHistory:
    """A Pydantic AI conversation stored as the log session ``session_id``.

    ``owner`` (a Django user, optional) owns a session this object creates;
    ``store``/``using``/``header`` as for
    :class:`~agentstore.integrations.conversation.ConversationLog`.
    """

    def __init__(
        self,
        session_id: str,
        *,
        owner: Any = None,
        store: LogStore | None = None,
        using: str = "default",
        header: dict[str, Any] | None = None,
    ) -> None:
        self.log = ConversationLog(
            session_id, harness=HARNESS, owner=owner, store=store, using=using, header=header
        )
        self.session_id = session_id

    def load(self, limit: int | None = None) -> list[ModelMessage]:
        """The conversation's messages, oldest first (the newest ``limit`` if given).

        Pass them as ``message_history=``. An unknown session has none (nothing
        is created). Takes no hold; a later :meth:`save` is refused if another
        writer saved meanwhile. With ``limit``, the window may start mid-turn
        (a tool return without its call): Pydantic AI expects whole turns, so
        prefer no limit or trim with a history processor.
        """
        with self.log.lock:
            entries = self.log.read(checked_limit(limit), types=_TYPES)
        return ModelMessagesTypeAdapter.validate_python([e.data["message"] for e in entries])

    def save(self, messages: Any) -> int:
        """Append a run's new messages in one transaction; return how many were stored.

        ``messages`` is a run result (its ``new_messages()`` are saved) or a list
        of ``ModelMessage``. Creates the session on first save. Raises
        ``ConcurrentWriter`` (nothing written) if the conversation moved on
        since this object's last :meth:`load` or save, ``SessionLocked`` if
        another process holds it. Anything that is not a ``ModelRequest`` or
        ``ModelResponse``, or that the API would refuse in a body (too deep, a
        NUL or lone surrogate, a number that is not finite — which Pydantic AI
        would silently store as ``null``), raises ``ValidationError`` naming the
        message, and nothing is written.
        """
        new = messages.new_messages() if hasattr(messages, "new_messages") else messages
        entries = _entries(new)
        with self.log.lock:
            self.log.write(entries)
        return len(entries)

    def close(self) -> None:
        """Forget this object's cached view of the session (optional: it holds nothing)."""
        with self.log.lock:
            self.log.close()

    # The async twins: each the same body, run once off the event loop
    # (agentstore.db.thread: the thread that should own Django's connection).
    aload = async_twin(load)
    asave = async_twin(save)
    aclose = async_twin(close)

    def __enter__(self) -> MessageHistory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> MessageHistory:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _entries(messages: Iterable[Any]) -> list[dict[str, Any]]:
    """The entries that store ``messages``, checked by the API's body rules."""
    if isinstance(messages, str | bytes | dict) or not isinstance(messages, Iterable):
        raise exceptions.ValidationError(
            "messages must be a run result or a list of ModelMessage", field="messages"
        )
    listed = list(messages)
    for index, message in enumerate(listed):
        if not isinstance(message, ModelRequest | ModelResponse):
            raise exceptions.ValidationError(
                f"messages[{index}] must be a ModelRequest or ModelResponse, "
                f"not {type(message).__name__}",
                field=f"messages[{index}]",
            )
    try:
        # warnings="error": a value the adapter cannot serialize is refused,
        # never written as something load() would not give back.
        dumped = ModelMessagesTypeAdapter.dump_python(listed, mode="json", warnings="error")
        # The Python dump keeps floats as they are: JSON mode writes inf/nan as null.
        plain = ModelMessagesTypeAdapter.dump_python(listed, warnings="error")
    except (PydanticSerializationError, ValueError, TypeError) as exc:
        raise exceptions.ValidationError(
            f"messages cannot be stored: {exc}", field="messages"
        ) from exc
    entries = []
    for index, (message, raw) in enumerate(zip(dumped, plain, strict=True)):
        field = f"messages[{index}]"
        if _has_non_finite(raw):
            raise exceptions.ValidationError(
                f"{field} holds a number that is not finite (JSON has none)", field=field
            )
        entries.append(checked({"type": ENTRY_TYPE, "message": message}, field))
    return entries


def _has_non_finite(value: Any) -> bool:
    """Whether a Python dump holds ``inf`` or ``nan`` (walked iteratively)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, float):
            if not math.isfinite(item):
                return True
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return False
