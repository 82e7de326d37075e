"""Runners the run tests start, and the settings that name them (``RUNNERS``).

Each writes what it did where a test can see it: the run's session (through
``ConversationLog``, as the integrations write) or its return value.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

from agentstore import exceptions
from agentstore.integrations.conversation import ConversationLog
from agentstore.runs import RunContext
from tests.runs.names import RUNNERS

__all__ = ["RUNNERS"]

HARNESS = "tests"


def _say(run: RunContext, text: str) -> list[str]:
    log = ConversationLog(run.session_id, harness=HARNESS, using=run.using)
    log.read(None, types={"item"})
    item = {"type": "message", "role": "user", "content": text}
    return log.write([{"type": "item", "item": item}])


def echo(run: RunContext) -> dict[str, Any]:
    return {"text": f"echo {run.input}", "attempt": run.attempt, "overrides": run.overrides}


async def aecho(run: RunContext) -> dict[str, Any]:
    return {"text": f"async echo {run.input}"}


def say(run: RunContext) -> int:
    """Append the input as a user message to the session; progress event on the way."""
    run.event("said", {"text": run.input})
    return len(_say(run, str(run.input)))


def fails(run: RunContext) -> None:
    raise RuntimeError(f"runner failed on attempt {run.attempt}")


def not_json(run: RunContext) -> object:
    return object()


def nul(run: RunContext) -> str:
    return "a\x00b\udc80"


def outsider(run: RunContext) -> dict[str, str]:
    """Write as the run, and try to write from outside it (another thread): what each got."""
    _say(run, "from the run")
    seen: dict[str, str] = {}

    def other() -> None:
        try:
            _say(run, "from outside")
            seen["outside"] = "written"
        except exceptions.SessionLocked:
            seen["outside"] = "SessionLocked"

    thread = threading.Thread(target=other)
    thread.start()
    thread.join()
    _say(run, "from the run again")
    return seen


def killable(run: RunContext) -> str:
    """First attempt: write, tell the test our pid (input: a marker path), wait to be killed."""
    marker = Path(str(run.input))
    _say(run, f"attempt {run.attempt}")
    if not marker.exists():
        marker.write_text(str(os.getpid()))
        while True:
            time.sleep(0.05)  # until SIGKILL
    return f"done on attempt {run.attempt}"


# -- an OpenAI Agents SDK agent whose tool waits to be killed (tests/runs/test_run_crash.py) --

#: The environment variable naming the marker file the tool writes its pid to.
KILL_MARKER = "AGENTSTORE_TEST_KILL_MARKER"


def _sdk_weather() -> Any:
    from agents import Agent, RunConfig, function_tool

    from agentstore.runs import builders
    from tests.integrations import agents_fakes

    agents_fakes.offline()

    @function_tool
    def get_weather(city: str) -> str:
        """The weather; the first call waits in the tool to be killed."""
        marker = Path(os.environ[KILL_MARKER])
        if not marker.exists():
            marker.write_text(str(os.getpid()))
            while True:
                time.sleep(0.05)  # until SIGKILL
        return "sunny, 21°C"

    agent = Agent(
        name="weather",
        instructions="Answer about the weather.",
        model=agents_fakes.WeatherModel(),
        tools=[get_weather],
    )
    return builders.openai_agents(agent, run_config=RunConfig(tracing_disabled=True))


async def sdk_weather(run: RunContext) -> Any:
    """The SDK agent above, built on first use (the SDK is imported by the worker only)."""
    global _built
    if _built is None:
        _built = _sdk_weather()
    return await _built(run)


_built: Any = None
