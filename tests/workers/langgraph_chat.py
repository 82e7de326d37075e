"""One turn of a LangGraph chat thread in its own OS process (a "restart" between turns).

Used by ``tests/integrations/test_langgraph_graphs.py``::

    DATABASE_URL=… python -m tests.workers.langgraph_chat --thread t1 --say hello

Builds a ``StateGraph(MessagesState)`` whose one node answers offline (it echoes
the last human message and counts the turns it has seen), compiles it with an
``AgentStoreSaver`` and invokes it once. Prints one JSON line: the thread's
messages as ``[type, content]`` pairs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--thread", required=True)
    parser.add_argument("--say", required=True)
    args = parser.parse_args(argv)

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    import django

    django.setup()

    from tests.integrations.graphs import chat_graph

    graph = chat_graph()
    result = graph.invoke(
        {"messages": [("human", args.say)]}, {"configurable": {"thread_id": args.thread}}
    )
    print(json.dumps([[m.type, m.content] for m in result["messages"]]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
