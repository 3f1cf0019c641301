"""Property-based checks of the fitting rule over random facts, messages, budgets and contributors."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from _assembler_helpers import HOSTILE_VALUES, make_store
from ctxslots import (
    AgentMemoryContributor,
    AssemblyRequest,
    BudgetExceededError,
    DropReason,
    ProjectMemoryContributor,
    PromptAssembler,
    StaticContributor,
    UserMemoryContributor,
)
from ctxslots.contributors.memory import NO_ROOM
from ctxslots.prompts.escape import bullet
from ctxslots.tokens import get_encoding

WORDS = ("deploy", "friday", "billing", "tests", "flaky", "cache", "editor", "helix", "shop",
         "release", "freeze", "migration", "rollback", "owner", "python", "docs")
BUDGET_REASONS = {DropReason.BUDGET, DropReason.HEADER_DOES_NOT_FIT}

sentences = st.lists(st.sampled_from(WORDS), min_size=1, max_size=12).map(" ".join)
values = st.one_of(sentences, sentences.map(lambda s: s + "\n# " + s),
                   st.sampled_from(HOSTILE_VALUES))
#: ``(slot, scope, value[, user])``: the second owner of a user fact is its user, not a scope.
facts = st.lists(st.tuples(st.sampled_from(["user", "project", "agent"]),
                           st.sampled_from([None, "shop", "blog"]), values).map(
    lambda f: ("user", None, f[2], f[1]) if f[0] == "user" else f), max_size=30)
statics = st.lists(
    st.builds(
        StaticContributor,
        name=st.sampled_from(["alpha", "beta", "gamma", "delta"]),
        title=sentences,
        lines=st.lists(values, max_size=6),
        priority=st.integers(-5, 100),
        sticky=st.booleans(),
    ),
    max_size=3, unique_by=lambda c: c.name,
)


def _check(prompt, request):
    encoding = get_encoding(prompt.encoding)
    # 1. the exact count of the final text fits budget - safety margin - answer reserve
    assert len(encoding.encode_ordinary(prompt.text)) == prompt.total_tokens
    assert prompt.total_tokens <= request.budget - request.safety_margin - request.answer_reserve
    # 2. sticky sections first, then priority high first, ties by name
    keys = [(not s.sticky, -s.priority, s.name) for s in prompt.sections]
    assert keys == sorted(keys)
    position = 0
    for report in prompt.sections:  # kept sections appear in the text in that order
        if report.status == "kept":
            position = prompt.text.index(f"## {bullet(report.title)}\n", position) + 1
    # 3. kept items are a prefix of the items competing for the budget: no item
    #    is dropped for budget while a later one (lower priority or rank) is kept
    #    (matches and fill each form their own walk: a section's fill yields to
    #    a later section's matches)
    for fill in (False, True):
        competing = [d for s in prompt.sections for d in s.items
                     if (d.kept or d.reason in BUDGET_REASONS)
                     and (d.item.trace is not None and d.item.trace.fill is not None) == fill]
        flags = [d.kept for d in competing]
        assert flags == sorted(flags, reverse=True)
    for report in prompt.sections:
        assert (report.status == "kept") == any(d.kept for d in report.items)
    # 4. a memory section shows its undated lines first, then each date once, as a
    #    heading over the kept lines said that day
    for report in prompt.sections:
        if report.status != "kept" or not report.name.endswith("_memory"):
            continue
        start = prompt.text.index(f"## {bullet(report.title)}\n")
        block = prompt.text[start:].split("\n\n## ", 1)[0].splitlines()[1:]
        heading: str | None = None
        headings: list[str] = []
        shown: list[tuple[str | None, str]] = []
        for line in block:
            if line.startswith("- "):
                shown.append((heading, line))
            elif line.endswith(":"):
                heading = line[:-1]
                headings.append(heading)
        kept = [d.item for d in report.items if d.kept]
        assert sorted({w for w in (i.when for i in kept) if w}) == sorted(headings)
        if headings:
            event("dates grouped")
        for item in kept:
            line = f"- {bullet(item.text).splitlines()[0]}"
            assert any(h == item.when and shown_line.startswith(line)
                       for h, shown_line in shown), (item, shown)
    for reason in {d.reason for d in prompt.dropped}:
        event(f"dropped: {reason.value}")


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(facts=facts, message=sentences,
       budget=st.one_of(st.integers(4, 80), st.integers(80, 700)),
       margin_pct=st.integers(0, 30), reserve_pct=st.integers(0, 30), extra=statics,
       scope=st.sampled_from([None, "shop"]), limit=st.integers(1, 6),
       days_ago=st.lists(st.sampled_from([0, 0, 3, 40, 400]), max_size=30))
def test_fitting_rule_holds(facts, message, budget, margin_pct, reserve_pct, extra, scope,
                            limit, days_ago):
    """Text fits the budget, sticky first, kept items form a prefix, each date shows once
    over its lines, same input gives same bytes."""
    margin, reserve = budget * margin_pct // 100, budget * reserve_pct // 100
    request = AssemblyRequest(message, scope=scope, user=scope, budget=budget,
                              safety_margin=margin, answer_reserve=reserve)
    with tempfile.TemporaryDirectory() as folder:
        store = make_store(Path(folder) / "p.db", facts, days_ago=days_ago)
        try:
            contributors = [UserMemoryContributor(store, limit=limit),
                            ProjectMemoryContributor(store, limit=limit),
                            AgentMemoryContributor(store, limit=limit), *extra]
            assembler = PromptAssembler(store, contributors=contributors)
            results = []
            for _ in range(2):
                try:
                    prompt = assembler.assemble(request)
                except BudgetExceededError as exc:
                    prompt = exc.prompt
                    event("sticky overflow")
                    assert prompt.sticky_overflow
                    # A sticky section overflowed: an item fell to the budget, or the
                    # sections before it left it no room to offer the match it has.
                    assert any(s.sticky and (any(d.reason in BUDGET_REASONS for d in s.items)
                                             or s.stopped == NO_ROOM)
                               for s in prompt.sections)
                _check(prompt, request)
                results.append(prompt)
            first, second = results
            assert first.text.encode() == second.text.encode()
            assert first.dump("json") == second.dump("json")
        finally:
            store.close()
