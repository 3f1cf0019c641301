"""How many SQL statements a search and an assembly run on SQLite, counted by apsw's trace.

A search plans its words once (the engines never see the text), and a memory
contributor that needs a longer list extends the search it started instead of
running its legs again. The counts below are pinned: a change that adds a
statement to the hot path shows up here.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterator

import pytest

from _sql import traced
from ctxslots import AssemblyRequest, FactStore, PromptAssembler


@pytest.fixture(name="statements")
def fixture_statements() -> Iterator[list[str]]:
    """Every statement run by connections opened during the test, in order."""
    with traced(lambda sql, _bindings: " ".join(sql.split())) as seen:
        yield seen


#: Short names of the statements a search runs, by a part of their text.
_KINDS = (("coalesce(max(id)", "growth check"), ("MATCH", "match"),
          ("NOT INDEXED WHERE id IN", "rows"), ("FROM fact_links", "links probe"),
          ("superseded_by IS NOT NULL", "near-duplicates probe"), ("BEGIN", "begin"),
          ("UPDATE facts SET access_count", "count access"), ("min(seq)", "log bounds"),
          ("max(seq)", "log bounds"), ("COMMIT", "commit"))


def _kind(statement: str) -> str:
    return next((name for part, name in _KINDS if part in statement), statement)


def _matches(statements: list[str]) -> int:
    return sum(1 for s in statements if "MATCH" in s)


def test_a_search_runs_four_statements_and_one_write(db_path, clock, statements):
    """Words checked against the store's growth, the match (which reads its rows), the
    links and near-duplicate probes; then the access count in one short transaction."""
    with FactStore(db_path, clock=clock, embedder=False) as store:
        for n in range(30):
            store.add("agent", f"Deploy note {n}: staging rolls out after the smoke test.")
        store.search("staging deploy")  # the first search reads the vocabulary's size
        statements.clear()
        store.search("staging deploy", track_access=False)
        assert ["growth check", "match", "links probe",
                "near-duplicates probe"] == [_kind(s) for s in statements]
        statements.clear()
        store.search("staging deploy")
        assert ["growth check", "match", "links probe", "near-duplicates probe", "begin",
                "count access", "log bounds", "log bounds", "commit"] == [
            _kind(s) for s in statements]


def test_a_contributor_that_needs_more_extends_its_search(db_path, clock, statements):
    """The agent section asks for more lines than its first guess; its words are matched
    once all the same, and each memory slot runs one lexical statement."""
    with FactStore(db_path, clock=clock, embedder=False) as store:
        with store.batch():
            store.upsert("user", "editor", "The user edits code in Helix.")
            store.add("project", "Deploys of shop-api run on Fridays.", scope="shop")
            for n in range(60):
                store.add("agent", f"Deploy {n} ok.", scope="shop")
        assembler = PromptAssembler(store)
        request = AssemblyRequest("deploy", scope="shop", budget=800)
        assembler.assemble(request)
        statements.clear()
        prompt = assembler.assemble(request)
        agent = prompt.section("agent_memory")
        # More lines than the first guess of max(10, room / 18) fit the room.
        assert len([d for d in agent.items if d.kept]) > 30
        assert 3 == _matches(statements)


def test_an_assembly_counts_every_sections_facts_in_one_write(db_path, clock, statements):
    """Three sections show facts; their access counts are one transaction, not one each."""
    with FactStore(db_path, clock=clock, embedder=False, access_writes="inline") as store:
        user = store.upsert("user", "editor", "The user deploys from Helix.")
        project = store.add("project", "Deploys of shop-api run on Fridays.", scope="shop")
        agent = store.add("agent", "The last deploy of shop-api took nine minutes.",
                          scope="shop")
        assembler = PromptAssembler(store)
        request = AssemblyRequest("deploy shop-api", scope="shop", budget=800)
        assembler.assemble(request, record_shown=False)
        statements.clear()
        prompt = assembler.assemble(request)
        shown = {d.item.fact.id for d in prompt.kept if d.item.fact}
        assert {user.id, project.id, agent.id} <= shown
        assert 1 == sum(1 for s in statements if "UPDATE facts SET access_count" in s)
        assert [1, 1, 1] == [store.get(i).access_count for i in (user.id, project.id, agent.id)]


def test_an_export_of_one_user_reads_that_users_history_and_links_alone(db_path, clock):
    """A user's JSONL export (what a user asking for their data receives) reads the history
    and co-recall links of the facts it exports, not every user's: it read the whole
    store's inside its read transaction, holding the store from every other request."""
    with FactStore(db_path, clock=clock, embedder=False) as store:
        with store.batch():
            for n in range(40):
                store.upsert("user", f"k{n}", f"Bob's first value {n}.", user="bob")
                store.upsert("user", f"k{n}", f"Bob's second value {n}.", user="bob")
            editor = store.upsert("user", "editor", "Alice edits code in Vim.", user="alice")
            store.upsert("user", "editor", "Alice edits code in Helix.", user="alice")
            shell = store.upsert("user", "shell", "Alice's shell is fish.", user="alice")
        for who, ids in (("alice", (editor.id, shell.id)), ("bob", (1, 3))):
            assert set(ids) <= {h.fact.id for h in store.search(
                "Alice edits code shell fish Bob's value 0 1", user=who, limit=50)}
            store.reinforce(ids[0], user=who)
    with traced(lambda sql, bindings: (" ".join(sql.split()), tuple(bindings or ()))) as seen, \
            FactStore(db_path, clock=clock, embedder=False) as store:
        out = io.StringIO()
        assert 2 == store.export_jsonl(out, user="alice")
    for table, bounded in (("fact_history", "WHERE fact_id IN"), ("fact_links", "WHERE a IN")):
        reads = [(sql, bindings) for sql, bindings in seen
                 if f"FROM {table}" in sql and "EXISTS" not in sql]
        assert reads
        for sql, bindings in reads:
            assert bounded in sql
            assert set(bindings) <= {editor.id, shell.id}
    records = {r["id"]: r for r in map(json.loads, out.getvalue().splitlines()[1:])}
    assert "Alice edits code in Helix." == records[editor.id]["value"]
    assert ["Alice edits code in Vim."] == [h["value"] for h in records[editor.id]["history"]]
    assert [(editor.id, shell.id)] == [(r["id"], link["to"])
                                       for r in records.values() for link in r["links"]]
