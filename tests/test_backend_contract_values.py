"""What every storage engine promises behind FactStore: stored values a read can use, and
finding facts by content a batch at a time.

The docstrings of stores/backend.py, as tests run on every engine (see
tests/_backend_contract.py).
"""

from __future__ import annotations

from _backend_contract import (  # noqa: F401  (fixtures, found by pytest by name)
    NOW,
    add,
    fixture_backend,
    fixture_opener,
    make_row,
)
from ctxslots.stores.backend import FactFilter, HistoryEntry


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


def test_find_existing_answers_a_batch_in_input_order(backend):
    """Keyed items match by key, free items by exact value, archived items by key and value;
    the lowest id wins, and items without a match are None."""
    keyed = add(backend, "Old value.", key="editor")
    free = add(backend, "A free memory.")
    add(backend, "A free memory.", scope="other")
    add(backend, "A free memory with a longer text " + "x" * 100)
    twin = add(backend, "A free memory with a longer text " + "x" * 100 + " and more")
    gone = add(backend, "Gone now.", key="old")
    with backend.transaction():
        backend.archive(gone, archived_at=NOW, reason=None)
    theirs = add(backend, "A free memory.", agent_id="coder")
    items = [("agent", "", "", "", "editor", "Another value."),
             ("agent", "", "", "", None, "A free memory."),
             ("agent", "", "", "", None, "a free memory."),
             ("agent", "", "", "", None,
              "A free memory with a longer text " + "x" * 100 + " and more"),
             ("user", "", "", "", None, "A free memory."),
             ("agent", "", "", "", "missing", "A free memory."),
             ("agent", "", "", "coder", None, "A free memory."),
             ("agent", "", "", "coder", "editor", "Another value.")]
    assert [keyed, free, None, twin, None, None, theirs, None] == backend.find_existing(items)
    assert [gone, None] == backend.find_existing(
        [("agent", "", "", "", "old", "Gone now."), ("agent", "", "", "", "old", "Other.")],
        archived=True)
    assert [] == backend.find_existing([])
    many = [("agent", "", "", "", None, f"Memory {n}.") for n in range(1200)]
    with backend.transaction():
        ids = [backend.insert(make_row(v)) for _, _, _, _, _, v in many[::2]]
    assert [*ids] == [i for i in backend.find_existing(many) if i is not None]
    assert 600 == backend.find_existing(many).count(None)


def test_taken_ids_covers_live_archived_and_historical_ids(backend):
    """An id is taken once a live, archived or historical fact had it."""
    live = add(backend, "Live.")
    archived = add(backend, "Archived.")
    with backend.transaction():
        backend.archive(archived, archived_at=NOW, reason=None)
        backend.add_history([HistoryEntry(
            fact_id=9_000, slot="agent", scope="", key=None, value="Old.", tags="",
            source=None, confidence=1.0, valid_from=NOW, valid_to=NOW)])
    assert {live, archived, 9_000} == backend.taken_ids([live, archived, 9_000, 9_001])
    assert set() == backend.taken_ids([])
