"""Plain-text tables and latency percentiles for the reliability reports."""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["format_table", "percentile"]


def percentile(values: Sequence[float], p: float) -> float:
    """The nearest-rank ``p``-th percentile of ``values`` (``nan`` when empty).

    :param values: The samples, in any order.
    :param p: From 0 to 100.
    """
    if not 0.0 <= p <= 100.0:
        raise ValueError(f"p must be from 0 to 100, not {p}")
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100.0 * len(ordered)))
    return ordered[rank - 1]


def format_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A markdown table with columns padded to their widest cell.

    Numbers are right-aligned; floats are shown with three decimals.
    """
    def cell(value: object) -> str:
        if isinstance(value, float):
            return "-" if math.isnan(value) else f"{value:.3f}"
        return str(value)

    text = [[cell(v) for v in row] for row in rows]
    numeric = [all(isinstance(row[i], (int, float)) for row in rows) if rows else False
               for i in range(len(headers))]
    widths = [max([len(h)] + [len(r[i]) for r in text]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        padded = [c.rjust(w) if numeric[i] else c.ljust(w)
                  for i, (c, w) in enumerate(zip(cells, widths))]
        return "| " + " | ".join(padded) + " |"

    rule = "| " + " | ".join(("-" * (w - 1) + ":") if numeric[i] else "-" * w
                             for i, w in enumerate(widths)) + " |"
    return "\n".join([line(list(headers)), rule, *(line(r) for r in text)])
