"""Many processes writing, searching and flushing on one store file at once.

Each worker process (``spawn`` start method) opens the same fresh database file
at the same moment, then runs a seeded mix of operations on keys and a scope of
its own: ``upsert`` (keyed facts, some keys rewritten), ``add`` (free-form
memories), ``search`` (every hit must be the worker's scope or global) and
``flush`` (a :class:`~ctxslots.MemoryFlusher` round trip against one
:class:`~ctxslots.testing.ScriptedChatServer` started by the parent). Every
exception a worker sees is recorded, never retried.

The parent then reads the file and checks that every write a worker made is
there with its last value, that nothing else is, and that ``store.doctor()``
finds nothing wrong::

    result = run_concurrency(Path("c.db"), processes=8, ops=1000)
    assert result.ok, result.failures
"""

from __future__ import annotations

import json
import multiprocessing
import random
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from ctxslots.stores.sqlite import open_connection

from ._table import format_table
from ._workers import (
    KindStats,
    collect,
    kind_stats,
    latency_table,
    ops_per_second,
    report_from,
)

__all__ = ["KINDS", "ConcurrencyResult", "KindStats", "plan", "run_concurrency"]

#: The operation kinds and their share of the mix.
KINDS: dict[str, float] = {"upsert": 0.35, "add": 0.25, "search": 0.35, "flush": 0.05}

#: How long the parent waits for all workers before giving up.
JOIN_TIMEOUT_S = 1800.0


def plan(index: int, ops: int, seed: int) -> list[str]:
    """The seeded sequence of operation kinds worker ``index`` runs."""
    rng = random.Random(f"plan:{seed}:{index}")
    return rng.choices(list(KINDS), weights=list(KINDS.values()), k=ops)


def flush_reply(number: int) -> str:
    """The scripted model reply to the ``number``-th flush request the server receives.

    Which worker gets which reply is up to the scheduler, so the keys name the
    reply and the worker reports what its flushes wrote.
    """
    return json.dumps({"operations": [
        {"op": "upsert", "slot": "project", "key": f"flush.{number}",
         "value": f"Flush reply {number} says build step {number} uses cache bucket {number}.",
         "confidence": 0.9, "tags": ["flush"]},
        {"op": "upsert", "slot": "user", "key": f"flush.{number}.user",
         "value": f"Flush reply {number} learned the user prefers editor theme {number}.",
         "confidence": 0.8, "tags": []},
    ]})


@attrs.frozen
class WorkerSpec:
    """What one worker process is asked to do.

    Attributes:
        index: The worker's number; its scope is ``w{index}``.
        db: The database file.
        base_url: The scripted chat server's API root.
        ops: How many operations to run.
        seed: Seeds the operation mix and the keys.
    """

    index: int
    db: str
    base_url: str
    ops: int
    seed: int

def _empty_report(index: int) -> dict[str, Any]:
    return {"index": index, "latencies": {}, "errors": [], "keyed": {},
            "adds": [], "flushed": [], "leaks": 0, "fatal": None}


def _worker(spec: WorkerSpec, barrier: Any, results: Any) -> None:
    """Run one worker's operations and put its report on ``results``."""
    report_from(lambda report: _run_worker(spec, barrier, report), _empty_report(spec.index),
                results)


def _run_worker(spec: WorkerSpec, barrier: Any, report: dict[str, Any]) -> None:
    from ctxslots import FactStore, MemoryFlusher, OpenAIChatClient

    kinds = plan(spec.index, spec.ops, spec.seed)
    rng = random.Random(f"values:{spec.seed}:{spec.index}")
    scope = f"w{spec.index}"
    latencies: dict[str, list[float]] = {kind: [] for kind in ("open", *KINDS)}
    barrier.wait()
    started = time.perf_counter()
    store = FactStore(spec.db)
    latencies["open"].append(time.perf_counter() - started)
    client = OpenAIChatClient(spec.base_url, "scripted", max_retries=0, timeout=120)
    # Pruning would archive facts on purpose; this run checks that none go missing.
    flusher = MemoryFlusher(store, client, prune=None)
    messages: list[dict[str, str]] = []
    key_space = max(1, spec.ops // 5)
    try:
        for n, kind in enumerate(kinds):
            started = time.perf_counter()
            try:
                if kind == "upsert":
                    slot = rng.choice(["project", "user"])
                    where = scope if slot == "project" else None
                    key = f"{scope}.k{rng.randrange(key_space)}"
                    value = f"Worker {spec.index} upsert {n} sets topic{rng.randrange(50)} token {scope}u{n}."
                    store.upsert(slot, key, value, scope=where, tags=[scope])
                    report["keyed"][(slot, where, key)] = value
                elif kind == "add":
                    value = f"Worker {spec.index} memory {n} notes topic{rng.randrange(50)} token {scope}a{n}."
                    store.add("agent", value, scope=scope)
                    report["adds"].append(("agent", scope, value))
                elif kind == "search":
                    hits = store.search(f"worker topic{rng.randrange(50)} memory upsert",
                                        scope=scope, limit=10)
                    report["leaks"] += sum(1 for h in hits if h.fact.scope not in (scope, None))
                else:
                    messages.append({"role": "user", "content": f"Worker {spec.index} message {n}: "
                                     f"the build uses cache bucket {n}."})
                    flushed = flusher.flush(messages, conversation=f"conv-{scope}", scope=scope,
                                            force=True)
                    if flushed.status != "applied":
                        raise RuntimeError(f"flush status {flushed.status}: {flushed.error}")
                    for change in (*flushed.added, *flushed.updated):
                        fact = change.fact
                        report["flushed"].append((fact.slot, fact.scope, fact.key, fact.value))
            except Exception as exc:  # noqa: BLE001 - every error is a finding
                report["errors"].append((kind, f"{type(exc).__name__}: {exc}"))
            latencies[kind].append(time.perf_counter() - started)
    finally:
        store.close()
    report["latencies"] = latencies

@attrs.frozen
class ConcurrencyResult:
    """What one concurrency run measured and found.

    Attributes:
        processes: Worker processes.
        ops: Operations per worker.
        wall_s: Seconds from the common start to the last worker's end.
        stats: Latency per operation kind (``open`` is the first open of the file).
        errors: ``(worker, kind, "Type: message")`` for every exception a worker saw.
        busy_errors: How many of those were lock or busy errors.
        lost: Writes a worker made that are missing or hold another value.
        unexpected: Facts in the file that no worker wrote.
        leaks: Search hits from another worker's scope.
        facts: Facts in the file at the end.
        flush_requests: Chat requests the server received.
        doctor_problems: What ``store.doctor()`` found at the end.
        fatal: Workers that died, with their traceback.
    """

    processes: int
    ops: int
    wall_s: float
    stats: tuple[KindStats, ...]
    errors: tuple[tuple[int, str, str], ...]
    busy_errors: int
    lost: tuple[str, ...]
    unexpected: tuple[str, ...]
    leaks: int
    facts: int
    flush_requests: int
    doctor_problems: tuple[str, ...]
    fatal: tuple[str, ...]

    @property
    def failures(self) -> list[str]:
        """Every check that failed, one line each (empty when all passed)."""
        out = [f"worker died: {f.splitlines()[-1] if f else f}" for f in self.fatal]
        out += [f"worker {w} {kind}: {msg}" for w, kind, msg in self.errors]
        out += [f"lost write: {x}" for x in self.lost]
        out += [f"unexpected fact: {x}" for x in self.unexpected]
        if self.leaks:
            out.append(f"{self.leaks} search hits from another worker's scope")
        out += [f"doctor: {p}" for p in self.doctor_problems]
        return out

    @property
    def ok(self) -> bool:
        """Whether every check passed."""
        return not self.failures

    def table(self) -> str:
        """The latency table and the summary figures, as markdown."""
        summary = [
            ("processes x operations", f"{self.processes} x {self.ops}"),
            ("wall time (s)", f"{self.wall_s:.1f}"),
            ("throughput (ops/s)", ops_per_second(self.stats, self.wall_s)),
            ("facts at the end", self.facts),
            ("flush requests served", self.flush_requests),
            ("errors reaching a caller", len(self.errors)),
            ("of which lock/busy errors", self.busy_errors),
            ("lost or changed writes", len(self.lost)),
            ("facts nobody wrote", len(self.unexpected)),
            ("search hits from another scope", self.leaks),
            ("doctor", "clean" if not self.doctor_problems else "; ".join(self.doctor_problems)),
        ]
        return latency_table(self.stats) + "\n\n" + format_table(["figure", "value"], summary)


def run_concurrency(db: Path, *, processes: int = 8, ops: int = 1000, seed: int = 0) -> ConcurrencyResult:
    """Run ``processes`` workers of ``ops`` operations each on the fresh file ``db``.

    :raises ValueError: ``processes`` or ``ops`` is below 1, or ``db`` already exists.
    """
    from ctxslots.testing import ScriptedChatServer

    if processes < 1 or ops < 1:
        raise ValueError(f"processes and ops must be at least 1, not {processes} and {ops}")
    if Path(db).exists():
        raise ValueError(f"{db} already exists; the run starts from a fresh file")
    flushes = sum(kind == "flush" for i in range(processes) for kind in plan(i, ops, seed))
    ctx = multiprocessing.get_context("spawn")
    with ScriptedChatServer([flush_reply(k) for k in range(flushes)]) as server:
        barrier = ctx.Barrier(processes + 1)
        results = ctx.Queue()
        workers = [ctx.Process(target=_worker, args=(
            WorkerSpec(i, str(db), server.base_url, ops, seed), barrier, results), daemon=True)
            for i in range(processes)]
        for w in workers:
            w.start()
        barrier.wait(timeout=300)
        started = time.perf_counter()
        reports = collect(workers, results, _empty_report, JOIN_TIMEOUT_S)
        wall = time.perf_counter() - started
        for w in workers:
            w.join(timeout=60)
        requests = len(server.requests)
    return _verify(db, reports, processes, ops, wall, requests)


def _verify(db: Path, reports: Sequence[dict[str, Any]], processes: int, ops: int, wall: float,
            requests: int) -> ConcurrencyResult:
    from ctxslots import FactStore

    reports = sorted(reports, key=lambda r: r["index"])
    with FactStore(db) as store:
        rows = open_connection(store.path, migrate=False).rows("SELECT slot, scope, key, value FROM facts")
        problems = store.doctor().problems
    keyed = {(r["slot"], r["scope"] or None, r["key"]): r["value"] for r in rows if r["key"] is not None}
    free = Counter((r["slot"], r["scope"] or None, r["value"]) for r in rows if r["key"] is None)
    lost: list[str] = []
    wanted_keys: set[tuple[str, str | None, str]] = set()
    wanted_free: Counter[tuple[str, str | None, str]] = Counter()
    for report in reports:
        expected = dict(report["keyed"])
        expected.update({(s, sc, k): v for s, sc, k, v in report["flushed"]})
        for where, value in expected.items():
            wanted_keys.add(where)
            if keyed.get(where) != value:
                lost.append(f"{where}: wanted {value!r}, found {keyed.get(where)!r}")
        wanted_free.update(report["adds"])
    for where, count in (wanted_free - free).items():
        lost.append(f"{where}: {count} free memories missing")
    unexpected = [f"{k}" for k in keyed if k not in wanted_keys]
    unexpected += [f"{k} x{n}" for k, n in (free - wanted_free).items()]
    stats = kind_stats(reports)
    errors = tuple((r["index"], kind, msg) for r in reports for kind, msg in r["errors"])
    busy = sum(1 for _, _, msg in errors if "locked" in msg.lower() or "busy" in msg.lower())
    return ConcurrencyResult(
        processes=processes, ops=ops, wall_s=wall, stats=stats, errors=errors, busy_errors=busy,
        lost=tuple(lost), unexpected=tuple(unexpected), leaks=sum(r["leaks"] for r in reports),
        facts=len(rows), flush_requests=requests, doctor_problems=tuple(problems),
        fatal=tuple(r["fatal"] for r in reports if r["fatal"]),
    )
