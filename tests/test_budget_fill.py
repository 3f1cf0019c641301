"""The budget decides how much memory a prompt shows; the user profile is always there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from _assembler_helpers import make_store
from ctxslots import (
    AssemblyRequest,
    BudgetExceededError,
    DropReason,
    FactStore,
    ProjectMemoryContributor,
    PromptAssembler,
    QueryPolicy,
    StaticContributor,
    UserMemoryContributor,
    count_tokens,
    hookimpl,
)


@pytest.fixture(name="many")
def fixture_many(tmp_path: Path):
    """A store with 300 project notes that all mention deploys, and a user profile."""
    notes = [("project", "shop", (f"Deploy note {n}: the {n}th deploy of shop went out on a "
              f"Tuesday after the checks for release {n} passed.")) for n in range(300)]
    store = make_store(tmp_path / "many.db", notes)
    store.upsert("user", "name", "The user is called Ada Lovelace.")
    store.upsert("user", "editor", "The user edits code in Helix.")
    yield store
    store.close()


@pytest.mark.parametrize("budget", [300, 1000, 2000, 4000])
def test_filling_stops_at_the_budget_never_over(many: FactStore, budget: int) -> None:
    """Memory fills the budget: the next item would not have fitted, and the text never exceeds it."""
    prompt = PromptAssembler(many).assemble(AssemblyRequest("how did the deploy go?", scope="shop",
                                                            budget=budget))
    assert prompt.total_tokens <= budget
    assert count_tokens(prompt.text) == prompt.total_tokens
    project = next(s for s in prompt.sections if s.name == "project_memory")
    kept = [d for d in project.items if d.kept]
    first_out = next(d for d in project.items if not d.kept)
    assert DropReason.BUDGET == first_out.reason
    assert budget - prompt.total_tokens < first_out.tokens + 3
    if budget >= 1000:
        assert len(kept) > 10


def test_the_dump_says_why_the_last_item_was_not_taken(many: FactStore, tmp_path: Path) -> None:
    """Budget, ceiling and running out of matches each name themselves in the section report."""
    request = AssemblyRequest("how did the deploy go?", scope="shop", budget=1000)
    full = PromptAssembler(many).assemble(request)
    stopped = next(s for s in full.sections if s.name == "project_memory").stopped
    assert stopped is not None and stopped.startswith("item ") and "(budget: needs " in stopped
    capped = PromptAssembler(many, contributors=[ProjectMemoryContributor(many, limit=3)]).assemble(
        request)
    assert "item 4 not taken (slot_limit: beyond the limit of 3 per slot)" == \
        capped.sections[0].stopped
    few = make_store(tmp_path / "few.db", [("project", "shop", "Deploys run on Friday."),
                                           ("project", "shop", "Deploys need two reviews.")])
    try:
        report = PromptAssembler(few).assemble(request)
        section = json.loads(report.dump("json"))["sections"]
        project = next(s for s in section if s["name"] == "project_memory")
        assert "no more facts match the message (2 found)" == project["stopped"]
        assert "Stopped: no more facts match the message (2 found)." in report.dump("markdown")
    finally:
        few.close()


@pytest.mark.parametrize("budget", range(13, 19))
def test_a_section_whose_first_item_does_not_fit_says_what_it_needed(budget: int) -> None:
    """The note of a section's first item counts the header it would have brought, and
    what it says was left is what the prompt leaves."""
    rules = StaticContributor("rules", "House rules", ["Answer in English."], priority=90)
    notes = StaticContributor("notes", "Notes", ["alpha beta gamma delta"], priority=10)
    prompt = PromptAssembler(None, contributors=[rules, notes]).assemble(
        AssemblyRequest("hi", budget=budget, safety_margin=0, answer_reserve=0))
    item = prompt.section("notes").items[0]
    header = count_tokens("\n## Notes\n")
    left = prompt.available - sum(s.tokens for s in prompt.sections)
    assert left == prompt.available - prompt.total_tokens
    assert (item.kept, item.reason) == (False, DropReason.BUDGET)
    assert item.detail == (f"needs {item.tokens + header} tokens ({header} of them its "
                           f"section's header), {left} left")
    assert item.tokens + header > left


def test_a_profile_fact_appears_for_a_message_that_matches_nothing(many: FactStore) -> None:
    """"hello" matches no fact, yet the prompt still says who the user is, marked as profile."""
    prompt = PromptAssembler(many).assemble(AssemblyRequest("hello", scope="shop"))
    assert "- The user is called Ada Lovelace." in prompt.text.splitlines()
    user = next(s for s in prompt.sections if s.name == "user_memory")
    assert [True, True] == [d.item.profile for d in user.items]
    assert all(d.kept and d.item.trace is None for d in user.items)
    assert "no facts match the message" == user.stopped
    items = next(s for s in json.loads(prompt.dump("json"))["sections"]
                 if s["name"] == "user_memory")["items"]
    assert [True, True] == [i["profile"] for i in items]


def test_the_profile_is_bounded_by_count_and_share_and_never_repeats(tmp_path: Path) -> None:
    """At most five profile facts, most reinforced first, within their share, none shown twice."""
    store = make_store(tmp_path / "p.db")
    try:
        ids = [store.upsert("user", f"k{n}", f"Profile fact number {n} about the user.").id
               for n in range(8)]
        store.reinforce(ids[6])
        store.add("user", "A free memory nobody reinforced is not profile material.")
        section = UserMemoryContributor(store).contribute(AssemblyRequest("hello", budget=2000))
        assert section is not None
        assert ids[6] == section.items[0].fact.id
        assert 5 == len(section.items) and all(i.profile for i in section.items)
        narrow = UserMemoryContributor(store, profile_share=0.05).contribute(
            AssemblyRequest("hello", budget=400))
        assert narrow is not None and 1 == len(narrow.items)
        assert UserMemoryContributor(store, profile_size=0).contribute(
            AssemblyRequest("hello")) is None
        matching = UserMemoryContributor(store).contribute(AssemblyRequest("fact number 6"))
        assert matching is not None
        shown = [i.fact.id for i in matching.items]
        assert len(shown) == len(set(shown))
    finally:
        store.close()


@pytest.mark.parametrize("values", [
    ["Ο χρήστης ζει στην Αθήνα", "Ο χρήστης πίνει καφέ κάθε πρωί", "Ο σκύλος του χρήστη λέγεται Μαξ",
     "Η χρήστρια δουλεύει στην Πάτρα", "Ο χρήστης παίζει κιθάρα", "Ο χρήστης τρέχει κάθε Κυριακή"],
    ["ユーザーは東京都渋谷区に住んでいる", "ユーザーの好きな言語はルビーです", "ユーザーは毎朝コーヒーを飲む",
     "ユーザーは猫を二匹飼っている", "ユーザーは週末に山に登る", "ユーザーは寿司が好きです"],
    ["🦩🦜🦚🪿🦤🐦‍⬛🪽🦩🦜🦚🪿🦤", "🫎🫏🪼🪸🪻🫚🫛🪭🪮🫎🫏🪼", "🧑🏽‍🚀👩🏿‍🔬🧑🏻‍🍳👨🏼‍🎤🧑🏽‍🚀",
     "🍣🍜🍙🍘🍥🥟🥠🥡🍣🍜", "🎸🎹🎺🎻🪕🥁🪘🎷", "🏔️⛰️🌋🗻🏕️🏖️🏜️🏝️"],
    ["ተጠቃሚው በአዲስ አበባ ይኖራል", "ተጠቃሚው ቡና ይወዳል በየቀኑ", "ተጠቃሚው ድመት አለው",
     "ተጠቃሚው ሙዚቃ ይወዳል", "ተጠቃሚው በእግር ይሄዳል", "ተጠቃሚው መጽሐፍ ያነባል"],
], ids=["greek", "japanese", "emoji", "amharic"])
@pytest.mark.parametrize("encoding", ["cl100k_base", "o200k_base"])
def test_the_profile_keeps_to_its_share_in_any_script(tmp_path: Path, values: list[str],
                                                      encoding: str) -> None:
    """Keyed user facts in scripts and emoji a tokenizer spends many tokens on: the
    profile's lines, counted by the real tokenizer, stay within its 20% share of the
    available tokens (its estimate is on the high side for them too)."""
    store = make_store(tmp_path / "p.db")
    try:
        for n, value in enumerate(values):
            store.upsert("user", f"k{n}", value)
        prompt = PromptAssembler(store, encoding=encoding).assemble(
            AssemblyRequest("hello", budget=300))
        section = prompt.section("user_memory")
        assert section is not None
        lines = [d.item.text for d in section.items if d.kept and d.item.profile]
        assert lines
        assert sum(count_tokens(f"- {line}\n", encoding) for line in lines) <= 0.2 * 300
    finally:
        store.close()


@pytest.mark.parametrize("padding", [" " * 300, "\u200b" * 300])
def test_values_the_prompt_shows_shorter_still_fill_the_budget(tmp_path: Path,
                                                                padding: str) -> None:
    """Values holding runs of spaces or zero-width characters (shown collapsed): the
    section is sized by the lines as shown, so 120 matches fill a 1,000-token budget
    instead of stopping at a fifth of it, and the async assembly gives the same text."""
    import asyncio

    store = make_store(tmp_path / "pad.db", [
        ("project", None, f"deploy note {n}:{padding}ok") for n in range(120)])
    try:
        request = AssemblyRequest("deploy note", budget=1000)
        assembler = PromptAssembler(store)
        prompt = assembler.assemble(request, record_shown=False)
        assert prompt.total_tokens <= 1000
        section = prompt.section("project_memory")
        assert section is not None and 120 == sum(d.kept for d in section.items)
        assert prompt.text == asyncio.run(assembler.aassemble(request)).text
    finally:
        store.close()


def test_a_sticky_section_that_fills_is_cut_by_the_budget_without_overflowing(tmp_path: Path) -> None:
    """Hundreds of matching user memories fill a small budget; only an empty fit is an overflow."""
    store = make_store(tmp_path / "u.db", [("user", None, (f"The user went hiking on trail {n} "
                                            "with friends and took photos of the lake."))
                                           for n in range(200)])
    try:
        prompt = PromptAssembler(store).assemble(AssemblyRequest("hiking photos", budget=500))
        assert not prompt.sticky_overflow and prompt.total_tokens <= 500
        user = prompt.sections[0]
        assert user.stopped is not None and "(budget: needs" in user.stopped
        capped = PromptAssembler(store, contributors=[UserMemoryContributor(store, limit=100)])
        with pytest.raises(BudgetExceededError):
            capped.assemble(AssemblyRequest("hiking photos", budget=500))
    finally:
        store.close()


def test_matches_far_below_the_best_fill_the_room_after_the_others(tmp_path: Path) -> None:
    """A fact matching one common word of a long question comes after the clear match,
    marked as fill; with fill off it is not offered."""
    store = make_store(tmp_path / "w.db", [
        ("project", None, "The billing service retries refunds three times before paging."),
        *[("project", None, f"Service note {n}: the service runs in region {n}.")
          for n in range(40)]])
    try:
        request = AssemblyRequest("how many times does billing retry a refund before paging the "
                                  "service owner?", budget=2000)
        section = ProjectMemoryContributor(store).contribute(request)
        assert section is not None and 41 == len(section.items)
        first, *rest = section.items
        assert first.text.startswith("The billing service") and first.trace.fill is None
        assert {"below_cut"} == {i.trace.fill for i in rest}
        assert "no more facts match the message (41 found: 40 under 10% of the best)" == \
            section.stop_note
        strict = ProjectMemoryContributor(store, fill=False).contribute(request)
        assert strict is not None and 1 == len(strict.items)
        assert "the next match scores under 10% of the best one's score" == strict.stop_note
    finally:
        store.close()


class _PinWeakSecond:
    """A reranker that moves the weak "Lunch" hit up to second place."""

    @hookimpl
    def rerank_hits(self, hits):
        pinned = [h for h in hits if h.fact.value.startswith("Lunch")]
        rest = [h for h in hits if not h.fact.value.startswith("Lunch")]
        return rest[:1] + pinned + rest[1:]


def test_a_reranked_weak_match_does_not_make_the_matches_after_it_fill(tmp_path: Path) -> None:
    """A reranker moves a match scoring far under the best up to second place: it comes
    after the other matches as fill, and the clear matches it passed stay matches (not
    fill that a later section's matches would take the room of)."""
    store = make_store(tmp_path / "r.db", [
        *[("project", None, f"Canary step {n} watches the canary host.") for n in range(4)],
        ("project", None, "Lunch; one canary."),
        ("agent", None, "Lesson: page the canary owner first.")])
    try:
        for fact in store.facts(slots=["project"]):
            if not fact.value.startswith("Lunch"):
                store.reinforce(fact.id, 15)
        best = max(h.trace.final for h in store.search("canary host", track_access=False))
        weak = store.search("canary host", slots=["project"], limit=5, track_access=False)[-1]
        assert weak.fact.value.startswith("Lunch") and weak.trace.final < 0.1 * best
        assembler = PromptAssembler(store, plugins=[_PinWeakSecond()])
        full = assembler.assemble(AssemblyRequest("canary host", budget=2000))
        project = full.section("project_memory")
        texts = [d.item.text for d in project.items]
        fills = [d.item.trace.fill for d in project.items]
        assert texts[-1].startswith("Lunch") and fills == [None, None, None, None, "below_cut"]
        # A budget that holds every clear match of both sections but not the fill too.
        matches = sum(s.tokens for s in full.sections) - project.items[-1].tokens
        prompt = assembler.assemble(AssemblyRequest("canary host", budget=matches))
        assert [f"Canary step {n} watches the canary host." in prompt.text
                for n in range(4)] == [True] * 4
        assert "Lesson: page the canary owner first." in prompt.text
        assert "Lunch" not in prompt.text
    finally:
        store.close()


def test_fill_said_beside_a_clear_match_comes_first(tmp_path: Path) -> None:
    """Below the cut, the facts said at the moment of a clear match (one flush, one session)
    come first, by that match's score, even when the store ranks them deepest; the rest keep
    the store's order."""
    clock = {"now": 1_700_000_000.0}
    with FactStore(tmp_path / "e.db", clock=lambda: clock["now"]) as store:
        with store.batch():
            for n in range(200):  # other sessions: short, so BM25 ranks them first
                store.add("user", f"Rosaline likes thing {n}.", observed_at=1_600_000_000.0 + n)
            visit = store.add("user", "Rosaline visited rowing clubs in May.",
                                 observed_at=1_650_000_000.0)
            beside = [store.add("user", f"Rosaline spoke at length with a coach about the "
                                        f"long and careful training plan, part {n}.",
                                observed_at=1_650_000_000.0) for n in range(3)]
        request = AssemblyRequest("Which rowing clubs did Rosaline visit?", budget=600)
        section = UserMemoryContributor(store).contribute(request)
        assert section is not None
        ids = [i.fact.id for i in section.items if i.fact is not None]
        assert [visit.id, *sorted(f.id for f in beside)] == \
            [ids[0], *sorted(ids[1:4])]
        assert {"below_cut"} == {i.trace.fill for i in section.items[1:]}
        # Without the episode the three would come after every shorter "likes" fact.
        plain = store.search("Which rowing clubs did Rosaline visit?", slots=["user"], limit=500,
                             track_access=False)
        assert {f.id for f in beside} == {h.fact.id for h in plain[-3:]}
        rest = [h.fact.id for h in plain[1:-3]]
        assert len(ids) > 8 and ids[4:] == rest[:len(ids) - 4]


def test_a_sticky_section_of_fill_only_yields_without_overflowing(tmp_path: Path) -> None:
    """The user's memories match only through a word common to the store (relaxed fill),
    and the project's long matches take the room: the user section is dropped for the
    budget and the prompt comes back, since the sticky section alone would fit."""
    store = FactStore(tmp_path / "f.db", query_policy=QueryPolicy(common_min_facts=0))
    try:
        with store.batch():
            for n in range(40):
                store.add("user", f"The user drinks coffee with oat milk, cup {n}.")
            for n in range(20):
                store.add("agent", f"Lesson {n}: rerun the flaky suite {n} once.", scope="shop")
            for n in range(5):
                store.add("project", f"Deploy rule {n}: "
                          + "the deploy waits for the freeze window and the checklist " * 6,
                          scope="shop")
        assert ["deploy"] == store.query_words("coffee deploy")
        for budget in (100, 200):
            prompt = PromptAssembler(store).assemble(
                AssemblyRequest("coffee deploy", scope="shop", budget=budget))
            assert not prompt.sticky_overflow and prompt.total_tokens <= budget
            user, project = prompt.section("user_memory"), prompt.section("project_memory")
            assert "dropped" == user.status and user.items
            assert {"relaxed"} == {d.item.trace.fill for d in user.items}
            assert {DropReason.BUDGET} == {d.reason for d in user.items}
            assert "kept" == project.status
    finally:
        store.close()


@pytest.mark.parametrize("group_dates", [True, False])
@pytest.mark.parametrize("budget", [100, 200, 300])
def test_the_profile_keeps_to_its_share_with_the_dates_it_shows(tmp_path: Path, budget: int,
                                                                 group_dates: bool) -> None:
    """Short profile facts said on different days: their lines and the dates shown with
    them (headings, or the end of each line), counted by tiktoken on the prompt, stay
    within the profile's 20% share of the available tokens."""
    now = 1_750_000_000.0
    store = FactStore(tmp_path / "d.db", clock=lambda: now)
    try:
        for n, value in enumerate(["Name: Ada.", "Lives in Oslo.", "Has a cat.", "Likes tea.",
                                   "Uses Vim.", "Runs daily."]):
            store.upsert("user", f"k{n}", value, observed_at=now - 86400.0 * (30 + 40 * n))
        assembler = PromptAssembler(store, contributors=[
            UserMemoryContributor(store, group_dates=group_dates)])
        prompt = assembler.assemble(AssemblyRequest("hello", budget=budget))
    finally:
        store.close()
    header, shown = prompt.text.split("\n", 1)
    assert "## What you know about the user" == header and shown
    assert all(d.item.profile for d in prompt.section("user_memory").items if d.kept)
    assert count_tokens(shown) <= 0.2 * budget
