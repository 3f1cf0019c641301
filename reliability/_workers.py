"""What the multi-process runs share: a worker's report, collecting reports, latency per kind."""

from __future__ import annotations

import queue
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from ._table import format_table, percentile

__all__ = ["KindStats", "collect", "kind_stats", "latency_table", "ops_per_second", "report_from"]


@attrs.frozen
class KindStats:
    """Latency of one operation kind, over every worker.

    Attributes:
        kind: The operation kind.
        count: How many ran.
        p50_ms: Median latency, milliseconds.
        p99_ms: 99th percentile latency, milliseconds.
        max_ms: Slowest one, milliseconds.
    """

    kind: str
    count: int
    p50_ms: float
    p99_ms: float
    max_ms: float


def report_from(run: Callable[[dict[str, Any]], None], report: dict[str, Any],
                results: Any) -> None:
    """Fill ``report`` by ``run(report)`` and put it on ``results``; a worker that
    fails is reported with its traceback as ``fatal``."""
    try:
        run(report)
    except BaseException:  # noqa: BLE001 - reported to the parent, which fails the run
        report["fatal"] = traceback.format_exc()
    results.put(report)


def collect(workers: Sequence[Any], results: Any, empty: Callable[[int], dict[str, Any]],
            timeout: float) -> list[dict[str, Any]]:
    """Every worker's report; a worker that died without one gets ``empty(index)``
    with ``fatal`` set."""
    reports: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while len(reports) < len(workers) and time.monotonic() < deadline:
        try:
            reports.append(results.get(timeout=1.0))
        except queue.Empty:
            if not any(w.is_alive() for w in workers):
                break
    seen = {r["index"] for r in reports}
    reports += [{**empty(index), "fatal": "exited without a report"}
                for index in range(len(workers)) if index not in seen]
    return reports


def kind_stats(reports: Sequence[dict[str, Any]]) -> tuple[KindStats, ...]:
    """Latency per operation kind over every report's ``latencies``."""
    merged: dict[str, list[float]] = {}
    for report in reports:
        for kind, values in report["latencies"].items():
            merged.setdefault(kind, []).extend(values)
    return tuple(KindStats(kind, len(v), 1000 * percentile(v, 50), 1000 * percentile(v, 99),
                           1000 * max(v)) for kind, v in merged.items() if v)


def latency_table(stats: Sequence[KindStats]) -> str:
    """The latency per operation kind, as a markdown table."""
    rows = [(s.kind, s.count, s.p50_ms, s.p99_ms, s.max_ms) for s in stats]
    return format_table(["operation", "count", "p50 ms", "p99 ms", "max ms"], rows)


def ops_per_second(stats: Sequence[KindStats], wall_s: float) -> str:
    """Operations a second over the run, the first opens left out (``-`` for no time)."""
    total = sum(s.count for s in stats if s.kind != "open")
    return f"{total / wall_s:.0f}" if wall_s else "-"
