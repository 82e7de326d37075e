"""A LangGraph graph that stops for a human, stored in agentstore, resumed from another process.

Needs only the documented install — no Django project, no demo extras:

    pip install "agentstore[langgraph]"
    python langgraph_interrupt.py start refund-7 "refund order 7"
    # … the process exits; later, in any other process:
    python langgraph_interrupt.py resume refund-7 yes
    python langgraph_interrupt.py show refund-7

Without ``DJANGO_SETTINGS_MODULE`` it configures just enough Django itself and
keeps the threads in ``langgraph_refunds.sqlite3`` (migrated on first use);
with it (``DJANGO_SETTINGS_MODULE=mysite.settings``, a project that has
``agentstore`` installed and migrated) it uses that project's database.

``start`` runs the graph until ``interrupt()`` asks for approval and exits;
the checkpoint and the open interrupt are in the database. ``resume`` answers
with ``Command(resume=…)`` and the graph carries on from where it stopped.
docs/integrations/langgraph.md walks through it; tests/integrations runs it both
ways (standalone, and with a project's settings on SQLite and PostgreSQL).
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

    from agentstore.integrations.langgraph import AgentStoreSaver

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
    return builder.compile(checkpointer=AgentStoreSaver())


def setup_django() -> None:
    """A project's settings when ``DJANGO_SETTINGS_MODULE`` names them, else a SQLite file."""
    import django
    from django.conf import settings

    if os.environ.get("DJANGO_SETTINGS_MODULE"):
        django.setup()
        return
    settings.configure(
        INSTALLED_APPS=[
            "django.contrib.admin",
            "django.contrib.auth",
            "django.contrib.contenttypes",
            "django.contrib.sessions",
            "django.contrib.messages",
            "rest_framework",
            "django_filters",
            "drf_spectacular",
            "agentstore",
        ],
        DATABASES={
            "default": {
                "ENGINE": "django.db.backends.sqlite3",
                "NAME": "langgraph_refunds.sqlite3",
                "OPTIONS": {
                    "transaction_mode": "IMMEDIATE",
                    "timeout": 20,
                    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL",
                },
                "CONN_MAX_AGE": None,
            }
        },
        USE_TZ=True,
    )
    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def main(argv: list[str]) -> int:
    if os.environ.get("DJANGO_SETTINGS_MODULE"):
        # A checkout's own project (the tests run it so): importable from here.
        sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    setup_django()
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
