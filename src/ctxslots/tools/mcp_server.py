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

import socket
import sys
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from contextlib import suppress
from typing import TYPE_CHECKING, Any, cast

import attrs

from .. import __version__
from .._serving import accept_refusals_in_one_line
from ..errors import InvalidArgumentError, MCPUnavailableError
from ._http_guard import BearerTokenGuard, HostGuard, guarded, is_loopback
from .memory_tools import MemoryTools
from .token_users import SCOPE_KEY, TokenUserGuard, TokenUsers, check_token

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server

__all__ = ["BearerTokenGuard", "HostGuard", "MCPUnavailableError", "is_loopback", "make_server",
           "require_sdk", "serve_http", "serve_stdio"]

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


def make_server(tools: MemoryTools, *, per_user: bool = False) -> Server[Any]:
    """An MCP server offering ``tools``.

    :param per_user: Each call runs as the user its HTTP request was authorized as
        (:class:`~.token_users.TokenUserGuard` names it): ``tools`` with that user; a
        call without one is refused.
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

    users: dict[str, MemoryTools] = {}

    def tools_of(ctx: Any) -> MemoryTools | None:
        if not per_user:
            return tools
        request = getattr(ctx, "request", None)
        user = None if request is None else request.scope.get(SCOPE_KEY)
        if user is None:
            return None
        if user not in users:
            users[user] = attrs.evolve(tools, user=user)
        return users[user]

    async def on_call_tool(ctx: Any, params: Any) -> Any:
        chosen = tools_of(ctx)
        if chosen is None:
            text = "Error: this call was not authorized as a user"
        else:
            text = await anyio.to_thread.run_sync(chosen.dispatch, params.name,
                                                  params.arguments, limiter=one_at_a_time)
        return types.CallToolResult(content=[types.TextContent(text=text)],
                                    is_error=text.startswith("Error:"))

    server: Server[Any] = server_class("ctxslots", version=__version__,
                                       instructions=INSTRUCTIONS, on_list_tools=on_list_tools,
                                       on_call_tool=on_call_tool)
    return server


async def serve_stdio(tools: MemoryTools) -> None:
    """Serve ``tools`` over this process's stdin and stdout until the client hangs up,
    or until cancelled (Ctrl-C), which stops it at once, whether or not the client
    is writing.

    A line that is not a JSON-RPC message (invalid JSON, a lone surrogate escape,
    nesting too deep for the parser) is answered with a JSON-RPC error: ``-32700``
    (parse error) or ``-32600`` (invalid request), as the HTTP transport answers; the
    SDK's stdio reader alone passes it on unanswered. The error carries the request's
    ``id`` where Python's own parser reads one (a lone surrogate escape is JSON to it),
    so the client's call fails at once instead of waiting for an answer; ``null``
    otherwise.
    """
    types, _ = require_sdk()
    server = make_server(tools)
    from mcp.shared.message import SessionMessage
    from pydantic import ValidationError

    from ._stdin import signals_wake_the_loop

    def refusal(exc: Exception) -> Any:
        parse = not isinstance(exc, ValidationError) or any(
            e.get("type") == "json_invalid" for e in exc.errors())
        error = (types.ErrorData(code=types.PARSE_ERROR, message="Parse error") if parse
                 else types.ErrorData(code=types.INVALID_REQUEST, message="Invalid Request"))
        return SessionMessage(types.JSONRPCError(jsonrpc="2.0", id=_request_id(exc),
                                                 error=error))

    with signals_wake_the_loop():
        await _serve_lines(server, refusal)


async def _serve_lines(server: Any, refusal: Callable[[Exception], Any]) -> None:
    """Serve stdin's lines (see :func:`serve_stdio`), each unreadable one refused."""
    import anyio
    from mcp.server.stdio import stdio_server

    from ._stdin import stdin_lines

    # The SDK only iterates its stdin's lines; given ours, it leaves fd 0 to stdin_lines.
    async with stdin_lines() as lines, \
            stdio_server(stdin=cast(Any, lines)) as (read_stream, write_stream):
        send, receive = anyio.create_memory_object_stream[Any](0)

        async def answer_unreadable_lines() -> None:
            async with send:
                async for item in read_stream:
                    if isinstance(item, Exception):
                        await write_stream.send(refusal(item))
                    else:
                        await send.send(item)

        try:
            async with anyio.create_task_group() as group:
                group.start_soon(answer_unreadable_lines)
                await server.run(receive, write_stream, server.create_initialization_options())
        finally:
            # While serving, fd 1 points at stderr; what a plugin printed is still in
            # sys.stdout's buffer, which would reach the client's pipe once fd 1 is back.
            with suppress(OSError, ValueError):
                sys.stdout.flush()


def _request_id(exc: Exception) -> int | str | None:
    """The id of the request on a line the SDK refused, when the line holds one.

    The SDK's parser refuses a lone surrogate escape (``"\\ud800"``, which a JavaScript
    client writes for a string cut inside an emoji); an error answered with ``id`` null
    matches no call, and the client waits for its answer until it times out. Python's
    parser reads such a line, and its id.
    """
    import json

    from pydantic import ValidationError

    if not isinstance(exc, ValidationError):
        return None
    for error in exc.errors(include_url=False):
        message = error.get("input")  # the line as read, or the object parsed from it
        if error.get("type") == "json_invalid" and isinstance(message, str):
            try:
                message = json.loads(message)
            except (ValueError, RecursionError):
                return None
        if isinstance(message, dict) and isinstance(message.get("method"), str):
            found = message.get("id")
            if isinstance(found, str) or (isinstance(found, int) and not isinstance(found, bool)):
                return found
            return None
    return None


@attrs.frozen
class EndedStreams:
    """ASGI middleware ending a response its application left open: the SDK's event
    stream (a client's standing ``GET``, a call's answer) returns without its last
    chunk when the server stops, which uvicorn logs as an error ("ASGI callable
    returned without completing response") on every stop with a client connected.

    Attributes:
        app: The application whose responses it ends.
    """

    app: _ASGIApp

    async def __call__(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
        """Run the application; send the last (empty) chunk of a response it started
        and did not end."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        open_response = [False]

        async def tracked(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                open_response[0] = True
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                open_response[0] = False
            await send(message)

        await self.app(scope, receive, tracked)
        if open_response[0]:
            await send({"type": "http.response.body", "body": b"", "more_body": False})


async def serve_http(tools: MemoryTools, *, host: str = "127.0.0.1", port: int = 8765,
                     token: str | None = None, allow_hosts: Iterable[str] = (),
                     users: TokenUsers | None = None) -> None:
    """Serve ``tools`` over MCP's streamable HTTP at ``http://HOST:PORT/mcp`` until stopped.

    Every request must name this server in ``Host`` (and in ``Origin``, when it has one):
    the address it was bound to, ``host`` as given, or a name of ``allow_hosts``, with
    the port it listens on; any other is refused, token or not (DNS rebinding; see
    :mod:`._http_guard`). The address served, with the port the system chose when
    ``port`` is 0, is written to stderr once listening.

    :param token: When given, every request must carry ``Authorization: Bearer <token>``
        (at least 16 characters, no space, control or invisible character: a short one
        is guessed).
    :param allow_hosts: Other names clients reach the server by (a DNS name, a proxy).
    :param users: One token per user instead of one shared ``token``: each request must
        carry one of them, and its tool calls run as that token's user.
    :raises InvalidArgumentError: The address bound is not a loopback one and there is no
        ``token`` or ``users``, or both are given, or ``token`` is short (a ``ValueError``).
    :raises InvalidFactError: A user of ``users`` is one the store refuses (too long...).
    """
    if token and users is not None:
        raise InvalidArgumentError("give one shared token or a token per user, not both",
                                   field="token", value=None)
    if token is not None:
        check_token(token)
    if users is not None:
        for name in users.users:  # each is a user the store takes, before any request
            tools.store.limits.owner(name, "user")
    import uvicorn
    from mcp.server.transport_security import TransportSecuritySettings

    # The SDK's own check knows three spellings of loopback; ours checks every address.
    app: _ASGIApp = make_server(tools, per_user=users is not None).streamable_http_app(
        streamable_http_path=HTTP_PATH, host=host,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    bound_host, bound_port = sock.getsockname()[:2]
    if not token and users is None and not is_loopback(bound_host):
        sock.close()
        raise InvalidArgumentError(f"serving on {host} ({bound_host}, not loopback) needs a "
                                   "token", field="token", value=None)
    sock.listen(128)  # connections made once the address is printed wait for the server
    app = guarded(EndedStreams(app if users is None else TokenUserGuard(app, users)),
                  host=host, allow_hosts=allow_hosts, token=token)
    shown = f"[{host}]" if ":" in host else host
    print(f"Serving MCP at http://{shown}:{bound_port}{HTTP_PATH}", file=sys.stderr, flush=True)
    # No log_config: uvicorn's own would give its loggers handlers of their own (the
    # access log's on stdout) and stop them propagating, taking its records from the
    # application's logging; the level keeps per-request access lines out.
    config = uvicorn.Config(app, log_config=None, log_level="warning", lifespan="on")
    async with accept_refusals_in_one_line():
        await uvicorn.Server(config).serve(sockets=[sock])
