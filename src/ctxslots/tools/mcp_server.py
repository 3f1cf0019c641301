"""The memory tools over the Model Context Protocol (stdio), with the official ``mcp`` SDK.

``ctxslots [--db PATH] mcp [--scope S]`` runs :func:`serve_stdio`. The tools, their
schemas and their answers are exactly those of :class:`~ctxslots.tools.MemoryTools`:
a bad call comes back as a tool result with ``isError`` set and an ``Error: ...``
text, never as a crashed server.

Needs the ``mcp`` extra (``pip install 'ctxslots[mcp]'``, SDK 2.x).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import __version__
from ..errors import MCPUnavailableError
from .memory_tools import TOOL_SPECS, MemoryTools

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server

__all__ = ["MCPUnavailableError", "make_server", "require_sdk", "serve_stdio"]

INSTRUCTIONS = (
    "Long-term memory for this workspace. Query it before answering questions about the user, "
    "the project or past lessons; store durable facts; reinforce facts that helped, demote "
    "or forget the ones that were wrong. Ids appear as [id:N]."
)


def require_sdk() -> tuple[Any, Any]:
    """The SDK's ``mcp_types`` module and low-level ``Server`` class, imported on first use.

    :raises MCPUnavailableError: The ``mcp`` SDK is not installed.
    """
    try:
        import mcp_types as types
        from mcp.server.lowlevel import Server
    except ImportError as exc:
        raise MCPUnavailableError(
            "the mcp command needs the 'mcp' extra: pip install 'ctxslots[mcp]'"
        ) from exc
    return types, Server


def make_server(tools: MemoryTools) -> Server[Any]:
    """An MCP server offering ``tools``.

    :raises MCPUnavailableError: The ``mcp`` SDK is not installed.
    """
    types, server_class = require_sdk()
    listed = [types.Tool(name=spec.name, description=spec.description,
                         input_schema=spec.input_schema(tools.slots)) for spec in TOOL_SPECS]

    async def on_list_tools(_ctx: Any, _params: Any) -> Any:
        return types.ListToolsResult(tools=listed)

    async def on_call_tool(_ctx: Any, params: Any) -> Any:
        text = tools.dispatch(params.name, params.arguments)
        return types.CallToolResult(content=[types.TextContent(text=text)],
                                    is_error=text.startswith("Error:"))

    server: Server[Any] = server_class("ctxslots", version=__version__,
                                       instructions=INSTRUCTIONS, on_list_tools=on_list_tools,
                                       on_call_tool=on_call_tool)
    return server


async def serve_stdio(tools: MemoryTools) -> None:
    """Serve ``tools`` over this process's stdin and stdout until the client hangs up."""
    server = make_server(tools)
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
