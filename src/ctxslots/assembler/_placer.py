"""Asking contributors in placement order, each told the room the sections before it left.

Fitting keeps a prefix of the placement order (see :mod:`.fit`): what a
section can keep depends only on the sections placed before it. So
:meth:`~ctxslots.PromptAssembler.assemble` asks the contributors one by one in
that order, renders and fits each section as it comes, and hands the next
contributor the tokens still free (:attr:`AssemblyRequest.room
<ctxslots.AssemblyRequest.room>`). A memory slot then searches for what can
still fit, and not at all once an earlier section has filled the budget. The
room told is what the matches before it left: an earlier section's fill yields
to a later section's matches (see step 5 of :mod:`.fit`).

The room is an upper bound as long as every section is placed where its
contributor's own ``sticky``, ``priority`` and ``name`` put it: a section placed
elsewhere stops the hints (later contributors are asked with no room set), so
no contributor is ever told less room than its section will have. The pieces
rendered here are reused for the final fit when the sections come out in the
same order.

A section whose lines repeat what an earlier section offered (``duplicate``)
fills less than its contributor counted on: when room is still left after it,
its contributor is asked again, told that room plus what its duplicates would
have taken (:meth:`Placer.room_for_more`), so it offers what asking every
contributor at once (:meth:`~ctxslots.PromptAssembler.aassemble`) would have kept.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs

from ..model import DropReason, Section
from ._plan import Preparer, placement_key
from .fit import Prepared, fit

__all__ = ["Placer"]


@attrs.define
class Placer:
    """The sections placed so far, rendered, and the room they leave.

    Attributes:
        preparer: Renders and counts each section (marking duplicates).
        available: Tokens the prompt may use.
        separator_tokens: Tokens of the separator between two sections.
        entries: The sections added, in placement order, with their errors.
        prepared: Each of them rendered.
        hinting: Whether rooms are still known (no section came out of order).
        no_room: Ids of the sections whose contributors were asked with no room left.
        rooms: The room each section's contributor was asked with, by the section's id.
    """

    preparer: Preparer
    available: int
    separator_tokens: int
    entries: list[tuple[Section, str | None]] = attrs.Factory(list)
    prepared: list[Prepared] = attrs.Factory(list)
    hinting: bool = True
    no_room: set[int] = attrs.Factory(set)
    rooms: dict[int, int] = attrs.Factory(dict)

    def room(self) -> int | None:
        """Tokens a section placed next could take, or ``None`` when not known."""
        if not self.hinting:
            return None
        return fit(self.prepared, self.available, self.separator_tokens, matches_only=True)

    def add(self, entry: tuple[Section, str | None], key: tuple[bool, int, str], *,
            room: int | None = None) -> None:
        """Place the next section, from a source that ``key`` places here (asked
        with ``room``)."""
        if not self.hinting:
            return
        section, error = entry
        if room is not None:
            self.rooms[id(section)] = room
        if room == 0:
            self.no_room.add(id(section))
        if placement_key(section) != key:
            self.hinting = False
            return
        self.entries.append(entry)
        self.prepared.append(self.preparer.add(section, error))

    def room_for_more(self, room: int) -> int | None:
        """The room to ask the contributor of the section placed last again with, told
        ``room`` at first: ``room`` plus the tokens of its lines dropped as duplicates
        of earlier sections', when it fills (:attr:`Section.fills`) and room is left
        after it; else ``None`` (asking again would offer nothing that could fit)."""
        if not self.hinting or not self.prepared:
            return None
        prep = self.prepared[-1]
        if not prep.section.fills or prep.error is not None:
            return None
        repeated = sum(tokens for tokens, pre in zip(prep.line_tokens, prep.pre, strict=True)
                       if pre is not None and pre[0] is DropReason.DUPLICATE)
        if not repeated or not self.room():
            return None
        return room + repeated

    def replace_last(self, entry: tuple[Section, str | None], *, room: int) -> None:
        """Put ``entry`` (its contributor asked again) in place of the section placed
        last, which was asked with ``room``; every section is rendered again, since
        which lines are duplicates depends on all the sections before."""
        section, _ = entry
        self.rooms[id(section)] = room
        self.entries[-1] = entry
        self.preparer = Preparer(self.preparer.env, self.preparer.counter)
        self.prepared = [self.preparer.add(s, e) for s, e in self.entries]

    def final(self, sections: Sequence[tuple[Section, str | None]]) -> list[Prepared]:
        """``sections`` (the final placement) rendered: the pieces made here when
        they are exactly these sections, else rendered anew."""
        if self.hinting and len(sections) == len(self.entries) and all(
                a is b and e == f for (a, e), (b, f) in zip(sections, self.entries)):
            prepared = self.prepared
        else:
            preparer = Preparer(self.preparer.env, self.preparer.counter)
            prepared = [preparer.add(section, error) for section, error in sections]
        for prep in prepared:
            prep.no_room = id(prep.section) in self.no_room
            prep.room = self.rooms.get(id(prep.section))
        return prepared
