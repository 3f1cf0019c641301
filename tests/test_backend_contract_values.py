"""What every storage engine promises behind FactStore: stored values a read can use.

The docstrings of stores/backend.py, as tests run on every engine (see
tests/_backend_contract.py).
"""

from __future__ import annotations

from _backend_contract import (  # noqa: F401  (fixtures, found by pytest by name)
    NOW,
    add,
    fixture_backend,
    fixture_opener,
)

from ctxslots.stores.backend import FactFilter


def test_bad_values_names_each_number_out_of_range_and_repair_resets_it(backend):
    """bad_values() finds times, scores, counts and confidences out of range (NaN and
    infinities too); repair_values() sets each to its fallback and counts them."""
    sound = add(backend, "Sound numbers.")
    bad_time = add(backend, "A time too far.", created_at=1e300, expires_at=-1.0)
    bad_number = add(backend, "A number too big.", score=float("inf"), access_count=2**60,
                     confidence=float("nan") if backend.engine == "postgresql" else 7.0)
    found = {(b.table, b.fact_id, b.column) for b in backend.bad_values(limit=100)}
    assert {("facts", bad_time, "created_at"), ("facts", bad_time, "expires_at"),
            ("facts", bad_number, "score"), ("facts", bad_number, "access_count"),
            ("facts", bad_number, "confidence")} == found
    assert 1 == len(backend.bad_values(limit=1))
    with backend.transaction():
        assert 5 == backend.repair_values(NOW + 1)
    assert [] == backend.bad_values(limit=100)
    rows = {r["id"]: r for r in backend.rows_by_ids([sound, bad_time, bad_number], FactFilter())}
    assert (NOW + 1, None) == (rows[bad_time]["created_at"], rows[bad_time]["expires_at"])
    assert (0.0, 0, 1.0) == (rows[bad_number]["score"], rows[bad_number]["access_count"],
                             rows[bad_number]["confidence"])
    assert NOW == rows[sound]["created_at"]
