"""PostgreSQL: an erase that runs while another process writes about the same facts (a
vector the background writer embeds, a co-recall link a reinforce adds) leaves nothing
of them behind. Each test holds the erase's transaction open at the moment of the race,
waits for the other writer to wait on it (seen in ``pg_locks``) or to finish, then
commits the erase."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from _sql import engine_of
from ctxslots import FactStore, RankingPolicy
from ctxslots.stores.embedders import HashingEmbedder
from ctxslots.stores.writes.vector_writer import RETRIES

psycopg = pytest.importorskip("psycopg")

FUSED = RankingPolicy(vector_weight=1.0)


class GatedEmbedder:
    """The hashing embedder, holding the background writer's batches until ``gate`` opens
    (``batches``: the size of each it embedded)."""

    def __init__(self) -> None:
        self.inner = HashingEmbedder(dimension=64)
        self.model_id, self.dimension = self.inner.model_id, self.inner.dimension
        self.gate = threading.Event()
        self.held = threading.Event()
        self.batches: list[int] = []

    def embed(self, texts):
        if threading.current_thread().name == "ctxslots-vectors":
            self.held.set()
            assert self.gate.wait(60)
            self.batches.append(len(texts))
        return self.inner.embed(texts)


def _commit_when_waited_on(pg_url: str, store: FactStore, fact_ids: list[int],
                           start: Callable[[], None], done: Callable[[], bool]) -> None:
    """Erase ``fact_ids`` in a transaction left open until the other writer (``start``ed
    inside it) waits on a lock or is ``done``; then commit."""
    with psycopg.connect(pg_url, autocommit=True) as watch, engine_of(store) as eraser:
        with eraser.transaction():
            eraser.erase_facts(fact_ids)
            start()
            while not done():
                if watch.execute("SELECT count(*) FROM pg_locks WHERE NOT granted").fetchone()[0]:
                    break
                time.sleep(0.01)


def _count(pg_url: str, sql: str, params: tuple) -> int:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        return int(conn.execute(sql, params).fetchone()[0])


def test_a_vector_written_in_the_background_does_not_outlive_an_erase(pg_url):
    """The writer read the fact and embedded it; the erase deletes the fact; the writer's
    vector then waits for the erase and is left out: no vector of an erased fact."""
    embedder = GatedEmbedder()
    with FactStore(pg_url, embedder=embedder, ranking=FUSED, vector_writes="background") as store:
        fact = store.add("user", "The user's locker code is 4711.", user="mallory")
        assert embedder.held.wait(60)  # the writer has read the fact and is embedding it
        # Done once the writer stopped trying (the fact it kept finding held was left).
        _commit_when_waited_on(pg_url, store, [fact.id], embedder.gate.set,
                               lambda: embedder.batches.count(1) > RETRIES)
        assert store.wait_for_vectors(60)
        assert 0 == _count(pg_url, "SELECT count(*) FROM fact_vectors WHERE fact_id = %s",
                           (fact.id,))
        assert 0 == store.doctor().vectors.orphans


def test_a_link_added_by_a_reinforce_does_not_outlive_an_erase(pg_url):
    """A shared fact and the user's fact were found together; the erase deletes the
    user's fact while the agent reinforces the shared one: the co-recall link to the
    erased fact waits for the erase and is left out."""
    with FactStore(pg_url) as store:
        shared = store.add("project", "Deploys of the shop go out on Fridays.", scope="shop")
        own = store.add("user", "Mallory deploys the shop on Fridays.", user="mallory")
        found = {h.fact.id for h in store.search("shop deploys Fridays", user="mallory",
                                                 scope="shop")}
        assert {shared.id, own.id} <= found
        worker = threading.Thread(target=store.reinforce, args=(shared.id,),
                                  kwargs={"user": "mallory", "scope": "shop"})
        _commit_when_waited_on(pg_url, store, [own.id], worker.start,
                               lambda: not worker.is_alive())
        worker.join(60)
        assert not worker.is_alive()
        assert 0 == _count(pg_url, "SELECT count(*) FROM fact_links WHERE a = %s OR b = %s",
                           (own.id, own.id))


def test_reindex_with_nothing_to_repair_never_waits_for_a_writer(pg_url):
    """Another process holds a write open (row locks, the table's write lock): a reindex
    with nothing to rebuild runs through without waiting on it (rebuilding every table's
    indexes waited there, and deadlocked with writers touching two tables)."""
    with FactStore(pg_url) as store, FactStore(pg_url) as other:
        store.add("agent", "A lesson about deploys.")
        waited: list[int] = []
        worker = threading.Thread(target=store.reindex)
        with psycopg.connect(pg_url, autocommit=True) as watch, other.batch():
            other.add("agent", "A lesson written meanwhile.")
            worker.start()
            while worker.is_alive():
                if watch.execute("SELECT count(*) FROM pg_locks WHERE NOT granted").fetchone()[0]:
                    waited.append(1)
                    break
                time.sleep(0.01)
        worker.join(60)
        assert [] == waited and not worker.is_alive()
        assert store.doctor().ok


def test_a_reinforce_and_an_erase_of_its_partner_never_deadlock(pg_url):
    """A batch holds fact X (demoted), an erase of its user waits on X having deleted Y,
    then the batch reinforces X (a link to Y): the link leaves Y out at once, the batch
    commits and the erase finishes, neither failing."""
    with FactStore(pg_url, embedder=False) as agent, FactStore(pg_url, embedder=False) as admin:
        y = agent.add("user", "The user drinks coffee at nine.", user="u").id
        x = agent.add("user", "The user drinks coffee at noon.", user="u").id
        assert {x, y} <= {h.fact.id for h in agent.search("coffee", user="u")}
        outcome: list[object] = []

        def erase() -> None:
            try:
                outcome.append(admin.erase(user="u").facts)
            except Exception as exc:
                outcome.append(exc)

        eraser = threading.Thread(target=erase)
        with psycopg.connect(pg_url, autocommit=True) as watch, agent.batch():
            agent.demote(x, 0.5, user="u")
            eraser.start()
            while not watch.execute("SELECT count(*) FROM pg_locks WHERE NOT granted"
                                    ).fetchone()[0]:
                assert eraser.is_alive()
                time.sleep(0.01)
            agent.reinforce(x, user="u")
        eraser.join(60)
        assert [2] == outcome
        assert 0 == _count(pg_url, "SELECT count(*) FROM fact_links", ())


class CountingGate(GatedEmbedder):
    """The gated embedder, counting the background writer's batches."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0
        self.called = threading.Condition()

    def embed(self, texts):
        if threading.current_thread().name == "ctxslots-vectors":
            with self.called:
                self.calls += 1
                self.called.notify_all()
        return super().embed(texts)


def test_a_fact_held_by_another_write_gets_its_vector_once_that_write_ends(pg_url):
    """The writer's batch meets its fact held by another store's upsert of it (FOR
    UPDATE): the fact is left out, queued again, and gets its vector once the upsert's
    transaction has ended; doctor finds none missing."""
    embedder = CountingGate()
    with FactStore(pg_url, embedder=embedder, ranking=FUSED, vector_writes="background") as store, \
            FactStore(pg_url, embedder=HashingEmbedder(dimension=64), ranking=FUSED,
                      vector_writes="inline") as other:
        fact = store.upsert("user", "editor", "The user edits code in Helix.")
        assert embedder.held.wait(60)
        with other.batch():
            other.upsert("user", "editor", "The user edits code in Helix.")  # holds the row
            embedder.gate.set()
            with embedder.called:  # the writer left it out and is trying again
                assert embedder.called.wait_for(lambda: embedder.calls >= 2, 60)
        assert store.wait_for_vectors(60)
        assert 1 == _count(pg_url, "SELECT count(*) FROM fact_vectors WHERE fact_id = %s",
                           (fact.id,))
        assert 0 == store.doctor().vectors.missing
