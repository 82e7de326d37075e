"""Integrations: agent frameworks keeping their memory in agentstore.

Each module needs its framework, installed through an optional extra, and
imports it at module level — import the module you use, not this package:

* :mod:`agentstore.integrations.openai_agents` — ``pip install "agentstore[openai-agents]"``:
  ``AgentStoreSession``, a session for the OpenAI Agents SDK's ``Runner``
  (docs/integrations/openai-agents.md).
* :mod:`agentstore.integrations.pydantic_ai` — ``pip install "agentstore[pydantic-ai]"``:
  ``MessageHistory``, Pydantic AI's ``message_history`` kept in a session
  (docs/integrations/pydantic-ai.md).
* :mod:`agentstore.integrations.langgraph` — ``pip install "agentstore[langgraph]"``:
  ``AgentStoreSaver``, a LangGraph checkpointer (docs/integrations/langgraph.md).

Their shared parts need no framework: :mod:`~agentstore.integrations.conversation`
(a conversation as a log session), :mod:`~agentstore.integrations.errors` (the
database errors every integration maps to agentstore's) and
:mod:`~agentstore.db.thread`. Every door checks its input by the
REST API's rules (``agentstore.validation``) before anything is written.

Nothing here is imported by agentstore itself: the core app runs without the
extras installed.
"""

from __future__ import annotations
