"""Demo data of the integrations: an OpenAI Agents SDK session, a Pydantic AI conversation
and a LangGraph thread, each written by the framework itself through agentstore.

    from agentstore.demo import integrations
    for line in integrations.seed(owner):
        print(line)

Each one runs the framework's own public API with a scripted model — no network,
no API key, the same conversation on every machine:

* **OpenAI Agents SDK**: ``Runner.run`` with an ``AgentStoreSession``
  (:mod:`agentstore.integrations.openai_agents`) and a ``Model`` that calls the
  ``get_weather`` tool for a question and answers from the tool's output.
* **Pydantic AI**: ``Agent.run_sync`` on a ``FunctionModel`` of the same
  script, its history kept by ``MessageHistory``
  (:mod:`agentstore.integrations.pydantic_ai`): loaded before each turn, the
  run's new messages saved after it.
* **LangGraph**: a ``StateGraph`` (a scripted model node, LangGraph's
  ``ToolNode``) compiled with ``AgentStoreSaver``
  (:mod:`agentstore.integrations.langgraph`) and invoked twice on one thread;
  the thread's session is created first through ``SessionStore``, so it has a
  name and an owner.

Each conversation has two turns: a question the tool answers, then a follow-up.
A framework that is not installed is skipped with a line saying which extra
brings it (``./scripts/demo`` installs all three); so is the LangGraph thread
inside a transaction (its saver writes on a connection of its own). Safe to
run again: a conversation is written only when its session does not exist yet.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.util import find_spec
from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections

from agentstore.models import Session
from agentstore.stores.sessions import SessionStore

__all__ = [
    "LANGGRAPH_ID",
    "OPENAI_AGENTS_ID",
    "PYDANTIC_AI_ID",
    "QUESTIONS",
    "seed",
    "weather_agent",
]

OPENAI_AGENTS_ID = "demo-openai-agents-weather"
PYDANTIC_AI_ID = "demo-pydantic-ai-weather"
LANGGRAPH_ID = "demo-langgraph-weather"
LANGGRAPH_NAME = "Demo: weather agent (LangGraph thread)"
INSTRUCTIONS = "Answer questions about the weather. Use the get_weather tool."
#: The two user turns of every demo conversation.
QUESTIONS = ("What is the weather in Lisbon?", "And in Oslo?")
WEATHER = {"Lisbon": "sunny, 24°C", "Oslo": "snow, -3°C", "Paris": "cloudy, 17°C"}


def get_weather(city: str) -> str:
    """The weather in a city (a fixed table: the demo is the same everywhere)."""
    return WEATHER.get(city, "fog, 9°C")


def city_of(question: str) -> str:
    """The city a demo question names (its last word)."""
    return question.rstrip("?").rsplit(" ", 1)[-1]


def answer(tool_output: str) -> str:
    """The scripted model's reply to the tool's output."""
    return f"The weather there: {tool_output}."


# -- OpenAI Agents SDK ---------------------------------------------------------------


def weather_agent() -> Any:
    """The demo's OpenAI Agents SDK agent: the weather tool and a scripted model (no key)."""
    from agents import Agent, function_tool
    from agents.items import ModelResponse
    from agents.models.interface import Model
    from agents.usage import Usage
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputText,
    )

    class ScriptedModel(Model):
        """A tool call for a question, a text answer for the tool's output."""

        async def get_response(
            self, system_instructions: str | None, input: Any, *args: Any, **kwargs: Any
        ) -> ModelResponse:
            items = [{"role": "user", "content": input}] if isinstance(input, str) else input
            last = dict(items[-1])
            turn = len(items)
            output: list[Any]
            if last.get("type") == "function_call_output":
                text = ResponseOutputText(
                    type="output_text", text=answer(str(last["output"])), annotations=[]
                )
                output = [
                    ResponseOutputMessage(
                        id=f"msg_demo_{turn}",
                        type="message",
                        role="assistant",
                        status="completed",
                        content=[text],
                    )
                ]
            else:
                output = [
                    ResponseFunctionToolCall(
                        id=f"fc_demo_{turn}",
                        call_id=f"call_demo_{turn}",
                        type="function_call",
                        name="get_weather",
                        arguments=f'{{"city": "{city_of(str(last.get("content", "")))}"}}',
                        status="completed",
                    )
                ]
            usage = Usage(requests=1, input_tokens=60 + 20 * turn, output_tokens=12)
            return ModelResponse(output=output, usage=usage, response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any) -> Any:
            raise NotImplementedError("the demo does not stream")

    return Agent(
        name="weather",
        instructions=INSTRUCTIONS,
        model=ScriptedModel(),
        tools=[function_tool(get_weather)],
    )


def _openai_agents(owner: Any) -> str:
    from agents import RunConfig, Runner
    from asgiref.sync import async_to_sync

    from agentstore.integrations.openai_agents import AgentStoreSession

    agent = weather_agent()
    # async_to_sync: the session's database work runs on this thread, with
    # Django's connection (agentstore.db.thread).
    run = async_to_sync(Runner.run)
    with AgentStoreSession(OPENAI_AGENTS_ID, owner=owner, header={"cwd": "/demo/agents"}) as chat:
        for question in QUESTIONS:
            run(agent, question, session=chat, run_config=RunConfig(tracing_disabled=True))
        items = len(chat.get_items_sync())
    return f"Created OpenAI Agents SDK session {OPENAI_AGENTS_ID} ({items} items, 2 turns)"


# -- Pydantic AI -----------------------------------------------------------------------


def _pydantic_ai(owner: Any) -> str:
    from pydantic_ai import Agent
    from pydantic_ai.messages import (
        ModelMessage,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from agentstore.integrations.pydantic_ai import MessageHistory

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        part = messages[-1].parts[-1]
        if isinstance(part, ToolReturnPart):
            return ModelResponse(parts=[TextPart(answer(str(part.content)))])
        question = part.content if isinstance(part, UserPromptPart) else ""
        call = ToolCallPart(
            "get_weather",
            {"city": city_of(str(question))},
            tool_call_id=f"call_demo_{len(messages)}",
        )
        return ModelResponse(parts=[call], model_name="demo-scripted")

    agent: Agent[None, str] = Agent(FunctionModel(respond), instructions=INSTRUCTIONS)
    agent.tool_plain(get_weather)
    with MessageHistory(PYDANTIC_AI_ID, owner=owner, header={"cwd": "/demo/pydantic"}) as history:
        for question in QUESTIONS:
            result = agent.run_sync(question, message_history=history.load())
            history.save(result)
        messages = len(history.load())
    return f"Created Pydantic AI conversation {PYDANTIC_AI_ID} ({messages} messages, 2 turns)"


# -- LangGraph -------------------------------------------------------------------------


def _langgraph(owner: Any) -> str:
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
    from langchain_core.tools import tool
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    from agentstore.integrations.langgraph import AgentStoreSaver, close_connections

    def model(state: MessagesState) -> dict[str, Any]:
        last = state["messages"][-1]
        turn = len(state["messages"])
        if isinstance(last, ToolMessage):
            return {"messages": [AIMessage(answer(str(last.content)))]}
        call = {
            "name": "get_weather",
            "args": {"city": city_of(str(last.content))},
            "id": f"call_demo_{turn}",
        }
        return {"messages": [AIMessage("", tool_calls=[call])]}

    builder = StateGraph(MessagesState)
    builder.add_node("model", model)
    builder.add_node("tools", ToolNode([tool(get_weather)]))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition)
    builder.add_edge("tools", "model")
    # The thread's session first, so it has a name (the saver creates bare ones).
    SessionStore().create("graph", session_id=LANGGRAPH_ID, owner=owner, name=LANGGRAPH_NAME)
    try:
        graph = builder.compile(checkpointer=AgentStoreSaver(owner=owner))
        config: Any = {"configurable": {"thread_id": LANGGRAPH_ID}}
        for question in QUESTIONS:
            graph.invoke({"messages": [HumanMessage(question)]}, config)
        messages = len(graph.get_state(config).values["messages"])
    finally:
        # The savers keep a connection of their own; the demo is done with it.
        close_connections()
    return f"Created LangGraph thread {LANGGRAPH_ID} ({messages} messages, 2 turns)"


#: (session id, what it is, the extra that brings it, the module it needs, the seeder).
_SEEDS: tuple[tuple[str, str, str, str, Callable[[Any], str]], ...] = (
    (OPENAI_AGENTS_ID, "OpenAI Agents SDK session", "openai-agents", "agents", _openai_agents),
    (PYDANTIC_AI_ID, "Pydantic AI conversation", "pydantic-ai", "pydantic_ai", _pydantic_ai),
    (LANGGRAPH_ID, "LangGraph thread", "langgraph", "langgraph", _langgraph),
)


def seed(owner: Any) -> list[str]:
    """Create each installed integration's demo conversation (once); return lines to print."""
    lines = []
    for session_id, what, extra, module, create in _SEEDS:
        if Session.objects.filter(pk=session_id).exists():
            lines.append(f"Kept {what} {session_id}")
        elif find_spec(module) is None:
            lines.append(f'Skipped the {what}: pip install "agentstore[{extra}]" to seed it')
        elif module == "langgraph" and connections[DEFAULT_DB_ALIAS].in_atomic_block:
            # The saver writes on a connection of its own and never joins the
            # caller's transaction: inside one it would wait for that
            # transaction's write lock (SQLite) or its uncommitted rows.
            lines.append(f"Skipped the {what}: its saver cannot write inside a transaction")
        else:
            lines.append(create(owner))
    return lines
