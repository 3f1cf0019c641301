"""Writers through PostgreSQL outages: nothing acknowledged is lost, failing calls fail
fast and say the server does not answer, calls work again as soon as it is back.

Worker processes, each with its own ``FactStore`` (its own pool) on one database,
add facts and search in a loop. The parent stops the server (``pg_ctl stop -m
fast``, every connection cut) a number of times, keeps it down for a while,
starts it again, and measures how long after each start every worker has had a
call succeed. At the end every acknowledged fact must be there with its value,
and nothing may have been printed on a worker's stderr.
"""

from __future__ import annotations

import multiprocessing
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs

__all__ = ["OutageResult", "run_postgres_outage"]


@attrs.frozen
class _WorkerSpec:
    url: str
    index: int
    stderr: str


def _worker(spec: _WorkerSpec, ready: Any, stop: Any, results: Any) -> None:
    """Add and search until ``stop`` is set (saying on ``ready`` when the first call
    succeeded); put the report on ``results``."""
    # What the pool or the store would print lands in a file the parent reads.
    fd = os.open(spec.stderr, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 2)
    from ctxslots import FactStore

    report: dict[str, Any] = {"index": spec.index, "acked": [], "successes": [],
                              "failures": [], "fatal": None}
    try:
        with FactStore(spec.url) as store:
            n = 0
            while not stop.is_set():
                n += 1
                started = time.time()
                try:
                    if n % 3:
                        value = f"Worker {spec.index} wrote fact {n} about topic{n % 40}."
                        fact = store.add("agent", value, scope=f"w{spec.index}")
                        report["acked"].append((fact.id, value))
                    else:
                        store.search(f"topic{n % 40}", scope=f"w{spec.index}", limit=5)
                    report["successes"].append(time.time())
                    if len(report["successes"]) == 1:
                        ready.put(spec.index)
                except Exception as exc:  # noqa: BLE001 - every error is a finding
                    report["failures"].append((started, time.time() - started,
                                               f"{type(exc).__name__}: {exc}"))
                    # A stopped server refuses at once: pace the retries like a caller would.
                    time.sleep(0.05)
    except Exception as exc:  # noqa: BLE001
        report["fatal"] = f"{type(exc).__name__}: {exc}"
        ready.put(spec.index)  # the parent waits for no call that will not come
    results.put(report)


@attrs.frozen
class OutageResult:
    """What a run measured.

    Attributes:
        workers: Worker processes.
        outages: ``(stopped_at, started_at)`` of each outage (Unix seconds).
        recoveries: Per outage, the seconds from the server's start to the moment
            every worker had a call succeed.
        acked: Facts acknowledged.
        lost: Acknowledged facts missing or changed at the end.
        failed_calls: ``(seconds blocked, message)`` of every failed call.
        stray: Failed calls whose error was not a ``StoreError`` saying the server
            does not answer or that the connection was lost.
        stderr_lines: Lines the workers printed on stderr.
        fatal: Workers that stopped on an error.
    """

    workers: int
    outages: tuple[tuple[float, float], ...]
    recoveries: tuple[float, ...]
    acked: int
    lost: tuple[str, ...]
    failed_calls: tuple[tuple[float, str], ...]
    stray: tuple[str, ...]
    stderr_lines: int
    fatal: tuple[str, ...]

    @property
    def failures(self) -> list[str]:
        """Every finding, one line each: a lost fact, an unexpected error, a worker
        that stopped, lines printed on stderr."""
        return [*self.lost, *self.stray, *self.fatal,
                *([f"{self.stderr_lines} lines on the workers' stderr"]
                  if self.stderr_lines else [])]

    @property
    def ok(self) -> bool:
        """Whether nothing was lost, every failure was the expected one and nothing printed."""
        return not self.failures

    def table(self) -> str:
        """A markdown table of the figures."""
        blocked = [seconds for seconds, _ in self.failed_calls]
        down = statistics.mean(b - a for a, b in self.outages) if self.outages else 0.0
        rows = [
            ("workers", str(self.workers)),
            ("outages", f"{len(self.outages)}, {down:.1f} s down each"),
            ("every worker served again after the start", ", ".join(
                f"{r:.2f} s" for r in self.recoveries)),
            ("facts acknowledged", f"{self.acked:,}"),
            ("acknowledged facts lost or changed", f"**{len(self.lost)}**"),
            ("failed calls", f"{len(self.failed_calls):,}"),
            ("longest failed call", f"{max(blocked, default=0.0):.2f} s"),
            ("failed calls that took over 1 s", str(sum(b > 1.0 for b in blocked))),
            ("median failed call", f"{statistics.median(blocked) if blocked else 0.0:.3f} s"),
            ("failures of another kind", f"**{len(self.stray)}**"),
            ("lines on the workers' stderr", f"**{self.stderr_lines}**"),
        ]
        return "\n".join(["| figure | value |", "| --- | --- |",
                          *(f"| {name} | {value} |" for name, value in rows)])


_EXPECTED = ("does not answer", "lost the connection")


def run_postgres_outage(url: str, *, stop_server: Callable[[], None],
                        start_server: Callable[[], None], folder: Path, workers: int = 4,
                        outages: int = 3, down_s: float = 15.0, warmup_s: float = 3.0
                        ) -> OutageResult:
    """Run ``workers`` writers on ``url`` through ``outages`` stops of ``down_s`` seconds."""
    from ctxslots import FactStore

    FactStore(url).close()  # the schema, before the workers race for it
    ctx = multiprocessing.get_context("spawn")
    ready, stop, results = ctx.Queue(), ctx.Event(), ctx.Queue()
    specs = [_WorkerSpec(url, i, str(folder / f"worker{i}.stderr")) for i in range(workers)]
    procs = [ctx.Process(target=_worker, args=(s, ready, stop, results)) for s in specs]
    for proc in procs:
        proc.start()
    for _ in procs:  # every worker under way before the first stop
        ready.get()
    time.sleep(warmup_s)
    windows: list[tuple[float, float]] = []
    for _ in range(outages):
        stopped = time.time()
        stop_server()
        time.sleep(down_s)
        start_server()
        windows.append((stopped, time.time()))
        time.sleep(max(warmup_s, down_s))  # the calls after the start are what is measured
    stop.set()
    reports = [results.get() for _ in procs]
    for proc in procs:
        proc.join()
    return _verify(url, reports, windows, specs)


def _verify(url: str, reports: Sequence[dict[str, Any]], windows: list[tuple[float, float]],
            specs: Sequence[_WorkerSpec]) -> OutageResult:
    from ctxslots import FactStore
    from ctxslots.stores.owners import ANY

    recoveries = []
    for _, started in windows:
        firsts = [min((t for t in r["successes"] if t >= started), default=float("inf"))
                  for r in reports]
        recoveries.append(max(firsts) - started)
    with FactStore(url) as store:
        stored = {f.id: f.value for f in store.facts(scope=ANY, user=ANY, agent=ANY)}
    acked = [(fid, value) for r in reports for fid, value in r["acked"]]
    lost = tuple(f"fact {fid} acknowledged as {value!r} is {stored.get(fid)!r}"
                 for fid, value in acked if stored.get(fid) != value)
    failed = tuple((seconds, message) for r in reports for _, seconds, message in r["failures"])
    stray = tuple(message for _, message in failed
                  if not (message.startswith("StoreError") and any(
                      words in message for words in _EXPECTED)))
    lines = sum(len(Path(s.stderr).read_text().splitlines()) for s in specs)
    fatal = tuple(f"worker {r['index']}: {r['fatal']}" for r in reports if r["fatal"])
    return OutageResult(workers=len(reports), outages=tuple(windows),
                        recoveries=tuple(recoveries), acked=len(acked), lost=lost,
                        failed_calls=failed, stray=stray, stderr_lines=lines, fatal=fatal)


if __name__ == "__main__":
    sys.exit("run it through `python -m reliability postgres-outage`")
