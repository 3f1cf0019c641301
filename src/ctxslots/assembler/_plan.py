"""From contributor outcomes to rendered, ordered sections, and back to reports."""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import jinja2

from ..model import DropReason, Item, ItemDecision, Section, SectionReport
from ..request import AssemblyRequest
from ..tokens import TokenCounterProtocol
from ._run import Outcome
from .fit import Prepared
from .render import render_header, render_item

__all__ = ["build_reports", "collect_sections", "prepare"]


def _order(section: Section) -> tuple[bool, int, str]:
    return (not section.sticky, -section.priority, section.name)


def _error_section(contributor: object, error: str) -> tuple[Section, str]:
    name = str(getattr(contributor, "name", "?"))
    title = getattr(contributor, "title", None)
    priority = getattr(contributor, "priority", 0)
    section = Section(
        title=title if isinstance(title, str) and title.strip() else name, name=name,
        priority=priority if isinstance(priority, int) and not isinstance(priority, bool) else 0,
        sticky=getattr(contributor, "sticky", False) is True,
    )
    return section, error


def collect_sections(
    outcomes: Sequence[Outcome], request: AssemblyRequest
) -> list[tuple[Section, str | None]]:
    """Every section to place, with its error if its contributor failed, in placement order.

    A section's name defaults to its contributor's; the request's extra context
    blocks become sections ``context-1``, ``context-2``...; a name already used
    makes the later section an error.
    """
    found: list[tuple[Section, str | None]] = []
    for outcome in outcomes:
        if outcome.error is not None:
            found.append(_error_section(outcome.contributor, outcome.error))
        elif outcome.section is not None:
            section = outcome.section
            if not section.name:
                section = attrs.evolve(section, name=outcome.contributor.name)
            found.append((section, None))
    for n, block in enumerate(request.extra, start=1):
        found.append((Section(title=block.title, name=f"context-{n}", priority=block.priority,
                              sticky=block.sticky,
                              items=tuple(Item(text=line) for line in block.lines)), None))
    seen: set[str] = set()
    unique: list[tuple[Section, str | None]] = []
    for section, error in found:
        if section.name in seen:
            section = attrs.evolve(section, items=())
            error = f"ValueError: section name {section.name!r} is already used"
        seen.add(section.name)
        unique.append((section, error))
    unique.sort(key=lambda entry: _order(entry[0]))
    return unique


def _text_key(text: str) -> str:
    return " ".join(text.split()).casefold()


def prepare(
    sections: Sequence[tuple[Section, str | None]], env: jinja2.Environment,
    counter: TokenCounterProtocol,
) -> list[Prepared]:
    """Render each section's header and lines, count them, and mark duplicates.

    An item whose key, or whose text (case and spacing aside), was offered by an
    earlier item in placement order is dropped as ``duplicate``.
    """
    first_seen: dict[str, str] = {}
    prepared = []
    for section, error in sections:
        if error is not None:
            prepared.append(Prepared(section, "", 0, [], [], [], error=error))
            continue
        header = render_header(env, section)
        lines: list[str] = []
        tokens: list[int] = []
        pre: list[tuple[DropReason, str | None] | None] = []
        for rank, item in enumerate(section.items, start=1):
            line = render_item(env, section, item, rank)
            lines.append(line)
            tokens.append(counter.count(line))
            if item.dropped is not None:
                pre.append((item.dropped, item.detail))
                continue
            keys = [k for k in (item.key, "text:" + _text_key(item.text)) if k]
            earlier = next((first_seen[k] for k in keys if k in first_seen), None)
            if earlier is not None:
                pre.append((DropReason.DUPLICATE, f"already offered by {earlier}"))
                continue
            for k in keys:
                first_seen[k] = section.name
            pre.append(None)
        prepared.append(Prepared(section, header, counter.count(header) if header else 0,
                                 lines, tokens, pre))
    return prepared


def _report(prep: Prepared) -> SectionReport:
    section = prep.section
    if prep.error is not None:
        return SectionReport(name=section.name, title=section.title, priority=section.priority,
                             sticky=section.sticky, status="error",
                             reason=DropReason.CONTRIBUTOR_ERROR, error=prep.error)
    eligible = prep.eligible
    kept = set(eligible[: prep.kept])
    decisions = []
    for index, item in enumerate(section.items):
        pre = prep.pre[index]
        if pre is not None:
            decisions.append(ItemDecision(item, index + 1, False, pre[0],
                                          prep.line_tokens[index], pre[1]))
        elif index in kept:
            decisions.append(ItemDecision(item, index + 1, True, None, prep.line_tokens[index]))
        else:
            decisions.append(ItemDecision(item, index + 1, False, prep.cut,
                                          prep.line_tokens[index], prep.notes.get(index)))
    reason: DropReason | None = None
    if not eligible:
        status, reason, tokens = "empty", None, 0
    elif prep.kept:
        status, reason = "kept", None
        tokens = (prep.separator_tokens + prep.header_tokens
                  + sum(prep.line_tokens[i] for i in kept))
    else:
        status, reason, tokens = "dropped", prep.cut, 0
    return SectionReport(
        name=section.name, title=section.title, priority=section.priority,
        sticky=section.sticky, status=status, reason=reason,
        header_tokens=prep.header_tokens + prep.separator_tokens, tokens=tokens,
        items=tuple(decisions), stopped=_stopped(decisions, section.stop_note),
    )


def _stopped(decisions: Sequence[ItemDecision], note: str | None) -> str | None:
    """Why the section holds no more: the first item not taken after the last kept one."""
    last = max((n for n, d in enumerate(decisions) if d.kept), default=-1)
    for decision in decisions[last + 1:]:
        if decision.reason is not None and decision.reason is not DropReason.DUPLICATE:
            detail = f": {decision.detail}" if decision.detail else ""
            return f"item {decision.rank} not taken ({decision.reason.value}{detail})"
    return note


def build_reports(prepared: Sequence[Prepared]) -> tuple[SectionReport, ...]:
    """One report per section, in placement order."""
    return tuple(_report(prep) for prep in prepared)
