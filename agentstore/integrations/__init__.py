"""Integrations with agent frameworks, each behind an optional extra.

* ``agentstore.integrations.langgraph`` — ``AgentstoreSaver``, a LangGraph
  checkpointer (``pip install "agentstore[langgraph]"``;
  docs/integrations/langgraph.md).

Nothing here is imported by agentstore itself: the core app runs without the
extras installed.
"""
