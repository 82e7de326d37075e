"""Fixtures of the store tests: stores on a ticking clock, sessions, message helpers."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import pytest

from agentstore.stores.documents import DocumentStore
from agentstore.stores.tree import TreeStore
from agentstore.types.tree import MessageEntity, SessionEntity

START = datetime(2026, 5, 31, 12, 0, tzinfo=UTC)


class TickClock:
    """A clock that moves 1 ms forward on every reading (deterministic ordering)."""

    def __init__(self, start: datetime = START) -> None:
        self.current = start

    def __call__(self) -> datetime:
        self.current += timedelta(milliseconds=1)
        return self.current


@pytest.fixture
def clock() -> TickClock:
    return TickClock()


@pytest.fixture
def tree(db: None, clock: TickClock) -> TreeStore:
    return TreeStore(clock=clock)


@pytest.fixture
def documents(db: None, clock: TickClock) -> DocumentStore:
    return DocumentStore(clock=clock)


@pytest.fixture
def session(tree: TreeStore) -> SessionEntity:
    return tree.create_session("/work/project")


def user(content: str, **kwargs: object) -> MessageEntity:
    return MessageEntity(role="user", content=content, **kwargs)  # type: ignore[arg-type]


def assistant(content: str, **kwargs: object) -> MessageEntity:
    return MessageEntity(role="assistant", content=content, **kwargs)  # type: ignore[arg-type]


Factory = Callable[..., MessageEntity]
