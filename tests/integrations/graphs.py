"""Small offline LangGraph graphs the integration tests (and their workers) run.

No model is called: nodes are plain functions, so the tests are deterministic
and need no network.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import interrupt

from agentstore.integrations.langgraph import AgentStoreSaver


def chat_graph(saver: AgentStoreSaver | None = None) -> Any:
    """MessagesState: the bot echoes the last human message and numbers its replies."""

    def bot(state: MessagesState) -> dict[str, Any]:
        turn = sum(1 for m in state["messages"] if m.type == "ai") + 1
        return {"messages": [AIMessage(f"#{turn} echo: {state['messages'][-1].content}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("bot", bot)
    builder.add_edge(START, "bot")
    builder.add_edge("bot", END)
    return builder.compile(checkpointer=saver or AgentStoreSaver())


class Approval(TypedDict, total=False):
    request: str
    approved: bool
    log: Annotated[list[str], operator.add]


def approval_graph(saver: AgentStoreSaver) -> Any:
    """draft → review (interrupt: asks a human) → act."""

    def draft(state: Approval) -> Approval:
        return {"log": [f"drafted {state['request']}"]}

    def review(state: Approval) -> Approval:
        answer = interrupt({"question": f"approve {state['request']}?"})
        return {"approved": answer == "yes", "log": [f"reviewed: {answer}"]}

    def act(state: Approval) -> Approval:
        return {"log": ["done" if state["approved"] else "declined"]}

    builder = StateGraph(Approval)
    for name, node in (("draft", draft), ("review", review), ("act", act)):
        builder.add_node(name, node)
    builder.add_edge(START, "draft")
    builder.add_edge("draft", "review")
    builder.add_edge("review", "act")
    builder.add_edge("act", END)
    return builder.compile(checkpointer=saver)
