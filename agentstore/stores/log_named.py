"""Sessions by name: the ref methods of the log store and the helpers built on refs.

A ref (``team/main``) names a session, optionally pinned to an entry; the
rows, the compare-and-swap and the ref log belong to
:class:`agentstore.stores.refs.RefStore` (docs/log-store.md, "Refs"), and
:class:`LogNamed`'s ref methods delegate to it — the log store only keeps its
historical names for them.

What is the log store's own is what it builds on those refs, the ports of
agentsession's ``SessionFor``, ``ContinueRef`` and ``ResolveCurrent``:

* :meth:`~LogNamed.session_for`: the session a ref names, opened; or a new
  session named by it. Racing callers agree on one session — a loser of the
  compare-and-swap deletes what it created and opens the winner's.
* :meth:`~LogNamed.continue_ref`: continue the named session
  (``LogAppends.continue_session``) and move the ref to the successor.
* :meth:`~LogNamed.resolve_current`: follow ``continued_in`` links from the
  ref's session to the newest successor (refusing a cycle).
"""

from __future__ import annotations

import builtins
import copy
from typing import Any

from django.db.models import QuerySet

from agentstore import exceptions
from agentstore.formats.agentsession import Session
from agentstore.models import Session as SessionRow
from agentstore.stores import log_refs
from agentstore.stores.log_appends import LogAppends
from agentstore.stores.log_rows import LOG
from agentstore.types.log import NamedRef, RefLogEntry, RefTarget

__all__ = ["LogNamed"]


class LogNamed(LogAppends):
    """The ref methods of a ``LogStore`` and the helpers built on them (module docstring)."""

    # -- refs (owned by RefStore: agentstore/stores/refs.py) ----------------------

    def update_ref(
        self,
        name: str,
        expected: RefTarget | None,
        next: RefTarget | None,  # noqa: A002
        reason: str = "",
    ) -> None:
        """Compare-and-swap the ref ``name``: :meth:`RefStore.update_ref`."""
        self.refs.update_ref(name, expected, next, reason)

    def resolve_ref(self, name: str) -> RefTarget:
        """The ref's target: :meth:`RefStore.resolve_ref`."""
        return self.refs.resolve_ref(name)

    def list_refs(
        self,
        prefix: str = "",
        *,
        after: str = "",
        limit: int | None = None,
        sessions: QuerySet[Any] | None = None,
    ) -> builtins.list[NamedRef]:
        """Refs named ``prefix…``, a page after ``after``: :meth:`RefStore.list_refs`."""
        return self.refs.list_refs(prefix, after=after, limit=limit, sessions=sessions)

    def count_refs(self, prefix: str = "", *, sessions: QuerySet[Any] | None = None) -> int:
        """How many refs :meth:`list_refs` lists: :meth:`RefStore.count_refs`."""
        return self.refs.count_refs(prefix, sessions=sessions)

    def ref_log(
        self,
        name: str,
        *,
        after: int | None = None,
        limit: int | None = None,
        sessions: QuerySet[Any] | None = None,
    ) -> builtins.list[RefLogEntry]:
        """Updates of ``name``, newest first, a page after ``after``: :meth:`RefStore.ref_log`."""
        return self.refs.ref_log(name, after=after, limit=limit, sessions=sessions)

    def count_ref_log(self, name: str, *, sessions: QuerySet[Any] | None = None) -> int:
        """How many rows :meth:`ref_log` lists: :meth:`RefStore.count_ref_log`."""
        return self.refs.count_ref_log(name, sessions=sessions)

    # -- sessions by name (agentsession's SessionFor / ContinueRef / …) -----------

    def session_for(self, name: str, header: dict[str, Any] | None = None) -> Session:
        """The session ref ``name`` names, opened; created (with ``header``) and named if none.

        A dangling ref is replaced by a new session. Racing callers agree on one
        session: a loser deletes the session it created and opens the winner's
        (which may raise ``SessionLocked`` when the winner holds it elsewhere).
        """
        log_refs.check_name(name)
        self._writable()
        while True:
            expected: RefTarget | None = None
            try:
                target = self.resolve_ref(name)
            except exceptions.NoRef:
                pass
            except exceptions.NoSession as exc:
                expected = exc.target
            else:
                try:
                    return self.open(target.session)
                except exceptions.NoSession:
                    continue  # deleted meanwhile: look again
            created = self.create(copy.deepcopy(header or {}))
            try:
                self.update_ref(name, expected, RefTarget(session=created.id), reason="session_for")
            except exceptions.RefMoved:
                self.delete(created.id)
                continue
            except BaseException:
                self.delete(created.id)
                raise
            return created

    def continue_ref(self, name: str, summary_item: dict[str, Any] | None = None) -> Session:
        """Continue the session ref ``name`` names and move the ref to the successor.

        The pin, if any, is not carried. If the ref moved meanwhile, raises
        ``RefMoved`` whose ``session`` attribute is the successor (created anyway).
        """
        target = self.resolve_ref(name)
        successor = self.continue_session(target.session, summary_item)
        try:
            self.update_ref(name, target, RefTarget(session=successor.id), reason="continued")
        except exceptions.RefMoved as exc:
            exc.session = successor  # type: ignore[attr-defined]
            raise
        return successor

    def resolve_current(self, name: str) -> tuple[str, bool]:
        """The end of the ``continued_in`` chain from the ref's session, and whether it moved."""
        target = self.resolve_ref(name)
        current = target.session
        seen = {current}
        while True:
            successor = (
                SessionRow.objects.using(self.using)
                .filter(id=current, kind=LOG)
                .values_list("superseded_by", flat=True)
                .first()
            )
            if successor is None:
                raise exceptions.NoSession(f"no such session: {current}")
            if not successor:
                return current, current != target.session
            if successor in seen:
                raise exceptions.AgentStoreError(
                    f"continued_in links from {target.session} form a cycle at {successor}"
                )
            seen.add(successor)
            current = successor
