"""Shared pieces of the LogStore tests: entry builders and the storetest harness.

The harness mirrors agentsession's ``storetest`` options: ``new()`` a fresh
store, ``reopen(store)`` closes it and opens another on the same database,
``second()`` another *writing* store (its own token — as separate as another
process), ``read_only()`` a read-only store on the same database.
"""

from __future__ import annotations

from typing import Any

from agentstore.stores import LogStore


def user(text: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "item",
        "item": {
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": text}],
        },
        **extra,
    }


def assistant(text: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "item",
        "item": {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text}],
        },
        **extra,
    }


class Harness:
    """Stores on one database; every store made is closed at the end of the test."""

    def __init__(self, **options: Any) -> None:
        self.options = options
        self.stores: list[LogStore] = []

    def _make(self, **options: Any) -> LogStore:
        store = LogStore(**{**self.options, **options})
        self.stores.append(store)
        return store

    def new(self, **options: Any) -> LogStore:
        return self._make(**options)

    def reopen(self, store: LogStore) -> LogStore:
        store.close()
        return self._make()

    def second(self) -> LogStore:
        return self._make()

    def read_only(self) -> LogStore:
        return self._make(read_only=True)

    def close(self) -> None:
        for store in self.stores:
            store.close()
