"""The servers ctxslots runs (the MCP server over HTTP, the inspector) leave the
application's logging as it was: what their HTTP server logs reaches the application's
own handlers."""

from __future__ import annotations

import logging
import queue
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest

pytest.importorskip("uvicorn")

from ctxslots import FactStore

TOKEN = "a-token-for-the-logging-tests"
_UVICORN = ("uvicorn", "uvicorn.error", "uvicorn.access", "uvicorn.asgi")


@pytest.fixture(autouse=True)
def _uvicorn_loggers_restored() -> Iterator[None]:
    """Whatever a server did to uvicorn's loggers is undone for the next test."""
    kept = {name: (list(lg.handlers), lg.propagate, lg.level)
            for name in _UVICORN for lg in [logging.getLogger(name)]}
    yield
    for name, (handlers, propagate, level) in kept.items():
        lg = logging.getLogger(name)
        lg.handlers[:] = handlers
        lg.propagate, lg.level = propagate, level


@contextmanager
def _running(serve: Callable[[], Awaitable[None]]) -> Iterator[None]:
    """Run ``serve`` on an event loop of its own thread until the block ends."""
    stop = threading.Event()
    failures: list[BaseException] = []

    async def main() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(serve)
            await anyio.to_thread.run_sync(stop.wait)
            group.cancel_scope.cancel()

    def run() -> None:
        try:
            anyio.run(main)
        except BaseException as exc:  # reported by the test
            failures.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(60)
    assert not failures


def _send_garbage(port: int) -> bytes:
    """Send a line that is no HTTP request and read the server's whole answer (the server
    logs the bad request before it answers)."""
    with socket.create_connection(("127.0.0.1", port), timeout=60) as conn:
        conn.sendall(b"\x00\x01 this is not HTTP\r\n\r\n")
        answer = b""
        while chunk := conn.recv(4096):
            answer += chunk
    return answer


def _server_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name.startswith("uvicorn") and r.levelno >= logging.WARNING]


def test_the_inspector_leaves_the_applications_logging_alone(tmp_path: Path, caplog):
    """The inspector's HTTP server adds no handler to its loggers and lets their records
    propagate: a bad request's warning reaches the application's handler (here caplog's)."""
    from ctxslots.inspector.app import serve

    caplog.set_level(logging.DEBUG)
    addresses: queue.Queue[str] = queue.Queue()
    with FactStore(str(tmp_path / "m.db")) as store, \
            _running(lambda: serve(store, token=TOKEN, announce=addresses.put)):
        port = int(addresses.get(timeout=60).split(":")[2].split("/")[0])
        assert b"400 Bad Request" in _send_garbage(port)
        assert ["Invalid HTTP request received."] == _server_warnings(caplog)
    for name in _UVICORN:
        assert [] == logging.getLogger(name).handlers
        assert logging.getLogger(name).propagate


def test_the_mcp_http_server_leaves_the_applications_logging_alone(tmp_path: Path, caplog,
                                                                  capsys):
    """The MCP server over HTTP adds no handler to uvicorn's loggers (uvicorn's own
    configuration would write its access log to stdout) and a bad request's warning
    reaches the application's handler."""
    pytest.importorskip("mcp")
    from ctxslots.tools import MemoryTools
    from ctxslots.tools.mcp_server import serve_http

    caplog.set_level(logging.DEBUG)
    shown: list[str] = []
    with FactStore(str(tmp_path / "m.db")) as store, \
            _running(lambda: serve_http(MemoryTools(store), port=0, token=TOKEN)):
        deadline = time.monotonic() + 60
        while not shown and time.monotonic() < deadline:  # written once the socket listens
            shown = [line for line in capsys.readouterr().err.splitlines()
                     if line.startswith("Serving MCP at ")]
            threading.Event().wait(0 if shown else 0.01)
        port = int(shown[0].rsplit(":", 1)[1].split("/")[0])
        assert b"400 Bad Request" in _send_garbage(port)
        assert ["Invalid HTTP request received."] == _server_warnings(caplog)
    for name in _UVICORN:
        assert [] == logging.getLogger(name).handlers
        assert logging.getLogger(name).propagate
    assert "" == capsys.readouterr().out
