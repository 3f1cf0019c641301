"""What the HTTP servers ctxslots runs (the MCP server, the inspector) say when the
system refuses them a connection.

Out of file descriptors (``ulimit -n``), asyncio logs a traceback for every connection
it cannot accept, and tries every waiting one again at once: a second at the limit
wrote tens of thousands of lines to stderr. The server goes on serving all the same
(each connection waits for a descriptor); while it runs, such a refusal is one warning
line on the ``ctxslots.server`` logger, at most once every :data:`WARN_EVERY_S` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import math
import time
from collections.abc import AsyncIterator
from typing import Any

__all__ = ["WARN_EVERY_S", "accept_refusals_in_one_line"]

_log = logging.getLogger("ctxslots.server")

#: Seconds between two warnings of refused connections.
WARN_EVERY_S = 10.0

#: The errors asyncio meets accepting a connection when a resource runs out.
_OUT_OF = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})

#: Seconds after a refusal by which asyncio has tried again (it waits one second).
_RETRIED_S = 1.5


@contextlib.asynccontextmanager
async def accept_refusals_in_one_line() -> AsyncIterator[None]:
    """Inside the block, the running loop reports a connection it could not accept for
    want of descriptors or memory as one warning line (at most once every
    :data:`WARN_EVERY_S` seconds), and says nothing of the retries still due when the
    server stops (the block then ends once they have run, a second at most); everything
    else goes to the loop's handler as before, which is put back afterwards."""
    loop = asyncio.get_running_loop()
    before = loop.get_exception_handler()
    warned = refused = -math.inf

    def handle(running: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        nonlocal warned, refused
        exc = context.get("exception")
        callback = getattr(context.get("handle"), "_callback", None)
        if getattr(callback, "__name__", "") == "_start_serving" and \
                isinstance(exc, (OSError, ValueError)):
            return  # a retry of a refusal, due after the server closed its socket
        if isinstance(exc, OSError) and exc.errno in _OUT_OF and \
                "accept" in str(context.get("message", "")):
            now = refused = time.monotonic()
            if now - warned >= WARN_EVERY_S:
                warned = now
                _log.warning("cannot accept connections for now: %s; they wait until the "
                             "server can take them (for too many open files, raise "
                             "`ulimit -n`)", exc.strerror or exc)
            return
        if before is None:
            running.default_exception_handler(context)
        else:
            before(running, context)

    loop.set_exception_handler(handle)
    try:
        yield
        # Each refusal left asyncio a retry, due a second later, which fails once the
        # server has closed its socket: those fail here, with the handler still in place.
        if (due := refused + _RETRIED_S - time.monotonic()) > 0:
            await asyncio.sleep(due)
    finally:
        loop.set_exception_handler(before)
