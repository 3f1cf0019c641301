"""The vector leg: the vector table kept in sync, fused with BM25, health checks."""

from __future__ import annotations

import numpy as np
import pytest

from _sql import engine_of, raw
from ctxslots import FactStore, RankingPolicy
from ctxslots.stores.backend import FactFilter
from ctxslots.stores.embedders import HashingEmbedder
from ctxslots.stores.sqlite import SQLiteBackend
from ctxslots.stores.sqlite._vector_cache import TABLE

FUSED = RankingPolicy(vector_weight=1.0)


def vector_ids(store):
    """The fact ids that have a vector in the file."""
    return sorted(int(r[0]) for r in raw(store).execute(f"SELECT fact_id FROM {TABLE}"))


@pytest.fixture(name="vstore", params=[True, False], ids=["cache", "table"])
def fixture_vstore(db_path, clock, request):
    """A store with the hashing embedder, searched through the cache or straight from the vector table."""
    store = FactStore(db_path, clock=clock, embedder=HashingEmbedder(dimension=256),
                      vector_cache=request.param, ranking=FUSED)
    if request.param:
        assert store.load_vector_cache()  # searched through the copy from the first search on
    try:
        yield store
    finally:
        store.close()


def test_vectors_follow_writes_updates_and_forgets(vstore):
    """Every add, changed upsert and forget is mirrored in the vector index."""
    a = vstore.add("agent", "Deploys run on Friday.")
    b = vstore.upsert("user", "editor", "The user edits in Helix.")
    assert [a.id, b.id] == vector_ids(vstore)

    before = bytes(raw(vstore).scalar(f"SELECT embedding FROM {TABLE} WHERE fact_id = ?", (b.id,)))
    vstore.upsert("user", "editor", "The user edits in Neovim.")
    after = bytes(raw(vstore).scalar(f"SELECT embedding FROM {TABLE} WHERE fact_id = ?", (b.id,)))
    assert before != after

    vstore.forget(a.id)
    assert [b.id] == vector_ids(vstore)
    assert vstore.doctor().ok


def test_batch_writes_vectors_in_the_same_transaction(vstore):
    """Facts written in a batch get their vectors in that transaction; a failed batch leaves neither."""
    with pytest.raises(ValueError), vstore.batch():
        vstore.add("agent", "First note about caching.")
        vstore.add("agent", "")
    assert [] == vector_ids(vstore)

    with vstore.batch():
        ids = [vstore.add("agent", f"Note number {i} about caching.").id for i in range(5)]
    assert ids == vector_ids(vstore)


def test_knn_filtered_by_scope_never_returns_another_scope(vstore):
    """A vector search in scope A never returns facts of scope B, even identical ones."""
    a = vstore.add("project", "The release train leaves every Friday.", scope="A")
    vstore.add("project", "The release train leaves every Friday.", scope="B")
    g = vstore.add("user", "The user likes trains.")

    hits = vstore.search("release train friday", scope="A", limit=50)
    assert {a.id, g.id} >= {h.fact.id for h in hits}
    assert a.id in {h.fact.id for h in hits}
    assert all(h.fact.scope in ("A", None) for h in hits)


def test_expired_facts_are_not_found_by_vectors(vstore, clock):
    """A fact found only by the vector leg still disappears when it expires."""
    fact = vstore.add("agent", "Temporary freeze on deployments.", expires_at=clock.now + 60)
    assert fact.id in {h.fact.id for h in vstore.search("temporary freeze deployments")}
    clock.advance(seconds=61)
    assert [] == vstore.search("temporary freeze deployments")


def test_fusion_fills_both_legs_of_the_trace(db_path):
    """A fact found only by words and one found only by the vector leg both come back, traced."""
    with FactStore(db_path, embedder=HashingEmbedder(dimension=256), ranking=FUSED) as store:
        words = store.add("agent", "Kubernetes manifests live in deploy/k8s.")
        typo = store.add("agent", "Postgresql connection pooling uses pgbouncer.")
        # "postgres" does not match the token "postgresql" in FTS5, but shares n-grams.
        hits = {h.fact.id: h.trace for h in store.search("kubernetes postgres pooling", limit=10)}
    assert hits[words.id].bm25_rank is not None
    assert hits[typo.id].cosine is not None and hits[typo.id].vector_rank is not None
    for trace in hits.values():
        assert trace.final == pytest.approx(
            trace.relevance * trace.decay * trace.reinforcement * trace.confidence)


def test_a_fact_only_the_vector_leg_finds(db_path):
    """With no shared word (typos), the vector leg alone still finds the fact, and the trace says so."""
    with FactStore(db_path, embedder=HashingEmbedder(dimension=256), ranking=FUSED) as store:
        fact = store.add("agent", "Refactoring the serializers cut latency.")
        hits = store.search("refactorng serialisers")
    assert [fact.id] == [h.fact.id for h in hits]
    assert hits[0].trace.bm25_rank is None
    assert hits[0].trace.vector_rank == 1


def test_legs_can_be_switched_off(db_path):
    """Weight 0 switches a leg off; the lexical-only relevance is -bm25 again."""
    lexical = RankingPolicy(vector_weight=0.0)
    with FactStore(db_path, embedder=HashingEmbedder(dimension=256), ranking=lexical) as store:
        store.add("agent", "Refactoring the serializers cut latency.")
        assert [] == store.search("refactorng serialisers")
        hit = store.search("serializers latency")[0]
        assert hit.trace.vector_rank is None
        assert hit.trace.relevance == pytest.approx(-hit.trace.bm25)
    vector_only = RankingPolicy(lexical_weight=0.0, vector_weight=1.0)
    with FactStore(db_path, embedder=HashingEmbedder(dimension=256), ranking=vector_only) as store:
        assert 1 == store.reindex()  # the words-only store kept no vectors
        hit = store.search("serializers latency")[0]
        assert hit.trace.bm25_rank is None and hit.trace.vector_rank == 1


def test_a_reindex_by_a_process_that_reads_no_vectors_keeps_them(location):
    """An app searches with the hash embedder's vectors (weight 1); ``ctxslots reindex``
    opens the store with the default weight (0 for hash): its reindex keeps every vector,
    and embeds one a fact lacks, instead of dropping them all."""
    with FactStore(location, embedder="hash", ranking=FUSED) as app:
        ids = [app.add("agent", f"Deploy note {n} about the queue.").id for n in range(20)]
    with FactStore(location, embedder="hash") as cli:
        with engine_of(cli) as backend, backend.transaction():
            backend.delete_vectors(ids[:1])
        assert 1 == cli.reindex()
    with FactStore(location, embedder="hash", ranking=FUSED) as app:
        state = app.doctor().vectors
        assert state is not None and (20, 0) == (state.vectors, state.missing)


def test_a_value_replaced_by_a_process_that_reads_no_vectors_loses_its_old_vector(location):
    """An app searches with the hash embedder's vectors (weight 1), as a store written
    before the hashing embedder kept none does; a process with the default weight
    replaces a value: the old value's vector goes with it, so the app never finds the
    fact by what it no longer says, ``doctor`` counts it as lacking a vector and
    ``reindex`` embeds its new value."""
    with FactStore(location, embedder="hash", ranking=FUSED) as app:
        fact = app.upsert("user", "editor", "The user edits code in Zed.")
        app.add("agent", "Backups of the billing database run nightly.")
    with FactStore(location, embedder="hash") as cli:
        assert not cli.keeps_vectors
        cli.upsert("user", "editor", "The user writes in Emacs with evil mode.")
    with FactStore(location, embedder="hash", ranking=FUSED) as app:
        assert [] == app.search("Zed")
        state = app.doctor().vectors
        assert state is not None and (1, 1) == (state.vectors, state.missing)
        assert 1 == app.reindex()
        hit = app.search("evil mode")[0]
        assert fact.id == hit.fact.id and hit.trace.cosine is not None


def test_consolidation_never_hides_a_fact_by_the_vector_of_its_replaced_value(location):
    """A value replaced by a process that keeps no vectors, then a note saying what it
    said before: consolidation compares the fact's new value, so the note does not hide it."""
    with FactStore(location, embedder="hash", ranking=FUSED) as app:
        app.upsert("project", "deploy.day", "Deploys run every Friday after the freeze.",
                   scope="shop-api")
    with FactStore(location, embedder="hash") as cli:
        fact = cli.upsert("project", "deploy.day", "Deploys moved to Tuesday mornings.",
                          scope="shop-api")
        cli.add("project", "Deploys run every Friday after the freeze!", scope="shop-api")
        assert [] == list(cli.consolidate().superseded)
        assert fact.id in {h.fact.id for h in cli.search("deploys", scope="shop-api")}


def test_a_value_replaced_in_a_store_without_vectors_logs_no_vector_change(db_path):
    """Replacing values where no fact has a vector adds nothing to ``vector_log``,
    which other processes' vector copies read."""
    with FactStore(db_path, embedder="hash") as store:
        for n in range(3):
            store.upsert("user", "editor", f"The user edits code in editor number {n}.")
        assert 0 == raw(store).scalar("SELECT count(*) FROM vector_log")


def test_switching_embedders_is_detected_and_reindex_repairs_it(db_path):
    """A store opened with another embedder reports stale vectors; reindex rebuilds them."""
    with FactStore(db_path, embedder=HashingEmbedder(dimension=256), ranking=FUSED) as store:
        fact = store.add("agent", "Refactoring the serializers cut latency.")
    with pytest.warns(RuntimeWarning, match="built by hash-v1-256"), \
            FactStore(db_path, embedder=HashingEmbedder(dimension=128), ranking=FUSED) as store:
        report = store.doctor()
        assert not report.ok and report.vectors.stale
        assert "reindex" in report.problems[0] and "reopen the store with" in report.problems[0]
        assert store.search("refactorng serialisers") == []  # stale vectors are not used
        progress = []
        assert 1 == store.reindex(progress=lambda done, total: progress.append((done, total)))
        assert (1, 1) == progress[-1]
        assert store.doctor().ok
        assert [fact.id] == [h.fact.id for h in store.search("refactorng serialisers")]


def test_missing_vectors_and_broken_fts_are_reported(db_path):
    """doctor finds facts without vectors and an FTS index out of sync; reindex repairs both."""
    with FactStore(db_path, embedder=HashingEmbedder(dimension=64), ranking=FUSED) as store:
        store.add("agent", "A fact that keeps its vector.")
        conn = raw(store)
        with conn.write():
            conn.execute(f"DELETE FROM {TABLE}")
            conn.execute("INSERT INTO facts_fts(facts_fts, rowid, stems, context_stems) "
                         "SELECT 'delete', id, stems, context_stems FROM facts WHERE id = 1")
        conn.close()
        report = store.doctor()
        assert not report.fts_in_sync
        assert any("1 fact has no vector" in p for p in report.problems)
        store.reindex()
        assert store.doctor().ok


def test_cache_sees_writes_from_another_connection(db_path):
    """The in-memory cache picks up vectors written by another store on the same file."""
    emb = HashingEmbedder(dimension=128)
    with FactStore(db_path, embedder=emb, ranking=FUSED) as reader, \
            FactStore(db_path, embedder=emb, ranking=FUSED) as writer:
        assert reader.load_vector_cache()
        first = writer.add("agent", "Serializers were refactored.")
        assert [first.id] == [h.fact.id for h in reader.search("serializer refactor")]
        second = writer.add("agent", "Serializer refactor number two.")
        writer.forget(first.id)
        assert [second.id] == [h.fact.id for h in reader.search("serializer refactor")]


def test_hashing_embedder_defaults_to_words_only(db_path):
    """With the default hashing embedder searches use words only, so the store keeps no vectors."""
    with FactStore(db_path) as store:
        store.add("agent", "Refactoring the serializers cut latency.")
        assert 0.0 == store.ranking.vector_weight
        assert not store.keeps_vectors
        assert [] == vector_ids(store)
        assert store.doctor().ok
        assert [] == store.search("refactorng serialisers")
        hit = store.search("serializers latency")[0]
        assert hit.trace.relevance == pytest.approx(-hit.trace.bm25)


WORDS = ["deploy", "friday", "cache", "billing", "refund", "retry", "docker", "helm", "queue"]


def _fill(db_path, emb, n, *, seed, words, place):
    """``n`` facts of random WORDS (plus their number); ``place(i)`` gives slot and scope."""
    rng = np.random.default_rng(seed)
    with FactStore(db_path, embedder=emb, ranking=FUSED) as store, store.batch():
        facts = []
        for i in range(n):
            slot, scope = place(i)
            facts.append(store.add(slot, " ".join(rng.choice(WORDS, words)) + f" {i}", scope=scope))
        return facts


def test_cache_and_table_scan_agree(db_path):
    """The cached and the table-scan KNN return the same neighbours."""
    emb = HashingEmbedder(dimension=128)
    _fill(db_path, emb, 300, seed=0, words=5, place=lambda i: ("agent", ["A", "B", None][i % 3]))
    with SQLiteBackend(db_path, vector_cache=True) as cached, \
            SQLiteBackend(db_path, vector_cache=False) as direct:
        for query in ("deploy friday", "billing refund retry", "docker helm queue"):
            vec = emb.embed([query])[0]
            assert cached.load_vector_cache()
            flt = FactFilter(scopes=("A", ""))
            a = cached.vector_knn(vec, flt, 20)
            assert cached.cache_status().vector_loaded
            b = direct.vector_knn(vec, flt, 20)
            assert np.allclose([c for _, c in a], [c for _, c in b], atol=1e-5)
            cut = a[-1][1] + 1e-5  # below it, float rounding may order near-ties differently
            assert {i for i, c in a if c > cut} == {i for i, c in b if c > cut}


def _agree(cached, direct, emb, query, scopes, slots):
    vec = emb.embed([query])[0]
    flt = FactFilter(scopes=tuple(scopes), slots=None if slots is None else tuple(slots))
    a = cached.vector_knn(vec, flt, 20)
    assert cached.cache_status().vector_loaded
    b = direct.vector_knn(vec, flt, 20)
    assert len(a) == len(b)
    assert np.allclose([c for _, c in a], [c for _, c in b], atol=1e-5)
    cut = a[-1][1] + 1e-5 if a else 0.0
    assert {i for i, c in a if c > cut} == {i for i, c in b if c > cut}
    return a


def test_cache_filters_slots_and_compacts_after_many_updates(db_path, monkeypatch):
    """Slot filters read only their slots' rows, and rewritten rows are dropped without changing results."""
    from ctxslots.stores.sqlite import _vector_cache

    monkeypatch.setattr(_vector_cache, "COMPACT_MIN_DEAD", 40)
    emb = HashingEmbedder(dimension=128)
    facts = _fill(db_path, emb, 270, seed=1, words=5, place=lambda i: (
        ["user", "project", "agent"][i % 3], [None, "A", "B"][(i // 3) % 3] if i % 3 else None))
    agent_a = [f.id for f in facts if f.slot == "agent" and f.scope == "A"]
    rng = np.random.default_rng(11)
    with FactStore(db_path, embedder=emb, ranking=FUSED) as writer, \
            SQLiteBackend(db_path, vector_cache=True) as cached, \
            SQLiteBackend(db_path, vector_cache=False) as direct:
        assert cached.load_vector_cache()
        for filt in (None, ["agent"], ["user", "project"], ["nope"]):
            found = _agree(cached, direct, emb, "billing refund", ["A", ""], filt)
            by_id = {f.id: f for f in facts}
            assert all(by_id[i].scope in ("A", None) for i, _ in found)
            if filt is not None:
                assert all(by_id[i].slot in filt for i, _ in found)
        before = cached.cache_status().vector_rows
        for round_ in range(6):  # each round leaves one dead row per rewritten fact
            for fid in agent_a:
                writer.update(fid, value=" ".join(rng.choice(WORDS, 5)) + f" r{round_}")
            _agree(cached, direct, emb, "billing refund", ["A", ""], None)  # syncs the copy
        # 30 facts x 6 rounds = 180 dead rows: compacted once past 40 and past the live ones.
        assert cached.cache_status().vector_rows < before + 6 * len(agent_a)
        assert cached.cache_status().vector_rows <= before + 2 * len(agent_a)
        for filt in (None, ["agent"]):
            _agree(cached, direct, emb, "docker helm queue", ["A", ""], filt)


class CountingEmbedder:
    """The hashing embedder, counting the texts it is asked to embed."""

    def __init__(self) -> None:
        self.inner = HashingEmbedder(dimension=128)
        self.model_id, self.dimension = self.inner.model_id, self.inner.dimension
        self.texts: list[str] = []

    def embed(self, texts):
        self.texts.extend(texts)
        return self.inner.embed(texts)


def test_one_assembly_embeds_the_message_once(db_path):
    """The three memory sections search with one message; the model embeds it once."""
    from ctxslots import AssemblyRequest, PromptAssembler

    emb = CountingEmbedder()
    with FactStore(db_path, embedder=emb, ranking=FUSED) as store:
        store.upsert("user", "editor", "The user edits code in Helix.")
        store.add("project", "Deploys run on Fridays.", scope="shop")
        store.add("agent", "Rerun the flaky refund test once.", scope="shop")
        assert store.wait_for_vectors(10)  # a model's vectors are written in the background
        emb.texts.clear()
        report = PromptAssembler(store).assemble(AssemblyRequest("when do we deploy?", scope="shop"))
        assert "Fridays" in report.text
        assert ["when do we deploy?"] == emb.texts
        hits = store.search("when do we deploy?", scope="shop")
        assert ["when do we deploy?"] == emb.texts  # still kept
        assert hits and hits[0].trace.cosine is not None
        for i in range(40):  # older query vectors make room for newer ones
            store.search(f"query number {i}", scope="shop")
        emb.texts.clear()
        store.search("when do we deploy?", scope="shop")
        assert ["when do we deploy?"] == emb.texts


def _search_in_child(db_path, expected):
    with FactStore(db_path, embedder=HashingEmbedder(dimension=128), ranking=FUSED) as store:
        got = [h.fact.id for h in store.search("billing refund retry", scope="A", limit=20)]
    raise SystemExit(0 if got == expected else 1)


def test_scan_split_across_threads_matches_the_table_scan_and_survives_fork(db_path, monkeypatch):
    """Scanned in many pieces on the thread pool, the cache gives the table scan's neighbours, also in a forked child."""
    import multiprocessing

    from ctxslots.stores.sqlite import _scan

    monkeypatch.setattr(_scan, "PIECE_ROWS", 16)
    monkeypatch.setattr(_scan, "PARALLEL_MIN_ROWS", 32)
    monkeypatch.setattr(_scan, "_WORKERS", 3)
    emb = HashingEmbedder(dimension=128)
    _fill(db_path, emb, 400, seed=2, words=4, place=lambda i: (
        ["user", "project", "agent"][i % 3], ["A", "B", None][i % 3] if i % 3 else None))
    with SQLiteBackend(db_path, vector_cache=True) as cached, \
            SQLiteBackend(db_path, vector_cache=False) as direct:
        assert cached.load_vector_cache()
        for query in ("deploy friday", "billing refund retry", "docker helm queue"):
            _agree(cached, direct, emb, query, ["A", ""], None)
            _agree(cached, direct, emb, query, ["A", ""], ["agent", "user"])
        assert _scan._pool is not None  # the pieces went through the pool
    with FactStore(db_path, embedder=emb, ranking=FUSED) as store:
        assert store.load_vector_cache()
        expected = [h.fact.id for h in store.search("billing refund retry", scope="A", limit=20)]
    child = multiprocessing.get_context("fork").Process(target=_search_in_child,
                                                        args=(db_path, expected))
    child.start()
    child.join(60)
    if child.is_alive():
        child.kill()
        pytest.fail("the forked child hung on the scan pool")
    assert 0 == child.exitcode


def test_the_vector_copy_loads_in_the_background(db_path):
    """The first vector search scans the table and starts the copy's load; later ones use the copy, same hits."""
    from ctxslots import StoreError

    emb = HashingEmbedder(dimension=64)
    _fill(db_path, emb, 3000, seed=3, words=4, place=lambda i: ("agent", ["A", None][i % 2]))
    with FactStore(db_path, embedder=emb, ranking=FUSED) as cached, \
            FactStore(db_path, embedder=emb, ranking=FUSED, vector_cache=False) as direct:
        expected = [h.fact.id for h in direct.search("billing refund", scope="A", track_access=False)]
        first = cached.search("billing refund", scope="A", track_access=False)
        assert not cached.cache_status().vector_loaded and cached.cache_status().vector_loading
        assert [h.fact.id for h in first] == expected
        assert cached.load_vector_cache()
        again = cached.search("billing refund", scope="A", track_access=False)
        assert cached.cache_status().vector_loaded
        assert [h.fact.id for h in again] == expected
        cached.reindex(full=True)  # the copy is of the old vectors: dropped, loaded afresh
        assert not cached.cache_status().vector_loaded
        assert [h.fact.id for h in cached.search("billing refund", scope="A",
                                                 track_access=False)] == expected
        with pytest.raises(StoreError, match="vector_cache=False"):
            direct.load_vector_cache()
    with FactStore(db_path, embedder=False) as words_only, \
            pytest.raises(StoreError, match="no usable vector index"):
        words_only.load_vector_cache()
    store = FactStore(db_path, embedder=emb, ranking=FUSED)
    store.search("docker helm", scope="A")
    assert store.cache_status().vector_loading  # the first search started it
    store.close()
    assert not store.cache_status().vector_loading


def test_a_vector_another_process_wrote_with_the_old_embedder_is_skipped(tmp_path):
    """Process B switches the store to a 48-dimension embedder and rebuilds its vectors;
    process A, still bound to the 32-dimension one, writes a fact and its old-size vector.
    B's searches skip that vector (they raised before), find the fact by its words, and
    doctor counts the vector as one no search can use."""
    import warnings

    db = tmp_path / "s.db"
    ranking = FUSED
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the switch warns, as documented
        a = FactStore(db, embedder="hash:32", ranking=ranking, vector_writes="inline")
        b = FactStore(db, embedder="hash:48", ranking=ranking, vector_writes="inline")
    try:
        a.add("user", "The user owns a golden retriever named Biscuit.")
        b.reindex(full=True)
        bike = a.add("user", "The user rides a blue bicycle to work.")
        assert [bike.id] == [h.fact.id for h in b.search("bicycle to work")]
        assert any("another dimension" in p for p in b.doctor().problems)
    finally:
        a.close()
        b.close()


def test_equal_cosines_at_the_cut_go_to_the_lower_id_in_the_copy(db_path):
    """Many memories of one text tie on the vector leg: the copy keeps the lowest ids, as
    the table scan does."""
    only_vectors = RankingPolicy(vector_weight=1.0, lexical_weight=0.0)
    emb = HashingEmbedder(dimension=64)
    with FactStore(db_path, embedder=emb, ranking=only_vectors) as store, store.batch():
        ids = [store.upsert("user", f"k{i:03d}", "The user likes green tea.").id
               for i in range(300)]  # more than the candidate pool, so the pool cuts a tie
    found = {}
    for cached in (True, False):
        with FactStore(db_path, embedder=emb, ranking=only_vectors,
                       vector_cache=cached) as store:
            if cached:
                assert store.load_vector_cache()
            hits = store.search("green tea", track_access=False, limit=10)
            assert len({h.trace.cosine for h in hits}) == 1
            found[cached] = [h.fact.id for h in hits]
    assert found[True] == found[False] == sorted(ids)[:10]
