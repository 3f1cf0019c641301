"""What every storage engine promises behind FactStore: the two legs, vectors, health, races.

The docstrings of stores/backend.py, as tests run on every engine (see
tests/_backend_contract.py).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

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
from ctxslots.errors import DuplicateKeyError
from ctxslots.stores.backend import FactFilter, Health, HistoryEntry, VectorRow, VectorState

# -- the lexical leg ---------------------------------------------------------------


def test_lexical_matches_any_word_best_first(backend):
    """Any token may match; more matching words rank first; scores grow from negative."""
    both = add(backend, "Rosaline went to the rowing club meeting.")
    one = add(backend, "Imogen joined a running club.")
    add(backend, "Nothing relevant here.")
    found = backend.lexical(plan_of(["rowing", "club"]), FactFilter(), 10)
    assert [both, one] == [c.row["id"] for c in found]
    assert found[0].score < found[1].score < 0
    assert [] == backend.lexical(plan_of([]), FactFilter(), 10)


def test_lexical_stems_words(backend):
    """Inflected forms meet: a query for running finds runs."""
    fact_id = add(backend, "Imogen runs every morning.")
    assert [fact_id] == [c.row["id"] for c in backend.lexical(plan_of(["running"]), FactFilter(), 5)]


def test_lexical_filters_before_the_cut(backend):
    """A scope's few matches come back even when other scopes hold many better ones."""
    with backend.transaction():
        for n in range(30):
            backend.insert(make_row(f"Deploy deploy deploy note {n}.", scope="busy"))
        mine = backend.insert(make_row("One deploy note among others.", scope="quiet"))
    found = backend.lexical(plan_of(["deploy"]), FactFilter(scopes=("quiet", "")), 3)
    assert [mine] == [c.row["id"] for c in found]


def test_lexical_leaves_out_expired_and_superseded(backend, mixed):
    """live_at and include_superseded apply to word matches too."""
    flt = FactFilter(scopes=("w1", ""), live_at=NOW, include_superseded=False)
    assert [] == backend.lexical(plan_of(["gone", "older"]), flt, 10)
    assert {mixed["expired"], mixed["old"]} == {
        c.row["id"] for c in backend.lexical(plan_of(["gone", "older"]), FactFilter(), 10)}


def test_lexical_searches_the_archive(backend):
    """archived=True searches forgotten facts, with when and why they left."""
    fact_id = add(backend, "The staging database moved to eu-west.")
    with backend.transaction():
        backend.archive(fact_id, archived_at=NOW, reason="forgotten")
    assert [] == backend.lexical(plan_of(["staging"]), FactFilter(), 5)
    found = backend.lexical(plan_of(["staging"]), FactFilter(), 5, archived=True)
    assert [(fact_id, "forgotten")] == [(c.row["id"], c.row["reason"]) for c in found]


def test_lexical_scores_follow_bm25(backend):
    """A rarer word outweighs a common one, and a shorter document outranks a longer one."""
    with backend.transaction():
        for n in range(8):
            backend.insert(make_row(f"Common word filler {n}."))
        rare = backend.insert(make_row("Zephyr."))
        short = backend.insert(make_row("Common lighthouse."))
        long = backend.insert(make_row("Common lighthouse with many more words around it."))
    found = [c.row["id"] for c in backend.lexical(plan_of(["zephyr", "common"]), FactFilter(), 3)]
    assert rare == found[0]
    found = [c.row["id"] for c in backend.lexical(plan_of(["lighthouse"]), FactFilter(), 3)]
    assert [short, long] == found


def test_document_counts_count_each_words_facts(backend):
    """Each word's facts are counted as the index stems it; nothing below min_rows."""
    with backend.transaction():
        for n in range(20):
            words = ["alpha"] + (["beta"] if n < 12 else []) + (["gamma"] if n < 2 else [])
            backend.insert(make_row(f"{' '.join(words)} note {n}."))
        backend.insert(make_row("Imogen runs every morning."))
    counts = backend.document_counts(["alpha", "beta", "gamma", "delta", "running"], min_rows=10)
    assert counts is not None and 21 == counts.rows
    assert {"alpha": 20, "beta": 12, "gamma": 2, "delta": 0, "running": 1} == dict(counts.docs)
    assert backend.document_counts(["alpha"], min_rows=100) is None


# -- vectors -----------------------------------------------------------------


def test_vectors_bind_to_an_embedder(backend):
    """reset_vectors records the embedder; put and read back; state counts gaps and orphans."""
    a, b = add(backend, "A."), add(backend, "B.")
    assert VectorState(None, None, 0, 2, 0) == backend.vector_state()
    with backend.transaction():
        backend.reset_vectors("model-x", 3)
        backend.put_vectors([VectorRow(a, "", "agent")], np.array([unit(1, 2, 3)]))
        backend.put_vectors([], np.zeros((0, 3), np.float32))
    assert VectorState("model-x", 3, 1, 1, 0) == backend.vector_state()
    np.testing.assert_allclose(unit(1, 2, 3), backend.vectors_of([a, b])[a], rtol=1e-6)
    assert [b] == [r["id"] for r in backend.without_vectors(limit=10)]
    assert [b] == [r["id"] for r in backend.without_vectors(limit=10, after=a)]
    assert [] == backend.without_vectors(limit=10, after=b)
    with backend.transaction():
        backend.put_vectors([VectorRow(b, "", "agent"), VectorRow(999, "", "agent")],
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
        backend.put_vectors([VectorRow(ids[n], "w1" if n % 3 else "w2",
                                       "user" if n % 2 else "agent") for n in range(60)], vectors)
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
        backend.put_vectors([VectorRow(i, "", "agent") for i in (live, expired, hidden, deleted)],
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
        backend.put_vectors([VectorRow(i, "big", "agent") for i in big_ids], big)
        backend.put_vectors([VectorRow(i, "small", "agent") for i in small_ids], small)
    query = rng.normal(size=4).astype(np.float32)
    found = backend.vector_knn(query, FactFilter(scopes=("small",)), 50)
    order = np.argsort(-(small @ query) / np.linalg.norm(small, axis=1), kind="stable")
    assert [small_ids[n] for n in order] == [fid for fid, _ in found]


def test_one_user_among_many_gets_all_their_vector_hits(backend):
    """One user's 20 vectors among 2,000 of other users: knn filtered to that user finds
    all 20, exactly ranked, and none of another user's (pgvector's index walks a limited
    number of candidates before it filters: the engine must not come back short)."""
    rng = np.random.default_rng(5)
    others = rng.normal(size=(2000, 4)).astype(np.float32)
    mine = rng.normal(size=(20, 4)).astype(np.float32)
    with backend.transaction():
        backend.reset_vectors("model", 4)
        other_ids = [backend.insert(make_row(f"Other {n}.", slot="user", user_id=f"u{n % 50}"))
                     for n in range(2000)]
        my_ids = [backend.insert(make_row(f"Mine {n}.", slot="user", user_id="me"))
                  for n in range(20)]
        backend.put_vectors([VectorRow(i, "", "user", f"u{n % 50}", "")
                             for n, i in enumerate(other_ids)], others)
        backend.put_vectors([VectorRow(i, "", "user", "me", "") for i in my_ids], mine)
    query = rng.normal(size=4).astype(np.float32)
    found = backend.vector_knn(query, FactFilter(users=("me", ""), agents=("",)), 50)
    order = np.argsort(-(mine @ query) / np.linalg.norm(mine, axis=1), kind="stable")
    assert [my_ids[n] for n in order] == [fid for fid, _ in found]


def test_lexical_sees_only_the_owners_asked(backend):
    """The lexical leg filters by user and agent before the cut: another user's better
    matches never take a place."""
    with backend.transaction():
        for n in range(30):
            backend.insert(make_row(f"Deploy deploy deploy note {n}.", slot="user",
                                    user_id="other"))
        mine = backend.insert(make_row("One deploy note.", slot="user", user_id="me"))
        shared = backend.insert(make_row("A shared deploy note."))
    found = backend.lexical(plan_of(["deploy"]), FactFilter(users=("me", "")), 3)
    assert [mine, shared] == sorted(c.row["id"] for c in found)


# -- health and races -------------------------------------------------------------


def test_a_fresh_store_is_healthy_and_rebuilds(backend):
    """check() finds nothing on a sound store; rebuild() keeps search working."""
    fact_id = add(backend, "The cache bucket is warm.")
    health = backend.check()
    assert isinstance(health, Health)
    assert (True, True, ()) == (health.facts_readable, health.lexical_in_sync, health.problems)
    backend.rebuild()
    assert [fact_id] == [c.row["id"] for c in backend.lexical(plan_of(["cache"]), FactFilter(), 5)]
    assert backend.used_bytes() > 0


def test_concurrent_upserts_keep_one_fact_per_key_and_every_value(opener):
    """Four writers upserting the same keys at once: one fact per key, no value lost (a
    key another writer stored after it was read as free is read again and replaced)."""
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
                    old = backend.get_by_key("user", "", key, user_id="", agent_id="")
                    if old is None:
                        try:
                            backend.insert(make_row(value, slot="user", key=key))
                            continue
                        except DuplicateKeyError:  # stored by another writer since it was read
                            old = backend.get_by_key("user", "", key, user_id="", agent_id="")
                    if old is not None:
                        backend.add_history([HistoryEntry(
                            old["id"], "user", "", key, old["value"], "", None, 1.0,
                            old["updated_at"], NOW)])
                        backend.update(old["id"], {"value": value})
        except BaseException as exc:
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
