"""The demo's runner: the weather agent of the demo conversations, as a durable run.

    AGENTSTORE = {"RUNNERS": {"weather": "agentstore.demo.runners.weather"}}   # the demo's

    manage.py agentstore start-run weather --input "What is the weather in Paris?"
    manage.py agentstore worker --once          # executes it
    manage.py agentstore runs                   # … succeeded, its output the answer

An OpenAI Agents SDK ``Agent`` with the demo's scripted model
(:func:`agentstore.demo.integrations.weather_agent`: it calls the
``get_weather`` tool for a question naming a city, then answers from the
tool's output), made a runner by :func:`agentstore.runs.builders.openai_agents`
— no network, no API key, the same answer on every machine. Importing this
module needs the ``openai-agents`` extra, which ``./scripts/demo`` installs.
"""

from __future__ import annotations

from agents import RunConfig

from agentstore.demo.integrations import weather_agent
from agentstore.runs import builders

__all__ = ["weather"]

#: The runner named ``weather`` in the demo project's settings.
weather = builders.openai_agents(weather_agent(), run_config=RunConfig(tracing_disabled=True))
