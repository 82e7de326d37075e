"""SessionStore: the one owner of ``Session`` rows — create, import, transfer, delete, holds.

Three stores share one session table (``docs/concepts.md``), and each used to
write its rows itself; the copies drifted (an ownerless row here, a raw
``IntegrityError`` there, a deletion that forgot a kind's cascade). Now every
INSERT, UPDATE and DELETE of a session row is in this module::

    from agentstore.stores import SessionStore

    sessions = SessionStore()
    record = sessions.create("loop", owner=user, model="gpt-x")   # a SessionRecord
    sessions.get(record.id)                    # any kind; get(id, kind="tree") narrows
    sessions.list("tree", cwd="/repo", top_level=True)
    sessions.transfer(record.id, other_user)   # give it to someone (one UPDATE)
    sessions.delete(record.id)                 # runs the kind's cascade; NoSession if missing
    sessions.hold(record.id)                   # LockInfo of the process holding it, or None
    sessions.break_hold(record.id)
    sessions.export_row(record.id)             # the SessionRow an export file carries

The tree, loop and log stores keep their entries, steps and lines; when one of
their writes must touch the session row in the same transaction (an append
moves ``updated_at``, an import inserts the row with its entries), they call
the methods under "inside a write transaction" below with their cursor. Those
methods never open a transaction of their own: that is the internal API
(``docs/development.md``, "Where each kind of change goes").

Vocabulary: a *hold* is the ``Holder`` row saying which process writes a
session. The Go-derived names keep "lock" (``LogStore.lock_holder``,
``LogStore.break_lock``, ``LockInfo``, the command's ``locks``/``break-lock``);
they call the methods here.
"""

from __future__ import annotations

import builtins
import os
import socket
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple

from django.db import IntegrityError, connections

from agentstore import db, exceptions, notify, sql
from agentstore.db import SqlCursor, is_unique_violation
from agentstore.ids import new_id
from agentstore.models import Grant, Holder, Session, Task
from agentstore.models.sessions import SessionKind
from agentstore.sql import log as log_sql
from agentstore.sql import sessions as session_sql
from agentstore.stores import log_holds
from agentstore.stores.base import StoreBase, false, lookup, no_session, none, nothing
from agentstore.types.log import LockInfo
from agentstore.types.sessions import SessionRecord, SessionRow
from agentstore.validation import (
    require_aware,
    require_int,
    require_json,
    require_name,
    require_storable_text,
    require_text,
)

__all__ = ["IMPORT_BATCH", "RowWriter", "SessionStore"]

#: Rows an import sends in one ``executemany`` (its memory: one batch of rows).
IMPORT_BATCH = 500

KINDS = frozenset(SessionKind.values)

#: Columns a caller may set on insert or update (everything but identity and kind).
_SETTABLE = frozenset(sql.column_names(Session)) - {"id", "kind"}

_RECORD_FIELDS = (
    "id",
    "kind",
    "created_at",
    "updated_at",
    "owner_id",
    "cwd",
    "name",
    "parent_session",
    "header",
    "superseded_by",
    "model",
    "system_prompt",
    "incarnation",
)
_STAMPS = frozenset({"created_at", "updated_at"})


def _record(values: Sequence[Any]) -> SessionRecord:
    return SessionRecord(**dict(zip(_RECORD_FIELDS, values, strict=True)))


def _owner_id(owner: Any) -> Any:
    """A user (or its primary key, or ``None``) as the ``owner_id`` column value.

    ``None`` (no owner) is a choice a caller makes by passing it. A user object
    that is not a stored user — Django's ``AnonymousUser``, an unsaved user —
    is refused: its ``pk`` is ``None``, so it used to become an ownerless
    session silently, which an API request by an anonymous client then could
    not even read back (a 500 after the row was written).
    """
    if owner is None:
        return None
    if not hasattr(owner, "pk"):
        return owner
    if not getattr(owner, "is_authenticated", True) or owner.pk is None:
        raise exceptions.ValidationError(
            f"a session's owner must be a stored user, not {owner!r}", field="owner"
        )
    return owner.pk


def _adapted(cursor: SqlCursor, values: dict[str, Any]) -> list[Any]:
    """``values``' parameters, checked as columns, datetimes adapted for the database."""
    _check_columns(values)
    return [
        sql.adapt_datetime(cursor.db, v) if isinstance(v, datetime) else v for v in values.values()
    ]


def _check_columns(values: dict[str, Any]) -> None:
    unknown = set(values) - _SETTABLE
    if unknown:
        raise exceptions.ValidationError(
            f"not a settable session column: {', '.join(sorted(unknown))}", field="session"
        )


def _check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise exceptions.ValidationError(
            f"kind must be one of {', '.join(sorted(KINDS))}", field="kind"
        )
    return str(kind)


# SessionRow's columns in its field order: what export_row reads.
_ROW_FIELDS = tuple(SessionRow.__dataclass_fields__)
# The text columns an import sets, with their sizes (None: unbounded text).
_ROW_TEXT = {
    "cwd": None,
    "name": 500,
    "parent_session": 255,
    "model": 255,
    "system_prompt": None,
    "message_id": 255,
    "status": 64,
}
_ROW_COUNTS = (
    "prompt_tokens",
    "completion_tokens",
    "step_count",
    "duration_ms",
    "data_bytes_carried",
)


class RowWriter(NamedTuple):
    """How :meth:`SessionStore.import_rows` writes one type of row.

    ``params(row, connection)`` validates the row (``ValidationError``) and
    returns its INSERT parameters; ``statement`` is that INSERT (``%s``
    marks); ``name`` counts the rows in the result and names them in errors.
    """

    name: str
    statement: str
    params: Callable[[Any, Any], Sequence[Any]]


class PreparedUpsert(NamedTuple):
    """An upsert built by :meth:`SessionStore.prepare_upsert`, run by ``upsert``."""

    statement: str
    params: builtins.list[Any]
    session_id: str
    kind: str


class SessionStore(StoreBase):
    """Session rows of every kind (see the module docstring)."""

    # -- create, read, list ---------------------------------------------------------

    def create(
        self,
        kind: str,
        *,
        session_id: str = "",
        owner: Any = None,
        cwd: str = "",
        name: str = "",
        parent_session: str = "",
        model: str = "",
        system_prompt: str = "",
    ) -> SessionRecord:
        """Create an empty session of ``kind`` owned by ``owner``; a new UUIDv7 id by default.

        Raises ``SessionExists`` for a taken id (whatever its kind) and
        ``ValidationError`` for bad input.
        """
        _check_kind(kind)
        sid = session_id or new_id()
        require_text(sid, "session.id")
        # The columns' sizes, and text PostgreSQL can hold (no NUL, no lone
        # surrogate): SQLite would keep what PostgreSQL refuses.
        require_storable_text(sid, "session.id", 255)
        require_storable_text(cwd, "session.cwd")
        require_storable_text(name, "session.name", 500)
        require_storable_text(parent_session, "session.parent_session", 255)
        require_storable_text(model, "session.model", 255)
        require_storable_text(system_prompt, "session.system_prompt")
        stamp = self.now()  # before the transaction: a retried write reuses it
        values = {
            "owner_id": _owner_id(owner),
            "cwd": cwd,
            "name": name,
            "parent_session": parent_session,
            "model": model,
            "system_prompt": system_prompt,
        }

        return self.write(
            lambda cursor: self.insert(
                cursor, kind, sid, created_at=stamp, updated_at=stamp, **values
            )
        )

    def create_many(self, kind: str, rows: Iterable[Mapping[str, Any]]) -> builtins.list[str]:
        """Insert many sessions of ``kind`` in one write (set-based; seeding and imports).

        Each row maps column names to values and must have ``id``, ``created_at``
        and ``updated_at``; ``owner`` may be a user. ``SessionExists`` when an id
        is taken (nothing is written then). Returns the ids in order.
        """
        _check_kind(kind)
        prepared = []
        for row in rows:
            values = dict(row)
            if "owner" in values:
                values["owner_id"] = _owner_id(values.pop("owner"))
            prepared.append(values)

        def write(cursor: SqlCursor) -> builtins.list[str]:
            ops = cursor.db.ops
            params = []
            for values in prepared:
                fields = dict(values)
                sid = fields.pop("id")
                _check_columns(fields)
                columns: dict[str, Any] = {
                    k: ops.adapt_datetimefield_value(v) if k in _STAMPS else v
                    for k, v in fields.items()
                }
                params.append(sql.row(Session, id=sid, kind=kind, **columns))
            try:
                cursor.executemany(session_sql.INSERT, params)
            except IntegrityError as exc:
                if is_unique_violation(exc):
                    raise exceptions.SessionExists("a session id is already taken") from exc
                raise
            return [str(values["id"]) for values in prepared]

        return self.write(write)

    @lookup("session_id", "kind", missing=none)
    def get(self, session_id: str, kind: str | None = None) -> SessionRecord | None:
        """The session (of ``kind``, when given), or ``None``."""
        rows = Session.objects.using(self.using).filter(pk=session_id)
        if kind is not None:
            rows = rows.filter(kind=kind)
        found = rows.values_list(*_RECORD_FIELDS).first()
        return None if found is None else _record(found)

    @lookup("session_id", missing=none)
    @lookup("session_id", missing=none)  # no row under an unstorable id
    def kind_of(self, session_id: str) -> str | None:
        """The session's kind, or ``None`` when there is no such session.

        One hand-written statement: a new conversation asks it on its first
        turn, and compiling the ORM query cost more than running it.
        """
        with db.cursor(self.using) as cursor:
            cursor.execute(session_sql.KIND_OF, [session_id])
            row = cursor.fetchone()
        return None if row is None else str(row[0])

    @lookup("kind", "cwd", "parent_session", missing=nothing)
    def list(  # noqa: A003
        self,
        kind: str | None = None,
        *,
        cwd: str | None = None,
        parent_session: str | None = None,
        top_level: bool = False,
        limit: int = 0,
    ) -> builtins.list[SessionRecord]:
        """Sessions (of ``kind``), most recently updated first; ``limit`` ≤ 0: all."""
        rows = Session.objects.using(self.using).all()
        if kind is not None:
            rows = rows.of_kind(kind)
        if cwd is not None:
            rows = rows.filter(cwd=cwd)
        if parent_session is not None:
            rows = rows.children_of(parent_session)
        if top_level:
            rows = rows.top_level()
        rows = rows.newest_first()
        if limit > 0:
            rows = rows[:limit]
        return [_record(values) for values in rows.values_list(*_RECORD_FIELDS)]

    # -- ownership and deletion ------------------------------------------------------

    @lookup("session_id", missing=false)
    def transfer(self, session_id: str, owner: Any, *, only_unowned: bool = False) -> bool:
        """Give the session to ``owner`` (``None``: nobody); ``False`` when nothing changed.

        ``only_unowned`` makes it a compare-and-set that never takes a session
        away from someone (the API hands a just-created session to its caller
        this way).
        """
        rows = Session.objects.using(self.using).filter(pk=session_id)
        if only_unowned:
            rows = rows.filter(owner__isnull=True)
        owner_id = _owner_id(owner)
        return bool(self.write(lambda cursor: rows.update(owner_id=owner_id), orm=True))

    def delete(self, session_id: str, kind: str | None = None) -> None:
        """Delete the session with everything that belongs to it.

        What goes (``docs/concepts.md``, "Deleting a session"): entries and
        their parts, steps, the hold, the tasks it owns (events and details
        too), the agent task that ran in it; a loop session's grants. What
        stays: child sessions, refs (they dangle), documents. A missing
        session raises ``NoSession``; with ``kind``, a session of another kind
        is left alone and ``WrongSessionKind`` raised — the one contract of
        every store's delete, the API's and the command's.
        """

        def write(cursor: SqlCursor) -> None:
            found = self.lock_kind(cursor, session_id)
            if found is None:
                raise no_session({"session_id": session_id})
            if kind is not None and found != kind:
                raise wrong_kind(session_id, kind, (found,))
            self.delete_rows(cursor, session_id, found)

        self.write(write, orm=True)

    # -- holds -----------------------------------------------------------------------

    @lookup("session_id", missing=none)
    def hold(self, session_id: str) -> LockInfo | None:
        """Which process holds the session for writing (any kind), or ``None``."""

        def read() -> LockInfo | None:
            with db.cursor(self.using) as cursor:
                found = log_holds.lock_info(cursor, session_id)
            return None if found is None else found[0]

        return self.read(read)

    @lookup("session_id", missing=false)
    def break_hold(self, session_id: str) -> bool:
        """Remove the session's hold whoever has it; ``False`` when it had none.

        For holders an operator knows are gone. A live holder's next append
        finds its hold gone and fails with ``SessionLocked`` (the fence in
        ``stores/log_holds.py``).
        """

        def write(cursor: SqlCursor) -> int:
            deleted, _ = Holder.objects.using(self.using).filter(session_id=session_id).delete()
            return deleted

        return bool(self.write(write, orm=True))

    def claim_hold(self, session_id: str, token: str) -> LockInfo | None:
        """Hold the session for writing under ``token`` (any kind); return a dead holder replaced.

        For holds that belong to something other than a store — a run holds
        its session for the run's duration under a token of its own, so any
        worker that executes the run's next attempt holds it too. Claiming a
        hold already under ``token`` changes nothing. ``SessionLocked`` when a
        live holder (or one on another host) has it; ``NoSession`` when there
        is no such session. The rules are the stores' (``stores/log_holds.py``).
        """
        require_storable_text(session_id, "session_id", 255)
        require_storable_text(token, "token", 64)
        pid, host, now = os.getpid(), socket.gethostname(), self.now()

        def free(cursor: SqlCursor) -> bool:
            return log_holds.claim_free(
                cursor, session_id, pid=pid, host=host, token=token, now=now
            )

        # One autocommitted statement when the session is free or already ours (a
        # run's rerun); else the full claim below says why not, or takes a dead
        # holder's over (it tries the same statement first: one body).
        if self.write(free, single=True):
            return None

        def write(cursor: SqlCursor) -> LockInfo | None:
            cursor.execute(session_sql.KIND_OF, [session_id])
            if cursor.fetchone() is None:
                raise exceptions.NoSession(f"no such session: {session_id}")
            return log_holds.claim(cursor, session_id, pid=pid, host=host, token=token, now=now)

        # orm: the claim's insert sits in a savepoint (log_holds.claim).
        return self.write(write, orm=True)

    def release_hold(self, session_id: str, token: str) -> bool:
        """Drop the session's hold if ``token`` has it; ``False`` when it did not."""

        def write(cursor: SqlCursor) -> bool:
            cursor.execute(log_sql.DELETE_HOLDER, [session_id, token])
            return bool(cursor.rowcount)

        return bool(self.write(write, single=True))

    # -- export and import of whole sessions (docs/commands.md, "Files") -----------

    @lookup("session_id", missing=none)
    def export_row(self, session_id: str) -> SessionRow | None:
        """The session's columns as an export file carries them; ``None`` when missing."""
        found = (
            Session.objects.using(self.using)
            .filter(pk=session_id)
            .values_list(*_ROW_FIELDS)
            .first()
        )
        if found is None:
            return None
        values = dict(zip(_ROW_FIELDS, found, strict=True))
        data = values["data"]
        values["data"] = None if data is None else bytes(data)
        return SessionRow(**values)

    def import_rows(
        self,
        session: SessionRow,
        rows: Iterable[Any],
        writers: Mapping[type, RowWriter],
        *,
        owner: Any = None,
        batch: int = IMPORT_BATCH,
    ) -> dict[str, int]:
        """Insert ``session`` and the rows that belong to it, in one transaction; the counts.

        ``rows`` is read once, as it comes (a file being parsed), and written
        ``batch`` rows at a time: a session of any length costs one batch of
        memory. Each row is validated by its :class:`RowWriter` (by type) as it
        arrives, so an error names the row just read; any error — a bad row,
        a repeated key, one raised by ``rows`` itself — rolls everything back.
        ``SessionExists`` when the id is taken. On SQLite the transaction holds
        the write lock until the last row: other writers wait in the queue.
        """
        values = self._import_values(session)
        owner_id = _owner_id(owner)
        started = False

        def write(cursor: SqlCursor) -> dict[str, int]:
            nonlocal started
            if started:
                # The write driver runs the body again only when SQLite was
                # busy; the rows already read cannot be read again.
                raise exceptions.DatabaseBusy(
                    "the database was busy after the import began; nothing was stored, run it again"
                )
            started = True
            connection = cursor.db
            counts = {writer.name: 0 for writer in writers.values()}
            self.insert(
                cursor,
                session.kind,
                session.id,
                created_at=session.created_at,
                updated_at=session.updated_at,
                owner_id=owner_id,
                **values,
            )
            pending: builtins.list[Sequence[Any]] = []
            current: RowWriter | None = None

            def flush() -> None:
                if current is None or not pending:
                    return
                try:
                    cursor.executemany(current.statement, pending)
                except IntegrityError as exc:
                    if not is_unique_violation(exc):
                        raise
                    raise exceptions.ValidationError(
                        f"a {current.name} repeats the key of another "
                        f"(one of {current.name}s {counts[current.name] - len(pending) + 1}"
                        f"–{counts[current.name]})",
                        field=current.name,
                    ) from exc
                pending.clear()

            for row in rows:
                writer = writers.get(type(row))
                if writer is None:
                    raise exceptions.ValidationError(
                        f"a {session.kind} session has no {type(row).__name__} rows",
                        field="rows",
                    )
                if writer is not current or len(pending) >= batch:
                    flush()
                    current = writer
                pending.append(writer.params(row, connection))
                counts[writer.name] += 1
            flush()
            return counts

        return self.write(write)

    def _import_values(self, session: SessionRow) -> dict[str, Any]:
        """The columns :meth:`import_rows` inserts (beside id, kind and stamps), validated."""
        if not isinstance(session, SessionRow):
            raise exceptions.ValidationError("session must be a SessionRow", field="session")
        require_name(session.id, "session.id")
        _check_kind(session.kind)
        for stamp in ("created_at", "updated_at"):
            value = getattr(session, stamp)
            if not isinstance(value, datetime):
                raise exceptions.ValidationError(
                    f"session.{stamp} must be a datetime", field=f"session.{stamp}"
                )
            require_aware(value, f"session.{stamp}")
        values: dict[str, Any] = {
            name: require_storable_text(getattr(session, name), f"session.{name}", size)
            for name, size in _ROW_TEXT.items()
        }
        for name in _ROW_COUNTS:
            values[name] = require_int(getattr(session, name), f"session.{name}")
        data = session.data
        if data is not None:
            if not isinstance(data, bytes):
                raise exceptions.ValidationError(
                    "session.data must be bytes (JSON text) or None", field="session.data"
                )
            require_json(data, "session.data")
        values["data"] = data
        return values

    # -- inside a write transaction (the stores' internal API) -----------------------
    #
    # Each takes the caller's cursor and runs in the caller's transaction.

    def insert(
        self,
        cursor: SqlCursor,
        kind: str,
        session_id: str,
        *,
        created_at: datetime,
        updated_at: datetime,
        **values: Any,
    ) -> SessionRecord:
        """Insert a session row; ``SessionExists`` when the id is taken (any kind).

        ``values`` are session columns by attribute name (``owner_id``, ``cwd``,
        ``header``, …); the rest get the model's defaults.
        """
        _check_columns(values)
        if "owner_id" in values:
            values["owner_id"] = _owner_id(values["owner_id"])
        ops = cursor.db.ops
        values.setdefault("incarnation", Session._meta.get_field("incarnation").get_default())
        params = sql.row(
            Session,
            id=session_id,
            kind=kind,
            created_at=ops.adapt_datetimefield_value(require_aware(created_at, "created_at")),
            updated_at=ops.adapt_datetimefield_value(require_aware(updated_at, "updated_at")),
            **values,
        )
        try:
            cursor.execute(session_sql.INSERT, params)
        except IntegrityError as exc:
            if is_unique_violation(exc):
                raise exceptions.SessionExists(f"session already exists: {session_id}") from exc
            raise
        fields = {name: values.get(name, "") for name in _RECORD_FIELDS[4:]}
        fields["owner_id"] = values.get("owner_id")
        return SessionRecord(
            id=session_id, kind=kind, created_at=created_at, updated_at=updated_at, **fields
        )

    def touch(
        self,
        cursor: SqlCursor,
        session_id: str,
        kind: str,
        stamp: datetime | None,
        *,
        adapted: Any = None,
    ) -> None:
        """Move ``updated_at`` forward to ``stamp`` (``None``: only lock the row).

        Either way the UPDATE takes PostgreSQL's row lock on the session, which
        serialises writers of one session. Raises ``NoSession`` when it is
        missing and ``WrongSessionKind`` when it is another kind. ``adapted``:
        ``stamp`` already adapted for the connection (before the write lock).
        """
        if stamp is None:
            cursor.execute(session_sql.LOCK_ROW, [session_id, kind])
            if cursor.rowcount == 1:
                return
        else:
            value = sql.adapt_datetime(cursor.db, stamp) if adapted is None else adapted
            if _touched(
                cursor, self.using, session_sql.TOUCH_FORWARD, [value, value], session_id, kind
            ):
                return
        cursor.execute(session_sql.KIND_OF, [session_id])
        raise _not_touched(session_id, kind, cursor.fetchone())

    def update(self, cursor: SqlCursor, session_id: str, **values: Any) -> int:
        """Set session columns (attribute names; datetimes adapted here); the row count."""
        _check_columns(values)
        statement = session_sql.update(tuple(values))  # checked above: column names
        ops = cursor.db.ops
        params = [
            ops.adapt_datetimefield_value(v) if isinstance(v, datetime) else v
            for v in values.values()
        ]
        cursor.execute(statement, [*params, session_id])
        count = int(cursor.rowcount)
        if count:
            notify.session_changed(self.using, session_id)
        return count

    def update_held(self, cursor: SqlCursor, session_id: str, token: str, **values: Any) -> bool:
        """:meth:`update`, only while ``token`` holds the session; ``False``: it does not.

        One statement for an append's session touch and its fence (the hold
        check that used to be the heartbeat's UPDATE; decision record 0031).
        """
        statement = session_sql.update_held(tuple(values), cursor.db.vendor)
        params = [*_adapted(cursor, values), session_id, session_id, token]
        return self._fenced(cursor, session_id, statement, params)

    def update_unheld(
        self, cursor: SqlCursor, session_id: str, head: str, token: str, **values: Any
    ) -> bool:
        """:meth:`update`, only while the session's head is ``head`` and no other store holds it.

        ``False``: someone appended since ``head`` was read, or another store
        (not ``token``) holds the session — the caller tells which. The fence
        of an append by a store that takes no lasting holds.
        """
        names, params = self.unheld_fence(cursor, session_id, head, token, **values)
        return self._fenced(cursor, session_id, session_sql.update_unheld(names), params)

    def _fenced(
        self, cursor: SqlCursor, session_id: str, statement: str, params: builtins.list[Any]
    ) -> bool:
        """Run a fenced session UPDATE; ``False`` when its fence held it back (no row)."""
        cursor.execute(statement, params)
        if cursor.rowcount == 0:
            return False
        notify.session_changed(self.using, session_id)
        return True

    def unheld_fence(
        self, cursor: SqlCursor, session_id: str, head: str, token: str, **values: Any
    ) -> tuple[tuple[str, ...], builtins.list[Any]]:
        """The column names and parameters of :meth:`update_unheld`'s statement, checked.

        For a statement that carries the fence inside it (on PostgreSQL, the
        log store's one-statement append, ``sql.log.fenced_insert``).
        """
        return tuple(values), [*_adapted(cursor, values), session_id, head, session_id, token]

    def prepare_upsert(
        self, kind: str, session_id: str, *, stamp: datetime, **values: Any
    ) -> PreparedUpsert:
        """Build :meth:`upsert`'s statement and parameters (outside the transaction).

        Inserting a session of ``kind``, or updating ``updated_at`` (= ``stamp``)
        and ``values`` of an existing one. Prepared before the write so the
        per-step path holds the write lock only for the statements, and a
        retried write reuses the same values.
        """
        names = tuple(values)
        if names:
            _check_columns(values)
        statement = session_sql.upsert(_check_kind(kind), names)
        adapted = sql.adapt_datetime(connections[self.using], stamp)
        params = sql.row(
            Session, id=session_id, kind=kind, created_at=adapted, updated_at=adapted, **values
        )
        return PreparedUpsert(statement, params, session_id, kind)

    def upsert(self, cursor: SqlCursor, prepared: PreparedUpsert) -> None:
        """Run a :meth:`prepare_upsert` (inside the caller's write transaction).

        ``INSERT … ON CONFLICT (id) DO UPDATE … WHERE kind = …`` (the same on
        SQLite ≥ 3.24 and PostgreSQL) is race-free on both: two transactions
        creating one session cannot both insert. An id of another kind changes
        nothing and raises ``WrongSessionKind``. The loop store's per-step path.
        """
        cursor.execute(prepared.statement, prepared.params)
        # The DO UPDATE only applies to sessions of ``kind``, so no row changed
        # means the id belongs to another store: refuse (the transaction rolls
        # back) instead of grafting, say, a step trace onto a tree session.
        if cursor.rowcount == 0:
            cursor.execute(session_sql.KIND_OF, [prepared.session_id])
            raise wrong_kind(prepared.session_id, prepared.kind, cursor.fetchone())
        notify.session_changed(self.using, prepared.session_id)

    def touch_or_create(
        self, cursor: SqlCursor, kind: str, session_id: str, *, stamp: datetime, adapted: Any
    ) -> None:
        """:meth:`upsert` of a new session of ``kind``, cheaper once the session exists.

        Once the session exists — every step but the first — it is one narrow
        ``UPDATE`` of ``updated_at`` (``adapted``: ``stamp`` adapted for the
        connection) on a session of ``kind``, which SQLite runs cheaper than the
        upsert's ``INSERT`` of every column; no row changed means a first write
        (or an id of another kind), and the upsert decides, refusing another
        kind with ``WrongSessionKind``. The transaction's lock (SQLite's write
        lock, PostgreSQL's row lock or the upsert's conflict check) keeps
        anything from coming between the two. The loop store's per-step path.
        """
        if _touched(cursor, self.using, session_sql.TOUCH, [adapted], session_id, kind):
            return
        self.upsert(cursor, self.prepare_upsert(kind, session_id, stamp=stamp))

    @lookup("session_id", missing=none)
    def lock_kind(self, cursor: SqlCursor, session_id: str) -> str | None:
        """The session's kind, its row locked on PostgreSQL; ``None`` when missing."""
        cursor.execute(session_sql.lock_kind(cursor.db.vendor), [session_id])
        row = cursor.fetchone()
        return None if row is None else str(row[0])

    def delete_rows(self, cursor: SqlCursor, session_id: str, kind: str) -> None:
        """Delete a session of ``kind`` and what belongs to it (see :meth:`delete`)."""
        using = self.using
        # The agent task that ran *in* this session: its generic task row
        # belongs to the parent session, so it would survive the cascade.
        Task.objects.using(using).filter(agent__child_session_id=session_id).delete()
        # Entries, parts and steps go with set-based statements: the ORM's
        # cascade would load every row into memory first.
        cursor.execute(session_sql.DELETE_PARTS, [session_id])
        cursor.execute(session_sql.DELETE_ENTRIES, [session_id])
        cursor.execute(session_sql.DELETE_STEPS, [session_id])
        if kind == SessionKind.LOOP:
            # A stale grant must never pre-approve a later session reusing the id.
            Grant.objects.using(using).filter(session_id=session_id).delete()
        # What is left (owned tasks with their events and details, the hold)
        # cascades through the ORM.
        Session.objects.using(using).filter(pk=session_id).delete()
        notify.session_changed(using, session_id)

    def create_or_touch(
        self,
        cursor: SqlCursor,
        kind: str,
        session_id: str,
        *,
        stamp: datetime,
        owner_id: Any = None,
    ) -> None:
        """Insert a session of ``kind`` owned by ``owner_id``, or set its ``updated_at``.

        One race-free statement (the :meth:`upsert` shape): two processes
        starting one session cannot both insert it, the owner is only set by the
        insert (a later writer never takes the session over), and an id of
        another kind raises ``WrongSessionKind``. LangGraph threads use it on
        every checkpoint that moves the thread (``stores/checkpoints.py``).
        """
        statement = session_sql.upsert(_check_kind(kind), ())
        adapted = cursor.db.ops.adapt_datetimefield_value(require_aware(stamp, "stamp"))
        params = sql.row(
            Session,
            id=session_id,
            kind=kind,
            created_at=adapted,
            updated_at=adapted,
            owner_id=_owner_id(owner_id),
        )
        self.upsert(cursor, PreparedUpsert(statement, params, session_id, kind))


def _touched(
    cursor: SqlCursor,
    using: str,
    statement: str,
    values: Sequence[Any],
    session_id: str,
    kind: str,
) -> bool:
    """Run a touch ``statement`` (params ``values``, then id and kind); did it change the row?

    A touch is a write to the session, so its followers look at commit. On
    PostgreSQL the notification rides in the statement (``RETURNING pg_notify``,
    sent only for a changed row): one round trip where an UPDATE and a
    ``SELECT pg_notify`` were two. Without notifications (SQLite, ``NOTIFY``
    off) it is the touch alone.
    """
    payload = notify.payload_of(using, notify.session_key(session_id))
    if payload is None:
        cursor.execute(statement, [*values, session_id, kind])
        return bool(cursor.rowcount == 1)
    cursor.execute(
        statement + session_sql.NOTIFYING, [*values, session_id, kind, notify.CHANNEL, payload]
    )
    return bool(cursor.rowcount == 1)


def _not_touched(
    session_id: str, kind: str, row: Sequence[Any] | None
) -> exceptions.AgentStoreError:
    """Why a touch changed no row: ``row`` is the session's ``(kind,)``, ``None`` when missing."""
    if row is None:
        return no_session({"session_id": session_id})
    return wrong_kind(session_id, kind, row)


def wrong_kind(
    session_id: str, expected: str, row: Sequence[Any] | None
) -> exceptions.WrongSessionKind:
    """The one error for an id that names a session of another kind (``row``: its ``(kind,)``).

    Every store raises it — an append, a step, a checkpoint or an open under an
    id another store owns — and the API answers it 409 ``wrong_session_kind``.
    """
    kind = str(row[0]) if row else "?"
    return exceptions.WrongSessionKind(
        f"session {session_id} is a {kind} session, not a {expected} session",
        session_id=session_id,
        kind=kind,
        expected=expected,
    )
