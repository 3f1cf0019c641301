"""Several processes on one store file: no lock error reaches a caller, no write is lost.

The default run is 4 processes x 100 operations; ``-m slow`` adds the full
8 x 1,000 run (``python -m reliability concurrency`` prints its figures).
"""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the reliability scripts live beside tests/, not in src/
    sys.path.insert(0, str(ROOT))

from reliability.concurrency import KINDS, _verify, plan, run_concurrency

from ctxslots import FactStore


def _opted_in(config: pytest.Config) -> bool:
    expr = config.getoption("markexpr", default="") or ""
    return "slow" in expr and "not slow" not in expr


def _check(result, processes: int, ops: int, seed: int) -> None:
    assert [] == result.failures
    assert 0 == result.busy_errors
    wanted = Counter(k for i in range(processes) for k in plan(i, ops, seed))
    counts = {s.kind: s.count for s in result.stats}
    assert {**wanted, "open": processes} == counts
    assert wanted["flush"] == result.flush_requests
    assert result.facts > 0
    for stat in result.stats:
        assert 0 < stat.p50_ms <= stat.p99_ms <= stat.max_ms


def test_processes_share_one_file_without_errors_or_lost_writes(tmp_path):
    """4 processes x 100 mixed operations on one fresh file: every write is there, no error."""
    result = run_concurrency(tmp_path / "c.db", processes=4, ops=100, seed=1)
    _check(result, 4, 100, 1)
    assert set(KINDS) | {"open"} == {s.kind for s in result.stats}


def test_the_check_notices_a_lost_write(tmp_path):
    """A write a worker reported but the file lacks is reported as lost."""
    db = tmp_path / "lost.db"
    with FactStore(db) as store:
        store.upsert("user", "w0.k0", "Worker 0 wrote this.")
    report = {"index": 0, "latencies": {"upsert": [0.001]}, "errors": [], "fatal": None,
              "keyed": {("user", None, "w0.k0"): "Worker 0 wrote this.",
                        ("user", None, "w0.k1"): "Worker 0 also wrote this."},
              "adds": [("agent", "w0", "A memory that never landed.")], "flushed": [], "leaks": 0}
    result = _verify(db, [report], 1, 1, 1.0, 0)
    assert 2 == len(result.lost)
    assert not result.ok


@pytest.mark.slow
def test_full_size_run(tmp_path, request):
    """8 processes x 1,000 operations (opt-in: ``pytest -m slow``)."""
    if not _opted_in(request.config):
        pytest.skip("opt-in: run with `pytest -m slow` (or `python -m reliability concurrency`)")
    result = run_concurrency(tmp_path / "full.db", processes=8, ops=1000, seed=0)
    _check(result, 8, 1000, 0)
