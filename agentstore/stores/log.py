"""LogStore: agentsession sessions in the database, with holds, follow and refs.

    from agentstore.stores import LogStore
    from agentstore.types import ListFilter, RefTarget

    store = LogStore()                                   # using="default"
    session = store.create({"cwd": "/repo", "harness": {"name": "demo"}})
    store.append(session.id, {"type": "config", "model": "gpt-5"})
    eid = store.append(session.id, {"type": "item", "item": {"type": "message",
                       "role": "user", "content": [{"type": "input_text", "text": "hi"}]}})
    store.update_ref("team/main", None, RefTarget(session=session.id))
    for change in store.follow(session.id):              # snapshot, then appends
        ...

The port of agentsession's ``sqlite`` store over agentstore's one schema: a log
session is a ``Session`` row of ``kind="log"`` (``header`` = the exact header
line) and one ``Entry`` row per line (``seq`` 1-based, a fork's prefix
included, ``line`` the exact line). Dumping the rows in ``seq`` order is the
JSONL file byte for byte (:meth:`LogStore.export_jsonl`), and a file imports
back with every id verified (:meth:`LogStore.import_jsonl`).

Concurrency, in three layers:

* **Holds** (``Holder`` rows, :mod:`.log_holds`): ``create``/``open`` claim the
  session for this *store instance* (a token; several stores in one process
  are as separate as processes) inside their write transaction; every append
  refreshes the heartbeat in its transaction and a zero-row update means the
  hold was lost → ``SessionLocked``, refused until :meth:`LogStore.release`.
* **ConcurrentWriter**: the backstop for writers that bypassed the hold. The
  entry's ``seq`` comes from the in-memory session; UNIQUE(session, seq) refuses
  the insert if anyone else appended since this store loaded the session, and
  the session stays refused until ``release`` — never re-parented.
* **One mutex per store** guards the cache (``open`` → the shared ``Session``),
  the refusals and the held ids, because a store is used from several threads
  (each with its own Django connection) while a ``Session`` is not thread-safe.

Every write is one short transaction (:meth:`StoreBase.write`); reads take a
snapshot that never holds the write lock. Read-only stores hold nothing and
refuse every write with ``ReadOnly``; they read, list and follow.

The store is one class assembled from modules named for what they hold, each
building on the one before (``LogStore``'s MRO: named → appends → reads →
sessions → ``StoreBase``):

* :mod:`.log_sessions` — ``LogSessions``: the state (cache, refusals, held ids,
  the mutex); create, fork, import, open, release, delete, close;
  ``lock_holder`` and ``break_lock``.
* :mod:`.log_appends` — ``LogAppends``: ``append``, ``append_many``, the fence
  and the heartbeat's pacing, ``continue_session``.
* :mod:`.log_reads` — ``LogReads``: ``read``, ``read_page``, ``tail``, ``list``,
  ``follow``/``afollow``, ``export_jsonl``.
* :mod:`.log_named` — ``LogNamed``: the ref methods (delegating to
  ``RefStore``), ``session_for``, ``continue_ref``, ``resolve_current``.

and the helpers they call, none of which knows the store: :mod:`.log_rows`
(the rows and their statements), :mod:`.log_open` (a session opened from its
head row), :mod:`.log_holds` (the hold protocol), :mod:`.log_follow` (the
follow loop), :mod:`.log_refs` (ref names).
"""

from __future__ import annotations

from agentstore.stores.log_appends import HEARTBEAT_EVERY
from agentstore.stores.log_named import LogNamed
from agentstore.stores.log_reads import LogReads

# HEARTBEAT_EVERY is re-exported: it is how callers learn how far ``updated_at``
# may trail a held session's last append.
__all__ = ["HEARTBEAT_EVERY", "LogStore"]


class LogStore(LogNamed, LogReads):
    """agentsession sessions over the agentstore schema (see the module docstring).

    ``LogStore(using="default", clock=None, read_only=False, follow_interval=0.1,
    stale_lock_report=None)``: the constructor is :class:`.log_sessions.LogSessions`'s.
    """
