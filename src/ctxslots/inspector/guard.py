"""Who may use the inspector: a request that names this server, and carries its token.

The checks of Host and Origin are the MCP server's (:class:`~ctxslots.tools.mcp_server.HostGuard`:
a page elsewhere cannot reach the inspector through a name it points at 127.0.0.1), and
both answer 403 here. The token comes in the address ``ctxslots ui`` prints
(``?token=...``, as a notebook server's does); a request that carries it gets a cookie
holding it (``HttpOnly``, ``SameSite=Strict``: another site's page cannot send it), so
the links and forms of the pages need not repeat it. Cookies ignore ports, so a page
served on another port of this host would send it too: here ``Origin`` must also name
this server's port, and a change (any method but GET and HEAD) whose ``Sec-Fetch-Site``
says another page sent it is refused.
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


#: What ``Sec-Fetch-Site`` says of a request the inspector's own pages (or the address
#: bar) made; any other value is a page elsewhere, another port of this host included.
_OWN_FETCH = (b"same-origin", b"none")


def _from_another_page(scope: _Scope) -> bool:
    """Whether a request that changes something says a browser sent it from a page
    other than the inspector's (a second check besides ``Origin``)."""
    if scope.get("method", "GET") in ("GET", "HEAD"):
        return False
    headers = {k.lower(): v for k, v in scope.get("headers") or ()}
    site = headers.get(b"sec-fetch-site")
    return site is not None and site.strip().lower() not in _OWN_FETCH


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
        refused = HostGuard(self.app, list(self.names), same_port=True).check(scope)
        if refused is not None:
            await _refuse(send, refused[1])
            return
        if _from_another_page(scope):
            await _refuse(send, "a change must come from the inspector's own pages")
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
