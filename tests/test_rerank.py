"""Boost functions and rerankers applied to fused candidates."""

from __future__ import annotations

import pytest

from ctxslots import FactStore, InvalidFactError, hookimpl
from ctxslots.plugins import make_plugin_manager, reranker_from_plugins
from ctxslots.stores.rerank import coverage_reranker


@pytest.fixture(name="facts")
def fixture_facts(store):
    """Three facts that all match the word 'deploy'."""
    return [
        store.add("project", "Deploy the billing service with make deploy.", tags=["billing"]),
        store.add("project", "Deploy checklist: staging first, then production.", tags=["ops"]),
        store.add("project", "The search service deploy uses blue-green.", tags=["search"]),
    ]


def test_boost_multiplies_and_is_traced(store, facts):
    """A boost favouring one tag moves its fact first and records the factor."""
    hits = store.search("deploy", boost=lambda f: 10.0 if "search" in f.tags else 1.0)
    assert facts[2].id == hits[0].fact.id
    assert 10.0 == hits[0].trace.extra["boost"]
    assert [1, 2, 3] == [h.trace.rank for h in hits]


@pytest.mark.parametrize("bad", [-1.0, float("nan"), "2", None])
def test_bad_boost_is_a_value_error(store, facts, bad):
    """A boost returning a negative, non-finite or non-number factor is refused."""
    with pytest.raises(InvalidFactError, match="boost"):
        store.search("deploy", boost=lambda f: bad)


def test_boost_applies_before_the_limit(store, facts):
    """With limit 1 the boosted fact wins even if it ranked last before boosting."""
    plain = [h.fact.id for h in store.search("deploy", limit=3)]
    hits = store.search("deploy", limit=1, boost=lambda f: 100.0 if f.id == plain[-1] else 1.0)
    assert [plain[-1]] == [h.fact.id for h in hits]


def test_coverage_reranker_prefers_more_query_words(db_path, clock):
    """The built-in reranker puts the fact covering most query words first."""
    with FactStore(db_path, clock=clock, rerank=coverage_reranker) as store:
        for i in range(5):
            store.add("agent", f"deploy deploy deploy note {i}")
        full = store.add("agent", "deploy the billing service on friday")
        hits = store.search("deploy billing friday", limit=3)
    assert full.id == hits[0].fact.id


def test_plugin_reranker_through_the_hook(db_path, clock):
    """A rerank_hits plugin reorders hits; a second one sees the first one's output."""

    class Reverse:
        @hookimpl
        def rerank_hits(self, hits):
            return list(reversed(hits))

    class DropLast:
        @hookimpl
        def rerank_hits(self, query, hits):
            return hits[:-1]

    pm = make_plugin_manager([Reverse(), DropLast()], builtins=False)
    with FactStore(db_path, clock=clock, rerank=reranker_from_plugins(pm)) as store:
        ids = [store.add("project", f"Deploy step {i} of the rollout.").id for i in range(3)]
        plain = [h.fact.id for h in FactStore(db_path, clock=clock).search("deploy rollout")]
        got = [h.fact.id for h in store.search("deploy rollout")]
    assert sorted(ids) == sorted(plain)
    assert list(reversed(plain))[:-1] == got


def test_reranker_may_not_add_facts(location, clock, facts):
    """A reranker that returns hits that were not candidates is an error."""
    with FactStore(location, clock=clock) as other:
        stranger = other.add("user", "Unrelated fact about tea.")
        foreign = other.search("tea")
    with FactStore(location, clock=clock, rerank=lambda q, hits: hits + foreign) as store:
        with pytest.raises(InvalidFactError, match="not add new ones"):
            store.search("deploy")
    assert stranger.id not in {f.id for f in facts}


def test_no_plugin_no_reranker():
    """Without rerank_hits implementations there is no reranker."""
    assert reranker_from_plugins(make_plugin_manager([], builtins=False)) is None


def test_a_reranker_that_fails_is_left_out_naming_its_plugin(db_path, clock, caplog):
    """A rerank_hits hook that raises, returns no list, or repeats a hit is left out with a
    warning naming its plugin; the search answers with the others' order, every hit once."""
    class Reverse:
        @hookimpl
        def rerank_hits(self, query, hits):
            return list(reversed(hits))

    class Raises:
        @hookimpl
        def rerank_hits(self, query, hits):
            raise ZeroDivisionError("division by zero")

    class Repeats:
        @hookimpl
        def rerank_hits(self, query, hits):
            return [hits[0]] * len(hits)

    class Text:
        @hookimpl
        def rerank_hits(self, query, hits):
            return "no hits"

    plugins = [Reverse(), Raises(), Repeats(), Text()]
    pm = make_plugin_manager(plugins, builtins=False)
    with FactStore(db_path, clock=clock, rerank=reranker_from_plugins(pm)) as store:
        [store.add("project", f"Deploy step {i} of the rollout.") for i in range(3)]
        plain = [h.fact.id for h in FactStore(db_path, clock=clock).search("deploy rollout")]
        with caplog.at_level("WARNING", logger="ctxslots.plugins"):
            got = [h.fact.id for h in store.search("deploy rollout")]
    assert list(reversed(plain)) == got
    failed = [r.getMessage() for r in caplog.records if "rerank_hits of plugin" in r.getMessage()]
    assert 3 == len(failed)
    for plugin in plugins[1:]:
        assert any(pm.get_name(plugin) in message for message in failed)


def test_a_failing_plugin_object_is_named_by_its_class(db_path, clock, caplog):
    """A plugin object given without a name is named by its class in the warnings about
    it (a second object of that class numbered), not by a number that says nothing."""
    class BrokenReranker:
        @hookimpl
        def rerank_hits(self, query, hits):
            raise RuntimeError("the reranking model is not loaded")

    pm = make_plugin_manager([BrokenReranker(), BrokenReranker()], builtins=False)
    with FactStore(db_path, clock=clock, rerank=reranker_from_plugins(pm)) as store:
        store.add("project", "Deploy step one of the rollout.")
        with caplog.at_level("WARNING", logger="ctxslots.plugins"):
            store.search("deploy rollout")
    said = "rerank_hits of plugin {} failed; the hits keep the order before it"
    assert [said.format("BrokenReranker"), said.format("BrokenReranker-2")] == sorted(
        r.getMessage() for r in caplog.records)
    assert ["the reranking model is not loaded"] * 2 == [str(r.exc_info[1])
                                                         for r in caplog.records]


def test_a_reranker_returning_hits_of_another_search_is_left_out_naming_it(db_path, caplog):
    """A rerank_hits hook that caches its answer by query text hands one user's hits to
    another user's search: it is left out of that search with a warning naming its
    plugin, and each user's prompt holds that user's memory (every memory section failed
    with an error naming no plugin)."""
    from ctxslots import AssemblyRequest, PromptAssembler

    class CachedByQuery:
        def __init__(self) -> None:
            self.answers: dict[str, list[object]] = {}

        @hookimpl
        def rerank_hits(self, query, hits):
            return self.answers.setdefault(query, list(reversed(hits)))

    with FactStore(db_path) as store:
        store.add("user", "Alice's bank PIN hint is her cat's name.", user="alice")
        store.add("user", "Bob keeps his bank PIN hint in a notebook.", user="bob")
        assembler = PromptAssembler(store, plugins=[CachedByQuery()])
        with caplog.at_level("WARNING"):
            alice = assembler.assemble(AssemblyRequest("bank PIN hint", user="alice"))
            bob = assembler.assemble(AssemblyRequest("bank PIN hint", user="bob"))
    assert alice.text == ("## What you know about the user\n"
                          "- Alice's bank PIN hint is her cat's name.\n")
    assert bob.text == ("## What you know about the user\n"
                        "- Bob keeps his bank PIN hint in a notebook.\n")
    assert [None] * 3 == [s.error for s in bob.sections]
    said = [r.getMessage() for r in caplog.records]
    assert said and all(m == "rerank_hits of plugin CachedByQuery failed; the hits keep "
                        "the order before it" for m in said), said
    assert any("not add new ones" in str(r.exc_info[1]) for r in caplog.records if r.exc_info)


@pytest.mark.parametrize("adjust", ["rerank", "boost"])
def test_reranked_first_hits_never_depend_on_the_limit(db_path, clock, adjust):
    """A reranker (or a boost) sees the candidates found within the pool, as fusion does;
    those a limit past the pool finds follow them. It saw every candidate the limit
    gathered, so a backwards reranker put other facts first at limit 300 than at 10."""
    def backwards(query, hits):
        return list(reversed(hits))

    def deeper_first(fact):  # later facts, found deeper, boosted most
        return float(fact.id)

    boost = {"boost": deeper_first} if adjust == "boost" else {}
    with FactStore(db_path, clock=clock, rerank=backwards if adjust == "rerank" else None
                   ) as store:
        with store.batch():
            for n in range(300):
                store.add("project", f"Deploy note {n}: " + "deploy " * (1 + n % 7)
                          + "the pipeline.")
        assert 100 == store.candidate_pool
        firsts = {limit: [h.fact.id for h in store.search("deploy pipeline", limit=limit,
                                                           track_access=False, **boost)][:10]
                  for limit in (10, 100, 101, 300)}
        ranked = store.search_ranked("deploy pipeline", **boost)
        assert [h.fact.id for h in ranked.hits(300)][:10] == [h.fact.id for h in ranked.hits(10)]
    assert 1 == len({tuple(ids) for ids in firsts.values()}), firsts
    assert 10 == len(firsts[10])
