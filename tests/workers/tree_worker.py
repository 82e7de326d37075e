"""A TreeStore worker process for the contention tests.

    DATABASE_URL=... python -m tests.workers.tree_worker append SESSION N --start-file F
    DATABASE_URL=... python -m tests.workers.tree_worker compact SESSION PARENT OP --start-file F

Prints one JSON line: ``{"status": "ok" | "stale" | "error", ...}``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from tests.workers.start import ready_then_wait


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    import django

    django.setup()
    from django.db import connection

    from agentstore import exceptions
    from agentstore.stores import TreeStore
    from agentstore.types import AppendCompactionInput, MessageEntity

    start_file = ""
    if "--start-file" in argv:
        index = argv.index("--start-file")
        start_file = argv[index + 1]
        argv = argv[:index] + argv[index + 2 :]
    action, *args = argv
    store = TreeStore()
    connection.ensure_connection()
    ready_then_wait(start_file)

    result: dict[str, object]
    try:
        if action == "append":
            session_id, count = args[0], int(args[1])
            ids = [
                store.append_message(
                    session_id, None, MessageEntity(role="user", content=f"{os.getpid()}-{n}")
                ).id
                for n in range(count)
            ]
            result = {"status": "ok", "appended": len(ids)}
        elif action == "compact":
            session_id, parent_id, operation_id = args
            entry = store.append_compaction(
                AppendCompactionInput(
                    session_id=session_id,
                    parent_id=parent_id,
                    summary=f"summary by {operation_id}",
                    operation_id=operation_id,
                )
            )
            result = {"status": "ok", "entry_id": entry.id}
        else:
            raise SystemExit(f"unknown action {action}")
    except exceptions.StaleCompactionParent as exc:
        result = {"status": "stale", "winner": exc.winner_entry_id}
    except Exception as exc:  # reported, never hidden
        result = {"status": "error", "error": f"{type(exc).__name__}: {exc}"}
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
