"""What every storage engine promises behind FactStore: rows, transactions, filters, links.

The docstrings of stores/backend.py, as tests run on every engine (see
tests/_backend_contract.py); the two legs, vectors and health are in
tests/test_backend_contract_search.py.
"""

from __future__ import annotations

import attrs
import numpy as np
import pytest

from _backend_contract import (  # noqa: F401  (fixtures, found by pytest by name)
    NOW,
    add,
    fixture_backend,
    fixture_mixed,
    fixture_opener,
    make_row,
    unit,
)
from _sql import plan_of
from ctxslots.errors import DuplicateKeyError, StoreError
from ctxslots.stores.backend import FACT_COLUMNS, Backend, FactFilter, HistoryEntry, VectorRow

# -- lifecycle -------------------------------------------------------------------


def test_the_engine_satisfies_the_protocol_and_names_itself(backend):
    """Every engine is a Backend with an engine name and a printable location."""
    assert isinstance(backend, Backend)
    assert backend.engine in ("sqlite", "postgresql")
    assert backend.location
    info = backend.info()
    assert {"engine", "location", "schema_version", "size_bytes"} <= set(info)
    assert backend.engine == info["engine"]


def test_close_is_idempotent(opener):
    """Closing twice is fine, and a closed backend refuses to be used."""
    backend = opener()
    backend.close()
    backend.close()
    with pytest.raises(Exception):  # noqa: B017 - each engine's driver says it its own way
        backend.get(1)


def test_a_transaction_writes_all_or_nothing(backend):
    """An exception inside transaction() leaves nothing of the block behind."""
    with pytest.raises(RuntimeError), backend.transaction():
        backend.insert(make_row("First."))
        backend.insert(make_row("Second."))
        raise RuntimeError("boom")
    assert 0 == backend.counts()["facts"]
    assert not backend.in_transaction


def test_a_failing_nested_block_rolls_back_only_itself(backend):
    """A nested transaction() that fails is undone; the outer one still commits."""
    with backend.transaction():
        kept = backend.insert(make_row("Kept."))
        assert backend.in_transaction
        with pytest.raises(RuntimeError), backend.transaction():
            backend.insert(make_row("Undone."))
            raise RuntimeError("inner")
    assert [kept] == [r["id"] for r in backend.select(FactFilter())]


def test_nested_blocks_keep_what_ended_well_and_undo_what_failed(backend):
    """Blocks side by side and inside each other: one that fails is undone with every block
    inside it (those that ended well too), the blocks before it stay, and the transaction
    writes on after it, after a statement the engine refused (a taken key) as well."""
    with backend.transaction():
        first = backend.insert(make_row("First.", key="a"))
        with pytest.raises(RuntimeError), backend.transaction():
            backend.insert(make_row("Undone, before its inner block."))
            with backend.transaction():
                backend.insert(make_row("Inner, undone with its parent."))
            backend.insert(make_row("Undone, after it."))
            raise RuntimeError("second")
        with pytest.raises(DuplicateKeyError), backend.transaction():
            backend.insert(make_row("Before the taken key, undone."))
            backend.insert(make_row("Taken key.", key="a"))
        with backend.transaction():
            with backend.transaction():
                third = backend.insert(make_row("Third."))
            with pytest.raises(RuntimeError), backend.transaction():
                backend.update(first, {"value": "Changed, then undone."})
                raise RuntimeError("fourth")
        last = backend.insert(make_row("Last."))
    rows = {r["id"]: r["value"] for r in backend.select(FactFilter())}
    assert {first: "First.", third: "Third.", last: "Last."} == rows


def test_a_snapshot_does_not_see_later_commits(opener):
    """Reads inside snapshot() see one moment, whatever another writer commits meanwhile."""
    reader, writer = opener(), opener()
    add(writer, "Before.")
    with reader.snapshot():
        assert 1 == len(list(reader.select(FactFilter())))
        add(writer, "After.")
        assert 1 == len(list(reader.select(FactFilter())))
    assert 2 == len(list(reader.select(FactFilter())))


def test_meta_round_trips(backend):
    """Settings are written inside a transaction and read back; absent ones are None."""
    assert backend.get_meta("nothing") is None
    with backend.transaction():
        backend.set_meta("answer", "42")
        backend.set_meta("answer", "43")
    assert "43" == backend.get_meta("answer")


# -- fact rows -----------------------------------------------------------------


def test_every_column_round_trips(backend):
    """insert then get returns every column as given, observed_at included."""
    row = make_row("The user edits code in Helix.", slot="user", scope="w1", key="editor",
                   tags="tools\neditor", source="chat", confidence=0.7, score=1.5,
                   created_at=NOW, updated_at=NOW + 1, observed_at=NOW - 86400.0,
                   last_accessed=NOW + 2, access_count=3, expires_at=NOW + 999,
                   context="Which editor does the user like?")
    with backend.transaction():
        fact_id = backend.insert(row)
    got = backend.get(fact_id)
    assert {**row, "id": fact_id} == {name: got[name] for name in FACT_COLUMNS}


def test_absent_and_expired_facts_are_none(backend):
    """get is None for an absent id, and for a fact expired at live_at."""
    fact_id = add(backend, expires_at=NOW + 10)
    assert backend.get(fact_id + 1000) is None
    assert backend.get(fact_id, live_at=NOW) is not None
    assert backend.get(fact_id, live_at=NOW + 10) is None


def test_ids_are_never_reused(backend):
    """An archived fact's id is not handed out again; a given id is kept and skipped later."""
    first = add(backend, "First.")
    with backend.transaction():
        backend.archive(first, archived_at=NOW, reason="test")
    second = add(backend, "Second.")
    assert second > first
    with backend.transaction():
        chosen = backend.insert(make_row("Imported."), fact_id=second + 100)
    assert second + 100 == chosen
    assert add(backend, "Third.") > chosen
    assert not backend.id_is_free(first)
    assert not backend.id_is_free(chosen)
    assert backend.id_is_free(chosen + 1000)


def test_a_historical_id_is_not_free(backend):
    """An id that only history still names is not free."""
    with backend.transaction():
        backend.add_history([HistoryEntry(777, "user", "", "k", "old", "", None, 1.0, NOW, NOW)])
    assert not backend.id_is_free(777)


def test_keys_are_unique_per_slot_and_owners(backend):
    """A second keyed insert raises DuplicateKeyError, writes nothing; the transaction goes on.
    Another scope, user or agent holds the same key apart."""
    add(backend, "The user edits code in Helix.", slot="user", key="editor", user_id="ada")
    with backend.transaction():
        with pytest.raises(DuplicateKeyError) as info:
            backend.insert(make_row("Vim.", slot="user", key="editor", user_id="ada"))
        other_scope = backend.insert(make_row("Vim.", slot="user", scope="w1", key="editor",
                                              user_id="ada"))
        other_user = backend.insert(make_row("Emacs.", slot="user", key="editor",
                                             user_id="bo"))
        other_agent = backend.insert(make_row("Nano.", slot="user", key="editor",
                                              user_id="ada", agent_id="coder"))
    assert ("user", "", "editor") == (info.value.slot, info.value.scope, info.value.key)
    assert isinstance(info.value, StoreError)
    ada = {"user_id": "ada", "agent_id": ""}
    assert "The user edits code in Helix." == backend.get_by_key("user", "", "editor",
                                                                  **ada)["value"]
    assert other_scope == backend.get_by_key("user", "w1", "editor", **ada)["id"]
    assert other_user == backend.get_by_key("user", "", "editor", user_id="bo",
                                            agent_id="")["id"]
    assert other_agent == backend.get_by_key("user", "", "editor", user_id="ada",
                                             agent_id="coder")["id"]
    assert backend.get_by_key("user", "w2", "editor", **ada) is None
    assert backend.get_by_key("user", "", "editor", user_id="cy", agent_id="") is None


def test_find_same_matches_exact_content(backend):
    """find_same returns the lowest id of an exact copy, live or archived, keyless too."""
    a = add(backend, "Same text.")
    add(backend, "Same text.")
    keyed = add(backend, "Keyed.", key="k")
    theirs = add(backend, "Same text.", agent_id="coder")
    none = {"user_id": "", "agent_id": ""}
    assert a == backend.find_same("agent", "", None, "Same text.", **none)
    assert keyed == backend.find_same("agent", "", "k", "Keyed.", **none)
    assert backend.find_same("agent", "", None, "Keyed.", **none) is None
    assert backend.find_same("agent", "w1", None, "Same text.", **none) is None
    assert theirs == backend.find_same("agent", "", None, "Same text.", user_id="",
                                       agent_id="coder")
    with backend.transaction():
        backend.archive(keyed, archived_at=NOW, reason=None)
    assert keyed == backend.find_same("agent", "", "k", "Keyed.", archived=True, **none)


def test_update_sets_only_the_given_columns(backend):
    """update changes the named columns and nothing else."""
    fact_id = add(backend, "Old value.", key="k", tags="a")
    with backend.transaction():
        backend.update(fact_id, {"value": "New value.", "updated_at": NOW + 5,
                                 "superseded_by": None})
    got = backend.get(fact_id)
    assert ("New value.", NOW + 5, "a", "k") == (got["value"], got["updated_at"], got["tags"],
                                                 got["key"])


def test_update_records_the_value_it_replaces(backend):
    """update with history keeps the earlier value as add_history would, in the same write,
    from the end of the fact's latest entry when that is later than the entry's start;
    searches see the new value and not the old one."""
    fact_id = add(backend, "The deploy runs on Fridays.", key="deploy")
    earlier = HistoryEntry(fact_id, "agent", "", "deploy", "The deploy runs on Fridays.", "",
                           None, 1.0, NOW, NOW + 5)
    with backend.transaction():
        backend.update(fact_id, {"value": "The deploy runs on Mondays.", "updated_at": NOW + 5},
                       history=earlier)
    assert [earlier] == backend.history(fact_id)
    assert "The deploy runs on Mondays." == backend.get(fact_id)["value"]
    found = backend.lexical(plan_of(["mondays"]), FactFilter(), 5)
    assert [fact_id] == [c.row["id"] for c in found]
    assert [] == backend.lexical(plan_of(["fridays"]), FactFilter(), 5)
    later = attrs.evolve(earlier, value="The deploy runs on Mondays.", valid_to=NOW + 9)
    with backend.transaction():  # nothing to set: the history is still recorded
        backend.update(fact_id, {}, history=later)
    # The Monday value began when Friday's ended, not at the start the writer passed.
    assert [earlier, attrs.evolve(later, valid_from=NOW + 5)] == backend.history(fact_id)


def test_history_is_kept_oldest_first(backend):
    """history lists a fact's earlier values by the time they ended; all_history by fact."""
    entries = [HistoryEntry(2, "user", "", "k", "v2", "", None, 1.0, NOW + 1, NOW + 2),
               HistoryEntry(1, "user", "", "j", "v1", "t", "s", 0.5, NOW, NOW + 1),
               HistoryEntry(2, "user", "", "k", "v1", "", None, 1.0, NOW, NOW + 1)]
    with backend.transaction():
        backend.add_history(entries)
        backend.add_history([])
    assert ["v1", "v2"] == [e.value for e in backend.history(2)]
    assert [entries[1], entries[2], entries[0]] == list(backend.all_history())
    assert [] == backend.history(99)


def test_archive_moves_a_fact_with_its_vector(backend):
    """archive moves the row (with when and why) and drops its vector; a missing id gives None."""
    fact_id = add(backend, "To be archived.", key="k")
    with backend.transaction():
        backend.reset_vectors("test-model", 3)
        backend.put_vectors([VectorRow(fact_id, "", "agent")], np.array([unit(1, 0, 0)]))
        archived = backend.archive(fact_id, archived_at=NOW + 7, reason="pruned")
        assert backend.archive(fact_id, archived_at=NOW, reason=None) is None
    assert (NOW + 7, "pruned", "To be archived.") == (archived["archived_at"], archived["reason"],
                                                      archived["value"])
    assert backend.get(fact_id) is None
    assert "pruned" == backend.get_archived(fact_id)["reason"]
    assert {} == backend.vectors_of([fact_id])
    assert {"facts": 0, "archived": 1, "history": 0} == backend.counts()


def test_insert_archived_keeps_the_id(backend):
    """An imported archived fact keeps its id, which is then never handed out."""
    with backend.transaction():
        backend.insert_archived(make_row("Old.", archived_at=NOW, reason="import"), 50)
    assert "import" == backend.get_archived(50)["reason"]
    assert add(backend) > 50


def test_scores_and_access_counts(backend):
    """adjust_score adds to live facts only; touch counts each fact once per call."""
    live = add(backend)
    expired = add(backend, expires_at=NOW - 1)
    with backend.transaction():
        assert backend.adjust_score(live, 2.5, live_at=NOW)
        assert not backend.adjust_score(expired, 1.0, live_at=NOW)
        assert not backend.adjust_score(live + 999, 1.0, live_at=NOW)
    with backend.transaction():
        assert 1 == backend.touch([live, live, live + 999], NOW + 3)
        assert 0 == backend.touch([], NOW)
    got = backend.get(live)
    assert (2.5, 1, NOW + 3) == (got["score"], got["access_count"], got["last_accessed"])


# -- reading with filters ------------------------------------------------------------


def test_select_applies_every_filter(backend, mixed):
    """select keeps only visible scopes, chosen slots, live and unsuperseded facts."""
    flt = FactFilter(scopes=("w1", ""), live_at=NOW, include_superseded=False)
    assert [mixed["global"], mixed["w1"]] == [r["id"] for r in backend.select(flt)]
    assert [mixed["w1"]] == [r["id"] for r in backend.select(
        FactFilter(scopes=("w1", ""), slots=("agent",), live_at=NOW, include_superseded=False))]
    assert 5 == len(list(backend.select(FactFilter())))
    assert [] == list(backend.select(FactFilter(slots=())))


def test_select_orders_by_observed_time(backend, mixed):
    """order='created' sorts by observed time, then id."""
    got = [r["id"] for r in backend.select(FactFilter(), order="created")]
    assert [mixed["old"], mixed["global"], mixed["w2"], mixed["w1"], mixed["expired"]] == got


def test_rows_by_ids_and_neighbours_respect_the_filter(backend, mixed):
    """rows_by_ids drops filtered ids; neighbours walk observed time within the filter."""
    flt = FactFilter(scopes=("w1", ""), live_at=NOW)
    got = {r["id"] for r in backend.rows_by_ids(list(mixed.values()), flt)}
    assert {mixed["global"], mixed["w1"], mixed["old"]} == got
    anchor = backend.get(mixed["global"])
    before, after = backend.neighbours(anchor, flt, before=5, after=5)
    assert ([mixed["old"]], [mixed["w1"]]) == ([r["id"] for r in before],
                                               [r["id"] for r in after])


def test_counts_per_group(backend, mixed):
    """group_counts gives facts and expired ones per slot and owners, sorted."""
    assert [("agent", "w1", "", "", 3, 1), ("agent", "w2", "", "", 1, 0),
            ("user", "", "", "", 1, 0)] == backend.group_counts(live_at=NOW)
    add(backend, "Ada's.", slot="user", user_id="ada")
    assert ("user", "", "ada", "", 1, 0) in backend.group_counts(live_at=NOW)


def test_supersession_can_be_handed_over_and_counted(backend, mixed):
    """hand_over_superseded moves hidden facts to the new survivor; hidden_counts counts them."""
    assert {mixed["w1"]: 1} == backend.hidden_counts([mixed["w1"], mixed["w2"]])
    with backend.transaction():
        backend.hand_over_superseded(mixed["w1"], mixed["w2"])
    assert {mixed["w2"]: 1} == backend.hidden_counts([mixed["w1"], mixed["w2"]])
    with backend.transaction():
        backend.set_superseded([(mixed["old"], None)])
    assert {} == backend.hidden_counts([mixed["w2"]])


# -- links and progress --------------------------------------------------------------


def test_links_strengthen_and_merge(backend):
    """strengthen adds one per pair; merge keeps the stronger; reads see both ends."""
    a, b, c = (add(backend, f"Fact {n}.") for n in range(3))
    with backend.transaction():
        backend.strengthen_links([(a, b), (a, c)], NOW)
        backend.strengthen_links([(a, b)], NOW + 1)
        backend.merge_links([(a, c, 0.5, NOW + 2), (b, c, 4.0, NOW + 3)])
    assert {b: 2.0, c: 1.0} == backend.links_of(a)
    assert {a: 1.0, b: 4.0} == backend.links_of(c)
    assert [(a, b, 2.0), (b, c, 4.0)] == backend.links_among([b], 2.0)
    assert [(a, b, 2.0, NOW + 1), (a, c, 1.0, NOW), (b, c, 4.0, NOW + 3)] == \
        list(backend.all_links())


def test_a_search_reads_its_hits_links_and_hidden_counts_together(backend):
    """links_and_hidden answers what links_among and hidden_counts answer, in one call;
    with no minimum strength it reads no link, and no ids read nothing."""
    a, b, c, d = (add(backend, f"Fact {n}.") for n in range(4))
    with backend.transaction():
        backend.merge_links([(a, b, 3.0, NOW), (b, c, 5.0, NOW), (c, d, 1.0, NOW)])
        backend.set_superseded([(d, b)])
    for ids, strength in (([b], 3.0), ([a, c], 1.0), ([a, b, c, d], 6.0), ([d], 1.0)):
        assert (backend.links_among(ids, strength), backend.hidden_counts(ids)) == \
            backend.links_and_hidden(ids, strength)
    assert ([(a, b, 3.0), (b, c, 5.0)], {b: 1}) == backend.links_and_hidden([b], 3.0)
    assert ([], {b: 1}) == backend.links_and_hidden([b, c], None)
    assert ([], {}) == backend.links_and_hidden([], 1.0)


def test_flush_progress_round_trips(backend):
    """write_progress replaces a conversation's progress, kept per user and agent; an
    unknown one is None; erase_progress drops one user's or agent's."""
    ada, bo = {"user_id": "ada", "agent_id": "a1"}, {"user_id": "bo", "agent_id": "a1"}
    assert backend.read_progress("chat-1", **ada) is None
    with backend.transaction():
        backend.write_progress("chat-1", 3, "abc", NOW, **ada)
        backend.write_progress("chat-1", 5, "def", NOW + 1, **ada)
        backend.write_progress("chat-1", 1, "bo1", NOW, **bo)
    assert (5, "def") == backend.read_progress("chat-1", **ada)
    assert (1, "bo1") == backend.read_progress("chat-1", **bo)
    with backend.transaction():
        assert 1 == backend.erase_progress("user", "bo")
    assert backend.read_progress("chat-1", **bo) is None
    assert (5, "def") == backend.read_progress("chat-1", **ada)
    with backend.transaction():
        assert 1 == backend.erase_progress("agent", "a1")
    assert backend.read_progress("chat-1", **ada) is None


def test_history_of_reads_the_entries_of_the_facts_named(backend):
    """history_of gives the entries of the facts named alone, by fact then time (an
    export of one owner's facts reads theirs, not the whole store's)."""
    entries = [HistoryEntry(2, "user", "", "k", "v2", "", None, 1.0, NOW + 1, NOW + 2),
               HistoryEntry(1, "user", "", "j", "v1", "t", "s", 0.5, NOW, NOW + 1),
               HistoryEntry(2, "user", "", "k", "v1", "", None, 1.0, NOW, NOW + 1),
               HistoryEntry(3, "user", "", "m", "other", "", None, 1.0, NOW, NOW + 1)]
    with backend.transaction():
        backend.add_history(entries)
    assert [entries[1], entries[2], entries[0]] == list(backend.history_of([2, 1, 2]))
    assert [entries[2], entries[0]] == list(backend.history_of([2, 99]))
    assert [] == list(backend.history_of([]))


def test_links_within_reads_the_links_among_the_facts_named(backend):
    """links_within gives the links both of whose facts are named, by a and b."""
    ids = [add(backend, f"Fact {n}.") for n in range(4)]
    with backend.transaction():
        backend.merge_links([(ids[0], ids[1], 2.0, NOW), (ids[0], ids[2], 3.0, NOW + 1),
                             (ids[2], ids[3], 1.0, NOW + 2)])
    assert [(ids[0], ids[1], 2.0, NOW), (ids[0], ids[2], 3.0, NOW + 1)] == \
        backend.links_within([ids[2], ids[1], ids[0]])
    assert [] == backend.links_within([ids[1], ids[3]])
    assert [] == backend.links_within([])
