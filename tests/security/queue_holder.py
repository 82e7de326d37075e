"""An OS process that takes agentstore's SQLite writer queue and keeps it.

    DATABASE_URL=sqlite:////tmp/x.sqlite3 python -m tests.security.queue_holder

Sets Django up on ``DATABASE_URL``, enters ``agentstore.db.write`` (so it
holds the writer lock file *and* SQLite's write lock, exactly like a store
write), prints ``ready`` and sleeps. The test then freezes it with ``SIGSTOP``:
a writer stopped inside its transaction (``tests/security/test_bounded_queue.py``).
"""

from __future__ import annotations

import os
import sys
import time

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")


def main() -> None:
    import django

    django.setup()
    from agentstore import db

    def hold() -> None:
        print("ready", flush=True)
        time.sleep(3600)

    db.write(lambda cursor: hold(), orm=True)


if __name__ == "__main__":
    sys.exit(main())
