"""Fitting rendered sections into a token budget.

The rule, exactly:

1. Sections are placed in order: sticky ones first, then by priority, higher
   first; ties by name. Within a section, items keep their rank order.
2. Items a contributor already marked dropped (``slot_limit``, ``threshold``,
   ``duplicate``) take no budget and are skipped. A section that offers nothing
   because it was asked when no room was left is dropped (``budget``).
3. A section's *fill* is the run of items at its end that a memory section
   offered only to fill its room once its matches ran out (their trace's
   ``fill`` is set); every other item is a *match*.
4. Walking that order, each section costs its header (plus the separator
   before it when a section was placed earlier) and each match its rendered
   line, plus, in a section that groups its items by time
   (:attr:`Section.group_template <ctxslots.model.Section.group_template>`),
   its group's heading when it is the first of its group kept. Matches are
   kept while they fit. At the first header or match that
   does not fit, filling stops: that item, the rest of its section and every
   later section are dropped (``budget``; ``header_does_not_fit`` when the
   header itself did not fit). A section whose items are all dropped leaves no
   header.
5. Then, when every match fitted, with what is left, the fill of each section
   in the same order, the header first for a section that has no match: kept
   while it fits, and at the first that does not fit, no more fill is kept.
   When a match did not fit, no fill is kept. So a section's fill never takes
   the room of a later section's matches, a sticky section's neither (the
   assembler decides whether the sticky sections overflowed by fitting them
   alone).
6. The kept items of each section are therefore always a prefix of its items,
   and of each of the two walks: an item is never dropped for budget while a
   later one of its walk (lower priority, or lower rank in the same section)
   is kept.
7. Costs come from per-piece counts (cached). The joined text is then counted
   exactly (a :class:`~ctxslots.tokens.TokenCounter` adds up the pieces' counts
   where its encoding must split between them, and counts the rest joined);
   while that count exceeds the budget (pieces can tokenize differently once
   joined), the item placed last is dropped (the last kept fill, else the last
   kept match) and the text is counted again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs

from ..errors import InvalidRequestError
from ..model import DropReason, Item, Section

__all__ = ["Prepared", "drop_section", "fit", "join", "parts", "verify"]


@attrs.define
class Prepared:
    """A section rendered into pieces, with what fitting decided about it.

    Attributes:
        section: The section offered.
        header: Its rendered heading.
        header_tokens: Tokens of ``header``.
        lines: One rendered line per item (including pre-dropped items).
        line_tokens: Tokens of each line.
        pre: Per item, the reason and note it was dropped before fitting, or ``None``.
        kept: How many eligible items were kept (a prefix of them).
        cut: Why the other eligible items were dropped.
        notes: Per eligible item not kept, a human-readable note.
        separator_tokens: Tokens of the separator before it, when placed after another.
        groups: Per item, the heading of the group it is shown under (its
            section's group template rendered for its ``when``), or ``None``.
        group_tokens: Tokens of each group heading.
        error: The contributor's error, for a section that could not be made.
        no_room: Its contributor was asked when the sections before it had left
            no room (it offers nothing then: dropped for the budget).
        template_failed: ``error`` is its own templates' failure (reported when the
            prompt is finished: a section may be rendered twice).
        room: The tokens its contributor was told the sections before it left
            (:attr:`AssemblyRequest.room <ctxslots.AssemblyRequest.room>`), or
            ``None`` when it was not told.
    """

    section: Section
    header: str
    header_tokens: int
    lines: list[str]
    line_tokens: list[int]
    pre: list[tuple[DropReason, str | None] | None]
    kept: int = 0
    cut: DropReason | None = None
    notes: dict[int, str] = attrs.Factory(dict)
    separator_tokens: int = 0
    groups: list[str | None] | None = None
    group_tokens: dict[str, int] = attrs.Factory(dict)
    error: str | None = None
    no_room: bool = False
    template_failed: bool = False
    room: int | None = None

    @property
    def eligible(self) -> list[int]:
        """Indexes of the items that compete for the budget, in rank order."""
        return [i for i, pre in enumerate(self.pre) if pre is None]

    def kept_items(self) -> list[Item]:
        """The items kept in the prompt, in rank order."""
        return [self.section.items[i] for i in self.eligible[: self.kept]]

    def kept_group_tokens(self) -> int:
        """Tokens of the group headings the kept items show under."""
        groups = self.groups
        if groups is None:
            return 0
        headings = {groups[i] for i in self.eligible[: self.kept]}
        return sum(self.group_tokens[h] for h in headings if h is not None)

    def cost(self, index: int, opened: set[str]) -> int:
        """Tokens item ``index`` adds to a section whose kept items show the
        group headings ``opened``: its line, and its heading when not yet shown."""
        cost = self.line_tokens[index]
        groups = self.groups
        if groups is not None:
            heading = groups[index]
            if heading is not None and heading not in opened:
                cost += self.group_tokens[heading]
        return cost

    def open(self, index: int, opened: set[str]) -> None:
        """Note that item ``index`` is kept: its group heading is shown."""
        heading = None if self.groups is None else self.groups[index]
        if heading is not None:
            opened.add(heading)


def _drop_rest(prep: Prepared, reason: DropReason, from_index: int, first_note: str,
               rest_note: str) -> None:
    prep.cut = reason
    for n, index in enumerate(prep.eligible[from_index:]):
        prep.notes[index] = first_note if n == 0 else rest_note


def drop_section(prep: Prepared, note: str) -> None:
    """Drop every item of a section for the budget, with ``note``."""
    prep.kept, prep.separator_tokens = 0, 0
    _drop_rest(prep, DropReason.BUDGET, 0, note, note)


def _needs(cost: int, line: int, head: int, remaining: int, used: int) -> str:
    """The note of the item that did not fit: what it costs and what was left. ``cost``
    is its ``line`` and the date heading it would open; the first item of a section that
    keeps nothing would have brought its header (``head``, with the separator), counted
    in both figures, so they are the prompt's."""
    parts = [f"{head} of them its section's header"] if head else []
    if cost > line:
        parts.append(f"{cost - line} {'' if head else 'of them '}its date heading")
    of = f" ({', '.join(parts)})" if parts else ""
    return f"needs {cost + head} tokens{of}, {remaining - used + head} left"


def _fill_start(prep: Prepared) -> int:
    """Position, among the eligible items, of the first of the section's fill (step 3)."""
    eligible = prep.eligible
    start = len(eligible)
    while start and _is_fill(prep.section.items[eligible[start - 1]]):
        start -= 1
    return start


def _is_fill(item: Item) -> bool:
    return item.trace is not None and item.trace.fill is not None


def fit(prepared: Sequence[Prepared], available: int, separator_tokens: int, *,
        matches_only: bool = False) -> int:
    """Decide, in place, how many items of each section are kept (steps 1 to 6).

    Returns the tokens a section placed after these could still take for its
    matches: what the matches leave of ``available`` (fill yields to a later
    section's matches), or 0 once filling stopped. With ``matches_only`` the
    fill is not placed (the room a contributor asked next is told).
    """
    remaining = available
    stopped = False
    placed = False
    starts = []
    opened: list[set[str]] = [set() for _ in prepared]
    for prep, shown in zip(prepared, opened, strict=True):
        eligible = prep.eligible
        prep.kept, prep.cut, prep.notes, prep.separator_tokens = 0, None, {}, 0
        start = _fill_start(prep)
        starts.append(start)
        if not eligible:
            if prep.no_room:
                prep.cut = DropReason.BUDGET
            continue
        if stopped:
            _drop_rest(prep, DropReason.BUDGET, 0, "an earlier section did not fit",
                       "an earlier section did not fit")
            continue
        if not start:
            continue  # fill only: placed in the second walk
        sep = separator_tokens if placed else 0
        head = prep.header_tokens + sep
        if head > remaining:
            note = f"header needs {head} tokens, {remaining} left"
            _drop_rest(prep, DropReason.HEADER_DOES_NOT_FIT, 0, note, note)
            stopped = True
            continue
        used = head
        for n, index in enumerate(eligible[:start]):
            cost = prep.cost(index, shown)
            if used + cost > remaining:
                _drop_rest(prep, DropReason.BUDGET, n,
                           _needs(cost, prep.line_tokens[index], head if n == 0 else 0,
                                  remaining, used),
                           "a higher-ranked item did not fit")
                stopped = True
                break
            used += cost
            prep.kept += 1
            prep.open(index, shown)
        if prep.kept:
            prep.separator_tokens = sep
            remaining -= used
            placed = True
    if matches_only:
        return 0 if stopped else remaining
    if stopped:
        for prep, start in zip(prepared, starts, strict=True):
            if prep.cut is None and start < len(prep.eligible):
                _drop_rest(prep, DropReason.BUDGET, start, "the matches placed took the room",
                           "the matches placed took the room")
        return 0
    _place_fill(prepared, starts, opened, remaining, separator_tokens, placed)
    return remaining


def _place_fill(prepared: Sequence[Prepared], starts: Sequence[int],
                opened: Sequence[set[str]], remaining: int, separator_tokens: int,
                placed: bool) -> None:
    """Step 5: the fill of each section, in order, with what the matches left."""
    full = False
    for prep, start, shown in zip(prepared, starts, opened, strict=True):
        eligible = prep.eligible
        if start == len(eligible):
            continue
        if full:
            _drop_rest(prep, DropReason.BUDGET, start, "an earlier section's fill did not fit",
                       "an earlier section's fill did not fit")
            continue
        head = 0
        if not prep.kept:
            prep.separator_tokens = separator_tokens if placed else 0
            head = prep.header_tokens + prep.separator_tokens
        used = head
        for n, index in enumerate(eligible[start:]):
            cost = prep.cost(index, shown)
            if used + cost > remaining:
                _drop_rest(prep, DropReason.BUDGET, start + n,
                           _needs(cost, prep.line_tokens[index], head if n == 0 else 0,
                                  remaining, used),
                           "a higher-ranked item did not fit")
                full = True
                break
            used += cost
            prep.kept += 1
            prep.open(index, shown)
        if prep.kept > start:
            remaining -= used
            placed = True
        elif not prep.kept:
            prep.separator_tokens = 0


def _kept_lines(prep: Prepared) -> list[str]:
    """The kept items' lines of a section, in rank order, or under their group
    headings: the ungrouped first, then each group in the order of its best item."""
    kept = prep.eligible[: prep.kept]
    groups = prep.groups
    if groups is None:
        return [prep.lines[i] for i in kept]
    by_heading: dict[str | None, list[str]] = {None: []}
    for i in kept:
        heading = groups[i]
        lines = by_heading.get(heading)
        if lines is None:  # a group's first line: its heading goes before it
            lines = by_heading[heading] = [] if heading is None else [heading]
        lines.append(prep.lines[i])
    return [line for lines in by_heading.values() for line in lines]


def parts(prepared: Sequence[Prepared], separator: str) -> list[str]:
    """The pieces of the prompt text, in order: each section with kept items,
    header then lines (under their group headings where the section groups them),
    with the separator between sections."""
    out: list[str] = []
    for prep in prepared:
        if not prep.kept:
            continue
        if out:
            out.append(separator)
        out.append(prep.header)
        out.extend(_kept_lines(prep))
    return out


def join(prepared: Sequence[Prepared], separator: str) -> str:
    """The prompt text: each section with kept items, header then lines."""
    return "".join(parts(prepared, separator))


def _last_placed(prepared: Sequence[Prepared]) -> Prepared | None:
    """The section of the item placed last (the first to go when the exact count is
    over): the last kept fill (step 5's walk), else the last kept match (step 4's)."""
    for prep in reversed(prepared):
        if prep.kept > _fill_start(prep):
            return prep
    return next((p for p in reversed(prepared) if p.kept), None)


def verify(prepared: Sequence[Prepared], available: int, separator: str,
           count: Callable[[Sequence[str]], int]) -> tuple[str, int]:
    """Count the joined pieces exactly (``count(pieces)``), and drop last kept
    items until the count fits (step 5).

    :raises InvalidRequestError: Even the empty prompt counts more than ``available``.
    """
    pieces = parts(prepared, separator)
    total = count(pieces)
    while total > available:
        last = _last_placed(prepared)
        if last is None:  # a counter that counts tokens for no text (a template's, say)
            raise InvalidRequestError(
                f"the token counter counts {total} tokens for an empty prompt, more than "
                f"the {available} the request makes available: raise the budget",
                field="budget", value=available)
        last.kept -= 1
        last.cut = DropReason.BUDGET
        last.notes[last.eligible[last.kept]] = (
            f"removed after the exact count of the joined prompt came to {total}"
        )
        pieces = parts(prepared, separator)
        total = count(pieces)
    return "".join(pieces), total
