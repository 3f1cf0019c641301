"""The store's async face: the same results as the sync calls, without blocking the event loop."""

from __future__ import annotations

import asyncio
import time

from ctxslots import FactStore, InvalidFactError


class SlowEmbedder:
    """The hashing embedder, taking 50 ms per call, as a model on a busy machine would."""

    def __init__(self) -> None:
        from ctxslots.stores.embedders import HashingEmbedder

        self.inner = HashingEmbedder(dimension=32)
        self.model_id, self.dimension = self.inner.model_id, self.inner.dimension
        self.on_loop = 0
        self.off_loop = 0

    def embed(self, texts):
        try:
            asyncio.get_running_loop()
            self.on_loop += 1  # called on the event loop's own thread
        except RuntimeError:
            self.off_loop += 1
        time.sleep(0.05)
        return self.inner.embed(texts)


def test_async_calls_match_the_sync_ones(store):
    """aadd, aupsert, aupdate, asearch and aforget do what their sync twins do."""

    async def run():
        a = await store.aadd("agent", "The nightly backup runs at 02:00.", scope="ops")
        b = await store.aupsert("user", "editor", "The user edits code in Helix.")
        b = await store.aupdate(b.id, value="The user edits code in Neovim.")
        hits = await store.asearch("nightly backup", scope="ops")
        gone = await store.aforget(a.id, reason="moved")
        return a, b, hits, gone

    a, b, hits, gone = asyncio.run(run())
    assert [a.id] == [h.fact.id for h in hits]
    assert "The user edits code in Neovim." == store.get(b.id).value
    assert gone.archived and store.get(a.id) is None
    try:
        asyncio.run(store.asearch(42))  # type: ignore[arg-type]
    except InvalidFactError as exc:
        assert "query" == exc.field
    else:
        raise AssertionError("a query that is not text must be refused")


def test_searches_with_a_model_leave_the_loop_free(location):
    """Searches embed their query (50 ms each) off the event loop, which keeps ticking meanwhile."""
    emb = SlowEmbedder()
    from ctxslots import RankingPolicy

    with FactStore(location, embedder=emb, ranking=RankingPolicy(vector_weight=1.0),
                   vector_writes="inline") as store:
        store.add("agent", "The release train leaves on Thursdays.")
        emb.on_loop = emb.off_loop = 0

        async def run():
            ticks = []

            async def ticker():
                end = time.monotonic() + 0.4
                while time.monotonic() < end:
                    ticks.append(time.monotonic())
                    await asyncio.sleep(0.005)

            results = await asyncio.gather(
                ticker(), *(store.asearch(f"release train {i}") for i in range(4)))
            return ticks, results[1:]

        ticks, results = asyncio.run(run())
    assert all(len(r) == 1 for r in results)
    assert (0, 4) == (emb.on_loop, emb.off_loop)
    assert len(ticks) > 10  # the loop went on ticking while the four searches ran
