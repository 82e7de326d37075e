"""The stores: the Python API agents and surfaces call.

    from agentstore.stores import TreeStore, LoopStore, LogStore, DocumentStore, SessionStore

    store = TreeStore()                          # using="default", clock=None
    session = store.create_session("/repo")

Each store is imported on first use, so importing this package is cheap and safe
before Django's app registry is ready.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the real names for type checkers; at run time they load lazily
    from agentstore.stores.documents import DocumentStore
    from agentstore.stores.log import LogStore
    from agentstore.stores.loop import LoopStore
    from agentstore.stores.refs import RefStore
    from agentstore.stores.sessions import SessionStore
    from agentstore.stores.tree import TreeStore

_EXPORTS = {
    "DocumentStore": "agentstore.stores.documents",
    "LogStore": "agentstore.stores.log",
    "LoopStore": "agentstore.stores.loop",
    "RefStore": "agentstore.stores.refs",
    "SessionStore": "agentstore.stores.sessions",
    "TreeStore": "agentstore.stores.tree",
}

__all__ = ["DocumentStore", "LogStore", "LoopStore", "RefStore", "SessionStore", "TreeStore"]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'agentstore.stores' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
