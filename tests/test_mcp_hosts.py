"""The MCP server over HTTP answers only requests that name it (DNS rebinding): on any loopback
address, as on 127.0.0.1, and off loopback with a token, Host and Origin must name the address
the server is bound to, or a host it was told to accept.

Each server is a real ``ctxslots mcp --transport http`` process; requests come from the official
MCP client and as raw HTTP, with the headers a rebinding page would send.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import pytest

pytest.importorskip("mcp")

import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from ctxslots import FactStore
from ctxslots.tools.mcp_server import is_loopback

TOKEN = "rebinding-test-token-7f3a"
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "raw", "version": "0"}}}


def _usable(address: str) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind((address, 0))
        except OSError:
            return False
    return True


@contextmanager
def mcp_server(db: Path, host: str, *extra: str) -> Iterator[tuple[str, int]]:
    """A running server on ``host`` (port chosen by the system): ``(address it printed, port)``."""
    env = {k: v for k, v in os.environ.items() if k != "CTXSLOTS_MCP_TOKEN"}
    proc = subprocess.Popen([sys.executable, "-m", "ctxslots", "--db", str(db), "mcp",
                             "--transport", "http", "--host", host, "--port", "0", "--scope",
                             "shop", *extra], stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = proc.stderr.readline()
        assert line.startswith("Serving MCP at http://"), line + proc.stderr.read()
        port = int(line.rsplit(":", 1)[1].split("/", 1)[0])
        yield line.split(" at ", 1)[1].strip(), port
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        proc.stderr.close()


def raw_post(address: str, port: int, headers: dict[str, str]) -> tuple[int, str]:
    """POST an initialize request to ``address:port`` with exactly the Host and headers given."""
    conn = http.client.HTTPConnection(address, port, timeout=60)
    try:
        conn.putrequest("POST", "/mcp", skip_host=True, skip_accept_encoding=True)
        body = json.dumps(INITIALIZE).encode()
        for name, value in {"Content-Type": "application/json",
                            "Accept": "application/json, text/event-stream",
                            "Content-Length": str(len(body)), **headers}.items():
            conn.putheader(name, value)
        conn.endheaders(body)
        response = conn.getresponse()
        return response.status, response.read(4096).decode("utf-8", "replace")
    finally:
        conn.close()


async def _query(url: str, token: str | None) -> str:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http, \
            streamable_http_client(url, http_client=http) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        result = await session.call_tool("memory_query", {"query": "deploy"})
    return "".join(block.text for block in result.content)


@pytest.fixture(name="db")
def fixture_db(tmp_path):
    """A store whose shop scope holds one fact a rebinding page would like to read."""
    db = tmp_path / "memory.db"
    with FactStore(db) as store:
        store.add("project", "The shop deploys with the secret runbook.", scope="shop")
    return db


@pytest.mark.parametrize("address", ["127.0.0.2", "127.0.0.1"])
def test_a_loopback_server_refuses_foreign_hosts_and_origins(db, address):
    """On 127.0.0.2 as on 127.0.0.1, with no token: the official client at the bound address
    reads the scope, and a request naming evil.example (Host or Origin), another loopback
    address or another port is refused before any tool runs."""
    if not _usable(address):
        pytest.skip(f"{address} is not a loopback address here")
    with mcp_server(db, address) as (url, port):
        assert "secret runbook" in anyio.run(_query, url, None)
        right = f"{address}:{port}"
        cases = {
            "evil host": ({"Host": f"evil.example:{port}"}, 421),
            "evil origin": ({"Host": right, "Origin": "http://evil.example"}, 403),
            "evil origin on our port": ({"Host": right, "Origin": f"http://evil.example:{port}"},
                                        403),
            "null origin": ({"Host": right, "Origin": "null"}, 403),
            "another port": ({"Host": f"{address}:{port + 1}"}, 421),
            "another loopback address": ({"Host": f"127.0.0.3:{port}"}, 421),
        }
        got = {name: raw_post(address, port, headers)[0] for name, (headers, _) in cases.items()}
        accepted = raw_post(address, port, {"Host": right, "Origin": f"http://{address}:5173"})
    assert {name: status for name, (_, status) in cases.items()} == got
    assert 200 == accepted[0], accepted


def test_localhost_is_accepted_where_it_names_the_bound_address(db):
    """localhost names 127.0.0.1: accepted there; on 127.0.0.2 it names another address."""
    if not _usable("127.0.0.2"):
        pytest.skip("127.0.0.2 is not a loopback address here")
    with mcp_server(db, "127.0.0.1") as (_url, port):
        on_one = raw_post("127.0.0.1", port, {"Host": f"localhost:{port}"})[0]
    with mcp_server(db, "127.0.0.2") as (_url, port):
        on_two = raw_post("127.0.0.2", port, {"Host": f"localhost:{port}"})[0]
    assert (200, 421) == (on_one, on_two)


def test_a_short_spelling_of_loopback_is_loopback(db):
    """--host 127.1 binds 127.0.0.1 without a token; Host may spell the address either way,
    and evil.example is refused."""
    with mcp_server(db, "127.1") as (url, port):
        assert url.startswith("http://127.1:")
        statuses = [raw_post("127.0.0.1", port, {"Host": f"{h}:{port}"})[0]
                    for h in ("127.1", "127.0.0.1", "localhost", "evil.example")]
    assert [200, 200, 200, 421] == statuses


def test_off_loopback_the_right_token_with_a_foreign_origin_is_refused(db):
    """On 0.0.0.0 with a token (reached here through 127.0.0.1): the token alone is not
    enough; a foreign Origin or Host is refused, the right ones with the token pass."""
    with mcp_server(db, "0.0.0.0", "--token", TOKEN) as (_url, port):
        auth = {"Authorization": f"Bearer {TOKEN}"}
        here = f"127.0.0.1:{port}"
        statuses = {
            "token, foreign origin": raw_post("127.0.0.1", port, {
                "Host": here, "Origin": "https://evil.example", **auth})[0],
            "token, foreign host": raw_post("127.0.0.1", port, {
                "Host": f"evil.example:{port}", **auth})[0],
            "no token": raw_post("127.0.0.1", port, {"Host": here})[0],
            "token": raw_post("127.0.0.1", port, {"Host": here, **auth})[0],
        }
        assert "secret runbook" in anyio.run(_query, f"http://127.0.0.1:{port}/mcp", TOKEN)
    assert {"token, foreign origin": 403, "token, foreign host": 421, "no token": 401,
            "token": 200} == statuses


def test_an_allowed_host_name_is_accepted(db):
    """--allow-host names one more host clients use (a proxy's name): accepted in Host and
    Origin; others still refused."""
    with mcp_server(db, "127.0.0.1", "--allow-host", "memory.internal") as (_url, port):
        ok = raw_post("127.0.0.1", port, {"Host": f"memory.internal:{port}",
                                          "Origin": "https://memory.internal"})[0]
        bad = raw_post("127.0.0.1", port, {"Host": f"memory.other:{port}"})[0]
    assert (200, 421) == (ok, bad)


@pytest.mark.parametrize(("host", "expected"), [
    ("127.0.0.1", True), ("127.0.0.2", True), ("127.1", True), ("127.255.255.254", True),
    ("0x7f.1", True), ("::1", True), ("[::1]", True), ("::ffff:127.0.0.1", True),
    ("localhost", True), ("LOCALHOST.", True),
    ("127.evil.example", False), ("0.0.0.0", False), ("::", False), ("10.0.0.1", False),
    ("localhost.evil.example", False), ("", False),
])
def test_loopback_is_decided_by_the_address_never_a_lookup(host, expected):
    """Every spelling of 127.0.0.0/8 and ::1 is loopback; a name that starts with 127. is not
    (it could resolve anywhere), and no name is looked up."""
    assert expected == is_loopback(host)


def test_an_off_loopback_name_without_a_token_is_a_usage_error(tmp_path):
    """--host 127.evil.example (a name, not an address) needs --token like any other."""
    env = {k: v for k, v in os.environ.items() if k != "CTXSLOTS_MCP_TOKEN"}
    done = subprocess.run([sys.executable, "-m", "ctxslots", "--db", str(tmp_path / "m.db"),
                           "mcp", "--transport", "http", "--host", "127.evil.example"],
                          capture_output=True, text=True, timeout=120, env=env, check=False)
    assert 2 == done.returncode
    assert "serving on 127.evil.example (not loopback) needs --token" in done.stderr
    assert not (tmp_path / "m.db").exists()
