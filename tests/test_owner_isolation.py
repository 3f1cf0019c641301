"""Kept apart everywhere: random operations by several users and agents in one store, on
each engine, and nothing done for one of them ever reads, ranks, links, hides, prunes,
counts, exports or erases another's facts.

Every example writes facts of three users, two agents and two workspaces (some with the
very same words, to tempt near-duplicate hiding and co-recall links across owners),
then runs random searches, reinforcements, assemblies, consolidations, prunes, exports
and erasures, checking each answer against who asked.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxslots import ANY, AssemblyRequest, FactStore, PromptAssembler, PrunePolicy, RankingPolicy

USERS = ("alice", "bob", "carol")
AGENTS = ("planner", "coder")
SCOPES = (None, "shop", "blog")
#: Few words, shared by everyone: the same sentence is written for several owners.
SENTENCES = ("The deploy runs on Friday after lunch.", "Tests need the VPN turned on.",
             "The user prefers dark mode everywhere.", "Cache warming takes ten minutes.",
             "Reviews happen every Monday morning.")

EXAMPLES = int(os.environ.get("CTXSLOTS_ISOLATION_EXAMPLES", "12"))

who = st.tuples(st.sampled_from(USERS), st.sampled_from(AGENTS), st.sampled_from(SCOPES))
write = st.tuples(st.just("write"), st.sampled_from(["user", "project", "agent"]), who,
                  st.sampled_from(SENTENCES), st.booleans())
read = st.tuples(st.sampled_from(["search", "assemble", "reinforce", "export"]), who,
                 st.sampled_from(SENTENCES))
upkeep = st.sampled_from([("consolidate",), ("prune",)])
erase = st.tuples(st.just("erase"), st.sampled_from(USERS))
operations = st.lists(st.one_of(write, write, write, read, read, upkeep, erase),
                      min_size=8, max_size=30)


def _sees(fact: Any, user: str, agent: str, scope: str | None) -> bool:
    """Whether a request of these owners may see ``fact`` (its own, or shared)."""
    return (fact.user in (user, None) and fact.agent in (agent, None)
            and fact.scope in (scope, None))


@contextmanager
def _fresh(engine: str, request: pytest.FixtureRequest, tmp_path: Any,
           number: list[int]) -> Iterator[FactStore]:
    """A new empty store on ``engine`` for one example (vector leg on: pgvector's
    filtered HNSW search and sqlite-vec are both exercised)."""
    number[0] += 1
    if engine == "sqlite":
        location, release = str(tmp_path / f"iso{number[0]}.db"), None
    else:
        postgres = request.getfixturevalue("postgres")
        location = postgres.database()
        release = postgres.release
    store = FactStore(location, ranking=RankingPolicy(vector_weight=1.0), clock=lambda: 1.8e9,
                      vector_writes="inline")
    try:
        yield store
    finally:
        store.close()
        if release is not None:
            release(location)


def _check_links_and_hiding(store: FactStore) -> None:
    everything = {f.id: f for f in store.facts(user=ANY, agent=ANY, scope=ANY)}
    for fact in everything.values():
        for other in store.links(fact.id):
            if other in everything:
                linked = everything[other]
                assert not (fact.user and linked.user and fact.user != linked.user), (
                    fact, linked)
        if fact.superseded_by is not None:
            newer = everything.get(fact.superseded_by) or store.get(
                fact.superseded_by, include_archive=True)
            assert newer is not None
            assert (newer.slot, newer.user, newer.agent, newer.scope) == (
                fact.slot, fact.user, fact.agent, fact.scope), (fact, newer)


def _run(store: FactStore, ops: list[tuple[Any, ...]]) -> None:
    assembler = PromptAssembler(store)
    for op in ops:
        kind = op[0]
        if kind == "write":
            _, slot, (user, agent, scope), text, keyed = op
            owners = {"user": {"user": user}, "agent": {"agent": agent, "scope": scope},
                      "project": {"scope": scope}}[slot]
            value = text if slot != "user" else f"{text} ({user})" if keyed else text
            if keyed:
                store.upsert(slot, "k", value, **owners)
            else:
                store.add(slot, value, **owners)
        elif kind in ("search", "reinforce"):
            _, (user, agent, scope), text = op
            hits = store.search(text, user=user, agent=agent, scope=scope, limit=20)
            assert all(_sees(h.fact, user, agent, scope) for h in hits), hits
            if kind == "reinforce" and hits:
                store.reinforce(hits[0].fact.id)
        elif kind == "assemble":
            _, (user, agent, scope), text = op
            prompt = assembler.assemble(AssemblyRequest(text, user=user, agent=agent,
                                                        scope=scope, budget=600))
            offered = [d.item.fact for s in prompt.sections for d in s.items
                       if d.item.fact is not None]  # kept or dropped: every fact considered
            assert all(_sees(f, user, agent, scope) for f in offered), offered
            others = [u for u in USERS if u != user]
            assert not any(f"({u})" in prompt.text for u in others), prompt.text
        elif kind == "export":
            _, (user, _agent, _scope), _text = op
            buf = io.StringIO()
            store.export_jsonl(buf, user=user, include_history=False)
            records = [json.loads(line) for line in buf.getvalue().splitlines()[1:]]
            assert {r.get("user") for r in records} <= {user}, records
            text = str(store.export_markdown(user=user))
            assert not any(f"({u})" in text for u in USERS if u != user), text
        elif kind == "consolidate":
            store.consolidate(threshold=0.95)
        elif kind == "prune":
            before = _counts(store)
            store.prune(PrunePolicy(slot_caps={"user": 2, "agent": 2, "project": 2},
                                    headroom=0.0, protect_days=0.0, protect_accesses=10**6,
                                    protect_score=10**6))
            after = _counts(store)
            for group, n in before.items():  # each owner's facts are capped on their own
                assert after.get(group, 0) == min(n, 2), (group, before, after)
        else:
            _, user = op
            before = {f.id for f in store.facts(user=ANY, agent=ANY, scope=ANY)
                      if f.user != user}
            store.erase(user=user)
            after = store.facts(user=ANY, agent=ANY, scope=ANY)
            assert {f.id for f in after} == before
        _check_links_and_hiding(store)
        _check_counts(store)


def _counts(store: FactStore) -> dict[tuple[Any, ...], int]:
    """Live, unhidden facts per slot and owners."""
    out: dict[tuple[Any, ...], int] = {}
    for f in store.facts(user=ANY, agent=ANY, scope=ANY):
        group = (f.slot, f.user, f.agent, f.scope)
        out[group] = out.get(group, 0) + 1
    return out


def _check_counts(store: FactStore) -> None:
    """stats counts each owner's facts apart, as the facts themselves are."""
    counted = {(r["slot"], r["user"], r["agent"], r["scope"]): r["facts"]
               for r in store.stats()["by_slot"]}
    assert counted == _counts(store)


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
def test_owners_are_kept_apart_under_random_operations(engine, request, tmp_path):
    number = [0]

    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                     HealthCheck.data_too_large])
    @given(ops=operations)
    def run(ops: list[tuple[Any, ...]]) -> None:
        with _fresh(engine, request, tmp_path, number) as store:
            _run(store, ops)

    run()


def test_a_user_among_many_gets_a_full_vector_result(request, tmp_path):
    """pgvector's HNSW search filtered to one user among many must not come back short."""
    with _fresh("postgresql", request, tmp_path, [0]) as store:
        with store.batch():
            for n in range(60):
                for user in ("someone", *(f"user{u}" for u in range(10))):
                    store.add("user", f"{SENTENCES[n % 5]} Note {n}.", user=user)
        hits = store.search("deploy Friday lunch VPN dark mode cache reviews",
                            user="someone", limit=40)
        assert len(hits) == 40 and {h.fact.user for h in hits} == {"someone"}
        vector_only = [h for h in hits if h.trace.vector_rank is not None]
        assert len(vector_only) == 40


def test_a_store_opened_for_a_user_and_agent_reads_as_them_when_none_is_named(location, clock):
    """A store's own user and agent (``FactStore(user=, agent=)``) are whom a read or a
    write naming nobody is for: each of its facts goes to its kind's owner, never the
    other's, and a store opened for someone else sees none of them."""
    with FactStore(location, clock=clock, user="alice", agent="helper") as store:
        mine = store.add("user", "Deploy notes: the user prefers dark mode.")
        lesson = store.add("agent", "Deploy notes: rerun the flaky billing tests once.")
        assert (mine.user, lesson.agent) == ("alice", "helper")
        assert {f.id for f in store.facts()} == {mine.id, lesson.id}
        assert {h.fact.id for h in store.search("deploy notes")} == {mine.id, lesson.id}
        assert [mine.id] == [f.id for f in store.facts(slots=["user"], agent="someone")]
    with FactStore(location, clock=clock, user="helper", agent="alice") as swapped:
        assert swapped.facts() == [] and swapped.search("deploy notes") == []
