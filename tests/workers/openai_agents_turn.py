"""One conversation turn of an OpenAI Agents SDK agent in a fresh OS process.

Used by ``tests/integrations/test_openai_agents_processes.py``: every turn is a
new interpreter, so the history the model sees can only come from the database::

    DATABASE_URL=sqlite:////tmp/x.sqlite3 python -m tests.workers.openai_agents_turn \
        --session conv-1 --prompt "Weather in Paris?" [--owner alice]

Runs ``Runner.run(agent, prompt, session=AgentStoreSession(...))`` with the
scripted ``WeatherModel`` (no network) and prints one JSON line: the final
output, the number of input items of each model call, and the pid — or
``{"error": "session_locked"}`` when another process holds the conversation
(``concurrent_writer`` when it moved on after this turn read it).
``--start-file`` (``tests/processes.run_together``): announce readiness after
set-up, then wait for it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--session", required=True)
    parser.add_argument("--prompt", required=True)
    parser.add_argument("--owner", default="")
    parser.add_argument("--start-file", default="", help="wait for it after set-up")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "project.settings")
    import django

    django.setup()
    from agents import Runner
    from django.contrib.auth import get_user_model

    from agentstore import exceptions
    from agentstore.integrations.openai_agents import AgentStoreSession
    from tests.integrations.agents_fakes import WeatherModel, offline, weather_agent
    from tests.workers.start import ready_then_wait

    offline()
    owner = get_user_model().objects.get(username=args.owner) if args.owner else None
    model = WeatherModel()
    ready_then_wait(args.start_file)  # tests/processes.py's handshake

    async def turn() -> str:
        async with AgentStoreSession(args.session, owner=owner) as session:
            result = await Runner.run(weather_agent(model), args.prompt, session=session)
        return str(result.final_output)

    try:
        output = asyncio.run(turn())
    except (exceptions.SessionLocked, exceptions.ConcurrentWriter) as exc:
        print(json.dumps({"error": exc.code, "pid": os.getpid()}), flush=True)
        return
    print(
        json.dumps(
            {"output": output, "inputs": [len(i) for i in model.inputs], "pid": os.getpid()}
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()
