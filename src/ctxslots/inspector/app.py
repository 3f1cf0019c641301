"""The inspector's web app: a store's memory, a prompt lab, why a fact is in a prompt or not,
the timeline and the store's health, served on this machine (``ctxslots ui``).

It needs Starlette and uvicorn (the ``ui`` extra; the ``mcp`` extra brings them too).
Every page is rendered by jinja2 with escaping on, from templates in the package (no
asset from elsewhere). Handlers ask the store in worker threads (a store is safe to
share between threads), so a page waiting for it keeps no other page waiting; a trial
prompt counts no fact as accessed. Writes go through
:class:`~ctxslots.FactStore`'s own methods, so they are checked as any caller's are: a
refused one shows the store's error beside the form, values kept. A store that cannot
be used now (a server that does not answer, a damaged file) gets its error on a 503 page.
"""

from __future__ import annotations

import ipaddress
import re
import socket
import sys
from collections.abc import Callable
from typing import Any

import jinja2

from .._serving import accept_refusals_in_one_line
from ..errors import InvalidArgumentError, StoreError
from ..stores import FactStore
from ..tools.mcp_server import is_loopback
from .guard import TokenGuard

__all__ = ["bind", "create_app", "serve"]

#: What a token may hold: it travels in an address and a cookie, so no character that
#: either would have to quote; 16 or more so that it cannot be guessed.
_TOKEN = re.compile(r"[A-Za-z0-9_-]{16,}")


def _environment() -> jinja2.Environment:
    from ..prompts import make_environment

    env = make_environment(loader=jinja2.PackageLoader("ctxslots.inspector", "templates"))
    env.autoescape = True  # every inspector page is HTML; the dump partials escape too
    return env


def create_app(store: FactStore, *, token: str, allow_hosts: tuple[str, ...] = (),
               assembler_factory: Callable[[FactStore], Any] | None = None) -> Any:
    """The inspector over ``store``, as an ASGI application behind :class:`.TokenGuard`.

    :param token: The secret every request must carry (16 or more letters, digits,
        ``-`` or ``_``).
    :param allow_hosts: Other names the browser reaches the server by (Host and Origin).
    :param assembler_factory: Builds the :class:`~ctxslots.PromptAssembler` the prompt
        lab and "why" use (default: the built-in sections over ``store``).
    :raises InvalidArgumentError: ``token`` is malformed, or Starlette is not installed.
    """
    if not isinstance(token, str) or not _TOKEN.fullmatch(token):
        raise InvalidArgumentError("the token must be 16 or more letters, digits, '-' or '_'",
                                   field="token", value=None)
    try:
        from starlette.applications import Starlette
        from starlette.exceptions import HTTPException
        from starlette.routing import Route

        from . import _pages
    except ImportError:  # pragma: no cover - the extra is installed in tests
        raise InvalidArgumentError("ctxslots ui needs Starlette and uvicorn: "
                                   "pip install 'ctxslots[ui]'", field="ui", value=None) from None
    if assembler_factory is None:
        from ..assembler import PromptAssembler

        def assembler_factory(s: FactStore) -> Any:
            return PromptAssembler(s)

    pages = _pages.Pages(store, _environment(), assembler_factory(store))
    routes = [
        Route("/", pages.memory),
        Route("/timeline", pages.timeline),
        Route("/fact/{fact_id}", pages.fact),
        Route("/fact/{fact_id}/{action}", pages.change, methods=["POST"]),
        Route("/lab", pages.lab),
        Route("/why", pages.why),
        Route("/health", pages.health),
    ]
    handlers = {StoreError: pages.unavailable, HTTPException: pages.no_page}
    return TokenGuard(Starlette(routes=routes, exception_handlers=handlers), token,
                      allow_hosts)


def _unspecified(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return False


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on ``host``:``port`` (0: a free port).

    :raises OSError: The address cannot be bound.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.listen(128)  # connections made once the address is printed wait for the server
    return sock


async def serve(store: FactStore, *, host: str = "127.0.0.1", port: int = 0, token: str,
                token_given: bool = False, allow_hosts: tuple[str, ...] = (),
                assembler_factory: Callable[[FactStore], Any] | None = None,
                announce: Callable[[str], None] | None = None) -> None:
    """Serve the inspector until stopped; announce its address with the token once listening.

    :param token_given: The token was chosen by the caller, not made up here: needed to
        listen on an address other than loopback.
    :param announce: Called with the address to open (default: printed to stderr).
    :raises InvalidArgumentError: ``host`` is not loopback and the token was not given.
    :raises OSError: The address cannot be bound.
    """
    if not is_loopback(host) and not token_given:
        raise InvalidArgumentError(f"serving on {host} (not loopback) needs --token",
                                   field="host", value=host)
    import uvicorn

    named = () if _unspecified(host) else (host,)  # 0.0.0.0 names no host
    app = create_app(store, token=token, allow_hosts=(*named, *allow_hosts),
                     assembler_factory=assembler_factory)
    sock = bind(host, port)
    bound_host, bound_port = sock.getsockname()[:2]
    if not is_loopback(bound_host) and not token_given:  # a name that stands for another address
        sock.close()
        raise InvalidArgumentError(f"serving on {host} ({bound_host}, not loopback) needs "
                                   "--token", field="host", value=host)
    shown = f"[{host}]" if ":" in host else host
    address = f"http://{shown}:{bound_port}/?token={token}"
    if announce is None:
        print(f"Inspector at {address}", file=sys.stderr, flush=True)
    else:
        announce(address)
    # No log_config: uvicorn's own would give its loggers handlers of their own and stop
    # them propagating, taking its records from the application's logging. The level
    # keeps the per-request access lines, which carry the token, out of the logs.
    config = uvicorn.Config(app, log_config=None, log_level="warning", lifespan="off")
    async with accept_refusals_in_one_line():
        await uvicorn.Server(config).serve(sockets=[sock])

