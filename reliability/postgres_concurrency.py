"""Several processes, each with its own pool, standing in for hosts on one PostgreSQL database.

Each worker process (``spawn``) opens a :class:`~ctxslots.FactStore` on the
same **empty** database at the same moment (so the migrations and the binding
of the vector table race), each with its own connection pool, then runs a
seeded mix through the public API:

- ``upsert`` (25%): a keyed fact of its own scope (keys drawn from a small
  range, so many are rewritten): the old value kept in history, the vector
  written in the same transaction;
- ``shared`` (15%): the same on a handful of global keys every worker writes,
  so writers of one key meet on different hosts;
- ``add`` (25%): a free memory of its own scope, with its vector;
- ``search`` (35%): both legs in its own scope (every hit must be that scope
  or global), counting the hits' accesses.

The parent then checks: every schema migration recorded once; one fact per
key; every value any worker wrote to a key is either its current value or in
its history, exactly once; each worker's own keys hold its last value; every
free memory is there with its value; nothing else is; every fact has its
vector and no vector is orphaned; no search saw another scope; the backend's
own check is clean::

    result = run_postgres_concurrency("postgresql://.../empty_db", processes=8, ops=1000)
    assert result.ok, result.failures
"""

from __future__ import annotations

import multiprocessing
import random
import time
import zlib
from collections import Counter
from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np

from ._table import format_table
from ._workers import (
    KindStats,
    collect,
    kind_stats,
    latency_table,
    ops_per_second,
    report_from,
)

__all__ = ["KINDS", "PostgresConcurrencyResult", "plan", "run_postgres_concurrency"]

#: The operation kinds and their share of the mix.
KINDS: dict[str, float] = {"upsert": 0.25, "shared": 0.15, "add": 0.25, "search": 0.35}
#: Global keys every worker writes.
SHARED_KEYS = 5
MODEL = "reliability-hash"
DIM = 16
JOIN_TIMEOUT_S = 1800.0
NOW = 1_800_000_000.0


def plan(index: int, ops: int, seed: int) -> list[str]:
    """The seeded sequence of operation kinds worker ``index`` runs."""
    rng = random.Random(f"pg-plan:{seed}:{index}")
    return rng.choices(list(KINDS), weights=list(KINDS.values()), k=ops)


def vector(text: str) -> np.ndarray:
    """A deterministic unit vector for ``text``."""
    v = np.random.default_rng(zlib.crc32(text.encode())).normal(size=DIM).astype(np.float32)
    return v / np.linalg.norm(v)


class SeededEmbedder:
    """A deterministic embedder (:func:`vector`), so every host writes the same vectors."""

    model_id = MODEL
    dimension = DIM

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One unit vector per text."""
        return np.array([vector(t) for t in texts], dtype=np.float32).reshape(len(texts), DIM)


@attrs.frozen
class WorkerSpec:
    """What one worker process is asked to do.

    Attributes:
        index: The worker's number; its scope is ``h{index}``.
        url: The database.
        ops: How many operations to run.
        seed: Seeds the operation mix and the words.
    """

    index: int
    url: str
    ops: int
    seed: int

def _empty_report(index: int) -> dict[str, Any]:
    return {"index": index, "latencies": {}, "errors": [], "keyed": [],
            "adds": [], "leaks": 0, "fatal": None}


def _worker(spec: WorkerSpec, barrier: Any, results: Any) -> None:
    """Run one worker's operations and put its report on ``results``."""
    report_from(lambda report: _run_worker(spec, barrier, report), _empty_report(spec.index),
                results)


def _run_worker(spec: WorkerSpec, barrier: Any, report: dict[str, Any]) -> None:
    from ctxslots import FactStore, RankingPolicy

    kinds = plan(spec.index, spec.ops, spec.seed)
    rng = random.Random(f"pg-values:{spec.seed}:{spec.index}")
    scope = f"h{spec.index}"
    latencies: dict[str, list[float]] = {kind: [] for kind in ("open", *KINDS)}
    clock = [NOW - spec.ops]
    barrier.wait()
    started = time.perf_counter()
    # What an agent on its own host opens: the public store, with its own pool.
    store = FactStore(spec.url, embedder=SeededEmbedder(), clock=lambda: clock[0],
                      ranking=RankingPolicy(vector_weight=1.0), vector_writes="inline")
    latencies["open"].append(time.perf_counter() - started)
    key_space = max(1, spec.ops // 8)
    try:
        for n, kind in enumerate(kinds):
            started = time.perf_counter()
            clock[0] = NOW - spec.ops + n
            try:
                if kind == "upsert":
                    key = f"{scope}.k{rng.randrange(key_space)}"
                    value = f"Host {spec.index} upsert {n} sets topic{rng.randrange(40)}."
                    store.upsert("project", key, value, scope=scope, source="reliability")
                    report["keyed"].append(("project", scope, key, value))
                elif kind == "shared":
                    key = f"shared.k{rng.randrange(SHARED_KEYS)}"
                    value = f"Host {spec.index} shared write {n} on topic{rng.randrange(40)}."
                    store.upsert("user", key, value, source="reliability")
                    report["keyed"].append(("user", "", key, value))
                elif kind == "add":
                    value = f"Host {spec.index} memory {n} notes topic{rng.randrange(40)}."
                    fact = store.add("agent", value, scope=scope, source="reliability")
                    report["adds"].append((fact.id, scope, value))
                else:
                    hits = store.search(f"topic{rng.randrange(40)} memory shared", scope=scope,
                                        limit=20)
                    report["leaks"] += sum(1 for h in hits if h.fact.scope not in (scope, None))
            except Exception as exc:  # noqa: BLE001 - every error is a finding
                report["errors"].append((kind, f"{type(exc).__name__}: {exc}"))
            latencies[kind].append(time.perf_counter() - started)
    finally:
        store.close()
    report["latencies"] = latencies

@attrs.frozen
class PostgresConcurrencyResult:
    """What one run measured and found.

    Attributes:
        processes: Worker processes (hosts).
        ops: Operations per worker.
        wall_s: Seconds from the common start to the last worker's end.
        stats: Latency per operation kind (``open`` includes the migration race).
        errors: ``(worker, kind, "Type: message")`` for every exception a worker saw.
        lost: Writes missing, changed, or present twice.
        unexpected: Facts no worker wrote, and keys held by more than one fact.
        leaks: Search hits from another worker's scope.
        facts: Facts at the end.
        migrations: Migration versions recorded, in order.
        expected_migrations: The versions this code applies.
        vector_problems: Facts without a vector, orphaned vectors, a wrong embedder.
        check_problems: What the backend's own check found.
        fatal: Workers that died, with their traceback.
    """

    processes: int
    ops: int
    wall_s: float
    stats: tuple[KindStats, ...]
    errors: tuple[tuple[int, str, str], ...]
    lost: tuple[str, ...]
    unexpected: tuple[str, ...]
    leaks: int
    facts: int
    migrations: tuple[int, ...]
    expected_migrations: tuple[int, ...]
    vector_problems: tuple[str, ...]
    check_problems: tuple[str, ...]
    fatal: tuple[str, ...]

    @property
    def failures(self) -> list[str]:
        """Every check that failed, one line each (empty when all passed)."""
        out = [f"worker died: {f.splitlines()[-1] if f else f}" for f in self.fatal]
        out += [f"worker {w} {kind}: {msg}" for w, kind, msg in self.errors]
        out += [f"lost write: {x}" for x in self.lost]
        out += [f"unexpected: {x}" for x in self.unexpected]
        if self.leaks:
            out.append(f"{self.leaks} search hits from another worker's scope")
        if self.migrations != self.expected_migrations:
            out.append(f"migrations recorded {list(self.migrations)}, wanted "
                       f"{list(self.expected_migrations)}")
        out += [f"vectors: {p}" for p in self.vector_problems]
        out += [f"check: {p}" for p in self.check_problems]
        return out

    @property
    def ok(self) -> bool:
        """Whether every check passed."""
        return not self.failures

    def table(self) -> str:
        """The latency table and the summary figures, as markdown."""
        summary = [
            ("processes (own pool each) x operations", f"{self.processes} x {self.ops}"),
            ("wall time (s)", f"{self.wall_s:.1f}"),
            ("throughput (ops/s)", ops_per_second(self.stats, self.wall_s)),
            ("facts at the end", self.facts),
            ("migrations applied", f"{len(self.migrations)} (each once)"
             if self.migrations == self.expected_migrations else str(list(self.migrations))),
            ("errors reaching a caller", len(self.errors)),
            ("lost, changed or doubled writes", len(self.lost)),
            ("facts nobody wrote, duplicate keys", len(self.unexpected)),
            ("search hits from another scope", self.leaks),
            ("vectors", "one per fact" if not self.vector_problems
             else "; ".join(self.vector_problems)),
            ("backend check", "clean" if not self.check_problems
             else "; ".join(self.check_problems)),
        ]
        return latency_table(self.stats) + "\n\n" + format_table(["figure", "value"], summary)


def run_postgres_concurrency(url: str, *, processes: int = 8, ops: int = 1000,
                             seed: int = 0) -> PostgresConcurrencyResult:
    """Run ``processes`` workers of ``ops`` operations each on the empty database at ``url``.

    :raises ValueError: ``processes`` or ``ops`` is below 1, or the database
        already holds tables.
    """
    import psycopg

    if processes < 1 or ops < 1:
        raise ValueError(f"processes and ops must be at least 1, not {processes} and {ops}")
    with psycopg.connect(url, autocommit=True) as conn:
        if conn.execute("SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
                        ).fetchone()[0]:
            raise ValueError("the run starts from an empty database; this one has tables")
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(processes + 1)
    results = ctx.Queue()
    workers = [ctx.Process(target=_worker, args=(WorkerSpec(i, url, ops, seed), barrier,
                                                 results), daemon=True)
               for i in range(processes)]
    for w in workers:
        w.start()
    barrier.wait(timeout=300)
    started = time.perf_counter()
    reports = collect(workers, results, _empty_report, JOIN_TIMEOUT_S)
    wall = time.perf_counter() - started
    for w in workers:
        w.join(timeout=60)
    return verify(url, reports, processes, ops, wall)


def verify(url: str, reports: Sequence[dict[str, Any]], processes: int, ops: int,
           wall: float) -> PostgresConcurrencyResult:
    """Check the database against what the workers report they wrote."""
    import psycopg

    from ctxslots.stores.backend import FactFilter
    from ctxslots.stores.postgres import PostgresBackend
    from ctxslots.stores.postgres._schema import SCHEMA_VERSION

    reports = sorted(reports, key=lambda r: r["index"])
    backend = PostgresBackend(url)
    try:
        rows = list(backend.select(FactFilter()))
        history = list(backend.all_history())
        state = backend.vector_state()
        check = backend.check().problems
    finally:
        backend.close()
    with psycopg.connect(url, autocommit=True) as conn:
        migrations = tuple(int(r[0]) for r in conn.execute(
            "SELECT version FROM schema_migrations ORDER BY version"))
    lost: list[str] = []
    unexpected: list[str] = []
    by_key: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for row in rows:
        if row["key"] is not None:
            by_key.setdefault((row["slot"], row["scope"], row["key"]), []).append(row)
    unexpected += [f"{k} held by {len(v)} facts" for k, v in by_key.items() if len(v) > 1]
    past: dict[int, Counter[str]] = {}
    for entry in history:
        past.setdefault(entry.fact_id, Counter())[entry.value] += 1
    wanted: dict[tuple[str, str, str], Counter[str]] = {}
    last: dict[tuple[str, str, str], str] = {}
    for report in reports:
        for slot, scope, key, value in report["keyed"]:
            wanted.setdefault((slot, scope, key), Counter())[value] += 1
            if scope:  # only this worker writes its own scope's keys
                last[(slot, scope, key)] = value
    for where, values in wanted.items():
        found = by_key.get(where, [])
        if where in last and (not found or found[0]["value"] != last[where]):
            lost.append(f"{where}: wanted {last[where]!r} last, found "
                        f"{found[0]['value'] if found else None!r}")
        kept = (Counter([found[0]["value"]]) + past.get(int(found[0]["id"]), Counter())
                if found else Counter())
        if kept != values:
            lost.append(f"{where}: {sum((values - kept).values())} values missing, "
                        f"{sum((kept - values).values())} extra or doubled")
    expected_free = {(fid, scope, value) for r in reports for fid, scope, value in r["adds"]}
    free = {(int(r["id"]), r["scope"], r["value"]) for r in rows if r["key"] is None}
    lost += [f"memory {x} missing or changed" for x in sorted(expected_free - free)]
    unexpected += [f"memory {x}" for x in sorted(free - expected_free)]
    unexpected += [f"key {k}" for k in by_key if k not in wanted]
    vector_problems = []
    if state.model_id != MODEL or state.dimension != DIM:
        vector_problems.append(f"bound to {state.model_id} ({state.dimension})")
    if state.missing or state.orphans or state.vectors != len(rows):
        vector_problems.append(f"{state.vectors} vectors for {len(rows)} facts, "
                               f"{state.missing} missing, {state.orphans} orphans")
    stats = kind_stats(reports)
    return PostgresConcurrencyResult(
        processes=processes, ops=ops, wall_s=wall, stats=stats,
        errors=tuple((r["index"], kind, msg) for r in reports for kind, msg in r["errors"]),
        lost=tuple(lost), unexpected=tuple(unexpected), leaks=sum(r["leaks"] for r in reports),
        facts=len(rows), migrations=migrations,
        expected_migrations=tuple(range(1, SCHEMA_VERSION + 1)),
        vector_problems=tuple(vector_problems), check_problems=tuple(check),
        fatal=tuple(r["fatal"] for r in reports if r["fatal"]))
