"""A LangGraph graph that stops for a human, stored in agentstore, resumed from another process.

Run from a checkout (the demo project's settings; DATABASE_URL picks the database):

    python manage.py migrate
    python docs/examples/langgraph_interrupt.py start refund-7 "refund order 7"
    # … the process exits; later, in any other process:
    python docs/examples/langgraph_interrupt.py resume refund-7 yes
    python docs/examples/langgraph_interrupt.py show refund-7

``start`` runs the graph until ``interrupt()`` asks for approval and exits;
the checkpoint and the open interrupt are in the database. ``resume`` answers
with ``Command(resume=…)`` and the graph carries on from where it stopped.
docs/integrations/langgraph.md walks through it; tests/integrations runs it.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, TypedDict


class Refund(TypedDict, total=False):
    request: str
    approved: bool
    outcome: str


def build_graph() -> Any:
    from langgraph.graph import END, START, StateGraph
    from langgraph.types import interrupt

    from agentstore.integrations.langgraph import AgentstoreSaver

    def review(state: Refund) -> Refund:
        # Stops the run here; the value is shown to whoever resumes it.
        answer = interrupt({"question": f"Approve {state['request']!r}?"})
        return {"approved": answer == "yes"}

    def act(state: Refund) -> Refund:
        return {"outcome": "refunded" if state["approved"] else "declined"}

    builder = StateGraph(Refund)
    builder.add_node("review", review)
    builder.add_node("act", act)
    builder.add_edge(START, "review")
    builder.add_edge("review", "act")
    builder.add_edge("act", END)
    return builder.compile(checkpointer=AgentstoreSaver())


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    import django

    django.setup()
    from langgraph.types import Command

    command, thread_id, *rest = argv
    graph = build_graph()
    config = {"configurable": {"thread_id": thread_id}}
    if command == "start":
        result = graph.invoke({"request": rest[0]}, config)
    elif command == "resume":
        result = graph.invoke(Command(resume=rest[0]), config)
    else:
        result = graph.get_state(config).values
    state = graph.get_state(config)
    print(
        json.dumps(
            {
                "values": {k: v for k, v in result.items() if k != "__interrupt__"},
                "waiting_for": [i.value for i in state.interrupts],
                "next": list(state.next),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
