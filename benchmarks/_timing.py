"""Timing two or more sides in turn, query by query, in one process; ratios with their spread.

A shared machine's load moves by the second. Timing one side over every query
and then the other compares two different moments of the machine; taking turns
query by query compares the same moment. So every benchmark that reports a
ratio does this::

    turns = in_turn({"store": lambda i: store.search(queries[i]),
                     "floor": lambda i: floor(words[i])}, len(queries), repeat=3)
    print(turns.load)                       # load average at start and end
    print(turns.ratio("store", "floor"))    # 1.23x (p10-p90 0.98x-1.61x), per-query ratios

For each query every side runs once per repeat, the order of the sides
rotating from one query to the next so that no side always goes first (and
always finds the caches the one before it warmed). A query's ratio is the
median of its repeats on one side over the median on the other; the ratio
reported is the median of the per-query ratios, with their 10th and 90th
percentiles as the spread.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["Load", "Ratio", "Turns", "in_turn", "load_average", "percentile"]


def load_average() -> tuple[float, float, float]:
    """The system's 1, 5 and 15-minute load averages (zeros where the OS has none)."""
    try:
        return os.getloadavg()
    except OSError:
        return (0.0, 0.0, 0.0)


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0 to 100) of ``values``, linear between ranks."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("no values")
    at = (len(ordered) - 1) * q / 100
    low = int(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


@dataclass(frozen=True)
class Load:
    """The load average when a measurement started and when it ended."""

    start: tuple[float, float, float]
    end: tuple[float, float, float]

    @classmethod
    def around(cls, start: tuple[float, float, float]) -> Load:
        """From ``start`` until now."""
        return cls(start, load_average())

    def short(self) -> str:
        """``"2.31 -> 2.85"``: the 1-minute averages at start and end."""
        return f"{self.start[0]:.2f} -> {self.end[0]:.2f}"

    def __str__(self) -> str:
        def three(values: tuple[float, float, float]) -> str:
            return " ".join(f"{v:.2f}" for v in values)

        return (f"load average (1, 5, 15 min) at start {three(self.start)}, "
                f"at end {three(self.end)}; {os.cpu_count()} cpus")


@dataclass(frozen=True)
class Ratio:
    """The median of per-query ratios, with their 10th and 90th percentiles."""

    median: float
    p10: float
    p90: float
    queries: int

    @classmethod
    def of(cls, ratios: Sequence[float]) -> Ratio:
        """The summary of per-query ratios."""
        return cls(statistics.median(ratios), percentile(ratios, 10), percentile(ratios, 90),
                   len(ratios))

    def spread(self) -> str:
        """``"0.98x-1.61x"``."""
        return f"{self.p10:.2f}x-{self.p90:.2f}x"

    def __str__(self) -> str:
        return f"{self.median:.2f}x (p10-p90 {self.spread()}, {self.queries} queries)"

    def as_dict(self) -> dict[str, float]:
        """The figures, for a JSON record."""
        return {"median": self.median, "p10": self.p10, "p90": self.p90,
                "queries": self.queries}


@dataclass(frozen=True)
class Turns:
    """Milliseconds of every call: ``times[side][query]`` lists that query's repeats."""

    times: dict[str, list[list[float]]]
    load: Load

    def calls(self, side: str) -> list[float]:
        """Every call of ``side``, all queries and repeats."""
        return [ms for repeats in self.times[side] for ms in repeats]

    def p(self, side: str, q: float = 50) -> float:
        """The ``q``-th percentile of ``side``'s calls, in ms."""
        return percentile(self.calls(side), q)

    def per_query(self, side: str) -> list[float]:
        """Each query's median time on ``side``."""
        return [statistics.median(repeats) for repeats in self.times[side]]

    def ratios(self, side: str, floor: str | Sequence[str]) -> list[float]:
        """Each query's ratio of ``side`` to ``floor`` (or to the sum of several floors)."""
        floors = [floor] if isinstance(floor, str) else list(floor)
        mine = self.per_query(side)
        base = [sum(parts) for parts in zip(*(self.per_query(f) for f in floors), strict=True)]
        return [m / b for m, b in zip(mine, base, strict=True) if b > 0]

    def ratio(self, side: str, floor: str | Sequence[str]) -> Ratio:
        """``side`` over ``floor`` (or over the sum of several floors): the per-query ratios'
        median and spread."""
        return Ratio.of(self.ratios(side, floor))


def in_turn(sides: Mapping[str, Callable[[int], object]], count: int, *, repeat: int = 1,
            warm: int = 5) -> Turns:
    """Time every side on query 0, then on query 1, ... (``count`` queries, ``repeat`` rounds).

    Each side is first called untimed on the last ``warm`` queries (so a cache
    keyed by query holds the queries timed last, not first). The sides' order
    rotates from one query to the next.
    """
    names = list(sides)
    for i in range(max(0, count - warm), count):
        for name in names:
            sides[name](i)
    times: dict[str, list[list[float]]] = {name: [[] for _ in range(count)] for name in names}
    start = load_average()
    turn = 0
    for _ in range(repeat):
        for i in range(count):
            shift = turn % len(names)
            turn += 1
            for name in names[shift:] + names[:shift]:
                began = time.perf_counter_ns()
                sides[name](i)
                times[name][i].append((time.perf_counter_ns() - began) / 1e6)
    return Turns(times, Load.around(start))
