"""Demo data of the log store: one agentsession session with a branch, a leaf label and a ref.

    from agentstore.demo import log
    for line in log.seed(owner):
        print(line)

Everything is written through :class:`agentstore.stores.LogStore`: a session with
a config, a user question, two assistant answers on two branches, a durable
``leaf`` label choosing the second branch, a name, and the ref ``demo/main``
naming the session. Safe to run again: the session is written only when it does
not exist yet, and the ref is created only when it is absent (or dangling).
"""

from __future__ import annotations

from typing import Any

from agentstore import exceptions
from agentstore.models import Session as SessionRow
from agentstore.stores.log import LogStore
from agentstore.types import RefTarget

SESSION_ID = "demo-log-lisbon"
REF = "demo/main"


def _message(role: str, text: str) -> dict[str, Any]:
    kind = "input_text" if role == "user" else "output_text"
    return {
        "type": "item",
        "item": {"type": "message", "role": role, "content": [{"type": kind, "text": text}]},
    }


def _create(store: LogStore) -> None:
    session = store.create(
        {
            "id": SESSION_ID,
            "created_at": "2026-05-31T09:00:00Z",
            "cwd": "/home/demo/travel",
            "harness": {"name": "agentstore-demo", "version": "1"},
        }
    )
    # Fixed timestamps: the entry ids (hashes over ts too) are the same every run.
    stamps = iter(f"2026-05-31T09:00:{s:02d}Z" for s in range(1, 60))

    def add(entry: dict[str, Any]) -> str:
        return store.append(SESSION_ID, {**entry, "ts": next(stamps)})

    add({"type": "config", "model": "gpt-5", "instructions": "You are a concise travel helper."})
    question = add(_message("user", "Plan one day in Lisbon."))
    add(_message("assistant", "Morning: Alfama. Afternoon: Belém. Evening: Bairro Alto."))
    session.branch(question)  # a second answer to the same question
    add(_message("assistant", "Start at LX Factory, ride tram 28, sunset at Miradouro da Graça."))
    add({**session.mark_leaf()})  # make the second branch the durable leaf
    add({"type": "info", "name": "Lisbon day trip"})


def seed(owner: Any) -> list[str]:
    """Create the demo log session and its ref (idempotent); return lines to print."""
    store = LogStore()
    lines: list[str] = []
    try:
        if not SessionRow.objects.filter(id=SESSION_ID).exists():
            _create(store)
            lines.append(f"Created log session {SESSION_ID}")
        else:
            lines.append(f"Log session {SESSION_ID} already exists")
        if owner is not None:
            SessionRow.objects.filter(id=SESSION_ID, owner__isnull=True).update(owner=owner)
        try:
            store.resolve_ref(REF)
        except exceptions.NoRef:
            store.update_ref(REF, None, RefTarget(session=SESSION_ID), reason="demo")
        except exceptions.NoSession as dangling:
            store.update_ref(REF, dangling.target, RefTarget(session=SESSION_ID), reason="demo")
        session = store.read(SESSION_ID)
        lines.append(
            f"  {len(session)} entries, name {session.name()!r}, leaf {session.leaf[:19]}…, "
            f"ref {REF} → {store.resolve_ref(REF).session}"
        )
    finally:
        store.close()
    return lines
