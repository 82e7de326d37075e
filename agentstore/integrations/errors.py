"""The integrations' database errors, as agentstore exceptions: one policy for every door.

    from agentstore.integrations.errors import database_errors, mapped

    @mapped
    def put(self, config, ...): ...     # no raw IntegrityError/DataError/OperationalError escapes

    with database_errors():             # the same, around a block (a generator's step)
        rows = store.list(...)

A framework calls a memory object (``AgentStoreSession``, ``MessageHistory``) or a
checkpointer (``AgentStoreSaver``) deep inside its own run loop; a raw
``django.db.utils.DataError`` from there tells neither the framework nor the
person reading the traceback what was wrong, and code that handles agentstore's
errors (``except AgentStoreError``, the API's one error shape) misses it. The
doors validate their input first (``agentstore.validation``), so what reaches the
database is storable; what the database still refuses is mapped here:

* agentstore's own errors pass unchanged — :class:`~agentstore.exceptions.DatabaseBusy`
  included: it is already the verdict of the busy retries (``agentstore.db``);
* ``DataError`` (a value the database will not take) → ``ValidationError``: input the
  door's validation should have refused;
* ``IntegrityError`` (a constraint) → :class:`~agentstore.exceptions.StorageConflict`,
  still an ``IntegrityError``;
* any other database error (``OperationalError``: unreachable, no such table, disk
  full; ``ProgrammingError``, ``InterfaceError``, ``InternalError``) →
  :class:`~agentstore.exceptions.DatabaseUnavailable`, still an ``OperationalError``.

Each keeps the database's error as its ``__cause__`` and its text in ``cause``.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from typing import ParamSpec, TypeVar

from django.db import DatabaseError, DataError, IntegrityError

from agentstore import exceptions

__all__ = ["database_errors", "mapped", "translate"]

P = ParamSpec("P")
R = TypeVar("R")


def translate(exc: DatabaseError) -> exceptions.AgentStoreError:
    """The agentstore exception a database error of an integration's call becomes."""
    if isinstance(exc, exceptions.AgentStoreError):
        return exc  # DatabaseBusy: already agentstore's
    cause = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, DataError):
        return exceptions.ValidationError(f"the database refused a value: {cause}")
    if isinstance(exc, IntegrityError):
        return exceptions.StorageConflict(f"the database refused the write: {cause}", cause=cause)
    return exceptions.DatabaseUnavailable(f"the database failed: {cause}", cause=cause)


def mapped(method: Callable[P, R]) -> Callable[P, R]:
    """``method`` with :func:`translate` applied to the database errors it raises."""

    @functools.wraps(method)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(*args, **kwargs)
        except exceptions.AgentStoreError:
            raise
        except DatabaseError as exc:
            raise translate(exc) from exc

    return run


@contextlib.contextmanager
def database_errors() -> Iterator[None]:
    """:func:`translate` the database errors raised inside the block."""
    try:
        yield
    except exceptions.AgentStoreError:
        raise
    except DatabaseError as exc:
        raise translate(exc) from exc
