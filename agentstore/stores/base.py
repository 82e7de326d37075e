"""What every store and repository shares: the database alias, the clock, the transactions.

    class DocumentStore(StoreBase):
        def put(self, doc):
            stamp = self.now()                      # outside the transaction: retries
            return self.write(lambda cursor: ...)   # rewrite the same values

:meth:`StoreBase.write` runs on :func:`agentstore.db.write`, the one write driver:
the body gets the transaction's cursor for its hand-written statements, and one
that uses the ORM says so (``orm=True``: Django opens the transaction).
A method whose whole body is one ORM write transaction says so with
:func:`retrying_write` instead of wrapping a closure::

    def update_ref(self, name, expected, next, reason=""):
        ...                                          # validate, read the clock
        self._update_ref(name, want, target, reason, self.now())

    @retrying_write
    def _update_ref(self, name, want, target, reason, now):
        ...                                          # plain statements, plain methods

A method that looks rows up by ids its caller names declares them with
:func:`lookup`, and what its answer is when nothing is stored under them::

    @lookup("session_id", missing=nothing)          # [] — as for an unknown id
    def entries(self, session_id): ...

An id that could never have been stored (NUL, a lone surrogate:
:func:`agentstore.validation.could_be_stored`) is then missing without asking the
database — PostgreSQL cannot be asked (psycopg refuses NUL), SQLite would
answer "not there" — so both backends give the method's own "missing" answer.

``using`` picks the database alias; ``clock`` is a callable returning an aware
datetime (tests inject a fixed or advancing one). Every timestamp a store writes
comes from :meth:`StoreBase.now`.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Concatenate, ParamSpec, TypeVar

from django.db import DEFAULT_DB_ALIAS

from agentstore import db, exceptions
from agentstore.db import SqlCursor
from agentstore.validation import could_be_stored, require_aware

T = TypeVar("T")
P = ParamSpec("P")
S = TypeVar("S", bound="StoreBase")

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


class StoreBase:
    """Base class of the stores and task repositories."""

    def __init__(self, *, using: str = DEFAULT_DB_ALIAS, clock: Clock | None = None) -> None:
        self.using = using
        self.clock: Clock = clock or utc_now

    def now(self) -> datetime:
        """Return the clock's time in UTC (refusing a naive clock)."""
        return require_aware(self.clock(), "clock()")

    def write(
        self,
        body: Callable[[SqlCursor], T],
        *,
        orm: bool = False,
        single: bool = False,
        prepare: bool = False,
    ) -> T:
        """Run ``body(cursor)`` as one short write transaction (:func:`agentstore.db.write`).

        ``body`` sends hand-written statements on ``cursor``; on SQLite the driver
        then opens the transaction on the ``sqlite3`` connection itself. ``orm``:
        the body also uses the ORM (writes, ``atomic()`` savepoints), so Django
        opens it. ``single``: the body is one statement, its own transaction in
        autocommit. ``prepare``: PostgreSQL plans the statements once per connection.
        """
        return db.write(body, using=self.using, orm=orm, single=single, prepare=prepare)

    def read(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` in a read snapshot that never takes the write lock."""
        return db.read_only(fn, using=self.using)


def retrying_write(method: Callable[Concatenate[S, P], T]) -> Callable[Concatenate[S, P], T]:
    """Run the decorated method as one ORM write transaction (``StoreBase.write(orm=True)``).

    On SQLite a busy database makes the write driver run the body again, so the
    body must be re-runnable: take the clock and new ids in the caller and
    pass them in, as arguments. The body can then be ordinary code split into
    ordinary methods rather than a long closure.
    """

    @functools.wraps(method)
    def wrapper(self: S, /, *args: P.args, **kwargs: P.kwargs) -> T:
        return self.write(lambda cursor: method(self, *args, **kwargs), orm=True)

    return wrapper


#: What a :func:`lookup` method answers for ids never stored, given its bound
#: arguments: a value to return, or an exception to raise.
Missing = Callable[[dict[str, Any]], object]


def nothing(arguments: dict[str, Any]) -> list[Any]:
    """The ``missing`` of a method that lists what it finds: ``[]``."""
    return []


def none(arguments: dict[str, Any]) -> None:
    """The ``missing`` of a method that returns one row or ``None``."""
    return None


def false(arguments: dict[str, Any]) -> bool:
    """The ``missing`` of a method that answers whether something is there."""
    return False


def zero(arguments: dict[str, Any]) -> int:
    """The ``missing`` of a method that counts (rows found, rows deleted)."""
    return 0


def no_session(arguments: dict[str, Any]) -> exceptions.NoSession:
    """The ``missing`` of a method that needs its ``session_id`` to name a session."""
    return exceptions.NoSession(f"no such session: {arguments['session_id']}")


def _unstorable(value: object) -> bool:
    return isinstance(value, str) and not could_be_stored(value)


def lookup(
    *ids: str, missing: Missing = none, excluded: tuple[str, ...] = ()
) -> Callable[[Callable[P, T]], Callable[P, T]]:
    """Answer ``missing`` when one of the ``ids`` arguments could never have been stored.

    The one rule for lookups by a caller-given id (module docstring): a ``str``
    argument named in ``ids`` that :func:`~agentstore.validation.could_be_stored`
    refuses makes the call answer ``missing(arguments)`` — the arguments bound by
    name, defaults applied — raised when it is an exception, returned otherwise,
    without running the method. A list, tuple or set of ids (``task_ids``) loses
    its unstorable members instead: they match no row, the others still may; if
    none is left the call is ``missing`` (an empty filter may mean "all").
    ``excluded`` names collections of values the method leaves *out* (a kinds
    exclusion list): their unstorable members are dropped, nothing more.
    ``None`` and other types pass through untouched (their own checks apply).

    The check is a type test and a scan of the id per named argument: cheap
    enough for the append paths, which look their session up this way too.
    """

    def decorate(method: Callable[P, T]) -> Callable[P, T]:
        signature = inspect.signature(method)
        names = list(signature.parameters)
        # (position, name, an exclusion list?); a misspelt name fails at import.
        slots = [(names.index(name), name, False) for name in ids]
        slots += [(names.index(name), name, True) for name in excluded]

        def bound(args: Any, kwargs: Any) -> inspect.BoundArguments:
            call = signature.bind(*args, **kwargs)
            call.apply_defaults()
            return call

        def answer(args: Any, kwargs: Any) -> Any:
            found = missing(dict(bound(args, kwargs).arguments))
            if isinstance(found, BaseException):
                raise found
            return found

        @functools.wraps(method)
        def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
            for index, name, exclusion in slots:
                value = args[index] if index < len(args) else kwargs.get(name)
                if type(value) is str or isinstance(value, str):
                    # An ASCII id without NUL (every UUID) is storable: decided
                    # without the full check, which only the rest need.
                    if (value.isascii() and "\x00" not in value) or exclusion:
                        continue
                    if not could_be_stored(value):
                        return answer(args, kwargs)  # type: ignore[no-any-return]
                elif isinstance(value, list | tuple | set | frozenset) and any(
                    _unstorable(member) for member in value
                ):
                    kept = [member for member in value if not _unstorable(member)]
                    if not kept and not exclusion:
                        return answer(args, kwargs)  # type: ignore[no-any-return]
                    call = bound(args, kwargs)
                    call.arguments[name] = kept
                    return wrapper(*call.args, **call.kwargs)
            return method(*args, **kwargs)

        return wrapper

    return decorate
