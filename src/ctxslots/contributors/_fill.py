"""How a memory section gathers the hits that fill its room.

1. Search with the message, sized by a low guess of each line's cost; while the
   hits found hold fewer tokens (estimated on the low side) than the room and
   more may match, search again for as many more as the lines found suggest.
   The store's first hits never depend on the limit asked, so each search
   extends the last.
2. Matches scoring under ``min_share`` of the best one's come after the others,
   marked as fill (``HitTrace.fill == "below_cut"``); with fill off they are not
   offered at all. Among them, those said at the same moment as a match (one
   flush's facts, one session's turns) come first, by that match's score: a fact
   said beside a clear match is more often what the message is about than one
   that only shares its commonest words. To find them, the section reads at
   least :data:`FILL_DEPTH` matches once the cut is reached.
3. When the matches run out with room left, a relaxed search (every word of the
   message, the words the store leaves out for being common too) adds the facts
   it finds that the first did not (``"relaxed"``), for a store that can search
   so and whose words for the message differ once relaxed.

With a ``limit`` (a ceiling a user sets) only step 1 runs: the section offers
that many and shows the overfetched ones as dropped.
"""

from __future__ import annotations

import datetime as dt
import inspect
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from .._readable import count
from ..model import RELAXED_FILL, Hit

__all__ = ["BELOW_CUT", "FILL_DEPTH", "MAX_FETCH", "RELAXED", "Gathered", "Wanted", "gather",
           "high_estimate", "low_estimate", "relaxed_search_of"]

#: Most facts a contributor asks the store for in one search.
MAX_FETCH = 500
#: Tokens one memory's line is guessed to cost at least, to size the first search:
#: low, so that one search nearly always finds enough to fill the room (a second
#: search ranks and reads every candidate again; a hit costs a few microseconds
#: more; BENCHMARKS.md, "A first search that fills the room").
GUESS_TOKENS_PER_ITEM = 14
#: Once its matches fall under the cut, a section reads at least this many (when
#: there are) to order its fill by episode: reading 200 found less of a session's
#: other facts, 500 hardly more (BENCHMARKS.md, "Fill in the order of episodes").
FILL_DEPTH = 300
#: ``HitTrace.fill`` of a match under the section's ``min_share`` of the best.
BELOW_CUT = "below_cut"
#: ``HitTrace.fill`` of a fact only the relaxed query found.
RELAXED = RELAXED_FILL

#: ``search(limit, relaxed) -> hits``: the store searched with the section's
#: message, slot, scope and time.
Search = Callable[[int, bool], list[Hit]]


def low_estimate(text: str) -> int:
    """Tokens of a rendered line, rather under than over (so filling asks for enough).

    An estimate over the real count can stop a section from offering before it
    fills its room (BENCHMARKS.md, "SQL statements per search and assembly").
    """
    return len(text) // 6 + 2


def high_estimate(text: str) -> int:
    """Tokens of a rendered line, rather over than under (so a bound holds): a quarter
    of a token a character, and a token for each byte past the first of a character
    outside ASCII (byte-level tokenizers spend up to one a byte on scripts and emoji
    they saw little of)."""
    wide = len(text.encode("utf-8", "surrogatepass")) - len(text)
    return len(text) // 4 + wide + 4


def _filling(lines: Sequence[str], room: int) -> int | None:
    """How many of ``lines`` to offer so that they hold more than ``room`` tokens
    (estimated on the low side) with a tenth more (at least two) to spare, or
    ``None`` when all of them hold less. Those past that would be dropped for the
    budget anyway: not offering them saves building, rendering and reporting them."""
    total = 0
    for n, line in enumerate(lines, start=1):
        total += low_estimate(line)
        if total >= room:
            spare = n + max(2, n // 10)
            return spare if spare < len(lines) else None
    return None


@attrs.frozen
class Wanted:
    """What a section asks of the store.

    Attributes:
        room: Tokens its lines may take.
        limit: The user's ceiling on facts offered, or ``None`` (fill the room).
        overfetch: With a ``limit``, extra facts asked for to show as dropped.
        min_share: Matches under this share of the best one's final score are fill.
        fill: Offer fill (matches under ``min_share``, then the relaxed query's)
            once the matches run out; ``False`` stops at the cut.
        skip: Fact ids already shown (the profile).
        line: The text a hit's line shows, for estimating its tokens.
    """

    room: int
    limit: int | None
    overfetch: int
    min_share: float
    fill: bool
    skip: frozenset[int]
    line: Callable[[Hit], str]


@attrs.frozen
class Gathered:
    """The hits a section offers, best first, and why it offers no more.

    Attributes:
        hits: Matches first, then fill (marked in each hit's trace).
        note: Why no more were offered (``None``: the overfetched ones, dropped for
            the limit, say it).
    """

    hits: list[Hit]
    note: str | None


def _cut(hits: list[Hit], wanted: Wanted) -> tuple[list[Hit], int | None]:
    """``hits`` with those scoring under ``min_share`` of the best one's score after the
    others, each part in its own order, and the index of the first of them (``None``:
    none is). The best is the highest score, and the weak ones are picked out wherever
    they stand: a reranker's order need not be the scores' (one may move a weak hit up)."""
    best = max((h.trace.final for h in hits), default=0.0)
    if not wanted.min_share or best <= 0 or wanted.limit is not None:
        return hits, None
    cut = wanted.min_share * best
    strong = [h for h in hits if h.trace.final >= cut]
    if len(strong) == len(hits):
        return hits, None
    return strong + [h for h in hits if h.trace.final < cut], len(strong)


def _as_fill(hits: Sequence[Hit], how: str) -> list[Hit]:
    return [Hit(fact=h.fact, trace=attrs.evolve(h.trace, fill=how)) for h in hits]


def _by_episode(matches: Sequence[Hit], weak: Sequence[Hit]) -> list[Hit]:
    """``weak`` with those said at the moment of a match first, by the best such
    match's score (the order kept otherwise)."""
    best: dict[dt.datetime | None, float] = {}
    for hit in matches:
        said = hit.fact.said_at
        if said is not None and hit.trace.final > best.get(said, float("-inf")):
            best[said] = hit.trace.final
    if not best:
        return list(weak)
    ranked = sorted(enumerate(weak), key=lambda item: (
        -best.get(item[1].fact.said_at, float("-inf")), item[0]))
    return [hit for _, hit in ranked]


def _offered(hits: list[Hit], room: int, wanted: Wanted) -> Gathered | None:
    """The hits to offer when they fill the room, else ``None``."""
    enough = _filling([wanted.line(h) for h in hits], room)
    if enough is None:
        return None
    fill = sum(1 for h in hits[:enough] if h.trace.fill is not None)
    extra = f" ({fill} of them to fill the room)" if fill else ""
    return Gathered(hits[:enough], f"offered {count(enough, 'fact')}{extra}, more than the "
                                   f"{room} tokens left hold (estimated); more match")


def gather(search: Search, wanted: Wanted, *, can_relax: Callable[[], bool]) -> Gathered:
    """The hits that fill ``wanted.room`` (see the module's notes).

    :param can_relax: Whether a relaxed search (``search(n, True)``) could find
        more; asked only once the matches ran out with room left.
    """
    room, limited = wanted.room, wanted.limit is not None
    ceiling = MAX_FETCH if wanted.limit is None else wanted.limit + wanted.overfetch
    want = min(ceiling, max(10, -(-room // GUESS_TOKENS_PER_ITEM)) + len(wanted.skip))
    while True:
        found = search(want, False)
        hits, weak = _cut([h for h in found if h.fact.id not in wanted.skip], wanted)
        if weak is not None and wanted.fill and len(found) == want \
                and want < min(ceiling, FILL_DEPTH):
            # Ordering the fill by episode needs the deeper matches too, once.
            want = min(ceiling, FILL_DEPTH)
            continue
        if weak is not None:
            if not wanted.fill:
                usable = hits[:weak]
                return _offered(usable, room, wanted) or Gathered(usable, (
                    f"the next match scores under {wanted.min_share:.0%} of the best one's score"))
            hits = hits[:weak] + _as_fill(_by_episode(hits[:weak], hits[weak:]), BELOW_CUT)
        if not limited and (done := _offered(hits, room, wanted)) is not None:
            return done
        if len(found) < want:
            break
        if want >= ceiling:
            # At its limit: overfetched hits, dropped for it, say so; with none, the note does.
            if wanted.limit is not None:
                return Gathered(hits, None if wanted.overfetch else
                                f"offered its limit of {count(wanted.limit, 'fact')}; more may "
                                "match")
            return Gathered(hits, f"asked the store for at most {MAX_FETCH} facts")
        estimate = sum(low_estimate(wanted.line(h)) for h in hits)
        if estimate >= room:
            return Gathered(hits, f"offered {count(len(hits), 'fact')}, more than the {room} "
                                  "tokens left hold (estimated); more match")
        # As many more as the lines found so far say the room needs, and some.
        per_line = max(1.0, estimate / max(1, len(hits)))
        want = min(ceiling, max(want * 5 // 4, want + int((room - estimate) / per_line * 1.25)
                                + 1))
    if limited or not wanted.fill or not can_relax():
        return Gathered(hits, _ran_out(hits, weak, wanted))
    return _relax(search, hits, weak, wanted, ceiling)


def _ran_out(hits: Sequence[Hit], weak: int | None, wanted: Wanted, relaxed: int = 0) -> str:
    if not hits:
        return "no facts match the message"
    parts = []
    if weak is not None and weak < len(hits) - relaxed:
        parts.append(f"{len(hits) - relaxed - weak} under {wanted.min_share:.0%} of the best")
    if relaxed:
        parts.append(f"{relaxed} found by the relaxed query")
    more = f": {', '.join(parts)}" if parts else ""
    return f"no more facts match the message ({len(hits)} found{more})"


def _relax(search: Search, hits: list[Hit], weak: int | None, wanted: Wanted,
           ceiling: int) -> Gathered:
    """``hits`` and, after them, what the relaxed query finds that they lack."""
    seen = {h.fact.id for h in hits} | wanted.skip
    left = wanted.room - sum(low_estimate(wanted.line(h)) for h in hits)
    want = min(ceiling, len(hits) + len(wanted.skip)
               + max(10, -(-left // GUESS_TOKENS_PER_ITEM)))
    extra = [h for h in search(want, True) if h.fact.id not in seen]
    combined = hits + _as_fill(extra, RELAXED)
    done = _offered(combined, wanted.room, wanted)
    if done is not None:
        return done
    return Gathered(combined, _ran_out(combined, weak, wanted, len(extra)))


_TAKES_RELAXED: dict[type, bool] = {}


def _takes_relaxed(store: Any) -> bool:
    """Whether ``store.search`` takes ``relaxed`` (remembered per class)."""
    kind = type(store)
    known = _TAKES_RELAXED.get(kind)
    if known is None:
        try:
            known = "relaxed" in inspect.signature(store.search).parameters
        except (TypeError, ValueError):
            known = False
        _TAKES_RELAXED[kind] = known
    return known


def relaxed_search_of(store: Any, message: str) -> bool:
    """Whether a relaxed search of ``message`` could find more: the store's
    ``search`` takes ``relaxed`` and its words for the message differ once relaxed
    (a :class:`~ctxslots.FactStore` leaves out words common to much of a large
    store)."""
    if not _takes_relaxed(store):
        return False
    words = getattr(store, "query_words", None)
    if not callable(words):
        return True
    try:
        return bool(words(message) != words(message, relaxed=True))
    except TypeError:
        return True
