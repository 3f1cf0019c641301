"""What every storage engine promises behind FactStore (the docstrings of stores/backend.py).

Each test runs on every engine: ``sqlite`` (skipped until ``ctxslots.stores.sqlite``
exists) and ``postgresql`` (a real server from pgserver, or the one
``CTXSLOTS_TEST_POSTGRES_URL`` names; a fresh database per test).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ctxslots.errors import DuplicateKeyError, StoreError
from ctxslots.stores.backend import (
    FACT_COLUMNS,
    Backend,
    FactFilter,
    Health,
    HistoryEntry,
    VectorState,
)

NOW = 1_800_000_000.0
Opener = Callable[[], Any]


def make_row(value: str = "A plain memory.", **fields: Any) -> dict[str, Any]:
    """A fact row with every column but ``id``; ``fields`` override the defaults."""
    row: dict[str, Any] = {
        "slot": "agent", "scope": "", "key": None, "value": value, "tags": "",
        "source": None, "confidence": 1.0, "score": 0.0, "created_at": NOW,
        "updated_at": NOW, "observed_at": NOW, "last_accessed": None, "access_count": 0,
        "expires_at": None, "superseded_by": None,
    }
    row.update(fields)
    return row


@pytest.fixture(name="opener", params=["sqlite", "postgresql"])
def fixture_opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """Opens another backend instance on one fresh store of the engine (own connections)."""
    opened: list[Any] = []
    if request.param == "sqlite":
        sqlite = pytest.importorskip("ctxslots.stores.sqlite")
        path = tmp_path / "memory.db"

        def open_sqlite() -> Any:
            backend = sqlite.SQLiteBackend(path)
            opened.append(backend)
            return backend

        yield open_sqlite
    else:
        url = request.getfixturevalue("pg_url")
        from ctxslots.stores.postgres import PostgresBackend

        def open_postgres() -> Any:
            backend = PostgresBackend(url, pool_size=2)
            opened.append(backend)
            return backend

        yield open_postgres
    for backend in opened:
        backend.close()


@pytest.fixture(name="backend")
def fixture_backend(opener: Opener) -> Any:
    """One backend on a fresh store."""
    return opener()


def add(backend: Any, value: str = "A plain memory.", **fields: Any) -> int:
    """Insert one fact in its own transaction; its id."""
    with backend.transaction():
        return int(backend.insert(make_row(value, **fields)))


def unit(*values: float) -> np.ndarray:
    """A normalised float32 vector."""
    v = np.array(values, dtype=np.float32)
    return v / np.linalg.norm(v)


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
    """Closing twice is fine."""
    backend = opener()
    backend.close()
    backend.close()


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
                   last_accessed=NOW + 2, access_count=3, expires_at=NOW + 999)
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


def test_keys_are_unique_per_slot_and_scope(backend):
    """A second keyed insert raises DuplicateKeyError, writes nothing; the transaction goes on."""
    add(backend, "The user edits code in Helix.", slot="user", key="editor")
    with backend.transaction():
        with pytest.raises(DuplicateKeyError) as info:
            backend.insert(make_row("Vim.", slot="user", key="editor"))
        other_scope = backend.insert(make_row("Vim.", slot="user", scope="w1", key="editor"))
    assert ("user", "", "editor") == (info.value.slot, info.value.scope, info.value.key)
    assert isinstance(info.value, StoreError)
    assert "The user edits code in Helix." == backend.get_by_key("user", "", "editor")["value"]
    assert other_scope == backend.get_by_key("user", "w1", "editor")["id"]
    assert backend.get_by_key("user", "w2", "editor") is None


def test_find_same_matches_exact_content(backend):
    """find_same returns the lowest id of an exact copy, live or archived, keyless too."""
    a = add(backend, "Same text.")
    add(backend, "Same text.")
    keyed = add(backend, "Keyed.", key="k")
    assert a == backend.find_same("agent", "", None, "Same text.")
    assert keyed == backend.find_same("agent", "", "k", "Keyed.")
    assert backend.find_same("agent", "", None, "Keyed.") is None
    assert backend.find_same("agent", "w1", None, "Same text.") is None
    with backend.transaction():
        backend.archive(keyed, archived_at=NOW, reason=None)
    assert keyed == backend.find_same("agent", "", "k", "Keyed.", archived=True)


def test_update_sets_only_the_given_columns(backend):
    """update changes the named columns and nothing else."""
    fact_id = add(backend, "Old value.", key="k", tags="a")
    with backend.transaction():
        backend.update(fact_id, {"value": "New value.", "updated_at": NOW + 5,
                                 "superseded_by": None})
    got = backend.get(fact_id)
    assert ("New value.", NOW + 5, "a", "k") == (got["value"], got["updated_at"], got["tags"],
                                                 got["key"])


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
        backend.put_vectors([(fact_id, "", "agent")], np.array([unit(1, 0, 0)]))
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


@pytest.fixture(name="mixed")
def fixture_mixed(backend) -> dict[str, int]:
    """Facts in two scopes and the global one, two slots, one expired, one superseded."""
    ids = {}
    with backend.transaction():
        ids["global"] = backend.insert(make_row("Global.", slot="user", observed_at=NOW - 30))
        ids["w1"] = backend.insert(make_row("In w1.", scope="w1", observed_at=NOW - 10))
        ids["w2"] = backend.insert(make_row("In w2.", scope="w2", observed_at=NOW - 20))
        ids["expired"] = backend.insert(make_row("Gone.", scope="w1", expires_at=NOW - 1,
                                                 observed_at=NOW - 5))
        ids["old"] = backend.insert(make_row("Older copy.", scope="w1", observed_at=NOW - 40))
        backend.set_superseded([(ids["old"], ids["w1"])])
    return ids


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
    """group_counts gives facts and expired ones per slot and scope, sorted."""
    assert [("agent", "w1", 3, 1), ("agent", "w2", 1, 0), ("user", "", 1, 0)] == \
        backend.group_counts(live_at=NOW)


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


def test_flush_progress_round_trips(backend):
    """write_progress replaces a conversation's progress; an unknown one is None."""
    assert backend.read_progress("chat-1") is None
    with backend.transaction():
        backend.write_progress("chat-1", 3, "abc", NOW)
        backend.write_progress("chat-1", 5, "def", NOW + 1)
    assert (5, "def") == backend.read_progress("chat-1")


# -- the lexical leg ---------------------------------------------------------------


def test_lexical_matches_any_word_best_first(backend):
    """Any token may match; more matching words rank first; scores grow from negative."""
    both = add(backend, "Caroline went to the support group meeting.")
    one = add(backend, "Melanie joined a running group.")
    add(backend, "Nothing relevant here.")
    found = backend.lexical(["support", "group"], FactFilter(), 10)
    assert [both, one] == [c.row["id"] for c in found]
    assert found[0].score < found[1].score < 0
    assert [] == backend.lexical([], FactFilter(), 10)


def test_lexical_stems_words(backend):
    """Inflected forms meet: a query for running finds runs."""
    fact_id = add(backend, "Melanie runs every morning.")
    assert [fact_id] == [c.row["id"] for c in backend.lexical(["running"], FactFilter(), 5)]


def test_lexical_filters_before_the_cut(backend):
    """A scope's few matches come back even when other scopes hold many better ones."""
    with backend.transaction():
        for n in range(30):
            backend.insert(make_row(f"Deploy deploy deploy note {n}.", scope="busy"))
        mine = backend.insert(make_row("One deploy note among others.", scope="quiet"))
    found = backend.lexical(["deploy"], FactFilter(scopes=("quiet", "")), 3)
    assert [mine] == [c.row["id"] for c in found]


def test_lexical_leaves_out_expired_and_superseded(backend, mixed):
    """live_at and include_superseded apply to word matches too."""
    flt = FactFilter(scopes=("w1", ""), live_at=NOW, include_superseded=False)
    assert [] == backend.lexical(["gone", "older"], flt, 10)
    assert {mixed["expired"], mixed["old"]} == {
        c.row["id"] for c in backend.lexical(["gone", "older"], FactFilter(), 10)}


def test_lexical_searches_the_archive(backend):
    """archived=True searches forgotten facts, with when and why they left."""
    fact_id = add(backend, "The staging database moved to eu-west.")
    with backend.transaction():
        backend.archive(fact_id, archived_at=NOW, reason="forgotten")
    assert [] == backend.lexical(["staging"], FactFilter(), 5)
    found = backend.lexical(["staging"], FactFilter(), 5, archived=True)
    assert [(fact_id, "forgotten")] == [(c.row["id"], c.row["reason"]) for c in found]


def test_lexical_scores_follow_bm25(backend):
    """A rarer word outweighs a common one, and a shorter document outranks a longer one."""
    with backend.transaction():
        for n in range(8):
            backend.insert(make_row(f"Common word filler {n}."))
        rare = backend.insert(make_row("Zephyr."))
        short = backend.insert(make_row("Common lighthouse."))
        long = backend.insert(make_row("Common lighthouse with many more words around it."))
    found = [c.row["id"] for c in backend.lexical(["zephyr", "common"], FactFilter(), 3)]
    assert rare == found[0]
    found = [c.row["id"] for c in backend.lexical(["lighthouse"], FactFilter(), 3)]
    assert [short, long] == found


def test_drop_common_leaves_out_frequent_words(backend):
    """Words in more than the share go; none below min_rows; the rarest stays if all go."""
    with backend.transaction():
        for n in range(20):
            words = ["alpha"] + (["beta"] if n < 12 else []) + (["gamma"] if n < 2 else [])
            backend.insert(make_row(f"{' '.join(words)} note {n}."))
    assert ["alpha", "gamma"] == backend.drop_common(["alpha", "gamma"], share=1.0, min_rows=100)
    assert ["gamma"] == backend.drop_common(["alpha", "gamma"], share=0.5, min_rows=10)
    assert ["beta"] == backend.drop_common(["alpha", "beta"], share=0.5, min_rows=10)
    assert [] == backend.drop_common([], share=0.5, min_rows=10)


# -- vectors -----------------------------------------------------------------


def test_vectors_bind_to_an_embedder(backend):
    """reset_vectors records the embedder; put and read back; state counts gaps and orphans."""
    a, b = add(backend, "A."), add(backend, "B.")
    assert VectorState(None, None, 0, 2, 0) == backend.vector_state()
    with backend.transaction():
        backend.reset_vectors("model-x", 3)
        backend.put_vectors([(a, "", "agent")], np.array([unit(1, 2, 3)]))
        backend.put_vectors([], np.zeros((0, 3), np.float32))
    assert VectorState("model-x", 3, 1, 1, 0) == backend.vector_state()
    np.testing.assert_allclose(unit(1, 2, 3), backend.vectors_of([a, b])[a], rtol=1e-6)
    assert [b] == [r["id"] for r in backend.without_vectors(limit=10)]
    with backend.transaction():
        backend.put_vectors([(b, "", "agent"), (999, "", "agent")],
                            np.array([unit(0, 1, 0), unit(1, 0, 0)]))
    assert VectorState("model-x", 3, 3, 0, 1) == backend.vector_state()
    with backend.transaction():
        backend.reset_vectors("model-y", 2)
    assert VectorState("model-y", 2, 0, 2, 0) == backend.vector_state()


def test_vector_knn_is_exact_and_filtered(backend):
    """knn returns the k nearest passing the filter, best first, with the cosine."""
    rng = np.random.default_rng(7)
    vectors = rng.normal(size=(60, 8)).astype(np.float32)
    with backend.transaction():
        backend.reset_vectors("model", 8)
        ids = [backend.insert(make_row(f"Fact {n}.", scope="w1" if n % 3 else "w2",
                                       slot="user" if n % 2 else "agent"))
               for n in range(60)]
        backend.put_vectors([(ids[n], "w1" if n % 3 else "w2", "user" if n % 2 else "agent")
                             for n in range(60)], vectors)
    query = rng.normal(size=8).astype(np.float32)
    cosines = vectors @ query / (np.linalg.norm(vectors, axis=1) * np.linalg.norm(query))
    wanted = [n for n in range(60) if n % 3 and n % 2]
    best = sorted(wanted, key=lambda n: -cosines[n])[:5]
    found = backend.vector_knn(query, FactFilter(scopes=("w1",), slots=("user",)), 5)
    assert [ids[n] for n in best] == [fid for fid, _ in found]
    np.testing.assert_allclose([cosines[n] for n in best], [c for _, c in found], rtol=1e-5)


def test_vector_knn_leaves_out_expired_superseded_and_deleted(backend):
    """Expired, superseded and vector-less facts never come back from knn."""
    with backend.transaction():
        backend.reset_vectors("model", 2)
        live = backend.insert(make_row("Live."))
        expired = backend.insert(make_row("Expired.", expires_at=NOW - 1))
        hidden = backend.insert(make_row("Hidden.", superseded_by=live))
        deleted = backend.insert(make_row("Deleted."))
        backend.put_vectors([(i, "", "agent") for i in (live, expired, hidden, deleted)],
                            np.array([unit(1, 0), unit(1, 0.1), unit(1, 0.2), unit(1, 0.3)]))
        backend.delete_vectors([deleted])
    flt = FactFilter(scopes=("",), live_at=NOW, include_superseded=False)
    assert [live] == [fid for fid, _ in backend.vector_knn(unit(1, 0), flt, 10)]
    assert 3 == len(backend.vector_knn(unit(1, 0), FactFilter(), 10))


def test_a_small_scope_gets_all_its_vector_hits(backend):
    """A scope of 20 among many other facts gets all 20 back, exactly ranked."""
    rng = np.random.default_rng(3)
    big = rng.normal(size=(2000, 4)).astype(np.float32)
    small = rng.normal(size=(20, 4)).astype(np.float32)
    with backend.transaction():
        backend.reset_vectors("model", 4)
        big_ids = [backend.insert(make_row(f"Big {n}.", scope="big")) for n in range(2000)]
        small_ids = [backend.insert(make_row(f"Small {n}.", scope="small")) for n in range(20)]
        backend.put_vectors([(i, "big", "agent") for i in big_ids], big)
        backend.put_vectors([(i, "small", "agent") for i in small_ids], small)
    query = rng.normal(size=4).astype(np.float32)
    found = backend.vector_knn(query, FactFilter(scopes=("small",)), 50)
    order = np.argsort(-(small @ query) / np.linalg.norm(small, axis=1), kind="stable")
    assert [small_ids[n] for n in order] == [fid for fid, _ in found]


# -- health and races -------------------------------------------------------------


def test_a_fresh_store_is_healthy_and_rebuilds(backend):
    """check() finds nothing on a sound store; rebuild() keeps search working."""
    fact_id = add(backend, "The cache bucket is warm.")
    health = backend.check()
    assert isinstance(health, Health)
    assert (True, True, ()) == (health.facts_readable, health.lexical_in_sync, health.problems)
    backend.rebuild()
    assert [fact_id] == [c.row["id"] for c in backend.lexical(["cache"], FactFilter(), 5)]
    assert backend.used_bytes() > 0


def test_concurrent_upserts_keep_one_fact_per_key_and_every_value(opener):
    """Four writers upserting the same keys at once: one fact per key, no value lost."""
    keys = [f"k{n}" for n in range(4)]
    writers = [opener() for _ in range(4)]
    errors: list[BaseException] = []
    start = threading.Barrier(len(writers))

    def upsert(backend: Any, index: int) -> None:
        try:
            start.wait()
            for round_ in range(15):
                key = keys[(index + round_) % len(keys)]
                value = f"writer {index} round {round_}"
                with backend.transaction():
                    old = backend.get_by_key("user", "", key)
                    if old is None:
                        backend.insert(make_row(value, slot="user", key=key))
                    else:
                        backend.add_history([HistoryEntry(
                            old["id"], "user", "", key, old["value"], "", None, 1.0,
                            old["updated_at"], NOW)])
                        backend.update(old["id"], {"value": value})
        except BaseException as exc:  # noqa: BLE001 - the test reports it below
            errors.append(exc)

    threads = [threading.Thread(target=upsert, args=(w, i)) for i, w in enumerate(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert [] == errors
    facts = list(writers[0].select(FactFilter()))
    assert sorted(keys) == sorted(r["key"] for r in facts)
    written = {f"writer {i} round {r}" for i in range(4) for r in range(15)}
    kept = {r["value"] for r in facts} | {e.value for e in writers[0].all_history()}
    assert written == kept
    assert 60 == len(facts) + sum(1 for _ in writers[0].all_history())
