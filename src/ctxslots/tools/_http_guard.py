"""Who may talk to the MCP server over HTTP: the address it is bound to, named in Host and
Origin, and the bearer token.

A web page can make a browser send requests to a server on this machine by pointing a
name it controls at 127.0.0.1 (DNS rebinding); the browser then sends that name in
``Host`` and its own site in ``Origin``. So every request must name the server the way
it was reached: ``Host`` is the address the connection arrived at (any spelling of it,
``127.1`` for ``127.0.0.1``), the ``--host`` the server was started with,
``localhost`` when that is what the address is, or a name given with ``--allow-host``,
with the port the server listens on; ``Origin``, when a browser sends one, names one of
the same hosts. A request that names another is refused, token or not.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import socket
import urllib.parse
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

import attrs

__all__ = ["BEARER", "BearerTokenGuard", "HostGuard", "address_of", "bearer_token", "guarded",
           "is_loopback", "refuse", "same_address"]

_Scope = MutableMapping[str, Any]
_Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
_Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
_ASGIApp = Callable[[_Scope, _Receive, _Send], Awaitable[None]]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

#: The addresses ``localhost`` stands for.
_LOCALHOST = (ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1"))


def address_of(host: str) -> IPAddress | None:
    """The IP address ``host`` spells (``127.1`` and ``0x7f.1`` too, as the socket calls
    read them), or ``None`` for a name. Never looks a name up."""
    text = host.strip().strip("[]").split("%", 1)[0]
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        try:
            address = ipaddress.IPv4Address(socket.inet_aton(text))
        except (OSError, ValueError):
            return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def is_loopback(host: str) -> bool:
    """Whether ``host`` is an address of this machine only (all of 127.0.0.0/8 in any
    spelling, ``::1``) or ``localhost``; a name is not, whatever it resolves to."""
    if host.strip().lower().rstrip(".") == "localhost":
        return True
    address = address_of(host)
    return address is not None and address.is_loopback


def same_address(name: str, address: IPAddress) -> bool:
    """Whether the host ``name`` (from a header) is ``address``: a spelling of it, or
    ``localhost`` for the addresses localhost stands for."""
    if name == "localhost":
        return address in _LOCALHOST
    return address_of(name) == address


def _split_host(value: str, default_port: int) -> tuple[str, int] | None:
    """``(name, port)`` of a ``Host`` value or an origin's netloc (lower case, no trailing
    dot), or ``None`` when it cannot be read."""
    try:
        parts = urllib.parse.urlsplit(f"//{value}")
        port = parts.port
    except ValueError:
        return None
    name = (parts.hostname or "").rstrip(".")
    return (name, default_port if port is None else port) if name else None


#: The header of a 401 that asks for a bearer token.
BEARER = ((b"www-authenticate", b"Bearer"),)


def bearer_token(scope: _Scope) -> bytes | None:
    """The token of a request's ``Authorization: Bearer <token>`` header, or ``None``
    without one. The scheme is read in any case (RFC 7235) and the token without the
    spaces around it, so every guard takes the same headers."""
    given: bytes = dict(scope.get("headers") or ()).get(b"authorization", b"")
    parts = given.split(None, 1)
    if len(parts) != 2 or parts[0].lower() != b"bearer":
        return None
    return parts[1].strip()


async def refuse(send: _Send, status: int, message: str,
                 headers: tuple[tuple[bytes, bytes], ...] = ()) -> None:
    """Answer ``status`` with ``{"error": message}`` as JSON (and any other ``headers``)."""
    body = json.dumps({"error": message}).encode()
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"), *headers,
        (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def _names(names: Iterable[str]) -> frozenset[str]:
    return frozenset(n.strip().lower().rstrip(".") for n in names if n.strip())


@attrs.frozen
class HostGuard:
    """ASGI middleware refusing a request whose ``Host`` or ``Origin`` names another site
    (421 and 403): see the module's notes.

    Attributes:
        app: The application it guards.
        names: Host names accepted besides the address the connection arrived at: the
            ``--host`` given and every ``--allow-host``, in lower case.
    """

    app: _ASGIApp
    names: frozenset[str] = attrs.field(converter=_names)
    #: Whether ``Origin`` must also name the server's port. A page on another port of
    #: this host is another site, but a browser sends it this one's cookies (cookies
    #: ignore ports): a server that trusts a cookie says so. The MCP server, whose
    #: clients carry a bearer token, accepts a web client on another port of this host.
    same_port: bool = False

    async def __call__(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
        """Pass a request that names this server (and every non-HTTP event) on."""
        if scope["type"] == "http":
            refused = self.check(scope)
            if refused is not None:
                await refuse(send, *refused)
                return
        await self.app(scope, receive, send)

    def check(self, scope: _Scope) -> tuple[int, str] | None:
        """``None`` when the request may pass, else the status and the reason."""
        server = scope.get("server") or ("", 0)
        local, port = address_of(str(server[0])), int(server[1] or 0)
        headers = {k.lower(): v for k, v in scope.get("headers") or ()}
        host = _split_host(headers.get(b"host", b"").decode("latin-1"), 80)
        if host is None or host[1] != port or not self._ours(host[0], local):
            return 421, "the Host header names another server"
        origin = headers.get(b"origin")
        if origin is not None and not self._our_origin(origin.decode("latin-1"), local, port):
            return 403, "the Origin header names another site"
        return None

    def _ours(self, name: str, local: IPAddress | None) -> bool:
        return name in self.names or (local is not None and same_address(name, local))

    def _our_origin(self, origin: str, local: IPAddress | None, port: int) -> bool:
        scheme, _, netloc = origin.strip().partition("://")
        scheme = scheme.lower()
        if scheme not in ("http", "https"):
            return False  # "null" (a sandboxed page, a file) or anything else
        found = _split_host(netloc, 443 if scheme == "https" else 80)
        return (found is not None and self._ours(found[0], local)
                and (not self.same_port or found[1] == port))


@attrs.frozen
class BearerTokenGuard:
    """ASGI middleware answering 401 to any HTTP request without ``Authorization: Bearer <token>``
    (read by :func:`bearer_token`).

    Attributes:
        app: The application it guards.
        token: The shared secret (compared in constant time).
    """

    app: _ASGIApp
    token: str = attrs.field(repr=False)

    async def __call__(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
        """Pass an authorized request (and every non-HTTP event) on; refuse the others."""
        if scope["type"] == "http":
            given = bearer_token(scope)
            if given is None or not hmac.compare_digest(given, self.token.encode("utf-8")):
                await refuse(send, 401, "a bearer token is required", BEARER)
                return
        await self.app(scope, receive, send)


def guarded(app: _ASGIApp, *, host: str, allow_hosts: Iterable[str],
            token: str | None) -> _ASGIApp:
    """``app`` behind the host check, then the token check when there is a token."""
    inner: _ASGIApp = BearerTokenGuard(app, token) if token else app
    given = address_of(host)
    names = [] if given is not None and given.is_unspecified else [host]  # 0.0.0.0 names no host
    return HostGuard(inner, [*names, *allow_hosts])
