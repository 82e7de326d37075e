"""Which sessions a user may see, and the annotations listings show.

A session belongs to its ``owner``; staff see every session. Everything that
hangs off a session (entries, steps, grants, holds, tasks, documents attached to
it) is visible exactly when the session is, so every read starts here::

    from agentstore.selectors.sessions import visible_session

    session = visible_session(request.user, session_id)   # None: missing *or* not yours

"Not yours" and "missing" answer the same on purpose: an id must not tell a
stranger that a session exists.
"""

from __future__ import annotations

from typing import Any

from django.db.models import OuterRef, Q, Subquery
from django.db.models.expressions import RawSQL

from agentstore import db, exceptions
from agentstore.models import Entry, Session
from agentstore.models.sessions import SessionQuerySet
from agentstore.search import match_sql
from agentstore.selectors.short_ids import resolve
from agentstore.sql import sessions as session_sql
from agentstore.validation import could_be_stored

__all__ = [
    "is_staff",
    "resolve_session",
    "search_sessions",
    "sessions_visible_to",
    "visible_session",
    "with_opening_message",
]


def is_staff(user: Any) -> bool:
    """Tell whether ``user`` sees every session (an active staff member)."""
    return bool(getattr(user, "is_active", False) and getattr(user, "is_staff", False))


def sessions_visible_to(user: Any, *, using: str = "default") -> SessionQuerySet:
    """Return the sessions ``user`` may see: staff all of them, others their own."""
    sessions: SessionQuerySet = Session.objects.using(using).all()
    if is_staff(user):
        return sessions
    if user is None or not getattr(user, "is_authenticated", False):
        return sessions.none()
    return sessions.owned_by(user)


def visible_session(user: Any, session_id: str, *, using: str = "default") -> Session | None:
    """Return the session if ``user`` may see it, else ``None`` (missing or someone else's).

    Only ``id``, ``kind``, ``owner_id`` and ``superseded_by`` are loaded. One
    hand-written statement rather than an ORM query: every session-bound API
    request starts here, including each append, and compiling the ORM query
    cost more than running it.
    """
    staff = is_staff(user)
    if not staff and (user is None or not getattr(user, "is_authenticated", False)):
        return None
    if not could_be_stored(session_id):
        return None
    statement = session_sql.VISIBLE if staff else session_sql.VISIBLE_TO_OWNER
    params = [session_id] if staff else [session_id, user.pk]
    with db.cursor(using) as cursor:
        cursor.execute(statement, params)
        row = cursor.fetchone()
    if row is None:
        return None
    return Session(id=row[0], kind=row[1], owner_id=row[2], superseded_by=row[3])


def with_opening_message(sessions: SessionQuerySet) -> SessionQuerySet:
    """Annotate ``opening``: the content of the session's first user message (by ``seq``)."""
    first_user = (
        Entry.objects.filter(session_id=OuterRef("pk"), role="user")
        .order_by("seq")
        .values("content")[:1]
    )
    return sessions.annotate(opening=Subquery(first_user))


#: Sessions a text search finds through their entries, at most (newest matches first).
SEARCH_SESSIONS = 1000


def search_sessions(sessions: SessionQuerySet, text: str) -> SessionQuerySet:
    """Sessions whose name contains ``text`` or whose entries' text matches it.

    Names match as a case-insensitive substring; entry text (messages — the
    opening one included — summaries, tool calls and outputs) through the
    search index of :mod:`agentstore.search` (words, the last one a prefix),
    looking at the newest 1,000 matching entries. Without a search index
    (another database) the opening user message is matched as a substring.
    """
    text = text.strip()
    if not text:
        return sessions
    match = match_sql(sessions.db, text, limit=SEARCH_SESSIONS)
    if match is None:
        return with_opening_message(sessions).filter(
            Q(name__icontains=text) | Q(opening__icontains=text)
        )
    sql, params = match
    in_entries = RawSQL(session_sql.sessions_of_entries(sql), params)
    return sessions.filter(Q(name__icontains=text) | Q(pk__in=in_entries))


def resolve_session(sessions: SessionQuerySet, text: str) -> str | None:
    """The id of the one session in ``sessions`` that ``text`` names: its id or a unique short id.

    ``None`` when none does, or when the short id is ambiguous: a search box
    treats the text as words then (:func:`search_sessions`), never as an error.
    Only ``sessions`` is looked at, so a caller scoped to a user's sessions
    learns nothing about anyone else's.
    """
    try:
        return resolve(sessions, "id", text, what="session")
    except exceptions.ValidationError:
        return None
