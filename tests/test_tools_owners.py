"""The memory tools with owners: each user's tool set sees its own facts and the shared
ones, filters like a search, and erases only when allowed."""

from __future__ import annotations

import datetime as dt

import pytest

from ctxslots import InvalidArgumentError, InvalidFactError, MemoryTools


@pytest.fixture(name="two")
def fixture_two(store):
    """Alice's and Bob's tool sets on one store, in the same workspace."""
    return (MemoryTools(store, user="alice", scope="shop"),
            MemoryTools(store, user="bob", scope="shop"))


def _id(answer: str) -> int:
    return int(answer.split("[id:", 1)[1].split("]", 1)[0])


def test_each_user_stores_and_finds_their_own_facts(store, two):
    alice, bob = two
    mine = _id(alice.dispatch("memory_store", {"slot": "user", "key": "editor",
                                               "value": "Alice edits code in Helix."}))
    theirs = _id(bob.dispatch("memory_store", {"slot": "user", "key": "editor",
                                               "value": "Bob edits code in Emacs."}))
    shared = _id(alice.dispatch("memory_store", {"slot": "project",
                                                 "value": "The shop builds with Bazel."}))
    assert mine != theirs
    assert (store.get(mine).user, store.get(theirs).user) == ("alice", "bob")
    assert (store.get(shared).user, store.get(shared).scope) == (None, "shop")
    answer = bob.dispatch("memory_query", {"query": "which editor does the user use"})
    assert "Bob edits code in Emacs." in answer and "Alice" not in answer
    assert "Bazel" in bob.dispatch("memory_query", {"query": "how does the shop build"})


@pytest.mark.parametrize("tool", ["memory_reinforce", "memory_demote", "memory_forget",
                                  "memory_timeline", "memory_update"])
def test_another_users_fact_is_an_unknown_id(store, two, tool):
    alice, bob = two
    mine = _id(alice.dispatch("memory_store", {"slot": "user", "value": "Alice is vegan."}))
    before = store.get(mine)
    args = {"id": mine, **({"value": "Bob was here."} if tool == "memory_update" else {})}
    assert bob.dispatch(tool, args) == f"Error: no memory with id {mine}"
    assert store.get(mine) == before


def test_the_query_tool_filters_by_tags_source_and_time(store, clock):
    tools = MemoryTools(store, user="alice")
    early = store.add("user", "Alice moved to Lisbon.", user="alice", tags=["home"],
                      observed_at=dt.datetime(2026, 1, 10, tzinfo=dt.UTC))
    late = store.add("user", "Alice moved to Porto.", user="alice", tags=["home", "recent"],
                     observed_at=dt.datetime(2026, 6, 1, tzinfo=dt.UTC), source="chat")
    both = tools.dispatch("memory_query", {"query": "where did Alice move"})
    assert f"[id:{early.id}]" in both and f"[id:{late.id}]" in both
    for args, kept in (({"tags": ["recent"]}, late), ({"source": "chat"}, late),
                       ({"said_before": "2026-03-01"}, early),
                       ({"said_after": "2026-03-01T00:00Z"}, late)):
        answer = tools.dispatch("memory_query", {"query": "where did Alice move", **args})
        other = early if kept is late else late
        assert f"[id:{kept.id}]" in answer and f"[id:{other.id}]" not in answer, args


@pytest.mark.parametrize("owners", [{"user": "alice"}, {"agent": "helper"},
                                    {"user": "alice", "agent": "helper", "scope": "shop"}])
def test_reinforcing_through_the_tools_links_what_their_query_returned(store, owners):
    """A tool set bound to a named user or agent reinforces as its own owners, so the
    fact it reinforces is linked to the others its last query returned."""
    tools = MemoryTools(store, **owners)
    first = _id(tools.dispatch("memory_store", {"slot": "user",
                                                "value": "The deploy runs on Friday."}))
    second = _id(tools.dispatch("memory_store", {"slot": "user",
                                                 "value": "The deploy needs a green build."}))
    answer = tools.dispatch("memory_query", {"query": "deploy"})
    assert f"[id:{first}]" in answer and f"[id:{second}]" in answer
    assert tools.dispatch("memory_reinforce", {"id": first}).startswith(f"Reinforced [id:{first}]")
    assert {second: 1.0} == store.links(first)


@pytest.mark.parametrize("args", [{"said_after": "last week"}, {"said_after": "2026-13-01"},
                                  {"said_after": "2026-05-01", "said_before": "2026-04-01"},
                                  {"tags": "home"}])
def test_a_malformed_filter_is_an_error_answer(store, args):
    answer = MemoryTools(store).dispatch("memory_query", {"query": "anything", **args})
    assert answer.startswith("Error:") and "Traceback" not in answer


def test_delete_is_offered_only_when_allowed(store):
    plain = MemoryTools(store, user="alice")
    allowed = MemoryTools(store, user="alice", allow_delete=True)
    assert "memory_delete" not in {t["function"]["name"] for t in plain.openai_tools()}
    assert "memory_delete" in {t["name"] for t in allowed.anthropic_tools()}
    fact = _id(plain.dispatch("memory_store", {"slot": "user", "value": "Alice is vegan."}))
    assert plain.dispatch("memory_delete", {"id": fact}).startswith(
        "Error: unknown tool 'memory_delete'")
    assert store.get(fact) is not None
    bobs = MemoryTools(store, user="bob", allow_delete=True)
    assert bobs.dispatch("memory_delete", {"id": fact}) == f"Error: no memory with id {fact}"
    assert allowed.dispatch("memory_delete", {"id": fact}) == (
        f"Erased [id:{fact}] and its history for good.")
    assert store.get(fact, include_archive=True) is None


def test_malformed_owners_are_refused_when_the_tool_set_is_made(store):
    for owners in ({"user": ""}, {"agent": "a\x00b"}, {"user": 3}):
        with pytest.raises(InvalidFactError):
            MemoryTools(store, **owners)
    with pytest.raises(InvalidArgumentError, match="user facts do not belong to a workspace"):
        MemoryTools(store, scoped_slots={"user"})
