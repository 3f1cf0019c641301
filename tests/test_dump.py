"""Prompt dumps: the JSON schema, markdown and the self-contained HTML page."""

from __future__ import annotations

import json
import re

import pytest

from _assembler_helpers import FIXED_NOW, make_store
from ctxslots import (
    AssemblyRequest,
    InvalidRequestError,
    ProjectMemoryContributor,
    PromptAssembler,
    StaticContributor,
    UserMemoryContributor,
    count_tokens,
)
from ctxslots.model.prompt import DUMP_SCHEMA_VERSION

TOP_KEYS = ["schema_version", "budget", "safety_margin", "answer_reserve", "available",
            "total_tokens", "encoding", "sticky_overflow", "message", "scope", "user", "agent",
            "now", "flagged",
            "sections", "text"]
SECTION_KEYS = ["name", "title", "priority", "sticky", "status", "reason", "error",
                "header_tokens", "group_tokens", "tokens", "stopped", "items"]
ITEM_KEYS = ["rank", "decision", "reason", "detail", "tokens", "text", "when", "key", "profile",
             "fact", "trace", "relevance_share", "warning"]
TRACE_KEYS = {"rank", "bm25", "bm25_rank", "vector_rank", "cosine", "decay", "age_days",
              "reinforcement", "confidence", "fill"}


class Broken:
    """A contributor that always fails."""

    name, priority, sticky = "broken", 75, False

    def contribute(self, request):
        raise ConnectionError("wiki unreachable")


@pytest.fixture(name="prompt")
def fixture_prompt(tmp_path):
    """A prompt with kept items, budget drops, slot-limit drops and a failed contributor."""
    facts = [("project", "shop", f"Deploy rule {i} for shop: check the freeze window.")
             for i in range(8)]
    facts += [("user", None, "The user deploys shop from a Linux laptop."),
              ("agent", "shop", "The shop deploy needs the cache warmed first.")]
    store = make_store(tmp_path / "d.db", facts)
    from ctxslots import (
        AgentMemoryContributor,
        ProjectMemoryContributor,
        UserMemoryContributor,
    )

    assembler = PromptAssembler(store, contributors=[
        UserMemoryContributor(store), ProjectMemoryContributor(store, limit=5),
        AgentMemoryContributor(store), Broken()])
    prompt = assembler.assemble(AssemblyRequest("deploy shop freeze", scope="shop", budget=90))
    yield prompt
    store.close()


def test_json_schema_is_stable(prompt):
    """The JSON dump has the documented keys, in order, with the documented types."""
    data = json.loads(prompt.dump("json"))
    assert TOP_KEYS == list(data)
    assert DUMP_SCHEMA_VERSION == data["schema_version"] == 1
    assert (90, 90, "o200k_base") == (data["budget"], data["available"], data["encoding"])
    assert count_tokens(data["text"]) == data["total_tokens"] == prompt.total_tokens
    for section in data["sections"]:
        assert SECTION_KEYS == list(section)
        assert section["status"] in {"kept", "dropped", "empty", "error"}
        for item in section["items"]:
            assert ITEM_KEYS == list(item)
            assert item["decision"] in {"kept", "dropped"}
            assert (item["reason"] is None) == (item["decision"] == "kept")
            assert isinstance(item["tokens"], int) and item["tokens"] > 0
            assert TRACE_KEYS <= set(item["trace"])
            assert not {"final", "relevance"} & set(item["trace"])


def test_json_shows_every_kind_of_decision(prompt):
    """Kept items, budget and slot-limit drops and the contributor error all appear, with reasons."""
    data = json.loads(prompt.dump())
    reasons = {i["reason"] for s in data["sections"] for i in s["items"]}
    assert {None, "budget", "slot_limit"} <= reasons
    broken = next(s for s in data["sections"] if s["name"] == "broken")
    assert ("error", "contributor_error", "ConnectionError: wiki unreachable") == \
        (broken["status"], broken["reason"], broken["error"])


def test_markdown_dump_lists_decisions_and_the_prompt(prompt):
    """The markdown dump shows the budget, each item's decision and the prompt in a fence."""
    text = prompt.dump("markdown")
    assert f"**Used:** {prompt.total_tokens} tokens" in text
    assert "dropped: slot_limit (beyond the limit of 5 per slot)" in text
    assert "Contributor error: ConnectionError: wiki unreachable" in text
    assert "```text\n" + prompt.text + "```\n" in text


def test_html_dump_is_one_self_contained_page(prompt):
    """The HTML page loads nothing from elsewhere: inline CSS and script, no URLs."""
    page = prompt.dump("html")
    assert page.startswith("<!DOCTYPE html>")
    assert not re.search(r"""\b(?:src|href)\s*=|url\(|@import|https?://""", page)
    assert 1 == page.count("<script>") and 1 == page.count("<style>")
    assert "ConnectionError: wiki unreachable" in page


def test_unknown_format_is_refused(prompt):
    """An unknown dump format raises InvalidRequestError, a ValueError."""
    with pytest.raises(InvalidRequestError, match="unknown dump format 'yaml'"):
        prompt.dump("yaml")
    with pytest.raises(InvalidRequestError, match="AssembledPrompt"):
        PromptAssembler(None).dump("not a prompt")


def test_empty_prompt_dumps_cleanly():
    """A prompt with nothing offered still dumps in every format, and says which
    contributor was asked and offered nothing."""
    prompt = PromptAssembler(None, contributors=[StaticContributor("none", "None", [])]).assemble(
        AssemblyRequest("hi"))
    assert "" == prompt.text
    assert "(empty: nothing fitted or nothing was offered)" in prompt.dump("markdown")
    assert [("none", "empty", 0, "the contributor offered nothing for this message")] == [
        (s["name"], s["status"], s["tokens"], s["stopped"])
        for s in json.loads(prompt.dump("json"))["sections"]]
    assert "<pre class=\"prompt\"></pre>" in prompt.dump("html")


def test_assembler_dump_uses_its_templates(prompt):
    """PromptAssembler.dump renders with the assembler's template overrides."""
    assembler = PromptAssembler(None, templates={"dump.md.j2": "{{ d.total_tokens }} tokens\n"})
    assert f"{prompt.total_tokens} tokens\n" == assembler.dump(prompt, "markdown")


def test_dumps_show_ages_in_words(tmp_path):
    """A fact written nine days before the turn reads "9 days ago" in the HTML (exact days on
    hover) and markdown dumps."""
    make_store(tmp_path / "a.db", [("project", "shop", "The shop deploys on Fridays.")]).close()
    store = make_store(tmp_path / "a.db", now=FIXED_NOW + 9 * 86400)
    prompt = PromptAssembler(store, contributors=[ProjectMemoryContributor(store)]).assemble(
        AssemblyRequest("deploys", scope="shop", budget=200))
    store.close()
    assert '<span class="meta age" title="9 days">9 days ago</span>' in prompt.dump("html")
    assert "| 1 (9 days ago) |" in prompt.dump("markdown")


def test_the_exact_days_on_hover_are_exact_for_old_memories(tmp_path):
    """Memories said years before the turn show their days on hover as a number a person
    reads ("1,500 days"), not rounded to three digits in exponent notation ("1.5e+03")."""
    store = make_store(tmp_path / "a.db", [("project", "shop", "The shop deploys on Fridays."),
                                           ("project", "shop", "The shop deploys by hand.")],
                       days_ago=[1500, 12000.25])
    prompt = PromptAssembler(store, contributors=[ProjectMemoryContributor(store)]).assemble(
        AssemblyRequest("deploys", scope="shop", budget=200, now=FIXED_NOW),
        record_shown=False)
    store.close()
    hovers = re.findall(r'<span class="meta age" title="([^"]*)">([^<]*)</span>',
                        prompt.dump("html"))
    assert [("1,500 days", "4 years ago"), ("12,000.25 days", "32 years ago")] == hovers


def test_the_dumps_show_the_multiplier_that_moved_a_memory_up(tmp_path):
    """A memory said in the period the message names ranks first with the second words
    rank: the markdown and HTML dumps show the period multiplier that put it there, beside
    its final rank, and nothing for the memory no multiplier lifted."""
    import datetime as dt

    now = dt.datetime(2024, 1, 10, tzinfo=dt.UTC).timestamp()
    july = (now - dt.datetime(2023, 7, 12, tzinfo=dt.UTC).timestamp()) / 86400
    november = (now - dt.datetime(2023, 11, 2, tzinfo=dt.UTC).timestamp()) / 86400
    store = make_store(tmp_path / "p.db", [
        ("project", "shop", "The deploy failed twice."),
        ("project", "shop", "The shop deploy of the shop moved to Fridays."),
    ], now=now, days_ago=[july, november])
    prompt = PromptAssembler(store, contributors=[ProjectMemoryContributor(store)]).assemble(
        AssemblyRequest("What happened to the shop deploy in July 2023?", scope="shop",
                        now=now), record_shown=False)
    store.close()
    first, second = json.loads(prompt.dump("json"))["sections"][0]["items"]
    assert (2, 1, {"period": 2.0}) == (first["trace"]["bm25_rank"], first["trace"]["rank"],
                                       first["trace"]["extra"])
    assert "extra" not in second["trace"]
    rows = [line for line in prompt.dump("markdown").splitlines() if "deploy" in line
            and line.startswith("| ")]
    assert "| 1 (period ×2.00) | The deploy failed twice. (12 July 2023) |" in rows[0]
    assert "| 2 | The shop deploy of the shop moved to Fridays." in rows[1]
    cells = re.findall(r'data-label="final rank">(.*?)</td>', prompt.dump("html"))
    assert ['1<div class="meta lifts" title="multipliers of its ranking">period ×2.00</div>',
            "2"] == cells


def test_the_dumps_name_the_fact_whose_link_pulled_a_memory_in(tmp_path):
    """A memory that shares no word with the message, pulled in by its co-recall link to
    one that does: every dump names that fact, where a reader would otherwise see a memory
    with no words rank and nothing to say why it is there."""
    store = make_store(tmp_path / "l.db", [
        ("project", "x", "The billing service deploys with the blue pipeline."),
        ("project", "x", "The cache must be warmed before traffic returns.")])
    billing, cache = (h.fact.id for h in store.search("billing cache", scope="x"))
    for _ in range(3):  # one search's results, then a reinforcement: one more link each time
        assert {billing, cache} == {h.fact.id for h in store.search("billing cache", scope="x")}
        store.reinforce(billing)
    prompt = PromptAssembler(store, contributors=[ProjectMemoryContributor(store)]).assemble(
        AssemblyRequest("billing deploy", scope="x", now=FIXED_NOW), record_shown=False)
    store.close()
    matched, pulled = json.loads(prompt.dump("json"))["sections"][0]["items"]
    assert matched["trace"]["linked_from"] is None
    assert (cache, billing, None) == (pulled["fact"]["id"], pulled["trace"]["linked_from"],
                                      pulled["trace"]["bm25_rank"])
    row = next(line for line in prompt.dump("markdown").splitlines()
               if "The cache must be warmed" in line and line.startswith("| "))
    assert f"| 2 (pulled in by its co-recall link to fact {billing}) |" in row
    cells = re.findall(r'data-label="final rank">(.*?)</td>', prompt.dump("html"))
    linked = f'<div class="meta linked">pulled in by its co-recall link to fact {billing}</div>'
    assert ["1", f"2{linked}"] == cells


class Traced:
    """A contributor offering a barely relevant line kept and a relevant one dropped."""

    name, priority, sticky = "traced", 60, False

    def contribute(self, request):
        from ctxslots import DropReason, HitTrace, Item, Section

        def trace(relevance, rank):
            return HitTrace(bm25_rank=rank, bm25=-relevance, relevance=relevance, decay=1.0,
                            age_days=0.0, reinforcement=1.0, confidence=1.0, final=relevance,
                            rank=rank)

        return Section(title="Notes", name=self.name, priority=self.priority, items=(
            Item(text="A barely related note.", trace=trace(0.02, 1)),
            Item(text="The note that answers.", trace=trace(1.0, 2),
                 dropped=DropReason.SLOT_LIMIT, detail="beyond the limit")))


def test_a_kept_item_far_less_relevant_than_a_dropped_one_is_flagged():
    """The dump warns on an item kept with near-zero relevance while a more relevant one
    was dropped, naming the share of each and why the other went."""
    prompt = PromptAssembler(None, contributors=[Traced()]).assemble(AssemblyRequest("note"))
    data = json.loads(prompt.dump("json"))
    kept, dropped = data["sections"][0]["items"]
    assert (0.02, 1.0) == (kept["relevance_share"], dropped["relevance_share"])
    assert ("kept with 2% of the best relevance while a more relevant item (100%, traced "
            "rank 2) was dropped (slot_limit)") == kept["warning"]
    assert dropped["warning"] is None and 1 == data["flagged"]
    assert "kept with 2% of the best relevance" in prompt.dump("markdown")


class TwiceTraced(Traced):
    """Two barely relevant lines kept, in two sections, and a relevant one dropped."""

    def __init__(self, name):
        self.name = name

    def contribute(self, request):
        import attrs

        section = super().contribute(request)
        return attrs.evolve(section, items=tuple(
            attrs.evolve(item, text=f"{self.name}: {item.text}") for item in section.items))


def test_the_html_dump_lists_the_flagged_items_one_after_another():
    """The HTML page's warning lists every flagged item, each a link to its row, separated
    as a list is (not each after a colon, which reads as a label of the one before)."""
    prompt = PromptAssembler(None, contributors=[TwiceTraced("notes"), TwiceTraced("more")]
                             ).assemble(AssemblyRequest("note"))
    page = prompt.dump("html")
    summary = re.search(r'<p class="flag-summary"[^>]*>(.*?)</p>', page).group(1)
    links = re.findall(r'<a href="#(item-\d-\d)">([^<]*)</a>', summary)
    assert [("item-1-1", "more rank 1"), ("item-2-1", "notes rank 1")] == links
    assert re.sub(r"<[^>]+>", "", summary) == (
        "&#9888; 2 items kept with near-zero relevance while a more relevant item was "
        "dropped: more rank 1, notes rank 1.")
    for anchor, _ in links:
        assert f'id="{anchor}"' in page


@pytest.mark.parametrize("mode", ["assemble", "aassemble"])
def test_a_memory_slot_that_found_nothing_is_reported_empty(tmp_path, mode):
    """A message no project fact matches: the dump still lists project_memory, empty,
    saying it offered nothing, beside the slots that found something."""
    import asyncio

    store = make_store(tmp_path / "e.db", [("project", "shop", "The shop deploys on Fridays."),
                                           ("agent", None, "Zebras are striped.")])
    assembler = PromptAssembler(store)
    request = AssemblyRequest("zebra", scope="shop", budget=500)
    prompt = assembler.assemble(request) if mode == "assemble" else asyncio.run(
        assembler.aassemble(request))
    sections = {s["name"]: s for s in json.loads(prompt.dump("json"))["sections"]}
    assert {"user_memory", "project_memory", "agent_memory"} == set(sections)
    assert ("empty", 0, [], "the contributor offered nothing for this message") == tuple(
        sections["project_memory"][k] for k in ("status", "tokens", "items", "stopped"))
    assert "kept" == sections["agent_memory"]["status"]
    assert ("What you know about this project (project_memory)\n\nStatus: **empty**, 0 tokens "
            "(header 0), priority 80. Stopped: the contributor offered nothing for this "
            "message.") in prompt.dump("markdown")
    store.close()


def test_every_dump_says_whose_memory_it_shows(tmp_path):
    """Two users' prompts for the same message: each markdown and HTML dump names the user
    and the agent it was assembled for (as the JSON dump does), and never the other user."""
    store = make_store(tmp_path / "w.db", [("user", None, "Edits code in Emacs.", "u-bob"),
                                           ("user", None, "Edits code in Helix.", "u-alice")])
    assembler = PromptAssembler(store)
    bob = assembler.assemble(AssemblyRequest("which editor?", user="u-bob", agent="a-ops"))
    default = assembler.assemble(AssemblyRequest("which editor?"))
    store.close()
    markdown, html = bob.dump("markdown"), bob.dump("html")
    assert "- **User:** u-bob\n- **Agent:** a-ops\n" in markdown
    assert '<dd id="user">u-bob</dd>' in html and '<dd id="agent">a-ops</dd>' in html
    assert "u-alice" not in markdown + html + bob.dump("json")
    assert "- **User:** (the store's default)\n- **Agent:** (the store's default)\n" in \
        default.dump("markdown")
    assert '<dd id="user">(the store&#39;s default)</dd>' in default.dump("html")


def _milliseconds() -> float:
    return FIXED_NOW * 1000


def _time_service_down() -> float:
    raise ConnectionError("the time service is down")


@pytest.mark.parametrize(("clock", "error"), [
    (_milliseconds, "InvalidFactError: clock must be a time between 1970 and the year 9999"),
    (_time_service_down, "ConnectionError: the time service is down")])
def test_a_store_clock_that_fails_leaves_the_dump_without_a_moment(tmp_path, clock, error):
    """A store clock in milliseconds, or one that raises: the memory sections fail naming
    it and the rest of the prompt goes out, and every dump still renders, with no moment.
    The assembly read the clock first and kept its reading: a millisecond one made every
    dump raise "year 59011 is out of range", and one that raised stopped the assembly."""
    from ctxslots import FactStore

    make_store(tmp_path / "c.db", [("user", None, "The user drinks tea.")]).close()
    store = FactStore(tmp_path / "c.db", clock=clock)
    rules = StaticContributor("rules", "Rules", ["Answer briefly."], priority=90)
    memory = UserMemoryContributor(store)
    prompt = PromptAssembler(store, contributors=[rules, memory]).assemble(
        AssemblyRequest("tea"))
    store.close()
    assert prompt.now is None
    assert "## Rules\n- Answer briefly.\n" == prompt.text
    failed = {s.name: s.error for s in prompt.sections if s.status == "error"}
    assert failed[memory.name].startswith(error)
    assert json.loads(prompt.dump())["now"] is None
    assert '<dd id="now">(not known)</dd>' in prompt.dump("html")
    assert "- **As of:** (not known)" in prompt.dump("markdown")


@pytest.mark.parametrize("mode", ["assemble", "aassemble"])
def test_every_dump_says_the_moment_its_ages_count_from(tmp_path, mode):
    """A prompt ranked as of 10 January 2024 shows a July 2023 memory "5 months ago": each
    dump says that moment, so the ages still read right when it is opened later; without
    a request's ``now`` it is the store's clock."""
    import asyncio
    import datetime as dt

    said = dt.datetime(2023, 7, 27, tzinfo=dt.UTC).timestamp()
    as_of = dt.datetime(2024, 1, 10, tzinfo=dt.UTC).timestamp()
    store = make_store(tmp_path / "n.db", [("agent", None, "The canary failed on host 4.")],
                       now=as_of, days_ago=[(as_of - said) / 86400])
    assembler = PromptAssembler(store)

    def run(request):
        if mode == "assemble":
            return assembler.assemble(request)
        return asyncio.run(assembler.aassemble(request))

    prompt = run(AssemblyRequest("canary", now=as_of))
    data = json.loads(prompt.dump())
    [item] = [i for s in data["sections"] for i in s["items"]]
    assert ("27 July 2023", 167.0) == (item["when"], item["trace"]["age_days"])
    assert "2024-01-10T00:00:00+00:00" == data["now"]
    assert "- **As of:** 2024-01-10T00:00:00+00:00 (the ages and dates below count from it)" \
        in prompt.dump("markdown")
    assert '<dd id="now">2024-01-10T00:00:00+00:00</dd>' in prompt.dump("html")
    assert as_of == run(AssemblyRequest("canary")).now  # the store's clock
    store.close()
    assert PromptAssembler(None, contributors=[StaticContributor("none", "None", [])]).assemble(
        AssemblyRequest("hi")).now is None
