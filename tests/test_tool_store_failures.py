"""A failing store answers a tool call with a fixed text: never the store's file, server,
or the process holding its lock (a remote MCP client is not told them); the server logs
the store's own message."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from _lock_holders import SQLiteHolder, holder_of
from ctxslots import FactStore
from ctxslots.stores.engines import BUSY_TIMEOUT_ENV
from ctxslots.tools import MemoryTools
from ctxslots.tools.memory_tools import BUSY_ANSWER, UNAVAILABLE_ANSWER

#: On the lock holder's command line: an answer must never show it.
SECRET = "SUPERSECRET-admin-token-0123456789"

def _leaks(answer: str, store_path: str, pid: int | None = None) -> list[str]:
    """What of the store's whereabouts ``answer`` shows."""
    shown = [word for word in (store_path, Path(store_path).name, SECRET, "process", "/")
             if word in answer]
    return shown + ([str(pid)] if pid is not None and str(pid) in answer else [])


@pytest.fixture(name="short_wait")
def fixture_short_wait(monkeypatch):
    """Writes wait half a second for another writer's lock."""
    monkeypatch.setenv(BUSY_TIMEOUT_ENV, "0.5")


def test_a_busy_store_answers_a_fixed_text_and_logs_the_holder(short_wait, store, caplog):
    """A write while another writer holds the lock answers 'busy' without the store's
    location or the holder's process; the log has the store's own message."""
    tools = MemoryTools(store, user="alice", scope="shop")
    holder = holder_of(store, "--token", SECRET)
    try:
        with caplog.at_level(logging.WARNING, logger="ctxslots.tools"):
            answer = tools.dispatch("memory_store", {"slot": "user", "value": "Alice likes tea."})
    finally:
        holder.release()
    assert BUSY_ANSWER == answer
    pid = holder.child.pid if isinstance(holder, SQLiteHolder) else None
    assert [] == _leaks(answer, str(store.path), pid)
    assert any("busy" in r.getMessage() for r in caplog.records)
    assert "Stored [id:1]" in tools.dispatch("memory_store", {"slot": "user",
                                                              "value": "Alice likes tea."})


def test_a_closed_store_answers_a_fixed_text(store, caplog):
    """A call on a closed store answers 'unavailable', naming neither its file nor its URL."""
    tools = MemoryTools(store)
    store.close()
    with caplog.at_level(logging.ERROR, logger="ctxslots.tools"):
        answers = [tools.dispatch("memory_query", {"query": "tea"}),
                   tools.dispatch("memory_store", {"slot": "agent", "value": "A lesson."})]
    assert [UNAVAILABLE_ANSWER] * 2 == answers
    assert any("closed" in r.getMessage() or "closed" in str(r.exc_info and r.exc_info[1])
               for r in caplog.records)


def test_the_callers_own_mistakes_keep_their_messages(store):
    """Errors about the call's own arguments still say what was wrong."""
    tools = MemoryTools(store)
    assert "Error: value is 5000 bytes, over the limit of 4096" == tools.dispatch(
        "memory_store", {"slot": "agent", "value": "é" * 2500})
    assert "Error: no memory with id 7" == tools.dispatch("memory_forget", {"id": 7})


ALICE = "alice-token-0123456789"


async def _call(url: str, name: str, args: dict) -> tuple[bool, str]:
    import httpx2  # with the SDK
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {ALICE}"}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http, \
            streamable_http_client(url, http_client=http) as (read, write), \
            ClientSession(read, write) as session:
        await session.initialize()
        result = await session.call_tool(name, args)
    return bool(result.is_error), "".join(block.text for block in result.content)


def test_a_team_server_tells_a_remote_user_only_that_the_store_is_busy(tmp_path):
    """Over HTTP, with a token per user, a write blocked by another process's lock answers
    the fixed text; the store's path, the holder's pid and command line stay in the
    server's own log."""
    pytest.importorskip("mcp")
    db = tmp_path / "private-team-memory.db"
    FactStore(db).close()
    holder = SQLiteHolder(db, "--token", SECRET)
    server = subprocess.Popen(
        [sys.executable, "-m", "ctxslots", "--db", str(db), "mcp", "--transport", "http",
         "--port", "0", "--scope", "shop"], stderr=subprocess.PIPE, text=True,
        env={**os.environ, "CTXSLOTS_MCP_TOKENS": f"alice={ALICE}", BUSY_TIMEOUT_ENV: "0.5"})
    assert server.stderr is not None
    try:
        line = server.stderr.readline()
        assert line.startswith("Serving MCP at http://127.0.0.1:"), line
        url = line.split(" at ", 1)[1].strip()
        is_error, answer = anyio.run(_call, url, "memory_store",
                                     {"slot": "user", "value": "Alice likes tea."})
    finally:
        holder.release()
        server.terminate()
        server.wait(timeout=60)
        log = server.stderr.read()
        server.stderr.close()
    assert (True, BUSY_ANSWER) == (is_error, answer)
    assert [] == _leaks(answer, str(db), holder.child.pid)
    assert "busy" in log and str(holder.child.pid) in log
