"""The memory tools over the Model Context Protocol, with the official ``mcp`` SDK.

``ctxslots [--db PATH] mcp [--scope S]`` runs :func:`serve_stdio`;
``ctxslots mcp --transport http`` runs :func:`serve_http`, the streamable-HTTP
transport at ``/mcp``. The tools, their schemas and their answers are exactly those
of :class:`~ctxslots.tools.MemoryTools`, listed with a title and MCP's hints
(read-only, destructive, idempotent): a bad call comes back as a tool result with
``isError`` set and an ``Error: ...`` text, never as a crashed server. Tool calls
run on a worker thread, one at a time, so a slow store never stalls the event loop
that serves the other sessions.

Needs the ``mcp`` extra (``pip install 'ctxslots[mcp]'``, SDK 2.x).
"""

from __future__ import annotations

import hmac
import socket
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from typing import TYPE_CHECKING, Any

import attrs

from .. import __version__
from ..errors import MCPUnavailableError
from .memory_tools import MemoryTools

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server

__all__ = ["BearerTokenGuard", "MCPUnavailableError", "make_server", "require_sdk", "serve_http",
           "serve_stdio"]

INSTRUCTIONS = (
    "Long-term memory for this workspace. Query it before answering questions about the user, "
    "the project or past lessons; store durable facts; reinforce facts that helped, demote "
    "or forget the ones that were wrong. Ids appear as [id:N]."
)

#: Where the streamable-HTTP transport answers.
HTTP_PATH = "/mcp"

_Scope = MutableMapping[str, Any]
_Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
_Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
_ASGIApp = Callable[[_Scope, _Receive, _Send], Awaitable[None]]


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
    import anyio
    import anyio.to_thread

    listed = [types.Tool(name=spec.name, title=spec.title or None, description=spec.description,
                         input_schema=spec.input_schema(tools.slots),
                         annotations=types.ToolAnnotations.model_validate(spec.annotations()))
              for spec in tools.specs]
    # One call at a time: the store is one connection, and calls keep their order.
    one_at_a_time = anyio.CapacityLimiter(1)

    async def on_list_tools(_ctx: Any, _params: Any) -> Any:
        return types.ListToolsResult(tools=listed)

    async def on_call_tool(_ctx: Any, params: Any) -> Any:
        text = await anyio.to_thread.run_sync(tools.dispatch, params.name, params.arguments,
                                              limiter=one_at_a_time)
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


@attrs.frozen
class BearerTokenGuard:
    """ASGI middleware answering 401 to any HTTP request without ``Authorization: Bearer <token>``.

    Attributes:
        app: The application it guards.
        token: The shared secret (compared in constant time).
    """

    app: _ASGIApp
    token: str = attrs.field(repr=False)

    async def __call__(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
        """Pass an authorized request (and every non-HTTP event) on; refuse the others."""
        if scope["type"] == "http":
            given = dict(scope.get("headers") or ()).get(b"authorization", b"")
            if not hmac.compare_digest(given, b"Bearer " + self.token.encode("utf-8")):
                body = b'{"error": "a bearer token is required"}'
                await send({"type": "http.response.start", "status": 401, "headers": [
                    (b"content-type", b"application/json"), (b"www-authenticate", b"Bearer"),
                    (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


def is_loopback(host: str) -> bool:
    """Whether ``host`` names this machine only (127.0.0.0/8, ``::1`` or ``localhost``)."""
    return host == "localhost" or host == "::1" or host.startswith("127.")


async def serve_http(tools: MemoryTools, *, host: str = "127.0.0.1", port: int = 8765,
                     token: str | None = None) -> None:
    """Serve ``tools`` over MCP's streamable HTTP at ``http://HOST:PORT/mcp`` until stopped.

    On a loopback host the SDK's DNS-rebinding protection is on (only loopback
    ``Host`` and ``Origin`` headers are accepted). The address served, with the
    port the system chose when ``port`` is 0, is written to stderr once listening.

    :param token: When given, every request must carry ``Authorization: Bearer <token>``.
    """
    import uvicorn

    app: _ASGIApp = make_server(tools).streamable_http_app(streamable_http_path=HTTP_PATH,
                                                           host=host)
    if token:
        app = BearerTokenGuard(app, token)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)  # connections made once the address is printed wait for the server
    bound_port = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    print(f"Serving MCP at http://{shown}:{bound_port}{HTTP_PATH}", file=sys.stderr, flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve(sockets=[sock])
