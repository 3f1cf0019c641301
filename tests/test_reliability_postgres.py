"""Several processes, each with its own pool, on one PostgreSQL database: nothing lost or leaked.

The default run is 4 processes x 100 operations on a real server; the full
8 x 1,000 run is ``python -m reliability postgres`` (figures in RELIABILITY.md).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("psycopg_pool")

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the reliability scripts live beside tests/, not in src/
    sys.path.insert(0, str(ROOT))

from reliability.postgres_concurrency import (
    KINDS,
    SeededEmbedder,
    plan,
    run_postgres_concurrency,
    verify,
)

from ctxslots import FactStore, RankingPolicy


def test_hosts_share_one_database_without_losing_or_leaking(postgres):
    """4 processes x 100 operations from an empty database: migrated once, every write kept."""
    result = run_postgres_concurrency(postgres.empty_database(), processes=4, ops=100, seed=1)
    assert [] == result.failures
    counts = {s.kind: s.count for s in result.stats}
    wanted = {kind: sum(k == kind for i in range(4) for k in plan(i, 100, 1)) for kind in KINDS}
    assert {**wanted, "open": 4} == counts
    assert result.facts > 0


def test_the_check_notices_lost_and_doubled_writes(pg_url):
    """A value a worker wrote but the database lacks, or a memory it never wrote, fails the run."""
    with FactStore(pg_url, embedder=SeededEmbedder(), ranking=RankingPolicy(vector_weight=1.0),
                   vector_writes="inline") as store:
        store.upsert("user", "shared.k0", "Host 0 wrote this.")
    report = {"index": 0, "latencies": {}, "errors": [], "fatal": None, "leaks": 0,
              "keyed": [("user", "", "shared.k0", "Host 0 wrote this."),
                        ("user", "", "shared.k0", "Host 0 wrote this too.")],
              "adds": [(999, "h0", "A memory that never landed.")]}
    result = verify(pg_url, [report], 1, 1, 1.0)
    assert 2 == len(result.lost)
    assert not result.ok
