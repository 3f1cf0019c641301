"""FactStore.important: a slot's most important facts, read from the engine in order."""

from __future__ import annotations

import apsw
import pytest

from ctxslots import AssemblyRequest, FactStore, InvalidFactError, PromptAssembler
from ctxslots.contributors.memory import _importance
from ctxslots.stores.sqlite import open_connection


def _fill(store, clock):
    """Facts of every kind the order tells apart, in the user slot and elsewhere."""
    made = []
    for i in range(12):
        made.append(store.upsert("user", f"k{i}", f"Keyed fact number {i}.",
                                 confidence=1.0 if i % 3 else 0.5))
        clock.advance(seconds=1)
    for i in range(6):
        made.append(store.add("user", f"Free memory number {i}."))
        clock.advance(seconds=1)
    store.reinforce(made[14].id)  # a free memory, reinforced
    store.reinforce(made[3].id, 1.0)
    store.demote(made[5].id, 2.0)
    store.touch([made[7].id, made[8].id])
    store.touch([made[8].id])
    store.upsert("user", "old", "An expiring keyed fact.", expires_at=clock() + 5)
    store.upsert("user", "there", "A keyed fact of another user.", user="someone-else")
    store.upsert("agent", "lesson", "A keyed agent lesson.")
    clock.advance(seconds=10)  # the expiring fact has expired


def test_important_facts_follow_the_profile_order(store, clock):
    """The engine returns the keyed or reinforced live facts of the slot and scope in
    the profile's order (score, accesses, confidence, keyed, newest, id), on each engine."""
    _fill(store, clock)
    everything = [f for f in store.facts(slots=["user"]) if f.key is not None or f.score > 0]
    expected = [f.id for f in sorted(everything, key=_importance)]
    assert expected[:5] == [f.id for f in store.important("user")]
    assert expected == [f.id for f in store.important("user", limit=100)]
    assert "A keyed fact of another user." not in [f.value for f in store.important("user")]
    assert "An expiring keyed fact." not in [f.value for f in store.important("user", limit=50)]


def test_important_reading_is_not_an_access(store, clock):
    """Reading the important facts leaves their access counts as they were."""
    _fill(store, clock)
    before = {f.id: f.access_count for f in store.facts(slots=["user"])}
    store.important("user", limit=20)
    assert before == {f.id: f.access_count for f in store.facts(slots=["user"])}


def test_bad_arguments_are_refused(store):
    """A malformed slot or a limit out of range raises a ValueError subclass."""
    for kwargs in ({"limit": 0}, {"limit": 1001}, {"limit": "5"}):
        with pytest.raises(ValueError):
            store.important("user", **kwargs)
    with pytest.raises(InvalidFactError):
        store.important("Not A Slot!")


def test_the_profile_is_the_same_read_either_way(db_path, clock):
    """The user section's profile is the same whether read through important() or by
    sorting every fact of the slot (a store without important())."""

    class FactsOnly:
        def __init__(self, store):
            self.store = store

        def search(self, *args, **kwargs):
            return self.store.search(*args, **kwargs)

        def facts(self, **kwargs):
            return self.store.facts(**kwargs)

        def touch(self, ids):
            return 0

    with FactStore(db_path, clock=clock) as store:
        _fill(store, clock)
        request = AssemblyRequest("nothing matches zzzz", budget=2000)
        text = PromptAssembler(store).assemble(request).text
        assert "Keyed fact number" in text
        assert text == PromptAssembler(FactsOnly(store)).assemble(request).text


@pytest.mark.parametrize("scope", [None, "proj"])
def test_sqlite_reads_them_from_its_index(db_path, clock, scope):
    """On SQLite each combination of owners and scope the request sees is a walk of
    the partial index of at most five entries; only those heads are sorted, never
    the slot."""
    ran: list[tuple[str, object]] = []

    def trace(_cursor, sql, bindings):
        ran.append((sql, bindings))
        return True

    def hook(conn):
        conn.exec_trace = trace

    with FactStore(db_path, clock=clock) as store:
        _fill(store, clock)
        apsw.connection_hooks.append(hook)
        try:
            with FactStore(db_path, clock=clock) as reader:
                ran.clear()
                assert reader.important("agent", scope=scope, agent="a1") == []
                assert [f.key for f in reader.important("agent", scope=scope)] == ["lesson"]
        finally:
            apsw.connection_hooks.remove(hook)
    reads = [(sql, b) for sql, b in ran if "ORDER BY score DESC" in sql]
    assert len(reads) == 2
    conn = open_connection(db_path)
    try:
        plan = [str(r[-1]) for r in conn.execute("EXPLAIN QUERY PLAN " + reads[0][0],
                                                 reads[0][1]).fetchall()]
    finally:
        conn.close()
    arms = [d for d in plan if d.startswith(("SEARCH facts", "SCAN facts"))]
    # the agent's facts and unowned ones, of the global scope (and the workspace's)
    assert len(arms) == (4 if scope is None else 8), plan
    assert all("USING INDEX facts_important" in d for d in arms), plan
    assert all("=? AND scope=?)" in d for d in arms), plan  # a seek on every owner
    assert sum("TEMP B-TREE" in d for d in plan) == 1, plan  # the outer sort of the heads
