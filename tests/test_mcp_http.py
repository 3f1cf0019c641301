"""The MCP server over streamable HTTP, driven by the official SDK's client, and its tool calls
running off the event loop."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import ClassVar

import anyio
import pytest

pytest.importorskip("mcp")

import httpx2
from mcp.client.client import Client
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from ctxslots import FactStore
from ctxslots.tools import TOOL_SPECS, MemoryTools
from ctxslots.tools._http_guard import bearer_token
from ctxslots.tools.mcp_server import make_server

TOKEN = "s3cret-token-for-the-tests"


@pytest.fixture(name="http_server")
def fixture_http_server(tmp_path: Path):
    """A ``ctxslots mcp --transport http`` subprocess on a free loopback port, with a token."""
    db = tmp_path / "memory.db"
    env = {**os.environ, "CTXSLOTS_MCP_TOKEN": TOKEN}
    proc = subprocess.Popen([sys.executable, "-m", "ctxslots", "--db", str(db), "mcp",
                             "--transport", "http", "--port", "0", "--scope", "shop"],
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stderr.readline()
        assert line.startswith("Serving MCP at http://127.0.0.1:"), line
        yield db, line.split(" at ", 1)[1].strip()
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        proc.stderr.close()


async def _over_http(url: str, calls: list[tuple[str, dict]]) -> tuple[list, list]:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http, \
            streamable_http_client(url, http_client=http) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        listed = await session.list_tools()
        results = [await session.call_tool(name, args) for name, args in calls]
    return listed.tools, results


def _text(result) -> str:
    return "".join(block.text for block in result.content)


def test_tools_over_streamable_http(http_server):
    """The official client lists the tools with titles and hints and calls them over HTTP."""
    db, url = http_server
    assert url.endswith("/mcp")
    calls = [("memory_store", {"slot": "project", "value": "The shop deploys on Fridays."}),
             ("memory_query", {"query": "deploy"}),
             ("memory_forget", {"id": 99})]
    tools, results = anyio.run(_over_http, url, calls)
    assert [s.name for s in TOOL_SPECS] == [t.name for t in tools]
    hints = {t.name: t.annotations for t in tools}
    assert hints["memory_query"].read_only_hint is True
    assert hints["memory_timeline"].read_only_hint is True
    assert hints["memory_forget"].destructive_hint is True
    assert hints["memory_store"].read_only_hint is False
    assert hints["memory_store"].destructive_hint is False
    assert all(h.open_world_hint is False for h in hints.values())
    assert "Search memory" == next(t for t in tools if t.name == "memory_query").title
    assert _text(results[0]).startswith("Stored [id:1] (project, today)")
    assert "Fridays" in _text(results[1])
    assert results[2].is_error and _text(results[2]) == "Error: no memory with id 99"
    with FactStore(db) as store:
        assert "shop" == store.get(1).scope


def test_stopping_with_a_client_connected_logs_nothing_but_the_stop(tmp_path):
    """SIGTERM while the official client holds its session (its standing event stream
    open) stops the server with its one line: the stream it leaves is ended, where
    uvicorn logged "ASGI callable returned without completing response" on every stop."""
    proc = subprocess.Popen([sys.executable, "-m", "ctxslots", "--db", str(tmp_path / "m.db"),
                             "mcp", "--transport", "http", "--port", "0"], stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "CTXSLOTS_MCP_TOKEN": TOKEN})
    try:
        url = proc.stderr.readline().split(" at ", 1)[1].strip()

        async def stop_while_connected() -> None:
            stream_open = anyio.Event()

            async def seen(response: httpx2.Response) -> None:
                if response.request.method == "GET" and response.status_code == 200:
                    stream_open.set()

            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"},
                                          timeout=30, event_hooks={"response": [seen]}) as http, \
                    streamable_http_client(url, http_client=http) as (read, write), \
                    ClientSession(read, write) as session:
                await session.initialize()
                with anyio.fail_after(30):
                    await stream_open.wait()
                proc.terminate()
                await anyio.to_thread.run_sync(proc.wait, 30)

        anyio.run(stop_while_connected)
        assert 143 == proc.returncode
        assert "Error: stopped (SIGTERM)\n" == proc.stderr.read()
    finally:
        proc.kill()
        proc.wait(timeout=20)
        proc.stderr.close()


def test_http_refuses_requests_without_the_token(http_server):
    """Without the bearer token (or with a wrong one) the endpoint answers 401 and runs nothing."""
    _db, url = http_server
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    headers = {"Accept": "application/json, text/event-stream"}
    missing = httpx2.post(url, json=body, headers=headers)
    wrong = httpx2.post(url, json=body, headers={**headers, "Authorization": "Bearer nope"})
    assert (401, 401) == (missing.status_code, wrong.status_code)


def test_http_reads_the_bearer_scheme_in_any_case_and_skips_extra_spaces(http_server):
    """The shared token is read from the Authorization header as per-user tokens are: the
    scheme in any case, the spaces before the token ignored; another scheme is refused."""
    _db, url = http_server
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "tests", "version": "1"}}}
    headers = {"Accept": "application/json, text/event-stream"}
    statuses = {auth: httpx2.post(url, json=body, headers={**headers, "Authorization": auth}
                                  ).status_code
                for auth in (f"bearer {TOKEN}", f"BEARER {TOKEN}", f"Bearer  {TOKEN}",
                             f"Basic {TOKEN}", f"Bearer{TOKEN}", f"Bearer {TOKEN}x")}
    assert {f"bearer {TOKEN}": 200, f"BEARER {TOKEN}": 200, f"Bearer  {TOKEN}": 200,
            f"Basic {TOKEN}": 401, f"Bearer{TOKEN}": 401, f"Bearer {TOKEN}x": 401} == statuses


@pytest.mark.parametrize(("header", "expected"), [
    (b"Bearer abc", b"abc"), (b"bearer abc", b"abc"), (b" Bearer \tabc  ", b"abc"),
    (b"Basic abc", None), (b"Bearer", None), (b"Bearer   ", None), (b"", None)])
def test_both_guards_read_the_authorization_header_alike(header, expected):
    """One reading of the Authorization header serves the shared and the per-user token."""
    assert expected == bearer_token({"headers": [(b"authorization", header)]})


def test_http_refuses_a_foreign_host_header(http_server):
    """On loopback the SDK's DNS-rebinding protection refuses a Host header naming another site."""
    _db, url = http_server
    response = httpx2.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers={
        "Authorization": f"Bearer {TOKEN}", "Host": "evil.example",
        "Accept": "application/json, text/event-stream"})
    assert response.status_code in (400, 403, 421)


def test_http_on_a_public_address_needs_a_token(tmp_path):
    """--host other than loopback without --token is a one-line usage error; nothing is served."""
    env = {k: v for k, v in os.environ.items() if k != "CTXSLOTS_MCP_TOKEN"}
    proc = subprocess.run([sys.executable, "-m", "ctxslots", "--db", str(tmp_path / "m.db"),
                           "mcp", "--transport", "http", "--host", "0.0.0.0"],
                          capture_output=True, text=True, timeout=60, env=env, check=False)
    assert 2 == proc.returncode
    assert "Error: serving on 0.0.0.0 (not loopback) needs --token" in proc.stderr
    assert not (tmp_path / "m.db").exists()


class HeldTools(MemoryTools):
    """Memory tools whose calls wait until the test lets them go, noting their thread."""

    threads: ClassVar[list[int]] = []
    started = threading.Event()
    release = threading.Event()

    def dispatch(self, name, arguments=None):  # type: ignore[override]
        HeldTools.threads.append(threading.get_ident())
        HeldTools.started.set()
        assert HeldTools.release.wait(120)
        return super().dispatch(name, arguments)


def test_tool_calls_run_off_the_event_loop(store):
    """A tool call held in its worker thread leaves the loop free: a tool listing asked
    meanwhile is answered before the call ends (on the loop, the held call would block it)."""
    # The events are the class's: a run of the other engine in this process set them.
    HeldTools.started.clear()
    HeldTools.release.clear()
    HeldTools.threads.clear()
    tools = HeldTools(store, scope="shop")
    order: list[str] = []

    async def run() -> int:
        loop_thread = threading.get_ident()
        async with Client(make_server(tools)) as client:

            async def held_call() -> None:
                await client.call_tool("memory_query", {"query": "anything"})
                order.append("call")

            async with anyio.create_task_group() as group:
                group.start_soon(held_call)
                assert await anyio.to_thread.run_sync(HeldTools.started.wait, 120)
                await client.list_tools()
                order.append("listing")
                HeldTools.release.set()
        return loop_thread

    loop_thread = anyio.run(run)
    assert ["listing", "call"] == order
    assert HeldTools.threads and loop_thread not in HeldTools.threads
