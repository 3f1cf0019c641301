"""Memory for the agent frameworks people build with, one module per framework.

- :mod:`ctxslots.integrations.openai_agents`: the OpenAI Agents SDK
  (``pip install 'ctxslots[openai-agents]'``).
- :mod:`ctxslots.integrations.pydantic_ai`: pydantic-ai (``ctxslots[pydantic-ai]``).
- :mod:`ctxslots.integrations.langgraph`: LangGraph (``ctxslots[langgraph]``).

This package imports no framework: :class:`Memory` (the store, assembler and
flusher a framework's agent uses, and how failures are handled) and
:class:`MemoryContext` (whose run it is) are shared by all three. Nothing in the
rest of ctxslots imports this package. See ``docs/integrations.md``.
"""

from __future__ import annotations

from ._memory import Memory, MemoryContext, RunIdentity, identity_of

__all__ = ["Memory", "MemoryContext", "RunIdentity", "identity_of"]
