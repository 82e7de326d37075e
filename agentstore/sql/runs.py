"""The raw SQL of runs: a run's detail row, and the hold a finished run left behind.

Sent by :mod:`agentstore.runs` (``docs/runs.md``). Names come from ``_meta``
(:mod:`agentstore.sql`).
"""

from __future__ import annotations

from agentstore.models import Holder, RunTask, Session, Task
from agentstore.sql import columns, for_update, marks, names

#: A run's detail row, inserted with its task (``TaskRepository.enqueue``'s detail).
INSERT_RUN = f"INSERT INTO {RunTask._meta.db_table} ({columns(RunTask)}) VALUES ({marks(RunTask)})"

#: What a worker reads of a claimed run: runner, input, overrides. Param: task id.
RUN_FIELDS: tuple[str, ...] = ("runner", "input_json", "overrides_json")
SELECT_RUN = (
    f"SELECT {names(RunTask, *RUN_FIELDS)} FROM {RunTask._meta.db_table} WHERE task_id = %s"
)

#: The prefix of the hold token a run claims its session with (``run:<task id>``).
HOLD_PREFIX = "run:"

#: Drop the session's hold if it is a run's and that run is over (or gone): a
#: worker that died in a run leaves its hold, which protects nothing once the
#: run has settled. A queued run keeps it (its rerun continues under it).
#: Params: session id.
CLEAR_FINISHED_RUN_HOLD = (
    f"DELETE FROM {Holder._meta.db_table} WHERE {names(Holder, 'session')} = %s "
    f"AND token LIKE '{HOLD_PREFIX}%%' AND NOT EXISTS (SELECT 1 FROM {Task._meta.db_table} t "
    f"WHERE t.id = substr({Holder._meta.db_table}.token, {len(HOLD_PREFIX) + 1}) "
    "AND t.state IN ('queued', 'running', 'canceling'))"
)


#: The states of a run that is going on (or will): what ``if_busy`` looks at.
ACTIVE = ("queued", "running", "canceling")


def active_runs(vendor: str) -> tuple[str, str]:
    """The statements that lock a session (PostgreSQL) and read its active runs' ids, oldest first.

    Params: session id each. The lock serialises the starts of one session's
    runs, so ``if_busy`` decides on what is there; SQLite's write lock does it.
    """
    lock = (
        f"SELECT {names(Session, 'id')} FROM {Session._meta.db_table} "
        f"WHERE {names(Session, 'id')} = %s{for_update(vendor)}"
    )
    states = ", ".join(f"'{state}'" for state in ACTIVE)
    active = (
        f"SELECT id FROM {Task._meta.db_table} WHERE {names(Task, 'owner_session')} = %s "
        f"AND kind = 'run' AND state IN ({states}) ORDER BY created_at, id"
    )
    return lock, active
