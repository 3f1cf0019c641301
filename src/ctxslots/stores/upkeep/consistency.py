"""Rows that contradict themselves: found for ``doctor``, set right by ``reindex``.

Every import now refuses them, but a store written before, or by hand, can hold:

- facts hidden by a loop of ``superseded_by`` (a fact naming itself, or two
  naming each other): search hides a superseded fact in favour of the fact that
  supersedes it, so no search or assembly returns any fact of the loop;
- facts hidden by a fact that no longer exists (a store whose survivor was
  erased before erasure showed its near-duplicates again): nothing stands for them;
- times out of order (:data:`~ctxslots.stores.backend.TIME_ORDERS`): a fact
  updated before it was created, an earlier value replaced before it was written.

A repair shows the facts of a loop, and those hidden by a missing fact, again (their
``superseded_by`` cleared; a later ``consolidate`` marks true near-duplicates anew)
and sets each later time to the earlier one.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..backend import Backend, MisorderedTimes

__all__ = ["SHOWN", "consistency_problems", "loops", "orphans", "repair_consistency"]

#: Most rows a problem line names.
SHOWN = 5
_LOOKED_AT = 100


def loops(links: Iterable[tuple[int, int]]) -> list[list[int]]:
    """The loops among ``(fact, superseded_by)`` links, each as its facts in link order
    (a fact naming itself is a loop of one); each fact has at most one link."""
    following = dict(links)
    done: set[int] = set()
    found: list[list[int]] = []
    for start in following:
        path: list[int] = []
        on_path: set[int] = set()
        node = start
        while node in following and node not in done and node not in on_path:
            path.append(node)
            on_path.add(node)
            node = following[node]
        if node in on_path:
            found.append(path[path.index(node):])
        done.update(path)
    return found


def _all_links(backend: Backend) -> tuple[list[tuple[int, int]], set[int]]:
    """Every link, live and archived (ids are unique across both), and the archived ids."""
    archived = backend.superseded_links(archived=True)
    return [*backend.superseded_links(), *archived], {fact for fact, _ in archived}


def orphans(backend: Backend, links: list[tuple[int, int]]) -> list[int]:
    """The facts among ``links`` hidden by a fact that exists nowhere (live, archived
    or in history)."""
    survivors = list(dict.fromkeys(by for _, by in links))
    if not survivors:
        return []
    known = backend.taken_ids(survivors)
    return [fact for fact, by in links if by not in known]


def _orphan_problem(found: list[int]) -> list[str]:
    if not found:
        return []
    shown = ", ".join(str(f) for f in found[:SHOWN])
    more = f" and {len(found) - SHOWN} more" if len(found) > SHOWN else ""
    return [(f"{len(found)} fact{'s' if len(found) != 1 else ''} hidden by a near-duplicate that "
             f"no longer exists, which no search or assembly returns: {shown}{more}; run "
             "`ctxslots reindex` to show them again")]


def _loop_problem(found: list[list[int]]) -> list[str]:
    if not found:
        return []
    facts = sum(len(loop) for loop in found)
    shown = "; ".join(" -> ".join(str(f) for f in [*loop, loop[0]]) for loop in found[:SHOWN])
    more = f" and {len(found) - SHOWN} more" if len(found) > SHOWN else ""
    return [(f"{facts} fact{'s' if facts != 1 else ''} hidden by a loop of superseded_by, "
             f"which no search or assembly returns: {shown}{more}; run `ctxslots reindex` "
             "to show them again")]


def _time_problem(bad: list[MisorderedTimes]) -> list[str]:
    if not bad:
        return []
    shown = "; ".join(b.describe() for b in bad[:SHOWN])
    more = ""
    if len(bad) > SHOWN:
        more = f" and {'at least ' if len(bad) == _LOOKED_AT else ''}{len(bad) - SHOWN} more"
    return [(f"times out of order (a fact updated before it was created, or an earlier value "
             f"replaced before it was written): {shown}{more}; run `ctxslots reindex` to set "
             "each later time to the earlier one")]


def consistency_problems(backend: Backend) -> list[str]:
    """One line per kind of contradiction found, naming the first rows; empty when none."""
    links = _all_links(backend)[0]
    return (_loop_problem(loops(links)) + _orphan_problem(orphans(backend, links))
            + _time_problem(backend.misordered_times(limit=_LOOKED_AT)))


def repair_consistency(backend: Backend) -> int:
    """Clear the ``superseded_by`` of every fact in a loop or hidden by a missing fact, and
    set every later time that comes before its earlier one (inside the caller's
    transaction); how many rows changed."""
    links, archived = _all_links(backend)
    shown = list(dict.fromkeys([*(fact for loop in loops(links) for fact in loop),
                                *orphans(backend, links)]))
    for in_archive in (False, True):
        backend.set_superseded([(f, None) for f in shown if (f in archived) == in_archive],
                               archived=in_archive)
    return len(shown) + backend.repair_times()
