"""Memory sections fill the budget once the words run out, and each bullet says when it was said."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ctxslots import (
    AssemblyRequest,
    DropReason,
    FactStore,
    InvalidRequestError,
    Item,
    ProjectMemoryContributor,
    PromptAssembler,
    QueryPolicy,
    Section,
    UserMemoryContributor,
    count_tokens,
)

NOW = datetime(2023, 11, 14, 15, 0, tzinfo=UTC).timestamp()
MAY = datetime(2023, 5, 8, 10, 20, tzinfo=UTC).timestamp()


@pytest.fixture(name="said")
def fixture_said(tmp_path: Path):
    """A store whose user said one thing in May and one thing today."""
    store = FactStore(tmp_path / "said.db", clock=lambda: NOW)
    store.add("user", "The user took in a dog named Biscuit.", observed_at=MAY)
    store.add("user", "The user walks Biscuit every morning.", observed_at=NOW - 3600)
    yield store
    store.close()


def test_a_bullet_carries_its_date(said: FactStore) -> None:
    """Ungrouped, a memory said on another day ends its bullet with that day; one said
    today does not, and the budget counts the date."""
    ungrouped = UserMemoryContributor(said, group_dates=False)
    prompt = PromptAssembler(said, contributors=[ungrouped]).assemble(
        AssemblyRequest("Biscuit the dog", budget=300))
    lines = prompt.text.splitlines()
    assert "- The user took in a dog named Biscuit. (8 May 2023)" in lines
    assert "- The user walks Biscuit every morning." in lines
    assert count_tokens(prompt.text) == prompt.total_tokens
    kept = {d.item.text: d for d in prompt.kept}
    dated = kept["The user took in a dog named Biscuit."]
    assert "8 May 2023" == dated.item.when
    assert count_tokens("- The user took in a dog named Biscuit. (8 May 2023)\n") == dated.tokens


JUNE = datetime(2023, 6, 2, 9, 0, tzinfo=UTC).timestamp()


@pytest.fixture(name="days")
def fixture_days(tmp_path: Path):
    """A store whose user said two things about Biscuit in May, one in June and one today."""
    store = FactStore(tmp_path / "days.db", clock=lambda: NOW)
    with store.batch():
        store.add("user", "Biscuit the dog is a beagle.", observed_at=MAY)
        store.add("user", "Biscuit the dog chewed the sofa.", observed_at=JUNE)
        store.add("user", "The user took in a dog named Biscuit.", observed_at=MAY)
        store.add("user", "The user walks Biscuit every morning.", observed_at=NOW - 3600)
    yield store
    store.close()


def test_memories_said_on_one_day_share_its_heading(days: FactStore) -> None:
    """By default a day's memories stand under one heading of that day, the groups in
    the order of their best memory and the memories in rank order within each; the
    undated ones come first; the budget counts each heading once, exactly."""
    prompt = PromptAssembler(days).assemble(AssemblyRequest("Biscuit the dog", budget=300))
    ranked = [d.item.text for d in prompt.section("user_memory").items]
    assert ["Biscuit the dog is a beagle.", "Biscuit the dog chewed the sofa."] == ranked[:2]
    assert prompt.text == ("## What you know about the user\n"
                           "- The user walks Biscuit every morning.\n"
                           "8 May 2023:\n"
                           "- Biscuit the dog is a beagle.\n"
                           "- The user took in a dog named Biscuit.\n"
                           "2 June 2023:\n"
                           "- Biscuit the dog chewed the sofa.\n")
    assert count_tokens(prompt.text) == prompt.total_tokens
    report = prompt.section("user_memory")
    assert prompt.total_tokens == report.tokens
    lines = sum(d.tokens for d in report.items if d.kept)
    headings = count_tokens("8 May 2023:\n") + count_tokens("2 June 2023:\n")
    assert report.tokens == report.header_tokens + lines + headings
    assert headings == report.group_tokens  # the dumps say it, so their figures add up
    dumped = json.loads(prompt.dump("json"))["sections"][0]
    assert dumped["tokens"] == dumped["header_tokens"] + dumped["group_tokens"] + sum(
        i["tokens"] for i in dumped["items"] if i["decision"] == "kept")
    assert f"date headings {headings})" in prompt.dump("markdown")
    assert f"date headings {headings})" in prompt.dump("html")
    assert count_tokens("- Biscuit the dog is a beagle.\n") == report.items[0].tokens
    # each memory keeps its own date in the dumps
    items = json.loads(prompt.dump("json"))["sections"][0]["items"]
    assert {"Biscuit the dog is a beagle.": "8 May 2023", "Biscuit the dog chewed the sofa.": "2 June 2023",
            "The user took in a dog named Biscuit.": "8 May 2023",
            "The user walks Biscuit every morning.": None} == {i["text"]: i["when"] for i in items}


def test_a_heading_is_paid_by_the_first_line_under_it(days: FactStore) -> None:
    """With room for the header, one heading and one line, the next line of another day
    does not fit: what it needs counts its heading too, and the dump says so."""
    header = count_tokens("## What you know about the user\n")
    first = count_tokens("8 May 2023:\n") + count_tokens("- Biscuit the dog is a beagle.\n")
    contributor = UserMemoryContributor(days, profile_size=0)
    assembler = PromptAssembler(days, contributors=[contributor])
    prompt = assembler.assemble(AssemblyRequest("Biscuit the dog", budget=header + first + 8))
    assert prompt.text == "## What you know about the user\n8 May 2023:\n- Biscuit the dog is a beagle.\n"
    second = prompt.section("user_memory").items[1]
    heading = count_tokens("2 June 2023:\n")
    needs = heading + count_tokens("- Biscuit the dog chewed the sofa.\n")
    assert needs - heading == second.tokens  # its line; the note adds the heading it opens
    note = f"needs {needs} tokens ({heading} of them its date heading), 8 left"
    assert (DropReason.BUDGET, note) == (second.reason, second.detail)


def test_grouping_is_a_setting_and_a_section_field(days: FactStore) -> None:
    """``group_dates=False`` puts each date on its line; any section can group its items
    by ``when`` with a template of its own; a bad value is refused."""
    ungrouped = PromptAssembler(days, contributors=[UserMemoryContributor(
        days, group_dates=False)]).assemble(AssemblyRequest("Biscuit the dog", budget=300)).text
    assert "- Biscuit the dog is a beagle. (8 May 2023)\n" in ungrouped
    assert "8 May 2023:" not in ungrouped
    with pytest.raises(InvalidRequestError, match="group_dates must be True or False"):
        UserMemoryContributor(days, group_dates="yes")  # type: ignore[arg-type]
    with pytest.raises(InvalidRequestError, match="group_template must be str"):
        Section(title="Notes", group_template=3)  # type: ignore[arg-type]

    class Notes:
        name, priority, sticky = "notes", 10, False

        def contribute(self, request: AssemblyRequest) -> Section:
            return Section(title="Notes", group_template="note_day.md.j2", items=(
                Item("Standup moved.", when="Monday"), Item("Fix the build."),
                Item("Release cut.", when="Tuesday"), Item("Retro held.", when="Monday")))

    assembler = PromptAssembler(days, contributors=[Notes()],
                                templates={"note_day.md.j2": "### {{ when }}\n"})
    text = assembler.assemble(AssemblyRequest("anything", budget=300)).text
    assert text == ("## Notes\n- Fix the build.\n### Monday\n- Standup moved.\n- Retro held.\n"
                    "### Tuesday\n- Release cut.\n")


def test_the_dumps_show_the_date_the_prompt_shows(said: FactStore) -> None:
    """The JSON, markdown and HTML dumps carry the same date as the bullet."""
    prompt = PromptAssembler(said).assemble(AssemblyRequest("Biscuit the dog", budget=300))
    items = json.loads(prompt.dump("json"))["sections"][0]["items"]
    assert {"The user took in a dog named Biscuit.": "8 May 2023",
            "The user walks Biscuit every morning.": None} == {i["text"]: i["when"] for i in items}
    assert "| The user took in a dog named Biscuit. (8 May 2023) |" in prompt.dump("markdown")
    assert "(8 May 2023)" in prompt.dump("html")


def test_the_date_style_is_a_setting(said: FactStore) -> None:
    """``dates="age"`` says how long ago, ``dates=None`` says nothing, and the request's
    ``now`` is the day the age is counted to; anything else is refused."""
    def text(dates: str | None, **request: float) -> str:
        contributor = UserMemoryContributor(said, dates=dates)
        assembler = PromptAssembler(said, contributors=[contributor])
        return assembler.assemble(AssemblyRequest("Biscuit the dog", budget=300, **request)).text

    assert "\n6 months ago:\n- The user took in a dog named Biscuit.\n" in text("age")
    assert text(None) == ("## What you know about the user\n- The user took in a dog named "
                          "Biscuit.\n- The user walks Biscuit every morning.\n")
    earlier = datetime(2023, 5, 20, tzinfo=UTC).timestamp()
    assert "\n11 days ago:\n- The user took in a dog named Biscuit.\n" in text("age", now=earlier)
    with pytest.raises(InvalidRequestError, match="dates must be 'date' or 'age' or None"):
        UserMemoryContributor(said, dates="weekday")


@pytest.fixture(name="common")
def fixture_common(tmp_path: Path):
    """A store that leaves out words found in more than 10% of its facts at any size:
    one fact says "deploy", forty others share "checkout" and "service"."""
    store = FactStore(tmp_path / "common.db", clock=lambda: NOW,
                      query_policy=QueryPolicy(common_min_facts=0))
    with store.batch():
        store.add("project", "The shop deploys every Friday after the freeze.", scope="shop")
        for n in range(40):
            store.add("project", f"Service note {n}: the checkout service in region {n} "
                                 f"handles card payments for store {n}.", scope="shop",
                      observed_at=NOW - 86400.0 * (n + 1))
    yield store
    store.close()


def test_the_budget_is_filled_when_the_words_run_out(common: FactStore) -> None:
    """The one strict match comes first; the relaxed query's matches fill the rest of
    the budget, each marked in its trace and in the dump."""
    assert ["deploy"] == common.query_words("how does the checkout service deploy?")
    request = AssemblyRequest("how does the checkout service deploy?", scope="shop", budget=400)
    prompt = PromptAssembler(common).assemble(request)
    project = prompt.section("project_memory")
    kept = [d for d in project.items if d.kept]
    assert kept[0].item.text.startswith("The shop deploys") and kept[0].item.trace.fill is None
    assert len(kept) > 5 and {"relaxed"} == {d.item.trace.fill for d in kept[1:]}
    first_out = next(d for d in project.items if not d.kept)
    assert DropReason.BUDGET == first_out.reason
    assert 400 - prompt.total_tokens < first_out.tokens
    items = next(s for s in json.loads(prompt.dump("json"))["sections"]
                 if s["name"] == "project_memory")["items"]
    assert ["relaxed"] * (len(kept) - 1) == [i["trace"]["fill"] for i in items[1:len(kept)]]
    assert "fill: relaxed" in prompt.dump("markdown")


def test_without_fill_the_section_stops_with_the_words(common: FactStore) -> None:
    """``fill=False`` offers the strict matches only and says why it stopped."""
    request = AssemblyRequest("how does the checkout service deploy?", scope="shop", budget=400)
    section = ProjectMemoryContributor(common, fill=False).contribute(request)
    assert section is not None and 1 == len(section.items)
    assert "no more facts match the message (1 found)" == section.stop_note
    with pytest.raises(InvalidRequestError, match="fill must be True or False"):
        ProjectMemoryContributor(common, fill="yes")  # type: ignore[arg-type]


def test_a_section_fill_yields_to_a_later_section_matches(tmp_path: Path) -> None:
    """The sticky user section's fill comes after the project section's matches: with a
    budget that cannot hold both, the project's matches stay and the user fill is cut."""
    store = FactStore(tmp_path / "yield.db", clock=lambda: NOW)
    try:
        with store.batch():
            store.add("user", "The user reviews billing refunds every Monday.", observed_at=NOW)
            for n in range(60):
                store.add("user", f"The user noted item {n} about the weather in town {n}.",
                          observed_at=NOW - 86400.0 * (n + 1))
            for n in range(3):
                store.add("project", f"Billing refunds retry {n + 2} times before paging.",
                          scope="shop", observed_at=NOW)
        request = AssemblyRequest("billing refunds the user noted", scope="shop", budget=300)
        prompt = PromptAssembler(store).assemble(request)
        user, project = prompt.section("user_memory"), prompt.section("project_memory")
        assert 3 == sum(d.kept for d in project.items)
        kept_fill = [d for d in user.items if d.kept and d.item.trace.fill]
        cut_fill = [d for d in user.items if not d.kept and d.item.trace.fill]
        assert kept_fill and cut_fill
        assert DropReason.BUDGET == cut_fill[0].reason
        assert prompt.total_tokens <= 300
        assert prompt.text.index("What you know about the user") < prompt.text.index(
            "Billing refunds retry")
    finally:
        store.close()


def test_fill_left_out_by_a_later_section_matches_says_why(tmp_path: Path) -> None:
    """When the matches fill the budget, a section's fill is reported dropped for the
    budget, with a note."""
    store = FactStore(tmp_path / "full.db", clock=lambda: NOW)
    try:
        with store.batch():
            store.add("user", "The user reviews invoices every Monday.", observed_at=NOW)
            for n in range(10):
                store.add("user", f"The user went hiking on trail {n}.",
                          observed_at=NOW - 86400.0 * (n + 1))
            for n in range(8):
                store.add("project", f"Payouts note {n}: payouts to sellers settle {n} days "
                                     "after the order ships, unless the buyer opens a dispute "
                                     "or the card network holds the money for review.",
                          scope="shop", observed_at=NOW - 3600.0 * n)
        prompt = PromptAssembler(store).assemble(
            AssemblyRequest("invoices and payouts for the user", scope="shop", budget=200))
        user = prompt.section("user_memory")
        fill = [d for d in user.items if d.item.trace is not None and d.item.trace.fill]
        assert fill and not any(d.kept for d in fill)
        assert all(DropReason.BUDGET == d.reason and d.detail for d in fill)
        assert any(d.kept for d in prompt.section("project_memory").items)
    finally:
        store.close()
