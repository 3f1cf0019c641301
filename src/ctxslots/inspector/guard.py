"""Who may use the inspector: a request that names this server, and carries its token.

The checks of Host and Origin are the MCP server's (:class:`~ctxslots.tools.mcp_server.HostGuard`:
a page elsewhere cannot reach the inspector through a name it points at 127.0.0.1), and
both answer 403 here. The token comes in the address ``ctxslots ui`` prints
(``?token=...``, as a notebook server's does); a request that carries it gets a cookie
holding it (``HttpOnly``, ``SameSite=Strict``: another site's page cannot send it), so
the links and forms of the pages need not repeat it.
"""

from __future__ import annotations

import hmac
import urllib.parse
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from http.cookies import SimpleCookie
from typing import Any

import attrs

from ..tools.mcp_server import HostGuard

__all__ = ["TokenGuard", "cookie_name"]

_Scope = MutableMapping[str, Any]
_Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
_Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
_ASGIApp = Callable[[_Scope, _Receive, _Send], Awaitable[None]]


def cookie_name(port: int) -> str:
    """The cookie that holds the token of the inspector on ``port`` (cookies ignore ports,
    so two inspectors on one host keep their own)."""
    return f"ctxslots_ui_{port}"


async def _refuse(send: _Send, message: str) -> None:
    body = f"403 Forbidden: {message}\n".encode()
    await send({"type": "http.response.start", "status": 403, "headers": [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def _given(scope: _Scope, name: str) -> tuple[str, bool]:
    """The token the request carries, and whether it came in the address."""
    query = urllib.parse.parse_qs(scope.get("query_string", b"").decode("latin-1"))
    if query.get("token"):
        return query["token"][0], True
    headers = {k.lower(): v for k, v in scope.get("headers") or ()}
    cookies: SimpleCookie = SimpleCookie()
    try:
        cookies.load(headers.get(b"cookie", b"").decode("latin-1"))
    except Exception:  # noqa: BLE001 - a malformed cookie header carries no token
        return "", False
    morsel = cookies.get(name)
    return ("" if morsel is None else morsel.value), False


@attrs.frozen
class TokenGuard:
    """ASGI middleware: 403 unless the request names this server (Host, Origin) and
    carries the token, in the address or in the cookie it sets.

    Attributes:
        app: The application it guards.
        token: The secret (compared in constant time).
        names: Host names accepted besides the address the connection arrived at.
    """

    app: _ASGIApp
    token: str = attrs.field(repr=False)
    names: Iterable[str] = ()

    async def __call__(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
        """Pass an allowed request (and every non-HTTP event) on; refuse the others."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refused = HostGuard(self.app, list(self.names)).check(scope)
        if refused is not None:
            await _refuse(send, refused[1])
            return
        port = int((scope.get("server") or ("", 0))[1] or 0)
        given, in_address = _given(scope, cookie_name(port))
        if not hmac.compare_digest(given.encode("utf-8", "replace"), self.token.encode()):
            await _refuse(send, "open the address with the token that ctxslots ui printed")
            return
        if not in_address:
            await self.app(scope, receive, send)
            return
        cookie = (f"{cookie_name(port)}={self.token}; Path=/; HttpOnly; SameSite=Strict"
                  ).encode()

        async def send_with_cookie(message: MutableMapping[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", ()), (b"set-cookie", cookie)]
            await send(message)

        await self.app(scope, receive, send_with_cookie)
