"""The raw SQL of the loop store's step hot paths (``docs/loop-store.md``).

One INSERT per step, the INSERT of a first approval (grant), and the two
reads of an agent loop's turn (the last N steps, or all of them), built once
per backend: on SQLite ``created_at`` is
read as text through the one timestamp fast path (:func:`agentstore.sql.utc`).
The session row's upsert is :mod:`agentstore.sql.sessions`'.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

from agentstore.models import Grant, Step
from agentstore.sql import GRANT, STEP, column_names, columns, marks, timestamp_column

INSERT = f"INSERT INTO {STEP} ({columns(Step)}) VALUES ({marks(Step)})"

#: A first approval; a conflict (the prompt was approved already) writes nothing
#: and its row count of 0 tells a replay apart (LoopStore.grant_created).
INSERT_GRANT = (
    f"INSERT INTO {GRANT} ({columns(Grant)}) VALUES ({marks(Grant)}) "
    "ON CONFLICT (session_id, prompt_digest) DO NOTHING"
)
#: A replayed approval refreshes ``granted_at``. Params: granted_at, session, digest.
REFRESH_GRANT = f"UPDATE {GRANT} SET granted_at = %s WHERE session_id = %s AND prompt_digest = %s"

#: An imported approval (``LoopStore.import_session``): a prompt granted twice
#: in one file, or already granted under the id, is an error, not a merge.
IMPORT_GRANT = f"INSERT INTO {GRANT} ({columns(Grant)}) VALUES ({marks(Grant)})"


class StepReads(NamedTuple):
    """The two step reads of one backend; params: (session, n) and (session,)."""

    last_n: str
    all_steps: str


@lru_cache(maxsize=4)
def reads(vendor: str) -> StepReads:
    """Every Step column but ``session_id``, in model order, by id."""
    select_cols = ", ".join(
        timestamp_column(name, vendor) if name == "created_at" else name
        for name in column_names(Step, exclude=("session",))
    )
    by_session = f"FROM {STEP} WHERE session_id = %s"
    return StepReads(
        last_n=f"SELECT {select_cols} {by_session} ORDER BY id DESC LIMIT %s",
        all_steps=f"SELECT {select_cols} {by_session} ORDER BY id",
    )
