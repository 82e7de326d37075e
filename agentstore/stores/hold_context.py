"""Writing under a hold someone else claimed: a run's, for the code the run calls.

A store without holds (``LogStore(holds=False)``, what the framework
integrations use) fences each append so that it runs only while *no other*
store holds the session. A worker executing a run claims the session's hold
for the run's duration (:mod:`agentstore.runs`), and the runner it calls
writes through the integrations — their stores are not the run's, and would
be refused by the run's own hold. This module says, for the current
``contextvars`` context, under which hold token a session's writes go::

    from agentstore.stores.hold_context import writing_under

    with writing_under(session_id, token):   # the token the run's hold was claimed with
        runner(run)                            # its appends pass that hold's fence

A context variable, not a thread-local or a global: it follows the runner into
coroutines and into the database thread of :mod:`agentstore.db.thread` (which
runs each call in a copy of the caller's context), and it ends with the block,
so nothing outside the run — another thread, another request, another run in
the same worker — writes under that hold.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from types import MappingProxyType

__all__ = ["run_for", "token_for", "writing_under"]

_EMPTY: Mapping[str, tuple[str, str]] = MappingProxyType({})
#: session id → (hold token, the run writing under it)
_holds: ContextVar[Mapping[str, tuple[str, str]]] = ContextVar(
    "agentstore_hold_tokens", default=_EMPTY
)


@contextmanager
def writing_under(session_id: str, token: str, *, run_id: str = "") -> Iterator[None]:
    """Within the block, stores without holds write ``session_id`` under hold ``token``.

    ``run_id`` names the run the writes are made for: the integrations mark
    what they append with it (:func:`run_for`), so a rerun of the run can tell
    what an earlier attempt already wrote.
    """
    reset = _holds.set(MappingProxyType({**_holds.get(), session_id: (token, run_id)}))
    try:
        yield
    finally:
        _holds.reset(reset)


def token_for(session_id: str) -> str | None:
    """The hold token this context writes ``session_id`` under, or ``None``."""
    found = _holds.get().get(session_id)
    return None if found is None else found[0]


def run_for(session_id: str) -> str:
    """The run this context writes ``session_id`` for, or ``""``."""
    found = _holds.get().get(session_id)
    return "" if found is None else found[1]
