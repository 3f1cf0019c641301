"""Tools an agent calls on its own memory, their schemas, a dispatcher, and an MCP server.

- :class:`MemoryTools`: the tools bound to a store, a user, an agent and a scope, with
  ``openai_tools(strict=...)``, ``responses_tools()``,
  ``anthropic_tools()`` and ``dispatch(name, arguments)``.
- :func:`openai_tools`, :func:`responses_tools`, :func:`anthropic_tools`: the schemas
  without a store.
- :data:`TOOL_SPECS`: the one definition per tool that schemas and checks come from
  (:data:`DELETE_SPEC` too, offered only where erasing is allowed; :func:`tool_specs`).
- :mod:`ctxslots.tools.token_users`: a bearer token per user, for one MCP server
  serving a team.
- :func:`age_in_words`: how results show a fact's age.
- :class:`InvalidToolArgumentsError`: what a tool method called from Python raises for
  arguments that do not fit its definition (``ArgumentError``, its former name, still works).
- :mod:`ctxslots.tools.mcp_server`: the same tools over MCP (``ctxslots mcp``;
  needs the ``mcp`` extra).
"""

from __future__ import annotations

from ..errors import InvalidToolArgumentsError
from ._age import age_in_words
from ._spec import ArgumentError, Param, ToolSpec
from .memory_tools import (
    DEFAULT_SLOTS,
    DELETE_SPEC,
    TOOL_SPECS,
    MemoryTools,
    anthropic_tools,
    openai_tools,
    responses_tools,
    tool_specs,
)

__all__ = [
    "DEFAULT_SLOTS",
    "DELETE_SPEC",
    "TOOL_SPECS",
    "ArgumentError",
    "InvalidToolArgumentsError",
    "MemoryTools",
    "Param",
    "ToolSpec",
    "age_in_words",
    "anthropic_tools",
    "openai_tools",
    "responses_tools",
    "tool_specs",
]
