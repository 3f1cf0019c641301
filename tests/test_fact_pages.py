"""The SQLite reads by when a fact was said walk their index rather than sort the store."""

from __future__ import annotations

from _sql import raw, traced
from ctxslots import FactStore
from ctxslots.stores.owners import ANY

EVERYONE = {"scope": ANY, "user": ANY, "agent": ANY}


def _fill(store, clock) -> list[int]:
    """Twelve facts of three users, said out of the order they were written in."""
    ids = []
    for n in range(12):
        said = clock() - (n % 4) * 86400 - n  # distinct moments, not in id order
        ids.append(store.add("user", f"Note {n} of the user.", user=f"u{n % 3}",
                             observed_at=said).id)
    return ids


def _sorts(db_path, clock, read) -> list[tuple[str, list[str]]]:
    """The statements ``read(store)`` runs that order by when said, each with its plan."""
    with traced(lambda sql, b: (sql, b)) as ran, FactStore(db_path, clock=clock) as store:
        ran.clear()
        read(store)
        reads = [(sql, b) for sql, b in ran
                 if "ORDER BY" in sql and "observed_at" in sql.split("ORDER BY")[1]]
    conn = raw(store)
    try:
        return [(sql, [str(r[-1]) for r in conn.execute("EXPLAIN QUERY PLAN " + sql,
                                                        bindings).fetchall()])
                for sql, bindings in reads]
    finally:
        conn.close()


def test_a_facts_timeline_walks_the_index_instead_of_sorting_the_store(db_path, clock):
    """The facts said just before and after one are read along the index on when said
    (no temporary B-tree: the store is not sorted to find four neighbours)."""
    with FactStore(db_path, clock=clock) as store:
        ids = _fill(store, clock)
    found = _sorts(db_path, clock,
                   lambda s: s.timeline(ids[5], before=2, after=2, **EVERYONE))
    assert 2 == len(found), found
    for sql, plan in found:
        assert not any("TEMP B-TREE" in d for d in plan), (sql, plan)
        assert any("facts_observed_at" in d for d in plan), (sql, plan)
