"""The lines of this process's standard input, read on a daemon thread, for :func:`serve_stdio`.

The SDK's stdio transport reads stdin on a worker thread blocked in ``readline``. A
cancelled server waits for that thread, and so does the interpreter at exit: Ctrl-C
(SIGINT) left ``ctxslots mcp`` running until the client sent another line or closed
its end of the pipe. Here a daemon thread reads the lines and hands each one to the
event loop; a cancelled server stops at once, and the thread, still blocked in its
read, ends with the process.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager, suppress

__all__ = ["signals_wake_the_loop", "stdin_lines"]


@asynccontextmanager
async def stdin_lines() -> AsyncIterator[AsyncIterator[str]]:
    """The lines of standard input (UTF-8, an undecodable byte replaced, as the SDK
    reads them) until its end.

    While open, fd 0 points at the null device, so nothing else in the process (a
    plugin, a child process) reads the client's messages; it points at the client's
    pipe again on exit. A read still waiting then is left to the daemon thread.
    """
    import anyio
    import anyio.from_thread

    saved = os.dup(0)
    wire = os.dup(0)  # the thread's own, closed when it ends
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    send, receive = anyio.create_memory_object_stream[str](0)

    async with anyio.from_thread.BlockingPortal() as portal:

        def pump() -> None:
            # RuntimeError: the portal stopped (the server is done); the others: it
            # stopped reading. Either way the lines left are not this server's to read.
            with suppress(RuntimeError, anyio.BrokenResourceError, anyio.ClosedResourceError), \
                    open(wire, encoding="utf-8", errors="replace") as lines:
                for line in lines:
                    portal.call(send.send, line)
                portal.call(send.aclose)  # end of input: the server's stream ends

        threading.Thread(target=pump, name="ctxslots-mcp-stdin", daemon=True).start()
        try:
            async with receive:
                yield receive
        finally:
            os.dup2(saved, 0)
            os.close(saved)


@contextmanager
def signals_wake_the_loop() -> Iterator[None]:
    """While open, a signal the process takes wakes the running event loop, whichever of
    its threads the signal reached.

    Python runs a signal's handler in the main thread, when that thread next runs; the
    event loop's thread sleeps in ``select`` until a file it watches is ready. A SIGINT the
    kernel gives to another thread (the stdin reader, a worker) left the loop asleep and
    Ctrl-C unanswered. The signal's number is written to a socket the loop watches
    (:func:`signal.set_wakeup_fd`), so the loop wakes and the main thread runs the handler.
    Inside a running loop; off the main thread (where signals are not handled, and the
    wakeup cannot be set), or on a loop that watches no sockets (Windows' proactor), it
    does nothing.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    loop = asyncio.get_running_loop()
    reader, writer = socket.socketpair()
    reader.setblocking(False)
    writer.setblocking(False)

    def drain() -> None:
        with suppress(OSError):
            while reader.recv(4096):
                pass

    try:
        loop.add_reader(reader.fileno(), drain)
    except NotImplementedError:
        reader.close()
        writer.close()
        yield
        return
    previous = signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    try:
        yield
    finally:
        signal.set_wakeup_fd(previous)
        loop.remove_reader(reader.fileno())
        reader.close()
        writer.close()
