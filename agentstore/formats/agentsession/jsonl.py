"""Whole-file JSONL reading and writing.

``loads(text)`` reads a session file: line 1 is the header, every later line an
entry; blank lines are skipped. The lines are kept exactly as read, so
``dumps(loads(text)) == text`` for any well-formed file of format 0.5 or later
without blank lines (a final newline is added when it was missing; a truncated
final line is dropped and kept in ``Session.truncated``, with its line number in
``Session.truncated_at``, never written back).

Files of format 0.1–0.4 are migrated in memory (see :mod:`.legacy`). ``dumps``
refuses a migrated session that still holds an entry the migration could not
rewrite (``UnresolvedMigration``): writing it would freeze an old id where the
format puts a hash.
"""

from __future__ import annotations

from agentstore import exceptions
from agentstore.formats.agentsession.legacy import migrate_legacy
from agentstore.formats.agentsession.session import Session

__all__ = ["dumps", "loads", "migrate_legacy"]


def loads(text: str | bytes, *, tolerate_truncated: bool = True) -> Session:
    """Read a whole agentsession JSONL file into a :class:`Session`."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise exceptions.ValidationError("file is not valid UTF-8", field="file") from exc
    lines = text.split("\n")
    # Blank lines are skipped wherever they are, before the header too.
    at = next((i for i, line in enumerate(lines) if line.strip()), None)
    if at is None:
        raise exceptions.ValidationError("file has no header line", field="header")
    return Session.from_lines(
        lines[at], lines[at + 1 :], tolerate_truncated=tolerate_truncated, first_number=at + 2
    )


def dumps(session: Session) -> str:
    """The session as JSONL: the header line, then each entry's exact line.

    ``UnresolvedMigration`` for a migrated session holding an entry the
    migration could not rewrite (``Session.unresolved``).
    """
    session.check_writable()
    return "".join(line + "\n" for line in [session.header_line, *session.lines])
