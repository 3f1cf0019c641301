"""Why a fact is in a prompt or not: ``ctxslots.inspector.explain`` and ``ctxslots why``."""

from __future__ import annotations

import json
import threading

import pytest
from click.testing import CliRunner

from _assembler_helpers import FIXED_NOW
from ctxslots import (
    AssemblyRequest,
    FactNotFoundError,
    FactStore,
    InvalidRequestError,
    ProjectMemoryContributor,
    PromptAssembler,
    RankingPolicy,
    UserMemoryContributor,
)
from ctxslots.cli import cli
from ctxslots.inspector import explain

MESSAGE = "How do I deploy shop-api on Friday and rerun the flaky billing tests?"


@pytest.fixture(name="demo")
def fixture_demo(tmp_path):
    """The demo's facts in a real SQLite file, with a fixed clock."""
    store = FactStore(tmp_path / "why.db", clock=lambda: FIXED_NOW)
    ids = {
        "name": store.upsert("user", "name", "The user is called Ada and prefers short answers.").id,
        "deploy": store.upsert("project", "deploy.day", "Deploys of shop-api run every Friday "
                               "after the 15:00 freeze.", scope="shop-api").id,
        "tests": store.upsert("project", "tests.command", "Run the shop-api tests with "
                              "`pytest -x services/billing`.", scope="shop-api").id,
        "blog": store.upsert("project", "deploy.day", "The blog deploys on every push.",
                             scope="blog").id,
        "flaky": store.add("agent", "test_refund_retry in services/billing is flaky under load; "
                           "rerun it once.", scope="shop-api").id,
        "english": store.add("agent", "Answer in British English when the user writes it.").id,
    }
    try:
        yield store, ids
    finally:
        store.close()


def why(store, fact_id, message=MESSAGE, **request):
    request.setdefault("scope", "shop-api")
    return explain(PromptAssembler(store), AssemblyRequest(message, **request), fact_id)


def short_budget(store):
    """A budget a little short of what the demo's prompt needs, so its last item is dropped."""
    assembler = PromptAssembler(store)
    need = assembler.assemble(AssemblyRequest(MESSAGE, scope="shop-api"),
                              record_shown=False).total_tokens
    return need - 3


def statuses(answer):
    return {step.name: step.status for step in answer.steps}


def test_a_kept_fact_says_where_and_by_which_words(demo):
    """A fact in the prompt: its section and rank, the query words it holds with their
    stems, its words rank, the candidate pool, its rank and the budget's verdict."""
    store, ids = demo
    answer = why(store, ids["deploy"])
    assert "kept" == answer.outcome and answer.in_prompt
    assert answer.summary == f"Fact {ids['deploy']} is in the prompt: project_memory keeps it at rank 1."
    words = next(s for s in answer.steps if s.name == "words")
    assert {"deploy", "shop", "friday"} <= set(words.data["shared"])
    # Snowball leaves "deploy" as it is: a word the index keeps unchanged shows no stem.
    assert "it holds deploy, shop, api, friday: words rank 1" in words.text
    tests = next(s for s in why(store, ids["tests"]).steps if s.name == "words")
    assert "billing (as bill), tests (as test)" in tests.text
    assert {"owners": "ok", "section": "ok", "words": "ok", "vector": "info", "pool": "ok",
            "rank": "ok", "offer": "ok", "budget": "ok"} == statuses(answer)


def test_a_fact_dropped_for_the_budget_says_what_it_needed(demo):
    """With a budget a little short, the agent lesson is offered and dropped: the answer
    gives its cost and what was left."""
    store, ids = demo
    answer = why(store, ids["flaky"], budget=short_budget(store))
    assert "dropped" == answer.outcome
    assert "dropped (budget: needs" in answer.summary and "left)" in answer.summary
    budget = next(s for s in answer.steps if s.name == "budget")
    assert "fails" == budget.status and budget.data["reason"] == "budget"
    section = next(s for s in answer.steps if s.name == "section")
    assert section.data["room"] == short_budget(store) - section.data["used_before"]


def test_a_fact_sharing_no_word_says_which_words_were_looked_for(demo):
    """A lesson that holds no word of the message: the words step fails and lists the words
    searched with their stems; the summary says so."""
    store, ids = demo
    answer = why(store, ids["english"])
    assert "not_found" == answer.outcome
    words = next(s for s in answer.steps if s.name == "words")
    assert "fails" == words.status and [] == words.data["shared"]
    assert "it shares no word with the message" in answer.summary
    assert "billing (as bill)" in words.text


@pytest.mark.parametrize(("fact", "request_", "expected"), [
    ("blog", {}, "it belongs to scope 'blog', and the search of its section is in 'shop-api'"),
    ("deploy", {"scope": None}, "names no scope"),
    ("name", {"user": "bob"}, ("it is the memory of user 'default', and the request is for user "
                              "'bob'")),
])
def test_a_fact_of_other_owners_says_whose_it_is(demo, fact, request_, expected):
    """A fact another user or another scope owns is not visible, and the answer names both."""
    store, ids = demo
    answer = why(store, ids[fact], **request_)
    assert "not_visible" == answer.outcome
    assert expected in answer.summary
    assert ["owners"] == [s.name for s in answer.steps]


def test_forgotten_and_expired_facts_say_so(tmp_path):
    """A forgotten fact is in the archive; an expired one says when it expired."""
    clock = [FIXED_NOW]
    with FactStore(tmp_path / "e.db", clock=lambda: clock[0]) as store:
        gone = store.add("project", "Deploy on Fridays.", scope="s").id
        store.forget(gone)
        late = store.add("project", "Deploy on Fridays only.", scope="s",
                         expires_at=FIXED_NOW + 60).id
        clock[0] += 3600
        assert "forgotten" in why(store, gone, "deploy", scope="s").summary
        assert "it expired on" in why(store, late, "deploy", scope="s").summary


def weak_match(store):
    """40 lunch notes, 3 strong matches and one weak match of the message; the weak one's id."""
    for n in range(40):
        store.add("project", f"Lunch note {n} about the office and coffee.", scope="s")
    for n in range(3):
        store.add("project", f"Kubernetes canary {n} for the payments ledger rollout.",
                  scope="s")
    return store.add("project", "The team note mentions a rollout once among many many "
                     "other words about lunch, coffee, chairs, desks, plants, windows and "
                     "the office.", scope="s").id


@pytest.mark.parametrize("fill", [False, True])
def test_a_weak_match_under_min_share(tmp_path, fill):
    """A fact that matches one word while others match the rare ones scores under the
    section's min_share of the best: without fill the answer gives its share and the cut;
    with fill (the default) it is kept after the clear matches, and the answer says so."""
    with FactStore(tmp_path / "m.db", clock=lambda: FIXED_NOW) as store:
        weak = weak_match(store)
        assembler = PromptAssembler(store, contributors=[
            ProjectMemoryContributor(store, min_share=0.5, fill=fill)])
        answer = explain(assembler, AssemblyRequest(
            "kubernetes canary payments ledger rollout", scope="s"), weak)
    offer = next(s for s in answer.steps if s.name == "offer")
    if fill:
        assert "kept" == answer.outcome and "as fill" in answer.summary
        assert "below_cut" == offer.data["fill"] and "min_share" in offer.text
        return
    assert "not_offered" == answer.outcome
    assert "under the section's cut of 50% (min_share)" in offer.text
    assert offer.data["share_of_best"] < 0.5 and 4 == offer.data["search_rank"]


def test_a_weak_match_past_the_room_is_dropped_as_fill(tmp_path):
    """With fill on and a budget a little short, the weak match is offered as fill after
    the clear matches and dropped for the budget, and the answer says both."""
    with FactStore(tmp_path / "m.db", clock=lambda: FIXED_NOW) as store:
        weak = weak_match(store)
        assembler = PromptAssembler(store, contributors=[
            ProjectMemoryContributor(store, min_share=0.5)])
        need = assembler.assemble(AssemblyRequest(
            "kubernetes canary payments ledger rollout", scope="s"),
            record_shown=False).total_tokens
        answer = explain(assembler, AssemblyRequest(
            "kubernetes canary payments ledger rollout", scope="s", budget=need - 4), weak)
    assert "dropped" == answer.outcome, answer.lines()
    offer = next(s for s in answer.steps if s.name == "offer")
    assert "below_cut" == offer.data["fill"] and "as fill" in offer.text
    assert "(budget: needs" in answer.summary


def test_a_section_with_no_room_was_not_searched(tmp_path):
    """When the sticky user section takes the whole budget, the project section is not
    searched, and the answer says how much the sections before it used."""
    with FactStore(tmp_path / "r.db", clock=lambda: FIXED_NOW) as store:
        for n in range(6):
            store.upsert("user", f"k{n}", f"The user deploys service number {n} on Fridays.")
        fact = store.add("project", "Deploys happen on Fridays.", scope="s").id
        answer = why(store, fact, "deploy fridays", scope="s", budget=40)
    assert "not_searched" == answer.outcome
    assert "was not searched" in answer.summary


class _Asked(ProjectMemoryContributor):
    """The project section, noting the room it is asked with."""

    def contribute(self, request):
        self.asked = request.room
        return super().contribute(request)


def test_the_room_a_section_was_left_is_the_room_its_contributor_was_told(tmp_path):
    """The sticky user section's fill is placed after the project section's matches: the
    room the answer says the project section was left is the room it was asked with, not
    what the user section holds in the end."""
    with FactStore(tmp_path / "r.db", clock=lambda: FIXED_NOW) as store:
        store.add("user", "The user deploys deploys deploys on friday friday.")
        for n in range(12):
            store.add("user", f"The user once mentioned a deploy in passing, long ago, among "
                      f"many other words and things number {n}.")
        fact = store.add("project", "Deploy shop on friday.", scope="shop").id
        project = _Asked(store)
        assembler = PromptAssembler(store, contributors=[UserMemoryContributor(store), project])
        request = AssemblyRequest("deploy friday", scope="shop", budget=200, safety_margin=0,
                                  answer_reserve=0)
        answer = explain(assembler, request, fact)
    user = answer.prompt.section("user_memory")
    assert any(d.kept and d.item.trace.fill for d in user.items)
    assert user.tokens > request.available - project.asked
    section = next(s for s in answer.steps if s.name == "section")
    assert section.data["room"] == project.asked
    assert section.data["used_before"] == request.available - project.asked
    assert section.text.endswith(f"used {request.available - project.asked} of 200 tokens, "
                                 f"leaving it {project.asked}")


def test_a_section_after_a_match_that_did_not_fit_names_where_filling_stopped(tmp_path):
    """The sticky user section's only match does not fit, which stops filling: the project
    section was not searched because of that item, not because the sections before it
    used the room (they used none)."""
    with FactStore(tmp_path / "r.db", clock=lambda: FIXED_NOW) as store:
        store.add("user", "The user keeps the deploy checklist in a very long document about "
                  "every single step of the release process and its many exceptions.")
        fact = store.add("project", "Deploy on Friday.", scope="s").id
        answer = why(store, fact, "deploy", scope="s", budget=30)
    assert "not_searched" == answer.outcome
    section = next(s for s in answer.steps if s.name == "section")
    assert "user_memory" == section.data["stopped_in"]
    assert "filling stopped in user_memory" in answer.summary
    assert "where item 1 did not fit (budget: needs" in answer.summary


class _Failing(ProjectMemoryContributor):
    """The project section, its search service down."""

    def contribute(self, request):
        raise RuntimeError("search <service> down")


class _Late(ProjectMemoryContributor):
    """The project section, answering only once ``release`` is set."""

    def __init__(self, store):
        super().__init__(store)
        self.release = threading.Event()

    def contribute(self, request):
        self.release.wait(timeout=60)
        return super().contribute(request)


@pytest.mark.parametrize(("contributor", "timeout", "error"), [
    (_Failing, None, "RuntimeError: search <service> down"),
    (_Late, 0.2, "TimeoutError: no section within 0.2 s"),
])
def test_a_fact_whose_section_failed_says_the_section_failed(tmp_path, contributor, timeout,
                                                             error):
    """A section whose contributor raised, or did not answer in time, offered nothing: the
    answer names its error, not a search rank and a cut the section never reached."""
    with FactStore(tmp_path / "e.db", clock=lambda: FIXED_NOW) as store:
        fact = store.add("project", "Deploys of shop-api run every Friday.", scope="s").id
        section = contributor(store)
        assembler = PromptAssembler(store, contributors=[UserMemoryContributor(store), section],
                                    contributor_timeout=timeout)
        try:
            answer = explain(assembler, AssemblyRequest("deploy shop-api", scope="s"), fact)
        finally:
            if isinstance(section, _Late):
                section.release.set()
    assert "error" == answer.prompt.section("project_memory").status
    assert "not_searched" == answer.outcome
    assert not answer.in_prompt
    step = answer.steps[-1]
    assert ("section", "fails", error) == (step.name, step.status, step.data["error"])
    assert answer.summary == (f"Fact {fact} is not in the prompt: its section project_memory "
                              f"failed ({error}), so it offered nothing.")


def test_a_fact_said_after_the_requests_moment_says_so(tmp_path):
    """A request replayed at a moment reads only what was said by then: a fact said later
    is not visible, and the answer says when it was said, not that no word matched."""
    with FactStore(tmp_path / "t.db", clock=lambda: FIXED_NOW) as store:
        fact = store.add("agent", "Deploys of shop api moved to Monday.", scope="s",
                         observed_at=FIXED_NOW - 86400).id
        assembler = PromptAssembler(store)
        answer = explain(assembler, AssemblyRequest("when do shop api deploys run", scope="s",
                                                     now=FIXED_NOW - 10 * 86400), fact)
    assert "not_visible" == answer.outcome
    owners = next(s for s in answer.steps if s.name == "owners")
    assert "fails" == owners.status and "after the request's moment" in owners.text
    assert owners.data["said_at"] > owners.data["now"]


def test_a_reranker_move_is_named(tmp_path):
    """A reranker that moved the fact leaves its mark in the rank step."""
    def backwards(query, hits):
        return list(reversed(hits))

    with FactStore(tmp_path / "k.db", clock=lambda: FIXED_NOW, rerank=backwards) as store:
        first = store.add("project", "Deploy deploy deploy on Fridays.", scope="s").id
        store.add("project", "Deploy notes live in the wiki, with many other words.", scope="s")
        answer = why(store, first, "deploy", scope="s")
    rank = next(s for s in answer.steps if s.name == "rank")
    assert "a reranker moved it from rank 1" in rank.text


def test_a_fact_a_link_pulled_in_does_not_stop_at_the_words_it_lacks(tmp_path):
    """A fact that shares no word with the message but that a co-recall link pulled in is
    in the prompt: its words step is a note, not the step its path stops at, and the
    answer names the link."""
    with FactStore(tmp_path / "l.db", clock=lambda: FIXED_NOW) as store:
        billing = store.add("project", "The billing service deploys with the blue pipeline.",
                            scope="x").id
        cache = store.add("project", "The cache must be warmed before traffic returns.",
                          scope="x").id
        for _ in range(3):  # one search's results, then a reinforcement: one more link each
            assert {billing, cache} == {h.fact.id for h in store.search("billing cache",
                                                                        scope="x")}
            store.reinforce(billing)
        answer = why(store, cache, "billing deploy", scope="x")
    assert ("kept", True) == (answer.outcome, answer.in_prompt)
    assert [] == [s.name for s in answer.steps if s.status == "fails"]
    words = next(s for s in answer.steps if s.name == "words")
    assert "info" == words.status and "it shares no word with the message" in words.text
    rank = next(s for s in answer.steps if s.name == "rank")
    assert f"pulled in by its co-recall link to fact {billing}" in rank.text
    assert next(line for line in answer.lines() if "matched by words" in line).startswith("- ")


def test_the_share_of_the_best_match_counts_from_the_highest_score(tmp_path):
    """A reranker that puts the weakest match first leaves the best match the highest
    scoring one: the others' shares are under 100%, as the section's cut reads them."""
    def backwards(query, hits):
        return list(reversed(hits))

    with FactStore(tmp_path / "b.db", clock=lambda: FIXED_NOW, rerank=backwards) as store:
        best = store.add("project", "Deploy deploy deploy on Fridays.", scope="s").id
        other = store.add("project", "Deploy notes live in the wiki, with many other words.",
                          scope="s").id
        shares = {fact: next(s for s in why(store, fact, "deploy", scope="s").steps
                             if s.name == "rank").text for fact in (best, other)}
    assert "scoring 100% of the best match" in shares[best]
    assert "scoring 100% of the best match" not in shares[other]
    assert "% of the best match" in shares[other]


def test_the_vector_leg_gives_rank_and_cosine(tmp_path):
    """With a vector leg (the hashing embedder, weighted in), the answer gives the fact's
    vector rank and cosine."""
    with FactStore(tmp_path / "v.db", clock=lambda: FIXED_NOW,
                   ranking=RankingPolicy(vector_weight=1.0)) as store:
        fact = store.add("project", "Deploys run on Fridays after the freeze.", scope="s").id
        store.add("project", "Lunch is at noon.", scope="s")
        answer = why(store, fact, "deploys fridays freeze", scope="s")
    vector = next(s for s in answer.steps if s.name == "vector")
    assert "ok" == vector.status and vector.data["vector_rank"] == 1
    assert 0 < vector.data["cosine"] <= 1 and "cosine" in vector.text


@pytest.mark.parametrize("scope", [None, "shop-api"])
def test_no_section_reads_a_plugin_slot(tmp_path, scope):
    """A fact in a slot no contributor reads, global or of the request's workspace: the
    request sees it, and the answer names the slot and the sections."""
    from ctxslots import Limits

    with FactStore(tmp_path / "p.db", clock=lambda: FIXED_NOW,
                   limits=Limits(strict_slots=False)) as store:
        fact = store.add("notes", "Deploy notes.", scope=scope).id
        answer = why(store, fact, "deploy notes", scope=scope)
    assert "no_section" == answer.outcome
    assert "no section reads slot 'notes'" in answer.summary
    owners = answer.steps[0]
    assert ("owners", "ok", scope) == (owners.name, owners.status, owners.data["scope"])


def test_no_section_and_another_workspace_says_the_request_is_elsewhere(tmp_path):
    """A fact of another workspace, in a slot no contributor reads, is not visible to the
    request, and the answer says so of the request (there is no section to name)."""
    from ctxslots import Limits

    with FactStore(tmp_path / "p.db", clock=lambda: FIXED_NOW,
                   limits=Limits(strict_slots=False)) as store:
        fact = store.add("notes", "Deploy notes.", scope="blog").id
        answer = why(store, fact, "deploy notes", scope="shop-api")
    assert "not_visible" == answer.outcome
    assert answer.summary.endswith("it belongs to scope 'blog', and the request is in "
                                   "'shop-api'.")


def test_explaining_counts_no_access(demo):
    """An explanation assembles a trial prompt: no fact counts as shown."""
    store, ids = demo
    why(store, ids["deploy"])
    assert 0 == store.get(ids["deploy"]).access_count


def test_bad_input_is_refused_with_a_clear_error(demo):
    """A missing fact, a malformed id, a request that is not one, or an assembler without
    a fact store each raise a clear error."""
    store, ids = demo
    with pytest.raises(FactNotFoundError):
        why(store, 10_000)
    with pytest.raises(ValueError, match="id"):
        why(store, "three")
    with pytest.raises(InvalidRequestError, match="AssemblyRequest"):
        explain(PromptAssembler(store), "deploy", ids["deploy"])
    with pytest.raises(InvalidRequestError, match="FactStore"):
        explain(PromptAssembler(None), AssemblyRequest("deploy"), ids["deploy"])


def test_match_words_reads_the_engines_stems(store):
    """On each engine, the words a fact holds are found through the index's own stemming
    (plural and singular meet), the context's words apart, stop words left out."""
    fact = store.add("project", "The deploys of shop-api run on Fridays.", scope="s",
                     context="release schedule")
    found = store.match_words(fact.id, "When is the deploy on friday? Any release?")
    assert ("deploy", "friday") == found.shared
    assert ("release",) == found.in_context
    assert "the" in found.stop_words and "the" in found.left_out_shared
    assert all(found.stems[w] for w in found.words)
    assert store.match_words(fact.id, "lunch menu").shared == ()


def test_locate_reports_a_fact_beyond_the_hits(store):
    """A fact that matches the query is located with its words rank and its trace; a fact
    that matches nothing is located nowhere."""
    hit = store.add("project", "Deploy on Fridays.", scope="s")
    miss = store.add("project", "Lunch at noon.", scope="s")
    ranked = store.search_ranked("deploy fridays", scope="s")
    found, lost = ranked.locate(hit.id), ranked.locate(miss.id)
    assert 1 == found.words_rank and found.hit is not None and 1 == found.hit.trace.rank
    assert lost.words_rank is None and lost.hit is None


def test_cli_why_prints_the_answer_and_json(demo):
    """``ctxslots why`` prints the summary and one line per step, or the JSON; a missing
    fact is one error line."""
    store, ids = demo
    path = store.path
    runner = CliRunner()
    result = runner.invoke(cli, ["--db", path, "why", str(ids["flaky"]), MESSAGE, "--scope",
                                 "shop-api", "--budget", str(short_budget(store))],
                           catch_exceptions=False)
    assert 0 == result.exit_code, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith(f"Fact {ids['flaky']} is not in the prompt")
    assert any(line.startswith("x kept by the budget: dropped (budget") for line in lines)
    result = runner.invoke(cli, ["--db", path, "why", str(ids["deploy"]), MESSAGE, "--scope",
                                 "shop-api", "--json"], catch_exceptions=False)
    data = json.loads(result.output)
    assert "kept" == data["outcome"] and data["in_prompt"] is True
    assert [s["name"] for s in data["steps"]][:2] == ["owners", "section"]
    result = runner.invoke(cli, ["--db", path, "why", "999", "deploy"])
    assert 1 == result.exit_code
    assert ["Error: no fact with id 999"] == result.output.splitlines()


def test_cli_why_takes_the_budget_options_of_assemble(tmp_path):
    """A dump made with a safety margin, an answer reserve and another tokenizer: ``ctxslots
    why`` given the same options agrees with the dump on every fact it names, and a fact the
    reserve dropped is explained as dropped (without the options it would be kept)."""
    path = str(tmp_path / "reserve.db")
    with FactStore(path, clock=lambda: FIXED_NOW) as store:
        for n in range(6):
            store.add("agent", f"Deploy lesson {n}: check step {n} before the deploy.")
    runner = CliRunner()
    options = ["--budget", "200", "--safety-margin", "20", "--answer-reserve", "130",
               "--tokenizer", "cl100k_base"]
    result = runner.invoke(cli, ["--db", path, "assemble", "deploy", *options, "--dump", "json"],
                           catch_exceptions=False)
    assert 0 == result.exit_code, result.output
    dump = json.loads(result.output)
    assert "cl100k_base" == dump["encoding"] and 50 == dump["available"]
    decisions = {item["fact"]["id"]: item["decision"] for section in dump["sections"]
                 for item in section["items"]}
    assert {"kept", "dropped"} == set(decisions.values())
    for fact_id, decision in decisions.items():
        result = runner.invoke(cli, ["--db", path, "why", str(fact_id), "deploy", *options,
                                     "--json"], catch_exceptions=False)
        assert 0 == result.exit_code, result.output
        assert decision == json.loads(result.output)["outcome"], fact_id
    dropped = next(i for i, d in decisions.items() if d == "dropped")
    result = runner.invoke(cli, ["--db", path, "why", str(dropped), "deploy", "--budget", "200",
                                 "--json"], catch_exceptions=False)
    assert "kept" == json.loads(result.output)["outcome"]


@pytest.mark.parametrize("scope", [None, "vault"])
def test_a_fact_a_plugin_section_offered_its_own_way_is_explained_as_offered(tmp_path, scope):
    """No memory section reads slot notes, but a plugin's contributor searches it itself, in
    the request's workspace, and keeps the fact: the answer is that it is in the prompt, in
    that section."""
    from ctxslots import Item, Limits, Section, UserMemoryContributor

    class Notes:
        name, priority, sticky = "notes", 75, False

        def __init__(self, store: FactStore) -> None:
            self.store = store

        def contribute(self, request: AssemblyRequest) -> Section | None:
            hits = self.store.search(request.message, slots=["notes"], scope=request.scope,
                                     limit=5, track_access=False)
            return Section(title="Notes", items=[
                Item(h.fact.value, key=f"fact:{h.fact.id}", fact=h.fact, trace=h.trace)
                for h in hits]) if hits else None

    limits = Limits(slots=("user", "project", "agent", "notes"))
    with FactStore(tmp_path / "n.db", limits=limits, clock=lambda: FIXED_NOW) as store:
        fact = store.add("notes", "The vault code rotates every Friday.", scope=scope).id
        assembler = PromptAssembler(store, contributors=[UserMemoryContributor(store),
                                                         Notes(store)])
        answer = explain(assembler, AssemblyRequest("vault code", scope=scope), fact)
    assert "kept" == answer.outcome
    assert "notes keeps it at rank 1" in answer.summary
