"""Scopes and slots never leak into each other: not through search, assembly or the flusher.

The memory tools, export/import and the MCP server have their own isolation
tests (tests/test_tools.py, tests/test_transfer.py, tests/test_mcp.py).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from _assembler_helpers import FIXED_NOW
from _sql import stored_rows
from ctxslots import (
    AssemblyRequest,
    FactNotFoundError,
    FactStore,
    InvalidFactError,
    MemoryFlusher,
    OpenAIChatClient,
    PromptAssembler,
    RankingPolicy,
)
from ctxslots.testing import ScriptedChatServer

SLOTS = ("user", "project", "agent")
SCOPES = ("a", "b", None)
#: Scope names that mean something to SQL LIKE, globs or quoting.
ODD_SCOPES = ("%", "_", "a%", "*", "a' OR '1'='1", "A", "a ", "b/../a")
QUERY = "shared deploy pipeline words"


def _value(slot: str, scope: str | None) -> str:
    return f"Shared deploy pipeline words, {slot} memory of scope {scope or 'global'}."


def rows_of(store: FactStore, scope: str | None) -> list[tuple[Any, ...]]:
    """Every stored row (facts, archive, history) of one scope, every column."""
    return stored_rows(store, scope=scope)


def _fill(store: FactStore, scopes: tuple[str | None, ...] = SCOPES) -> dict[tuple[str, str | None], int]:
    """A fact of each slot in each scope (user facts belong to a user, not a scope)."""
    ids = {}
    with store.batch():
        for scope in scopes:
            for slot in SLOTS:
                if slot != "user" or scope is None:
                    ids[(slot, scope)] = store.add(slot, _value(slot, scope), scope=scope).id
    return ids


LEGS = {
    "lexical": {},
    "fused": {"ranking": RankingPolicy(vector_weight=1.0)},
    "vector-only-no-cache": {"ranking": RankingPolicy(lexical_weight=0.0, vector_weight=1.0),
                             "vector_cache": False},
}


@pytest.mark.parametrize("leg", list(LEGS))
def test_search_sees_only_its_scope_and_global(tmp_path, leg):
    """Each leg returns exactly the facts of the asked scope and slots, plus global ones."""
    with FactStore(tmp_path / "s.db", clock=lambda: FIXED_NOW, **LEGS[leg]) as store:
        ids = _fill(store)
        archived = store.add("project", _value("project", "b") + " Archived.", scope="b")
        store.forget(archived.id)
        for scope in SCOPES:
            for slots in (None, ["project"], ["user", "agent"]):
                hits = store.search(QUERY, scope=scope, slots=slots, limit=100,
                                    include_archive=True, track_access=False)
                wanted = {i for (slot, sc), i in ids.items()
                          if sc in (scope, None) and (slots is None or slot in slots)}
                if scope == "b" and (slots is None or "project" in slots) and leg != "vector-only-no-cache":
                    wanted.add(archived.id)  # archived facts are found by words only
                assert wanted == {h.fact.id for h in hits}, (scope, slots)


@pytest.mark.parametrize("odd", ODD_SCOPES)
def test_scope_names_are_compared_exactly(store, odd):
    """A scope with wildcard, quote or case tricks sees its own facts and global ones only."""
    ids = _fill(store)
    mine = store.add("project", _value("project", odd), scope=odd)
    hits = store.search(QUERY, scope=odd, limit=100)
    assert {mine.id} | {i for (_, sc), i in ids.items() if sc is None} == {h.fact.id for h in hits}
    assert [f.id for f in store.facts(scope=odd) if f.scope is not None] == [mine.id]


def test_searching_one_scope_counts_no_access_in_another(store):
    """Access counting touches only the facts a search returned."""
    _fill(store)
    before = rows_of(store, "b")
    assert store.search(QUERY, scope="a", limit=100)
    assert before == rows_of(store, "b")


def test_assembly_shows_only_the_request_scope_and_global_facts(tmp_path):
    """The built-in contributors put no other scope's fact into the prompt or its dumps."""
    with FactStore(tmp_path / "asm.db", clock=lambda: FIXED_NOW) as store:
        _fill(store)
        # A user fact belongs to a user, not a scope: one named with a scope is refused.
        with pytest.raises(InvalidFactError, match="user facts belong to a user"):
            store.add("user", "Shared deploy pipeline words, user fact kept in scope a.",
                      scope="a")
        before_b = rows_of(store, "b")
        assembler = PromptAssembler(store)
        for scope in ("a", None):
            prompt = assembler.assemble(AssemblyRequest(QUERY, scope=scope, budget=4000))
            shown = {(d.item.fact.slot, d.item.fact.scope) for d in prompt.kept}
            wanted = {(slot, sc) for slot in SLOTS for sc in (scope, None)
                      if not (slot == "user" and sc is not None)}
            assert wanted == shown
            for slot in SLOTS:
                assert _value(slot, "b") not in prompt.text
                for fmt in ("json", "markdown", "html"):
                    assert "scope b" not in prompt.dump(fmt)
            assert "user fact kept in scope a" not in prompt.text
        assert before_b == rows_of(store, "b")


def _reply(ops: list[dict[str, Any]]) -> str:
    return json.dumps({"operations": ops})


def test_a_flush_for_one_scope_never_touches_another(tmp_path):
    """A flush for scope a writes, replaces and forgets in a (and global slots) only;
    the model is never shown b's facts."""
    with FactStore(tmp_path / "f.db", clock=lambda: FIXED_NOW) as store:
        for scope in ("a", "b"):
            store.upsert("project", "deploy.day", f"Scope {scope} deploys on Friday.", scope=scope)
            store.upsert("project", "db.engine", f"Scope {scope} runs Postgres.", scope=scope)
        secret = store.upsert("project", "b.secret", "Scope b keeps its deploy keys in vault.",
                              scope="b")
        store.upsert("user", "name", "The user is Ada.")
        before_b = rows_of(store, "b")
        ops = [
            {"op": "upsert", "slot": "project", "key": "deploy.day",
             "value": "Scope a deploys on Tuesday now.", "confidence": 0.9, "tags": []},
            {"op": "forget", "slot": "project", "key": "db.engine", "reason": "Moved to MySQL."},
            {"op": "forget", "slot": "project", "key": "b.secret", "reason": "Try the other scope."},
            {"op": "upsert", "slot": "agent", "key": "deploy.check",
             "value": "Check the deploy calendar first.", "confidence": 0.8, "tags": []},
        ]
        with ScriptedChatServer([_reply(ops)]) as server:
            flusher = MemoryFlusher(store, OpenAIChatClient(server.base_url, "scripted",
                                                            max_retries=0))
            report = flusher.flush(
                [{"role": "user", "content": "We deploy on Tuesday now and moved to MySQL; "
                  "where are the deploy keys and the vault secret?"}],
                conversation="iso", scope="a", force=True)
            sent = json.dumps(server.requests)
        assert before_b == rows_of(store, "b")
        assert "Scope b" not in sent and secret.value not in sent
        assert [2] == [r.index for r in report.rejected]
        assert "Scope a deploys on Tuesday now." == store.get_by_key(
            "project", "deploy.day", scope="a").value
        assert store.get_by_key("project", "db.engine", scope="a") is None
        assert "Scope b runs Postgres." == store.get_by_key("project", "db.engine", scope="b").value
        # agent is not a scoped slot of the flusher: its facts are global.
        assert None is store.get_by_key("agent", "deploy.check").scope


def test_a_global_flush_writes_no_scoped_fact(tmp_path):
    """A flush without a scope writes global facts only and leaves every scope alone."""
    with FactStore(tmp_path / "g.db", clock=lambda: FIXED_NOW) as store:
        _fill(store)
        before = {s: rows_of(store, s) for s in ("a", "b")}
        ops = [{"op": "upsert", "slot": "project", "key": "pipeline.owner",
                "value": "The platform team owns the deploy pipeline.", "confidence": 1.0,
                "tags": []}]
        with ScriptedChatServer([_reply(ops)]) as server:
            flusher = MemoryFlusher(store, OpenAIChatClient(server.base_url, "scripted",
                                                            max_retries=0))
            flusher.flush([{"role": "user", "content": "Who owns the deploy pipeline?"}],
                          conversation="g", force=True)
            sent = json.dumps(server.requests)
        assert before == {s: rows_of(store, s) for s in ("a", "b")}
        assert store.get_by_key("project", "pipeline.owner").scope is None
        assert "scope a" not in sent and "scope b" not in sent



#: A fact of one owner, the owners that must not see it, and the owners that do.
OTHERS = {
    "scope": (("project", {"scope": "b"}), {"scope": "a"}, {"scope": "b"}),
    "user": (("user", {"user": "alice"}), {"user": "bob"}, {"user": "alice"}),
    "agent": (("agent", {"agent": "planner"}), {"agent": "coder"}, {"agent": "planner"}),
}


@pytest.mark.parametrize("kind", sorted(OTHERS))
def test_a_fact_named_by_id_for_other_owners_is_not_found_and_nothing_changes(store, kind):
    """Every call that takes a fact id and owners sees only what a search for those
    owners sees: another workspace's, user's or agent's fact is not found, and stays
    as it was."""
    (slot, owner), stranger, owners = OTHERS[kind]
    other = store.add(slot, _value(slot, "b"), **owner)
    before = stored_rows(store)
    assert store.get(other.id, **stranger) is None
    assert store.get(other.id, include_archive=True, **stranger) is None
    assert store.history(other.id, **stranger) == []
    for change in (lambda: store.update(other.id, value="Moved.", **stranger),
                   lambda: store.forget(other.id, **stranger),
                   lambda: store.reinforce(other.id, **stranger),
                   lambda: store.demote(other.id, **stranger),
                   lambda: store.delete(other.id, **stranger)):
        with pytest.raises(FactNotFoundError):
            change()
    assert stored_rows(store) == before
    assert store.get(other.id, **owners).id == other.id
