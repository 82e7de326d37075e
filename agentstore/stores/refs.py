"""RefStore: the one owner of ``Ref`` and ``RefLog`` rows (docs/log-store.md, "Refs").

    from agentstore.stores.refs import RefStore
    from agentstore.types import RefTarget

    refs = RefStore()                                   # using="default", clock=None
    refs.update_ref("team/main", None, RefTarget(session=sid))   # create if absent
    refs.resolve_ref("team/main")                       # RefTarget(session=sid, entry="")

A ref is a store-level, mutable name for a log session (and optionally a pinned
entry). It is changed only by compare-and-swap, and every successful change
appends a ``RefLog`` row in the same transaction. Refs outlive their session (no
foreign key): the ref remembers the *incarnation* of the session it was set to,
so a session deleted and created again under the same id reads as dangling.

``LogStore`` keeps its public ref methods (``update_ref``, ``resolve_ref``,
``list_refs``, ``ref_log``) as one-line delegations to the ``RefStore`` it holds
on ``LogStore.refs``, so surfaces and users keep calling the log store; only this
module writes the rows. The name rules live in :mod:`agentstore.stores.log_refs`.

Reads come in pages (decision records 0033 and 0013): ``list_refs(prefix, after=, limit=,
sessions=)`` reads the names after ``after`` in byte order with ``LIMIT``, and
``ref_log(name, after=, limit=, sessions=)`` the rows older than position
``after``; ``sessions`` (a ``Session`` queryset) puts a caller's visibility into
the query. The queries are :mod:`agentstore.stores.ref_queries`; surfaces always
pass a ``limit``.

``update_ref`` is one write transaction (:func:`retrying_write`) split by
concern: serialise ref writers, check the expected target, check the new
target exists, then create or move the ref, then log the change.
"""

from __future__ import annotations

import builtins
from datetime import datetime
from typing import Any

from django.db import connections
from django.db.models import QuerySet

from agentstore import db, exceptions, notify, sql
from agentstore.models import Entry, Ref, RefLog
from agentstore.models import Session as SessionRow
from agentstore.stores import log_refs
from agentstore.stores.base import Clock, StoreBase, retrying_write
from agentstore.stores.log_rows import LOG
from agentstore.stores.ref_queries import (
    clash_candidates,
    count_refs_under,
    ref_log_rows,
    refs_under,
)
from agentstore.types.log import NamedRef, RefLogEntry, RefTarget

__all__ = ["MAX_POSITION", "RefStore"]

#: Largest ref-log position (a 64-bit row id).
MAX_POSITION = 2**63 - 1


def _zero(target: RefTarget | None) -> RefTarget:
    return target if target is not None and target.session else RefTarget()


def _public(target: RefTarget) -> RefTarget | None:
    return target if target.session else None


class RefStore(StoreBase):
    """Refs and their log (see the module docstring)."""

    def __init__(
        self, *, using: str = "default", clock: Clock | None = None, read_only: bool = False
    ) -> None:
        super().__init__(using=using, clock=clock)
        self.read_only = read_only

    # -- writes -----------------------------------------------------------------

    def update_ref(
        self,
        name: str,
        expected: RefTarget | None,
        next: RefTarget | None,  # noqa: A002
        reason: str = "",
    ) -> None:
        """Compare-and-swap the ref ``name`` from ``expected`` to ``next`` (``None``: absent).

        Raises ``RefNameError`` (bad name, or a clash with an existing name on
        creation), ``ReadOnly``, ``RefMoved`` (carrying ``current``) when the ref
        is not ``expected``, ``NoSession``/``NoEntry`` for a ``next`` that is not
        there. A same-value update succeeds without a log row.
        """
        log_refs.check_name(name)
        if self.read_only:
            raise exceptions.ReadOnly("the log store is read-only")
        want = _zero(expected)
        target = _zero(next)
        if not isinstance(reason, str):
            raise exceptions.ValidationError("reason must be a string", field="reason")
        self._update_ref(name, want, target, reason, self.now())

    @retrying_write
    def _update_ref(
        self, name: str, want: RefTarget, target: RefTarget, reason: str, now: datetime
    ) -> None:
        """The body of :meth:`update_ref`: one write transaction, re-runnable as a whole."""
        self._lock_refs()
        current = self._expect_ref(name, want)
        incarnation = self._target_incarnation(target)
        if current == target:
            return  # a same-value update succeeds without a log row
        if not current.session:
            self._create_ref(name, target, incarnation, now)
        else:
            self._move_ref(name, current, target, incarnation, now)
        RefLog.objects.using(self.using).create(
            name=name,
            old_session=current.session,
            old_entry=current.entry,
            new_session=target.session,
            new_entry=target.entry,
            at=now,
            reason=reason,
        )
        # Sent at commit, so a follower of the ref never wakes before the move.
        notify.notify(self.using, notify.ref_key(name))

    def _lock_refs(self) -> None:
        connection = connections[self.using]
        if connection.vendor == "postgresql":
            # Serialise ref writers like SQLite's single writer does: the
            # creation conflict rules read names that may not exist yet (a
            # racing creator's), which row locks cannot protect
            # (docs/log-store.md, "Refs"). Readers are not blocked.
            with db.cursor_on(connection) as cursor:
                cursor.execute(f"LOCK TABLE {sql.REF} IN SHARE ROW EXCLUSIVE MODE")

    def _expect_ref(self, name: str, want: RefTarget) -> RefTarget:
        """The ref's current target; ``RefMoved`` unless it is ``want``."""
        row = self._row(name)
        current = RefTarget(session=row[0], entry=row[1]) if row is not None else RefTarget()
        if current != want:
            raise exceptions.RefMoved(
                f"ref {name} names {current.session or 'nothing'}, not {want.session or 'nothing'}",
                name=name,
                current=_public(current),
            )
        return current

    def _target_incarnation(self, target: RefTarget) -> str:
        """The incarnation a ref to ``target`` records; ``NoSession``/``NoEntry`` if absent."""
        if not target.session:
            return ""
        live = self._live(target.session)
        if live is None or live[0] != LOG:
            raise exceptions.NoSession(f"no such session: {target.session}")
        if (
            target.entry
            and not Entry.objects.using(self.using)
            .filter(session_id=target.session, entry_id=target.entry)
            .exists()
        ):
            raise exceptions.NoEntry(f"entry {target.entry} is not in session {target.session}")
        return live[1]

    def _create_ref(self, name: str, target: RefTarget, incarnation: str, now: datetime) -> None:
        clash = log_refs.conflict(name, clash_candidates(name, using=self.using))
        if clash:
            raise exceptions.RefNameError(
                f"ref name {name!r} conflicts with existing ref {clash!r}",
                field="name",
                conflicts_with=clash,
            )
        Ref.objects.using(self.using).create(
            name=name,
            session_id=target.session,
            entry_id=target.entry,
            target_incarnation=incarnation,
            updated_at=now,
        )

    def _move_ref(
        self,
        name: str,
        current: RefTarget,
        target: RefTarget,
        incarnation: str,
        now: datetime,
    ) -> None:
        """Point the ref at ``target`` (or delete it for the zero target), compare-and-set."""
        matching = Ref.objects.using(self.using).filter(
            name=name, session_id=current.session, entry_id=current.entry
        )
        if not target.session:
            changed = matching.delete()[0]
        else:
            changed = matching.update(
                session_id=target.session,
                entry_id=target.entry,
                target_incarnation=incarnation,
                updated_at=now,
            )
        if changed != 1:
            raise exceptions.RefMoved(f"ref {name} moved", name=name, current=None)

    # -- reads ------------------------------------------------------------------

    def _row(self, name: str) -> tuple[str, str, str] | None:
        """The ref's ``(session, entry, incarnation)``, or ``None``."""
        return (
            Ref.objects.using(self.using)
            .filter(name=name)
            .values_list("session_id", "entry_id", "target_incarnation")
            .first()
        )

    def _live(self, session_id: str) -> tuple[str, str] | None:
        """The session row's ``(kind, incarnation)``, or ``None`` when there is none."""
        row = (
            SessionRow.objects.using(self.using)
            .filter(id=session_id)
            .values_list("kind", "incarnation")
            .first()
        )
        return None if row is None else (row[0], str(row[1]))

    def resolve_ref(self, name: str) -> RefTarget:
        """The ref's target; ``NoRef`` if absent; ``NoSession`` (``.target`` set) if dangling.

        Dangling: the session is gone, or was deleted and created again under
        the same id (another incarnation than the one the ref was set to).
        """
        log_refs.check_name(name)

        def run() -> tuple[RefTarget, str, tuple[str, str] | None] | None:
            row = self._row(name)
            if row is None:
                return None
            return RefTarget(session=row[0], entry=row[1]), row[2], self._live(row[0])

        found = self.read(run)
        if found is None:
            raise exceptions.NoRef(f"no such ref: {name}")
        target, incarnation, live = found
        if live is None or live[0] != LOG or (incarnation and live[1] != incarnation):
            raise exceptions.NoSession(
                f"no such session: {target.session}, which ref {name} names", target=target
            )
        return target

    def list_refs(
        self,
        prefix: str = "",
        *,
        after: str = "",
        limit: int | None = None,
        sessions: QuerySet[Any] | None = None,
    ) -> builtins.list[NamedRef]:
        """Refs named ``prefix…`` (a plain, case-sensitive prefix) after ``after``, in byte order.

        One page: at most ``limit`` refs whose names are greater than
        ``after`` (the last name of the previous page; ``""`` from the start),
        read with ``LIMIT`` (:func:`agentstore.stores.ref_queries.refs_under`).
        ``limit=None`` reads them all — for Python callers; surfaces page.
        ``sessions`` (a ``Session`` queryset) keeps refs naming one of those
        sessions; without it dangling refs are listed too (no existence check).
        """
        log_refs.check_prefix(prefix)
        log_refs.check_after(after)
        limit = _check_limit(limit)
        found = refs_under(prefix, after=after, sessions=sessions, using=self.using)
        rows = found.values_list("name", "session_id", "entry_id", "updated_at")
        if limit is not None:
            rows = rows[:limit]
        return [
            NamedRef(name=n, target=RefTarget(session=s, entry=e), updated_at=u)
            for n, s, e, u in self.read(lambda: list(rows))
        ]

    def count_refs(self, prefix: str = "", *, sessions: QuerySet[Any] | None = None) -> int:
        """How many refs :meth:`list_refs` lists for ``prefix`` and ``sessions`` (one ``COUNT``)."""
        log_refs.check_prefix(prefix)
        return self.read(lambda: count_refs_under(prefix, sessions=sessions, using=self.using))

    def ref_log(
        self,
        name: str,
        *,
        after: int | None = None,
        limit: int | None = None,
        sessions: QuerySet[Any] | None = None,
    ) -> builtins.list[RefLogEntry]:
        """``name``'s successful updates, newest first (kept after the ref is deleted).

        One page: at most ``limit`` rows older than position ``after`` (the
        ``position`` of the previous page's last row; ``None`` from the newest),
        read with ``LIMIT`` (:func:`agentstore.stores.ref_queries.ref_log_rows`).
        ``limit=None`` reads them all. ``sessions`` keeps the rows whose every
        named session is among those sessions.
        """
        log_refs.check_name(name)
        if after is not None and (
            isinstance(after, bool) or not isinstance(after, int) or not 0 <= after <= MAX_POSITION
        ):
            raise exceptions.ValidationError(
                f"after must be a position from 0 to {MAX_POSITION}", field="after"
            )
        limit = _check_limit(limit)
        found = ref_log_rows(name, after=after, sessions=sessions, using=self.using)
        if limit is not None:
            found = found[:limit]
        return [
            RefLogEntry(
                name=r.name,
                old=_public(RefTarget(session=r.old_session, entry=r.old_entry)),
                new=_public(RefTarget(session=r.new_session, entry=r.new_entry)),
                time=r.at,
                reason=r.reason,
                position=r.id,
            )
            for r in self.read(lambda: list(found))
        ]

    def count_ref_log(self, name: str, *, sessions: QuerySet[Any] | None = None) -> int:
        """How many rows :meth:`ref_log` lists for ``name`` and ``sessions`` (one ``COUNT``)."""
        log_refs.check_name(name)
        return self.read(ref_log_rows(name, sessions=sessions, using=self.using).count)


def _check_limit(limit: object) -> int | None:
    """``limit`` if it is ``None`` or a positive integer, else ``ValidationError``."""
    if limit is None:
        return None
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise exceptions.ValidationError("limit must be a positive integer", field="limit")
    return limit
