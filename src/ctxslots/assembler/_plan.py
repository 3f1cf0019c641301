"""From contributor outcomes to rendered, ordered sections, and back to reports."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs
import jinja2

from ..errors import TemplateError
from ..model import DEFAULT_PRIORITY, DropReason, Item, ItemDecision, Section, SectionReport
from ..prompts import SHIPPED_TEMPLATES
from ..request import AssemblyRequest
from ..tokens import TokenCounterProtocol
from ._lines import render_group, render_header, render_item
from ._run import Outcome, report_failure
from .fit import Prepared

__all__ = ["Preparer", "build_reports", "collect_sections", "extra_sections", "order_sections",
           "placement_key", "prepare", "section_of"]


def placement_key(section: Section) -> tuple[bool, int, str]:
    """Where a section is placed: sticky ones first, then by priority (high first), then name."""
    return (not section.sticky, -_priority(section), section.name)


def _priority(section: Section) -> int:
    return DEFAULT_PRIORITY if section.priority is None else section.priority


def _declared_priority(contributor: object, default: int) -> int:
    """The contributor's ``priority``, or ``default`` when it has no integer one."""
    priority = getattr(contributor, "priority", default)
    return priority if isinstance(priority, int) and not isinstance(priority, bool) else default


def _stand_in(contributor: object, default_priority: int) -> Section:
    """A section of no item for ``contributor``, with the name, title, priority and
    sticky it declares (for a report of its failure, or of its offering nothing)."""
    name = str(getattr(contributor, "name", "?"))
    title = getattr(contributor, "title", None)
    return Section(
        title=title if isinstance(title, str) and title.strip() else name, name=name,
        priority=_declared_priority(contributor, default_priority),
        sticky=getattr(contributor, "sticky", False) is True,
    )


def _error_section(contributor: object, error: str) -> tuple[Section, str]:
    return _stand_in(contributor, 0), error


def section_of(outcome: Outcome) -> tuple[Section, str | None] | None:
    """One contributor's section to place, an error section when it failed, or ``None``
    when it offered nothing. What the section leaves unset comes from its contributor:
    its name, and its ``priority`` and ``sticky``, so a plugin that declares them on the
    contributor (as docs/plugins.md shows) is placed where it says."""
    if outcome.error is not None:
        return _error_section(outcome.contributor, outcome.error)
    if outcome.section is None:
        return None
    section = outcome.section
    contributor = outcome.contributor
    if section.name and section.name != contributor.name:
        # A section goes by its contributor's name: what it showed is told to that
        # contributor, and another's name would push that contributor's section out.
        error = (f"ValueError: contributor {contributor.name!r} returned a section named "
                 f"{section.name!r}; leave Section.name out (it is the contributor's)")
        report_failure(contributor.name, error)
        return _error_section(contributor, error)
    filled: dict[str, Any] = {}
    if not section.name:
        filled["name"] = contributor.name
    if section.priority is None:
        filled["priority"] = _declared_priority(contributor, DEFAULT_PRIORITY)
    if section.sticky is None:
        filled["sticky"] = getattr(contributor, "sticky", False) is True
    return (attrs.evolve(section, **filled) if filled else section), None


def extra_sections(request: AssemblyRequest, taken: Iterable[str] = ()) -> list[Section]:
    """The request's extra context blocks as sections ``context-1``, ``context-2``...,
    each numbered past the names in ``taken`` (the contributors')."""
    used = set(taken)
    sections = []
    n = 0
    for block in request.extra:
        n += 1
        while f"context-{n}" in used:
            n += 1
        sections.append(Section(title=block.title, name=f"context-{n}", priority=block.priority,
                                sticky=block.sticky,
                                items=tuple(Item(text=line) for line in block.lines)))
    return sections


def order_sections(
    found: Sequence[tuple[Section, str | None]],
) -> list[tuple[Section, str | None]]:
    """``found`` (contributors' sections in their order, then the extra blocks) in
    placement order; a name already used makes the later section an error."""
    seen: set[str] = set()
    unique: list[tuple[Section, str | None]] = []
    for section, error in found:
        if section.name in seen:
            section = attrs.evolve(section, items=())
            error = f"ValueError: section name {section.name!r} is already used"
        seen.add(section.name)
        unique.append((section, error))
    unique.sort(key=lambda entry: placement_key(entry[0]))
    return unique


def collect_sections(
    outcomes: Sequence[Outcome], request: AssemblyRequest
) -> list[tuple[Section, str | None]]:
    """Every section to place, with its error if its contributor failed, in placement order.

    A section's name defaults to its contributor's; the request's extra context
    blocks become sections ``context-1``, ``context-2``...; a name already used
    makes the later section an error.
    """
    found = [entry for entry in map(section_of, outcomes) if entry is not None]
    extras = extra_sections(request, (o.contributor.name for o in outcomes))
    return order_sections([*found, *((s, None) for s in extras)])


def _text_key(text: str) -> str:
    return " ".join(text.split()).casefold()


@attrs.define
class _Offer:
    """The first item that offered a key: its section's name; for fill (offered only to
    fill room), its index and, once built, its section."""

    section: str
    keys: list[str]
    fill_index: int | None = None
    prepared: Prepared | None = None

    @property
    def is_fill(self) -> bool:
        """Whether it is an earlier section's fill, which a match may take over."""
        return self.fill_index is not None and self.prepared is not None


@attrs.define
class Preparer:
    """Renders and counts sections one at a time, in placement order, marking an
    item whose key, or whose text (case and spacing aside), an earlier item
    offered as ``duplicate``. A match is never the duplicate of an earlier
    section's fill: fitting places every match before any fill, so the fill item
    is the one marked, and the text keeps its place among the matches."""

    env: jinja2.Environment
    counter: TokenCounterProtocol
    _first_seen: dict[str, _Offer] = attrs.Factory(dict)

    def add(self, section: Section, error: str | None) -> Prepared:
        """The section rendered into pieces (the next in placement order). A section
        that names templates of its own (a plugin's) and fails to render with them is an
        error section, as a contributor that raises is; the others stay. A failure of
        the assembler's own templates is the caller's: :class:`TemplateError`."""
        if error is not None:
            return Prepared(section, "", 0, [], [], [], error=error)
        try:
            header, lines, groups, group_tokens = self._render(section)
        except TemplateError as exc:
            if not _own_templates(section):
                raise
            return Prepared(section, "", 0, [], [], [], error=str(exc), template_failed=True)
        counter, first_seen = self.counter, self._first_seen
        tokens = [counter.count(line) for line in lines]
        pre: list[tuple[DropReason, str | None] | None] = []
        fills: list[_Offer] = []
        for item in section.items:
            if item.dropped is not None:
                pre.append((item.dropped, item.detail))
                continue
            keys = [k for k in (item.key, "text:" + _text_key(item.text)) if k]
            is_fill = item.trace is not None and item.trace.fill is not None
            earlier = list({id(o): o for o in (first_seen.get(k) for k in keys) if o}.values())
            if earlier and (is_fill or not all(o.is_fill for o in earlier)):
                first = next((o for o in earlier if not o.is_fill), earlier[0])
                pre.append((DropReason.DUPLICATE, f"already offered by {first.section}"))
                continue
            offer = _Offer(section.name, keys, len(pre) if is_fill else None)
            for taken in earlier:  # only earlier sections' fill: this match takes it over
                assert taken.prepared is not None and taken.fill_index is not None
                taken.prepared.pre[taken.fill_index] = (
                    DropReason.DUPLICATE, f"offered by {section.name} as a match")
                for k in taken.keys:
                    first_seen[k] = offer
            if is_fill:
                fills.append(offer)
            for k in keys:
                first_seen[k] = offer
            pre.append(None)
        prepared = Prepared(section, header, counter.count(header) if header else 0, lines,
                            tokens, pre, groups=groups, group_tokens=group_tokens)
        for offer in fills:
            offer.prepared = prepared
        return prepared

    def _render(self, section: Section
                ) -> tuple[str, list[str], list[str | None] | None, dict[str, int]]:
        """The section's header, one line per item, and (grouped by time) each item's
        group heading with each heading's tokens.

        :raises TemplateError: A template is missing or fails.
        """
        env, counter = self.env, self.counter
        header = render_header(env, section)
        grouped = section.group_template is not None
        lines: list[str] = []
        groups: list[str | None] = []
        headings: dict[str, str] = {}
        group_tokens: dict[str, int] = {}
        for rank, item in enumerate(section.items, start=1):
            if grouped and item.when is not None:
                heading = headings.get(item.when)
                if heading is None:
                    heading = headings[item.when] = render_group(env, section, item.when)
                    group_tokens[heading] = counter.count(heading)
                groups.append(heading)
            else:
                groups.append(None)
            lines.append(render_item(env, section, item, rank, dated=not grouped))
        return header, lines, groups if grouped else None, group_tokens

def _own_templates(section: Section) -> bool:
    """Whether ``section`` renders with a template of its own (a plugin's), not one the
    package ships (the assembler's, which ``templates=`` may override): a failure of
    those is the caller's, not a section's."""
    return any(name is not None and name not in SHIPPED_TEMPLATES
               for name in (section.header_template, section.item_template,
                            section.group_template))


def prepare(
    sections: Sequence[tuple[Section, str | None]], env: jinja2.Environment,
    counter: TokenCounterProtocol,
) -> list[Prepared]:
    """Render each section's header and lines, count them, and mark duplicates."""
    preparer = Preparer(env, counter)
    return [preparer.add(section, error) for section, error in sections]


def _report(prep: Prepared) -> SectionReport:
    section = prep.section
    if prep.error is not None:
        return SectionReport(name=section.name, title=section.title, priority=_priority(section),
                             sticky=bool(section.sticky), status="error",
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
    grouped = 0
    if not eligible:
        status, reason, tokens = ("dropped" if prep.cut else "empty"), prep.cut, 0
    elif prep.kept:
        status, reason, grouped = "kept", None, prep.kept_group_tokens()
        tokens = (prep.separator_tokens + prep.header_tokens
                  + sum(prep.line_tokens[i] for i in kept) + grouped)
    else:
        status, reason, tokens = "dropped", prep.cut, 0
    return SectionReport(
        name=section.name, title=section.title, priority=_priority(section),
        sticky=bool(section.sticky), status=status, reason=reason,
        header_tokens=prep.header_tokens + prep.separator_tokens, tokens=tokens,
        group_tokens=grouped, items=tuple(decisions),
        stopped=_stopped(decisions, section.stop_note), room=prep.room,
    )


def _stopped(decisions: Sequence[ItemDecision], note: str | None) -> str | None:
    """Why the section holds no more: the first item not taken after the last kept one."""
    last = max((n for n, d in enumerate(decisions) if d.kept), default=-1)
    for decision in decisions[last + 1:]:
        if decision.reason is not None and decision.reason is not DropReason.DUPLICATE:
            detail = f": {decision.detail}" if decision.detail else ""
            return f"item {decision.rank} not taken ({decision.reason.value}{detail})"
    return note


#: Why a contributor that returned ``None`` shows nothing (its report's ``stopped``).
OFFERED_NOTHING = "the contributor offered nothing for this message"


def build_reports(prepared: Sequence[Prepared], offered_nothing: Sequence[object] = (),
                  rooms: Mapping[str, int] | None = None) -> tuple[SectionReport, ...]:
    """One report per section, and one (``"empty"``) per contributor in
    ``offered_nothing`` (it returned ``None``; ``rooms`` holds the room each of them was
    told, by name), in placement order: a dump shows every contributor asked."""
    reports = [_report(prep) for prep in prepared]
    for contributor in offered_nothing:
        stand_in = _stand_in(contributor, DEFAULT_PRIORITY)
        reports.append(SectionReport(
            name=stand_in.name, title=stand_in.title, priority=_priority(stand_in),
            sticky=bool(stand_in.sticky), status="empty", stopped=OFFERED_NOTHING,
            room=(rooms or {}).get(stand_in.name)))
    if offered_nothing:
        reports.sort(key=lambda r: (not r.sticky, -r.priority, r.name))
    return tuple(reports)
