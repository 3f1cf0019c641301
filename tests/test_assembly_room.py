"""Contributors are asked in placement order, each told the room the sections before it left."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest

from _assembler_helpers import make_store
from ctxslots import (
    AssemblyRequest,
    BudgetExceededError,
    DropReason,
    FactStore,
    InvalidRequestError,
    Item,
    ProjectMemoryContributor,
    PromptAssembler,
    Section,
    StaticContributor,
    UserMemoryContributor,
)
from ctxslots.contributors.memory import NO_ROOM
from ctxslots.tokens import TokenCounter


def _crowded(path: Path, *, dated: bool) -> FactStore:
    """User memories that can fill any budget, project and agent notes on the same words
    (said on a few days before now when ``dated``, so the sections group them by day)."""
    facts = [("user", None, (f"The user deploys the shop service on day {n} and checks the "
              "dashboards right after.")) for n in range(300)]
    facts += [("project", "shop", (f"The shop service deploy {n} runs the database migrations "
               "first.")) for n in range(300)]
    facts += [("agent", "shop", f"Lesson {n}: the shop deploy fails when the cache is cold.")
              for n in range(50)]
    return make_store(path, facts, days_ago=[n % 7 * 3 for n in range(len(facts))]
                      if dated else ())


@pytest.fixture(name="crowded")
def fixture_crowded(tmp_path: Path):
    """The crowded store, said now."""
    store = _crowded(tmp_path / "crowded.db", dated=False)
    yield store
    store.close()


@pytest.fixture(name="crowded_either", params=[False, True], ids=["said now", "dated"])
def fixture_crowded_either(tmp_path: Path, request: pytest.FixtureRequest):
    """The crowded store, said now or on several days."""
    store = _crowded(tmp_path / "crowded.db", dated=request.param)
    yield store
    store.close()


class Asked:
    """A contributor of fixed lines that remembers the request it was asked with."""

    def __init__(self, name: str, priority: int, lines: list[str], *,
                 section_priority: int | None = None) -> None:
        self.name, self.priority, self.sticky = name, priority, False
        self.lines = lines
        self.section_priority = priority if section_priority is None else section_priority
        self.asked: list[AssemblyRequest] = []

    def contribute(self, request: AssemblyRequest) -> Section:
        self.asked.append(request)
        return Section(title=self.name, name=self.name, priority=self.section_priority,
                       items=tuple(Item(text=line) for line in self.lines))


def test_a_slot_after_a_full_budget_is_not_searched_and_the_dump_says_why(
        crowded: FactStore) -> None:
    """The user section fills 600 tokens: project and agent are dropped for the budget, unsearched."""
    prompt = PromptAssembler(crowded).assemble(
        AssemblyRequest("how do we deploy the shop service?", scope="shop", budget=600))
    user, project, agent = (prompt.section(n) for n in
                            ("user_memory", "project_memory", "agent_memory"))
    assert user.status == "kept" and user.stopped is not None and "(budget: needs" in user.stopped
    for report in (project, agent):
        assert ("dropped", DropReason.BUDGET, NO_ROOM, ()) == (
            report.status, report.reason, report.stopped, report.items)
    sections = {s["name"]: s for s in json.loads(prompt.dump("json"))["sections"]}
    assert NO_ROOM == sections["project_memory"]["stopped"]
    assert f"Stopped: {NO_ROOM}." in prompt.dump("markdown")


@pytest.mark.parametrize("budget", [120, 400, 1000, 3000])
def test_rooms_never_change_the_prompt(crowded_either: FactStore, budget: int) -> None:
    """The same prompt as when every contributor is asked for the whole budget (aassemble),
    with lines grouped by day too."""
    crowded = crowded_either
    assembler = PromptAssembler(crowded)
    for message in ("how do we deploy the shop service?", "what fails when the cache is cold",
                    "database migrations", "hello"):
        request = AssemblyRequest(message, scope="shop", budget=budget)
        told = assembler.assemble(request)
        untold = asyncio.run(assembler.aassemble(request))
        assert untold.text == told.text
        assert [d.item.key for s in untold.sections for d in s.items if d.kept] == \
            [d.item.key for s in told.sections for d in s.items if d.kept]
        for section in told.sections:  # an unsearched section offers nothing untold would keep
            if section.stopped == NO_ROOM:
                same = [s for s in untold.sections if s.name == section.name]
                assert not any(d.kept for s in same for d in s.items)


def test_lines_repeating_an_earlier_section_leave_room_a_later_match_fills(
        tmp_path: Path) -> None:
    """Agent lessons that repeat the user's facts word for word are dropped as duplicates
    and take none of the room: the section offers more, as when asked for the whole budget."""
    now = 1_700_000_000.0
    with FactStore(tmp_path / "memory.db", clock=lambda: now) as store:
        with store.batch():
            for n in range(8):
                store.upsert("user", f"note.{n}", f"Friday tea note {n}.")
            for n in range(8):
                store.add("agent", f"Friday tea note {n}.")
            for n in range(8):
                store.add("agent", f"Friday tea lesson {n}.")
        assembler = PromptAssembler(store)
        for budget in range(60, 200, 2):
            request = AssemblyRequest("friday tea", budget=budget, now=now)
            told = assembler.assemble(request)
            untold = asyncio.run(assembler.aassemble(request))
            assert told.text == untold.text, budget
        request = AssemblyRequest("friday tea", budget=78, now=now)
        prompt = assembler.assemble(request)
        lessons = {s.name: s for s in prompt.sections}["agent_memory"]
        assert any(d.reason is DropReason.DUPLICATE for d in lessons.items)
        assert "- Friday tea lesson 0.\n" in prompt.text
        assert lessons.room == 14  # what the user's section left, as it was told first


class Filling:
    """A contributor whose section fills: it offers the lines that fit the room it is told,
    and remembers each room."""

    name, priority, sticky = "feed", 40, False

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.rooms: list[int | None] = []
        self.counter = TokenCounter()

    def contribute(self, request: AssemblyRequest) -> Section:
        self.rooms.append(request.room)
        items: list[Item] = []
        used = 0
        for line in self.lines:
            used += self.counter.count(f"- {line}\n")
            if used > request.room_left:
                break
            items.append(Item(text=line))
        return Section(title="Feed", items=tuple(items), fills=True)


def test_a_filling_section_is_asked_again_only_with_more_room_than_it_was_told() -> None:
    """Its lines repeat the rules' lines: it is asked again with the room they took, once;
    not a third time with that same room, which brings the same answer."""
    rules = ["Use tabs in Makefiles.", "Never deploy on Fridays."]
    feed = Filling(rules + [f"News item {n} today." for n in range(40)])
    assembler = PromptAssembler(None, contributors=[
        StaticContributor("rules", "Rules", tuple(rules), priority=90), feed])
    request = AssemblyRequest("hello", budget=120)
    prompt = assembler.assemble(request)
    assert 2 == len(feed.rooms), feed.rooms
    first, second = feed.rooms
    assert first is not None and second is not None and second > first
    assert prompt.text == asyncio.run(assembler.aassemble(request)).text


class FailsWhenAskedAgain(Filling):
    """A filling contributor whose second answer in one assembly raises."""

    def contribute(self, request: AssemblyRequest) -> Section:
        if self.rooms:
            self.rooms.append(request.room)
            raise RuntimeError("the news service went down")
        return super().contribute(request)


@pytest.mark.parametrize("timeout", [None, 120.0])
def test_a_filling_section_whose_second_answer_fails_keeps_its_first_unwarned(
        caplog: pytest.LogCaptureFixture, timeout: float | None) -> None:
    """Asked again for the room its repeated lines left, a contributor that raises keeps
    its first answer, in the prompt and the dump with no error, and no warning says it
    failed (the command would print one for a section that is in the prompt)."""
    rules = ["Use tabs in Makefiles.", "Never deploy on Fridays."]
    feed = FailsWhenAskedAgain(rules + [f"News item {n} today." for n in range(40)])
    assembler = PromptAssembler(None, contributors=[
        StaticContributor("rules", "Rules", tuple(rules), priority=90), feed],
        contributor_timeout=timeout)
    with caplog.at_level(logging.WARNING, logger="ctxslots.assembler"):
        prompt = assembler.assemble(AssemblyRequest("hello", budget=120))
    assert 2 == len(feed.rooms), feed.rooms
    report = next(s for s in prompt.sections if s.name == "feed")
    assert ("kept", None) == (report.status, report.error)
    assert "- News item 0 today.\n" in prompt.text
    assert [] == [r.getMessage() for r in caplog.records]


def test_each_contributor_hears_the_room_left_by_the_ones_placed_before_it() -> None:
    """Asked high priority first; the next one's room is the budget less what the first kept."""
    first = Asked("first", 90, ["alpha beta gamma"] * 1 + ["delta epsilon"])
    second = Asked("second", 50, ["zeta"])
    assembler = PromptAssembler(None, contributors=[second, first])
    prompt = assembler.assemble(AssemblyRequest("x", budget=300))
    assert [300] == [r.room for r in first.asked]
    used = prompt.section("first").tokens
    assert [300 - used] == [r.room for r in second.asked]
    assert all(r.room is None for r in asyncio.run(_untold(assembler)))


async def _untold(assembler: PromptAssembler) -> list[AssemblyRequest]:
    """The requests the contributors got from aassemble."""
    await assembler.aassemble(AssemblyRequest("x", budget=300))
    return [r for c in assembler.contributors or () for r in c.asked[-1:]]  # type: ignore[attr-defined]


def test_a_section_placed_elsewhere_than_its_contributor_stops_the_hints() -> None:
    """A section that moves above others would make their rooms too small: no room is told then."""
    mover = Asked("mover", 10, ["a line that moves up"], section_priority=95)
    later = Asked("later", 5, ["the last line"])
    top = Asked("top", 90, ["the first line"])
    prompt = PromptAssembler(None, contributors=[mover, later, top]).assemble(
        AssemblyRequest("x", budget=200))
    assert top.asked[0].room == 200 and mover.asked[0].room is not None
    assert later.asked[0].room is None
    assert ["mover", "top", "later"] == [s.name for s in prompt.sections]
    assert all(s.status == "kept" for s in prompt.sections)


def test_extra_blocks_take_their_room_before_lower_sections(crowded: FactStore) -> None:
    """A context block (priority 90) placed after the sticky user section, before project."""
    static = StaticContributor("rules", "Rules", ("Be brief.",), priority=85)
    seen: list[int | None] = []

    class Spy(ProjectMemoryContributor):
        def contribute(self, request: AssemblyRequest) -> Section | None:
            seen.append(request.room)
            return super().contribute(request)

    assembler = PromptAssembler(crowded, contributors=[
        Spy(crowded), static, UserMemoryContributor(crowded, profile_size=0)])
    request = AssemblyRequest("zzz-nothing-matches", scope="shop", budget=500,
                              extra=[("Open file", "line one\nline two")])
    prompt = assembler.assemble(request)
    kept_before = sum(s.tokens for s in prompt.sections if s.name != "project_memory")
    assert [500 - kept_before] == seen


def test_room_is_checked_and_bounded_by_what_is_available() -> None:
    """A negative room is refused; room_left never exceeds the budget's available tokens."""
    with pytest.raises(InvalidRequestError):
        AssemblyRequest("x", room=-1)
    assert 100 == AssemblyRequest("x", budget=100, room=500).room_left
    assert 40 == AssemblyRequest("x", budget=100, room=40).room_left
    assert 90 == AssemblyRequest("x", budget=100, answer_reserve=10).room_left


def test_a_memory_section_offers_what_fills_its_room_and_a_little_more(
        crowded: FactStore) -> None:
    """With a small room a slot offers a few facts, not a whole budget's worth, and says so."""
    contributor = ProjectMemoryContributor(crowded)
    small = contributor.contribute(AssemblyRequest("shop service deploy", scope="shop",
                                                   budget=2000, room=100))
    full = contributor.contribute(AssemblyRequest("shop service deploy", scope="shop",
                                                  budget=2000))
    assert small is not None and full is not None
    assert 3 <= len(small.items) < 12 < len(full.items)
    assert [i.key for i in small.items] == [i.key for i in full.items[:len(small.items)]]
    assert small.stop_note is not None and "more than the 100 tokens left hold" in small.stop_note
    assert NO_ROOM == contributor.contribute(AssemblyRequest("shop service deploy", scope="shop",
                                                             room=0)).stop_note


@pytest.mark.parametrize("holds_a_fact", [False, True], ids=["empty", "holding"])
def test_a_sticky_memory_section_without_room_overflows_only_if_it_had_something(
        tmp_path, holds_a_fact):
    """A sticky section placed first fills the budget; the user section (sticky too) gets no
    room. With no fact to show it is simply absent; with one, the prompt overflows."""
    facts = [("user", None, "The user deploys on Fridays.")] if holds_a_fact else []
    store = make_store(tmp_path / "s.db", facts)
    rules = StaticContributor("alpha", "deploy", ["deploy deploy deploy deploy",
                                                  "deploy deploy deploy\n# deploy deploy deploy"],
                              priority=88, sticky=True)
    assembler = PromptAssembler(store, contributors=[UserMemoryContributor(store, limit=1), rules])
    request = AssemblyRequest("deploy", budget=21)
    try:
        if holds_a_fact:
            with pytest.raises(BudgetExceededError, match="user_memory"):
                assembler.assemble(request)
        else:
            prompt = assembler.assemble(request)
            assert not prompt.sticky_overflow
            assert "user_memory" not in {s.name for s in prompt.sections if s.status != "empty"}
    finally:
        store.close()
