"""Ages and times read when a memory was said, and a read at a given moment sees nothing said later."""

from __future__ import annotations

import datetime as dt
import os
import sys

import anyio
import pytest
from click.testing import CliRunner

from ctxslots import AssemblyRequest, FactStore, MemoryTools, PromptAssembler
from ctxslots.cli import cli

DAY = 86400.0
SAID = dt.datetime(2023, 5, 8, 10, 20, tzinfo=dt.UTC)


def test_the_tools_show_the_age_of_when_it_was_said(store, clock):
    """A memory written today but said in 2023 reads its age from 2023 in tool results."""
    store.add("project", "Rosaline went to the rowing club.", observed_at=SAID, scope="club")
    tools = MemoryTools(store, scope="club")
    years = int((clock.now - SAID.timestamp()) // (365 * DAY))
    answer = tools.memory_query("rowing club")
    assert "Rosaline" in answer and f"{years} years ago" in answer and "today" not in answer


def test_list_shows_the_age_of_when_it_was_said(location):
    """``ctxslots list`` ages a fact from when it was said, not from when it was written."""
    with FactStore(location) as store:
        store.add("agent", "Rosaline went to the rowing club.", observed_at=SAID)
        store.add("agent", "A note said just now.")
    result = CliRunner().invoke(cli, ["--db", location, "list"], catch_exceptions=False)
    assert 0 == result.exit_code, result.output
    lines = {line.split("] ", 1)[-1] for line in result.output.splitlines()}
    said = [line for line in lines if "Rosaline" in line]
    now = [line for line in lines if "just now" in line]
    assert said and "years ago)" in said[0] and "today" not in said[0], result.output
    assert now and now[0].endswith("(today)"), result.output


async def _query_over_mcp(db: str, query: str) -> str:
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, env=dict(os.environ), args=[
        "-m", "ctxslots", "--db", db, "mcp", "--scope", "club"])
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        result = await session.call_tool("memory_query", {"query": query})
    return "".join(block.text for block in result.content)


def test_mcp_shows_the_age_of_when_it_was_said(tmp_path):
    """memory_query over MCP (the official client, a real server process) reads the said time."""
    pytest.importorskip("mcp")
    db = str(tmp_path / "said.db")
    with FactStore(db) as store:
        store.add("project", "Rosaline went to the rowing club.", observed_at=SAID,
                  scope="club")
    answer = anyio.run(_query_over_mcp, db, "rowing club")
    assert "Rosaline" in answer and "years ago" in answer and "today" not in answer


def test_search_at_a_moment_leaves_out_what_was_said_later(location, clock):
    """search(now=T) returns what was said up to T, never what was said after it."""
    with FactStore(location, clock=clock) as store:
        before = store.add("agent", "The deploy freeze starts on Friday.",
                           observed_at=clock.now - 10 * DAY)
        at = store.add("agent", "The deploy freeze was moved to Monday.",
                       observed_at=clock.now - 5 * DAY)
        later = store.add("agent", "The deploy freeze is over.", observed_at=clock.now - DAY)
        everything = {h.fact.id for h in store.search("deploy freeze")}
        assert {before.id, at.id, later.id} == everything
        then = clock.now - 5 * DAY
        assert {before.id, at.id} == {h.fact.id for h in store.search("deploy freeze", now=then)}
        assert {before.id} == {h.fact.id for h in store.search(
            "deploy freeze", now=dt.datetime.fromtimestamp(then - 1, tz=dt.UTC))}
        # Combined with a narrower cut of the caller's own, the narrower one holds.
        assert {before.id} == {h.fact.id for h in store.search(
            "deploy freeze", now=clock.now, said_before=then)}
        assert [] == store.search("deploy freeze", now=then, said_after=clock.now - 2 * DAY)
        store.upsert("user", "city", "The user lives in Lisbon.", observed_at=clock.now - 2 * DAY)
        assert [] == store.important("user", now=then)
        assert ["city"] == [f.key for f in store.important("user")]


def test_an_assembly_at_a_moment_shows_nothing_said_later(location, clock):
    """AssemblyRequest(now=T): neither the searches nor the user profile show what was
    said after T; at the clock, both show everything."""
    with FactStore(location, clock=clock) as store:
        store.upsert("user", "city", "The user moved to Lisbon.", observed_at=clock.now - DAY)
        store.add("agent", "The deploy freeze is over.", observed_at=clock.now - DAY)
        store.add("agent", "The deploy freeze starts on Friday.",
                  observed_at=clock.now - 10 * DAY)
        assembler = PromptAssembler(store)
        now = assembler.assemble(AssemblyRequest("deploy freeze, and where does the user live"))
        assert "Lisbon" in now.text and "is over" in now.text and "on Friday" in now.text
        then = assembler.assemble(AssemblyRequest("deploy freeze, and where does the user live",
                                                  now=clock.now - 5 * DAY))
        assert "on Friday" in then.text
        assert "Lisbon" not in then.text and "is over" not in then.text
