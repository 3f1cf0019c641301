"""Tools an agent calls on its own memory, their schemas, a dispatcher, and an MCP server.

- :class:`MemoryTools`: the tools bound to a store and a scope, with
  ``openai_tools()``, ``anthropic_tools()`` and ``dispatch(name, arguments)``.
- :func:`age_in_words`: how results show a fact's age.
- :mod:`ctxslots.tools.mcp_server`: the same tools over MCP (``ctxslots mcp``;
  needs the ``mcp`` extra).
"""

from __future__ import annotations

from ._age import age_in_words
from ._spec import ArgumentError, Param, ToolSpec
from .memory_tools import TOOL_SPECS, MemoryTools

__all__ = ["TOOL_SPECS", "ArgumentError", "MemoryTools", "Param", "ToolSpec", "age_in_words"]
