"""Continue a log session again and again until killed (issue 13 item 15's process test).

    DATABASE_URL=… python -m tests.workers.continue_worker --session SID

Follows the ``continued_in`` chain from ``--session`` to its end, prints
``{"ready": true}``, then continues the end of the chain forever, printing
``{"continued": successor}`` after each one commits. The test SIGKILLs it at
some point mid-way and checks that every successor is linked from its parent.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--session", required=True)
    args = parser.parse_args(argv)

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    import django

    django.setup()

    from agentstore.models import Session as SessionRow
    from agentstore.stores import LogStore

    current = args.session
    while True:
        successor = SessionRow.objects.filter(pk=current).values_list("superseded_by", flat=True)
        if not successor or not successor[0]:
            break
        current = successor[0]
    store = LogStore()
    print(json.dumps({"ready": True, "from": current}), flush=True)
    summary = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "s"}]}
    while True:
        successor_id = store.continue_session(current, summary).id
        store.release(current)
        print(json.dumps({"continued": successor_id}), flush=True)
        current = successor_id


if __name__ == "__main__":
    raise SystemExit(main())
