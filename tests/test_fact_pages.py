"""Reading the facts a page at a time: ``FactStore.facts(limit=, offset=, newest_first=,
order=)`` and ``FactStore.count_facts``, on every engine; and the SQLite reads by when a
fact was said walk their index rather than sort the store."""

from __future__ import annotations

import pytest

from _sql import raw, rows_read, traced
from ctxslots import FactStore, InvalidArgumentError
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


def test_a_page_is_the_slice_of_the_whole_list_in_each_order(store, clock):
    """Every page, by id or by when said, either way round, is the slice of the full
    list at its offset; the count is the full list's length, filters and all."""
    _fill(store, clock)
    for order in ("id", "said"):
        for newest in (False, True):
            whole = store.facts(**EVERYONE, order=order, newest_first=newest)
            assert 12 == len(whole)
            for offset in range(0, 13, 5):
                page = store.facts(**EVERYONE, order=order, newest_first=newest, limit=5,
                                   offset=offset)
                assert [f.id for f in whole[offset:offset + 5]] == [f.id for f in page]
    by_said = store.facts(**EVERYONE, order="said", newest_first=True)
    assert [f.said_at for f in by_said] == sorted((f.said_at for f in by_said), reverse=True)
    assert [f.id for f in store.facts(**EVERYONE)] == sorted(f.id for f in by_said)
    assert 12 == store.count_facts(**EVERYONE)
    assert 4 == store.count_facts(scope=ANY, agent=ANY, user="u1")
    assert [f.id for f in store.facts(scope=ANY, agent=ANY, user="u1")] == [
        f.id for f in store.facts(scope=ANY, agent=ANY, user="u1", limit=10)]


@pytest.mark.parametrize("bad", [{"limit": 0}, {"limit": 1001}, {"limit": "5"},
                                 {"offset": -1}, {"offset": 1.5}, {"order": "score"}])
def test_a_malformed_page_is_refused_with_its_field(store, bad):
    """A limit outside 1 to 1000, a negative offset or an unknown order: one clear error."""
    with pytest.raises(InvalidArgumentError) as caught:
        store.facts(**EVERYONE, **bad)
    assert next(iter(bad)) == caught.value.field


@pytest.mark.parametrize("offset", [12, 2**63 - 1, 2**63, 10**30])
def test_an_offset_past_the_end_is_an_empty_page(store, clock, offset):
    """An offset past the last fact, however far (a page number a caller multiplied out),
    is an empty page on every engine, not an OverflowError or a server's range error."""
    _fill(store, clock)
    for order in ("id", "said"):
        assert [] == store.facts(**EVERYONE, order=order, limit=5, offset=offset)
        assert [] == store.facts(**EVERYONE, order=order, newest_first=True, offset=offset)


def test_a_page_reads_only_its_own_rows(db_path, clock):
    """A page of 10 out of 400 facts takes 10 rows from SQLite, and the count one."""
    with FactStore(db_path, clock=clock) as store, store.batch():
        for n in range(400):
            store.add("agent", f"Lesson {n}.")
    with rows_read() as read, FactStore(db_path, clock=clock) as reader:
        read.clear()
        page = reader.facts(**EVERYONE, newest_first=True, limit=10, offset=20)
        assert [f.value for f in page] == [f"Lesson {n}." for n in range(379, 369, -1)]
        assert 10 == read.get("facts")
        read.clear()
        assert 400 == reader.count_facts(**EVERYONE)
        assert 1 == read.get("facts")  # the count's one row


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


def test_a_page_by_when_said_walks_the_index_instead_of_sorting(db_path, clock):
    """A page of the newest said facts is read along the index, not sorted."""
    with FactStore(db_path, clock=clock) as store:
        _fill(store, clock)
    found = _sorts(db_path, clock, lambda s: s.facts(**EVERYONE, order="said",
                                                     newest_first=True, limit=5))
    assert 1 == len(found), found
    sql, plan = found[0]
    assert not any("TEMP B-TREE" in d for d in plan), (sql, plan)
    assert any("facts_observed_at" in d for d in plan), (sql, plan)


def test_a_fact_without_an_observed_time_is_listed_by_when_it_was_written(db_path, clock):
    """A fact written before the observed time was kept (NULL in its column, which the
    store reads as when it was written) takes its place among the others by when said,
    as its ``said_at`` says, in a page and in the timeline of a fact; it was listed before
    every other fact (after, newest first), and never said around another."""
    with FactStore(db_path, clock=clock) as store:
        old = store.add("user", "Said long ago.", observed_at=clock() - 3 * 86400).id
        unobserved = store.add("user", "Written yesterday, said then.").id
        late = store.add("user", "Said two days ago.", observed_at=clock() - 2 * 86400).id
        recent = store.add("user", "Said just now.", observed_at=clock() + 60).id
    conn = raw(store)
    try:
        conn.execute("UPDATE facts SET observed_at = NULL, created_at = ? WHERE id = ?",
                     (clock() - 86400, unobserved))
    finally:
        conn.close()
    with FactStore(db_path, clock=clock) as store:
        assert store.get(unobserved).said_at.timestamp() == clock() - 86400
        oldest_first = [old, late, unobserved, recent]
        assert oldest_first == [f.id for f in store.facts(**EVERYONE, order="said")]
        assert oldest_first[::-1] == [f.id for f in store.facts(
            **EVERYONE, order="said", newest_first=True)]
        assert oldest_first[::-1][1:3] == [f.id for f in store.facts(
            **EVERYONE, order="said", newest_first=True, limit=2, offset=1)]
        # and among the facts said around one (it was never a neighbour)
        assert oldest_first == [f.id for f in store.timeline(late, before=2, after=2,
                                                             **EVERYONE)]
        assert oldest_first == [f.id for f in store.timeline(unobserved, before=2, after=2,
                                                             **EVERYONE)]
