"""Co-recall links on real store files: returned together, reinforced, pulled in later."""

from __future__ import annotations

import attrs
import pytest

from ctxslots import FactStore, RankingPolicy


def _pair(store, scope=None):
    a = store.add("project", "Staging deploys need the VPN turned on first.", scope=scope)
    b = store.add("project", "The VPN profile lives in the ops vault under netops.", scope=scope)
    return a, b


def _search_and_reinforce(store, times, query="staging deploys VPN", scope=None, target=None):
    for _ in range(times):
        hits = store.search(query, scope=scope)
        store.reinforce(target if target is not None else hits[0].fact.id)


def test_reinforcing_one_of_a_result_links_it_to_the_others(store):
    a, b = _pair(store)
    c = store.add("agent", "Unrelated lesson about caching wheels.")
    hits = store.search("staging deploys VPN profile")
    assert {h.fact.id for h in hits} == {a.id, b.id}
    store.reinforce(a.id)
    assert store.links(a.id) == {b.id: 1.0}
    assert store.links(b.id) == {a.id: 1.0}
    assert store.links(c.id) == {}
    store.demote(a.id)                                  # demoting links nothing
    assert store.links(a.id) == {b.id: 1.0}


def test_a_strong_link_pulls_the_neighbour_in_and_says_so(store):
    a, b = _pair(store)
    _search_and_reinforce(store, 3, query="staging deploys VPN profile", target=a.id)
    assert store.links(a.id)[b.id] == 3.0
    hits = store.search("staging deploys")               # matches a only
    assert [h.fact.id for h in hits] == [a.id, b.id]
    pulled = hits[1].trace
    assert pulled.linked_from == a.id and pulled.bm25 is None
    assert pulled.extra["link_strength"] == 3.0
    assert pulled.relevance == pytest.approx(hits[0].trace.relevance * 0.5)
    assert [h.trace.rank for h in hits] == [1, 2]
    assert hits[0].trace.linked_from is None


def test_a_fact_the_search_finds_is_never_pulled_in_by_a_link(store):
    """A linked fact that matches the query, but ranks below the limit, keeps its own
    place: a link does not lift it over a better match at a small limit only, with a
    trace saying it matched nothing."""
    a = store.add("project", "deploy deploy deploy deploy friday")
    c = store.add("project", "deploy notes from a long and rambling meeting about many other "
                             "things entirely unrelated to anything at all whatsoever in the "
                             "whole wide world of ours today")
    d = store.add("project", "deploy checklist for the shop api release process steps and "
                             "more words to make it weaker still")
    for n in range(6):
        store.add("project", f"unrelated fact number {n} about cats")
    _search_and_reinforce(store, 3, query="friday rambling", target=a.id)
    assert store.links(a.id)[c.id] == 3.0
    deep = store.search("deploy", limit=10)
    assert [h.fact.id for h in deep] == [a.id, d.id, c.id]
    assert deep[2].trace.bm25_rank == 3 and deep[2].trace.linked_from is None
    top = store.search("deploy", limit=2)
    assert [h.fact.id for h in top] == [a.id, d.id]
    assert [h.trace for h in top] == [h.trace for h in deep[:2]]


def test_a_pulled_fact_keeps_the_rerankers_order(store):
    """Pulling a linked fact in keeps the order a reranker gave the hits, and each hit
    marked as moved stands where the reranker put it."""
    a, b = _pair(store)
    c = store.add("project", "staging deploys are slow on mondays and need a long checklist "
                             "of other things")
    _search_and_reinforce(store, 3, query="staging deploys VPN profile", target=a.id)
    assert [h.fact.id for h in store.search("staging deploys")] == [a.id, c.id, b.id]
    store.rerank = lambda query, hits: list(reversed(hits))
    hits = store.search("staging deploys")
    assert [h.fact.id for h in hits[:2]] == [c.id, a.id]
    assert hits[2].fact.id == b.id and hits[2].trace.linked_from == a.id
    for hit in hits[:2]:
        assert hit.trace.extra["reranked_from"] != hit.trace.rank


def test_a_pulled_neighbour_says_what_it_hides(store, clock):
    """A fact a link pulls in was not among the hits whose near-duplicates were counted
    with the links: its own count is read after, and shown in its trace."""
    older = store.add("project", "the VPN profile lives in the ops vault under netops")
    clock.advance(seconds=5)
    a, b = _pair(store)
    assert {(s.fact_id, s.by) for s in store.consolidate().superseded} == {(older.id, b.id)}
    _search_and_reinforce(store, 3, query="staging deploys VPN profile", target=a.id)
    hits = store.search("staging deploys")               # matches a only
    assert [(h.fact.id, h.trace.linked_from, h.trace.hides) for h in hits] == \
        [(a.id, None, 0), (b.id, a.id, 1)]


def test_weak_links_and_a_disabled_policy_pull_nothing(db_path, clock):
    with FactStore(db_path, clock=clock) as store:
        a, b = _pair(store)
        _search_and_reinforce(store, 2, query="staging deploys VPN profile", target=a.id)
        assert [h.fact.id for h in store.search("staging deploys")] == [a.id]
    policy = attrs.evolve(RankingPolicy(), link_min_strength=None)
    with FactStore(db_path, clock=clock, ranking=policy) as store:
        _search_and_reinforce(store, 3, query="staging deploys VPN profile", target=a.id)
        assert [h.fact.id for h in store.search("staging deploys")] == [a.id]


def test_links_never_cross_scopes_slots_or_the_archive(store):
    a, b = _pair(store, scope="shop")
    _search_and_reinforce(store, 3, query="staging deploys VPN profile", scope="shop", target=a.id)
    assert [h.fact.id for h in store.search("staging deploys", scope="shop", slots=["project"])
            ] == [a.id, b.id]
    assert [h.fact.id for h in store.search("staging deploys", scope="shop", slots=["agent"])] == []
    store.forget(b.id)
    assert [h.fact.id for h in store.search("staging deploys", scope="shop")] == [a.id]


def test_a_pulled_fact_stays_within_the_limit(store):
    a, b = _pair(store)
    _search_and_reinforce(store, 3, query="staging deploys VPN profile", target=a.id)
    assert [h.fact.id for h in store.search("staging deploys", limit=1)] == [a.id]


def test_reinforce_in_a_fresh_store_object_links_nothing(db_path, clock):
    with FactStore(db_path, clock=clock) as store:
        a, b = _pair(store)
        store.search("staging deploys VPN profile")
    with FactStore(db_path, clock=clock) as store:
        store.reinforce(a.id)
        assert store.links(a.id) == {}


def test_one_users_reinforcement_links_only_what_their_own_searches_returned(store):
    """Alice's search returns her fact with a shared one; Bob, who sees only the shared
    fact, reinforces it: no link reaches Alice's fact, and Alice's own reinforcement
    still links what she saw."""
    mine = store.add("user", "Alice keeps the staging deploy VPN token in her vault.",
                     user="alice")
    shared = store.add("project", "Staging deploys need the VPN turned on first.")
    seen = {h.fact.id for h in store.search("staging deploy VPN", user="alice")}
    assert seen == {mine.id, shared.id}
    assert [h.fact.id for h in store.search("staging deploy VPN", user="bob")] == [shared.id]
    for _ in range(3):
        store.reinforce(shared.id, user="bob")
    assert store.links(mine.id) == {}
    store.reinforce(shared.id, user="alice")
    assert store.links(mine.id) == {shared.id: 1.0}


def test_a_reinforcement_names_its_owners_as_the_search_did(store):
    """With no owners named, a reinforcement refers to the searches made with none (the
    store's default user and agent), not to another agent's."""
    a, b = _pair(store)
    assert len(store.search("staging deploys VPN", agent="deployer")) == 2
    store.reinforce(a.id)
    assert store.links(a.id) == {}
    store.reinforce(a.id, agent="deployer")
    assert store.links(a.id) == {b.id: 1.0}


def test_after_an_erasure_no_reinforcement_links_to_a_removed_fact(store):
    gone = store.add("user", "Alice keeps the staging deploy VPN token in her vault.",
                     user="alice")
    shared = store.add("project", "Staging deploys need the VPN turned on first.")
    assert len(store.search("staging deploy VPN", user="alice")) == 2
    store.erase(user="alice")
    store.reinforce(shared.id, user="alice")
    assert store.links(shared.id) == {} and store.links(gone.id) == {}


def test_a_link_to_a_fact_another_store_erased_is_not_written(store):
    """Another process erased a fact this store's recent results still name: the
    reinforcement strengthens nothing towards it."""
    a, b = _pair(store)
    assert len(store.search("staging deploys VPN")) == 2
    with FactStore(store.path, clock=store.clock) as other:
        other.delete(b.id)
    store.reinforce(a.id)
    assert store.links(a.id) == {} and store.links(b.id) == {}


def test_a_link_to_another_users_fact_pulls_nothing_into_their_search(store):
    """Alice's fact linked to a shared one is pulled into her searches that find the
    shared fact; Bob's searches finding that shared fact pull nothing of hers."""
    mine = store.add("user", "Alice keeps the staging VPN token in her vault.", user="alice")
    shared = store.add("project", "Staging deploys need the VPN turned on first.")
    for _ in range(3):
        assert len(store.search("staging VPN", user="alice")) == 2
        store.reinforce(shared.id, user="alice")
    assert store.links(shared.id) == {mine.id: 3.0}
    assert {h.fact.id for h in store.search("deploys turned", user="alice")} == {shared.id,
                                                                                   mine.id}
    assert [h.fact.id for h in store.search("deploys turned", user="bob")] == [shared.id]
