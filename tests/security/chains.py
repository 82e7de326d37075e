"""Huge sessions for the bounded-work tests: the shared seeding helper, re-exported.

    insert_chain(session_id, 100_000)          # e1 ← e2 ← … ← e100000, one branch
    compact_every(session_id, 1000, 500, 20)   # e500, e1500, …: compactions keeping 20

The statements live in :mod:`agentstore.demo.seeding` (``chain``,
``compact_every``), which the benchmarks and the demo use too; their column
lists come from ``agentstore.sql``. Entry ids are ``e<n>``; every entry
is a user/assistant message whose parent is the previous one, all stamped
:data:`STAMP` (append order is then ``seq``).
"""

from __future__ import annotations

from agentstore.demo.seeding import STAMP, chain, compact_every

__all__ = ["STAMP", "compact_every", "insert_chain"]


def insert_chain(session_id: str, depth: int, *, content: str = "hello") -> None:
    """Append a ``depth``-long chain of messages to an empty session."""
    chain(session_id, depth, content=content)
