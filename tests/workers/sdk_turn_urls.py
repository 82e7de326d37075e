"""One OpenAI Agents SDK turn per request, as an application serves a chat.

``POST /turn/<conversation>`` with ``{"prompt": "Weather in Oslo?"}`` runs
``Runner.run_sync(agent, prompt, session=...)`` with the scripted
``WeatherModel`` (no network). The session object is this process's one
:class:`AgentStoreSession` for that conversation, made on first use and
**never closed** — the SDK's documented use, in every worker process. The
answer is JSON: the final output, how many input items the model's first call
saw (the whole history must come from the database) and the worker's pid; an
agentstore error answers its code with status 409.
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

from agents import Runner
from django.http import HttpRequest, JsonResponse
from django.urls import path
from django.views.decorators.csrf import csrf_exempt

from agentstore import exceptions
from agentstore.integrations.openai_agents import AgentStoreSession
from tests.integrations.agents_fakes import WeatherModel, offline, weather_agent

offline()
#: This process's session objects, one per conversation, never closed.
SESSIONS: dict[str, AgentStoreSession] = {}
_made = threading.Lock()


def _session(conversation: str) -> AgentStoreSession:
    with _made:
        if conversation not in SESSIONS:
            SESSIONS[conversation] = AgentStoreSession(conversation)
        return SESSIONS[conversation]


@csrf_exempt
def turn(request: HttpRequest, conversation: str) -> JsonResponse:
    prompt = str(json.loads(request.body)["prompt"])
    model = WeatherModel()
    try:
        result = Runner.run_sync(weather_agent(model), prompt, session=_session(conversation))
    except exceptions.AgentStoreError as exc:
        return JsonResponse({"error": exc.code, "pid": os.getpid()}, status=409)
    body: dict[str, Any] = {
        "output": str(result.final_output),
        "seen": len(model.inputs[0]),
        "pid": os.getpid(),
    }
    return JsonResponse(body)


urlpatterns = [path("turn/<str:conversation>", turn)]
