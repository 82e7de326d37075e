"""Demo data of the log store: an agentsession session with a tool call, branches and a ref.

    from agentstore.demo import log
    for line in log.seed(owner):
        print(line)

Everything is written through :class:`agentstore.stores.LogStore`: a session with
a config (model, instructions, a ``get_weather`` tool), a user question, a first
answer whose response recorded no request hash, and on a second branch the
model's reasoning summary, a tool call, its response (with the request hash the
format's context rules give), the tool's output and the final answer with its
own hashed response; a durable ``leaf`` label choosing the second branch, a
name, and the ref ``demo/main`` naming the session. Safe to run again: the
session is written only when it does not exist yet, and the ref is created only
when it is absent (or dangling).
"""

from __future__ import annotations

from typing import Any

from agentstore import exceptions
from agentstore.ids import short_id
from agentstore.models import Session as SessionRow
from agentstore.stores.log import LogStore
from agentstore.types import RefTarget

SESSION_ID = "demo-log-lisbon"
REF = "demo/main"
#: A session an agent on another machine is writing right now (it holds it).
HELD_ID = "demo-log-live"
HELD_BY = ("agent-box-2", 4242)  # (host, pid) of that agent


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

    add(
        {
            "type": "config",
            "model": "gpt-5",
            "instructions": "You are a concise travel helper.",
            "tools_added": [
                {
                    "type": "function",
                    "name": "get_weather",
                    "description": "Forecast for a city and a day",
                    "parameters": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}, "day": {"type": "string"}},
                        "required": ["city"],
                    },
                }
            ],
        }
    )
    question = add(_message("user", "Plan one day in Lisbon."))
    add(
        {
            **_message("assistant", "Morning: Alfama. Afternoon: Belém. Evening: Bairro Alto."),
            "response": "resp_1",
        }
    )
    add({"type": "response", "response_id": "resp_1", "model": "gpt-5", "status": "completed"})
    session.branch(question)  # a second answer to the same question, checking the weather
    asked = session.context().request_hash()
    add(
        {
            "type": "item",
            "item": {
                "type": "reasoning",
                "summary": [{"type": "summary_text", "text": "Outdoor plan: check the forecast."}],
            },
            "response": "resp_2",
        }
    )
    add(
        {
            "type": "item",
            "item": {
                "type": "function_call",
                "call_id": "call_weather",
                "name": "get_weather",
                "arguments": '{"city":"Lisbon","day":"Saturday"}',
            },
            "response": "resp_2",
        }
    )
    add(_response("resp_2", asked, 412, 38, 850))
    add(
        {
            "type": "item",
            "item": {
                "type": "function_call_output",
                "call_id": "call_weather",
                "output": "Sunny, 24 °C, light wind.",
            },
        }
    )
    asked = session.context().request_hash()
    add(
        {
            **_message(
                "assistant", "Start at LX Factory, ride tram 28, sunset at Miradouro da Graça."
            ),
            "response": "resp_3",
        }
    )
    add(_response("resp_3", asked, 470, 25, 640))
    add({**session.mark_leaf()})  # make the second branch the durable leaf
    add({"type": "info", "name": "Lisbon day trip"})


def _response(rid: str, request_hash: str, tokens_in: int, tokens_out: int, ms: int) -> Any:
    return {
        "type": "response",
        "response_id": rid,
        "model": "gpt-5",
        "status": "completed",
        "request_hash": request_hash,
        "latency_ms": ms,
        "usage": {
            "input_tokens": tokens_in,
            "output_tokens": tokens_out,
            "total_tokens": tokens_in + tokens_out,
        },
    }


def _hold(owner: Any) -> str:
    """Make sure ``HELD_ID`` exists and is held, as an agent on another host holds it.

    Written through the log store, which records the hold with its own pid and
    host: this store says it is that agent's. A host that is not this one
    cannot be checked for liveness, so the hold shows as live until someone
    breaks it (the next seed takes it again).
    """
    store = LogStore()
    store.host, store.pid = HELD_BY
    if store.lock_holder(HELD_ID) is not None:
        return f"Log session {HELD_ID} is held by pid {HELD_BY[1]} on {HELD_BY[0]}"
    if not SessionRow.objects.filter(id=HELD_ID).exists():
        store.create({"id": HELD_ID, "cwd": "/srv/agent-box", "harness": {"name": "demo"}})
        store.append(HELD_ID, {"type": "config", "model": "gpt-5", "instructions": "Triage."})
        store.append(HELD_ID, _message("user", "Triage the overnight alerts."))
        store.append(HELD_ID, {"type": "info", "name": "Alert triage (running)"})
        if owner is not None:
            SessionRow.objects.filter(id=HELD_ID, owner__isnull=True).update(owner=owner)
    else:
        store.open(HELD_ID)
    # Not closed on purpose: closing would release the hold this demo shows.
    return f"Log session {HELD_ID}: held by pid {HELD_BY[1]} on {HELD_BY[0]} (a live hold)"


def seed(owner: Any) -> list[str]:
    """Create the demo log sessions and the ref (idempotent); return lines to print."""
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
            f"  {len(session)} entries, name {session.name()!r}, leaf {short_id(session.leaf)}, "
            f"ref {REF} → {store.resolve_ref(REF).session}"
        )
    finally:
        store.close()
    lines.append(_hold(owner))
    return lines
