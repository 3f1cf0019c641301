"""Threads writing through one store each have a transaction of their own: what one thread's
batch owes (vectors, the count against ``max_batch``) is never another thread's."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from ctxslots import ANY, FactStore, InvalidFactError, Limits, RankingPolicy


class HeldEmbedder:
    """The hashing embedder; embedding :attr:`held_text` waits, once, until :attr:`release`
    is set (after setting :attr:`holding`)."""

    def __init__(self, held_text: str) -> None:
        from ctxslots.stores.embedders import HashingEmbedder

        self.inner = HashingEmbedder(dimension=32)
        self.model_id, self.dimension = self.inner.model_id, self.inner.dimension
        self.held_text = held_text
        self.holding, self.release = threading.Event(), threading.Event()

    def embed(self, texts):
        if self.held_text in texts and not self.holding.is_set():
            self.holding.set()
            assert self.release.wait(60)
        return self.inner.embed(texts)


def test_a_write_while_another_threads_batch_commits_keeps_its_vector(pg_url):
    """A fact one thread writes while another thread's batch embeds its facts before
    committing gets its own vector (it got none: it was taken as part of the other
    thread's batch, which had already read what it would embed)."""
    embedder = HeldEmbedder("Deploys run on Fridays.")
    with FactStore(pg_url, embedder=embedder, ranking=RankingPolicy(vector_weight=0.5),
                   vector_writes="inline") as store:

        def first() -> int:
            with store.batch():
                fact = store.add("agent", "Deploys run on Fridays.", agent="a")
            return fact.id

        def second() -> int:
            try:
                assert embedder.holding.wait(60)
                return store.add("agent", "The cache warms on Mondays.", agent="b").id
            finally:
                embedder.release.set()

        with ThreadPoolExecutor(2) as pool:
            ids = [job.result() for job in [pool.submit(first), pool.submit(second)]]
        report = store.doctor()
        assert report.vectors is not None
        assert (0, 2) == (report.vectors.missing, report.vectors.vectors)
        assert sorted(ids) == sorted(h.fact.id for h in store.search("Fridays Mondays", agent=ANY))


def test_another_threads_writes_do_not_count_against_a_batch(pg_url):
    """``max_batch`` counts the facts of one batch: writes another thread makes meanwhile
    are not among them (they were, and the batch failed at its limit)."""
    b_wrote, a_open = threading.Event(), threading.Event()
    with FactStore(pg_url, limits=Limits(max_batch=2)) as store:

        def first() -> int:
            with store.batch():
                store.add("agent", "Deploys run on Fridays.", agent="a")
                a_open.set()
                assert b_wrote.wait(60)
                store.add("agent", "Tests run before each deploy.", agent="a")
            return 2

        def second() -> int:
            try:
                assert a_open.wait(60)
                store.add("agent", "The cache warms on Mondays.", agent="b")
                store.add("agent", "The cache is cold on Tuesdays.", agent="b")
            finally:
                b_wrote.set()
            return 2

        with ThreadPoolExecutor(2) as pool:
            done = [job.result() for job in [pool.submit(first), pool.submit(second)]]
        assert [2, 2] == done
        assert 4 == len(store.facts(agent=ANY))
        try:
            with store.batch():
                for n in range(3):
                    store.add("agent", f"Lesson {n}.", agent="c")
        except InvalidFactError as exc:
            assert "at most 2 facts" in str(exc)
        else:
            raise AssertionError("a batch of three facts passed max_batch=2")
