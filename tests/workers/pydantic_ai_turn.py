"""One Pydantic AI conversation turn in a fresh OS process.

Used by ``tests/integrations/test_pydantic_ai.py``::

    DATABASE_URL=sqlite:////tmp/x.sqlite3 python -m tests.workers.pydantic_ai_turn \
        --session chat-1 --prompt "Weather in Paris?"

Loads the history from agentstore, runs the offline ``FunctionModel`` agent,
saves the run's new messages, and prints one JSON line: the output, the number
of messages each model call was sent, and how many messages were saved.
"""

from __future__ import annotations

import argparse
import json
import os


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--session", required=True)
    parser.add_argument("--prompt", required=True)
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    import django

    django.setup()
    from agentstore.integrations.pydantic_ai import MessageHistory
    from tests.integrations.pydantic_fakes import weather_agent

    seen: list[int] = []
    with MessageHistory(args.session) as history:
        result = weather_agent(seen).run_sync(args.prompt, message_history=history.load())
        saved = history.save(result)
    print(json.dumps({"output": result.output, "seen": seen, "saved": saved}), flush=True)


if __name__ == "__main__":
    main()
