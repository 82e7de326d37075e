"""TreeStore: sessions as trees of entries — messages, compactions, branches, labels.

The librecode session repository over agentstore's schema::

    store = TreeStore()
    session = store.create_session("/repo")
    hi = MessageEntity(role="user", content="hi")
    user = store.append_message(session.id, None, hi)
    hello = MessageEntity(role="assistant", content="hello")
    reply = store.append_message(session.id, user.id, hello)
    context = store.build_context(session.id, reply.id)

A tree session is a ``Session`` row of kind ``tree`` (owned by
:class:`~agentstore.stores.sessions.SessionStore`) and its entries, each
hanging off a parent entry or starting a new root. The store is built from
rooms, one responsibility each:

* this module — the class, and the session-level operations it passes to the
  session store for the ``tree`` kind (create, get, list, delete);
* :mod:`.tree_writes` — every append, an imported session, a deleted branch:
  validate and derive outside the transaction, then one short write
  transaction per entry (:class:`~.tree_writes.TreeWrites`);
* :mod:`.tree_reads` — entries, branches, the forest page by page, transcripts
  and the model's context, each in one snapshot (:class:`~.tree_reads.TreeReads`);
* :mod:`.tree_walks` — the recursive SQL walks along parent links both halves use;
* :mod:`.tree_rows` — rows to value objects and back (positional builders,
  message parts, the JSON columns);
* :mod:`.tree_metadata`, :mod:`.tree_parts`, :mod:`.tree_context` — pure rules:
  the columns derived from an entry, a message's validation, context building.

A ``None`` parent makes a new root: the store never guesses "the current leaf"
for you (``branch(session_id, "")`` finds the most recent childless entry when
you need it). "Append order" is ``(created_at, seq)``: entries sort by their
timestamp (caller-supplied message timestamps are kept), ties by insertion.
Hot paths send hand-written SQL (:mod:`agentstore.sql.tree`) on
:mod:`agentstore.db`'s cursor. See ``docs/tree-store.md`` for the measured figures.
"""

from __future__ import annotations

from typing import Any

from agentstore.stores.base import Clock
from agentstore.stores.sessions import SessionStore
from agentstore.stores.tree_reads import TreeReads
from agentstore.stores.tree_rows import TREE
from agentstore.stores.tree_writes import TreeWrites
from agentstore.types.sessions import SessionRecord
from agentstore.types.tree import SessionEntity
from agentstore.validation import require_text

__all__ = ["TreeStore"]


class TreeStore(TreeWrites, TreeReads):
    """Sessions as entry trees (the librecode ``SessionRepository`` behaviour).

    The appends and other writes are :class:`~.tree_writes.TreeWrites`', the
    reads :class:`~.tree_reads.TreeReads`'; the session operations are here.
    """

    def __init__(self, *, using: str = "default", clock: Clock | None = None) -> None:
        super().__init__(using=using, clock=clock)
        #: The owner of the session rows (this store keeps entries and parts).
        self.sessions = SessionStore(using=using, clock=clock)

    # -- sessions ----------------------------------------------------------------

    def create_session(
        self, cwd: str, name: str = "", parent_session: str = "", *, owner: Any = None
    ) -> SessionEntity:
        """Create a top-level (or child, with ``parent_session``) session in ``cwd``."""
        require_text(cwd, "session.cwd")
        record = self.sessions.create(
            TREE, cwd=cwd, name=name, parent_session=parent_session, owner=owner
        )
        return self._session_entity(record)

    @staticmethod
    def _session_entity(row: SessionRecord) -> SessionEntity:
        return SessionEntity(
            id=row.id,
            cwd=row.cwd,
            name=row.name,
            parent_session=row.parent_session,
            created_at=row.created_at,
            updated_at=row.updated_at,
            header=row.header,
        )

    def get_session(self, session_id: str) -> SessionEntity | None:
        """Return the session, or ``None`` when there is no tree session with that id."""
        row = self.sessions.get(session_id, TREE)
        return None if row is None else self._session_entity(row)

    def latest_session(self, cwd: str) -> SessionEntity | None:
        """Return the most recently updated top-level session of ``cwd``."""
        rows = self.sessions.list(TREE, cwd=cwd, top_level=True, limit=1)
        return self._session_entity(rows[0]) if rows else None

    def list_sessions(self, cwd: str) -> list[SessionEntity]:
        """Top-level sessions of ``cwd``, most recently updated first."""
        rows = self.sessions.list(TREE, cwd=cwd, top_level=True)
        return [self._session_entity(row) for row in rows]

    def list_child_sessions(self, parent_id: str) -> list[SessionEntity]:
        """Sessions whose parent is ``parent_id``, most recently updated first."""
        rows = self.sessions.list(TREE, parent_session=parent_id)
        return [self._session_entity(row) for row in rows]

    def delete_session(self, session_id: str) -> None:
        """Delete a session with its entries, parts and owned tasks; keep child sessions.

        ``SessionStore.delete`` for a tree session (the agent task that ran in
        it goes too). A missing session raises ``NoSession``; a session of
        another kind raises ``WrongSessionKind`` and nothing is deleted.
        """
        self.sessions.delete(session_id, TREE)
