"""The store's async face: the same results as the sync calls, without blocking the event loop."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

from ctxslots import FactStore, InvalidFactError
from ctxslots.integrations import Memory, RunIdentity


class SlowEmbedder:
    """The hashing embedder, as a slow model: once :attr:`hold` is set, a call does not end
    until the event loop has run meanwhile (which it cannot if the call blocks it)."""

    def __init__(self) -> None:
        from ctxslots.stores.embedders import HashingEmbedder

        self.inner = HashingEmbedder(dimension=32)
        self.model_id, self.dimension = self.inner.model_id, self.inner.dimension
        self.on_loop = 0
        self.off_loop = 0
        self.hold = False
        self.waiting = threading.Event()
        self.loop_ran = threading.Event()

    def embed(self, texts):
        try:
            asyncio.get_running_loop()
            self.on_loop += 1  # called on the event loop's own thread
        except RuntimeError:
            self.off_loop += 1
        if self.hold:
            self.waiting.set()
            self.loop_ran.wait(120)
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
    """Searches embed their query off the event loop, which runs meanwhile: the first
    embedding does not end until the loop has run after it began (blocking the loop, it
    would wait for nothing), and all four finish."""
    emb = SlowEmbedder()
    from ctxslots import RankingPolicy

    with FactStore(location, embedder=emb, ranking=RankingPolicy(vector_weight=1.0),
                   vector_writes="inline") as store:
        store.add("agent", "The release train leaves on Thursdays.")
        emb.on_loop = emb.off_loop = 0
        emb.hold = True

        async def run():
            searches = [asyncio.ensure_future(store.asearch(f"release train {i}"))
                        for i in range(4)]
            while not all(s.done() for s in searches):
                if emb.waiting.is_set():
                    emb.loop_ran.set()  # the loop ran while an embedding was under way
                await asyncio.sleep(0.005)
            return [s.result() for s in searches]

        results = asyncio.run(run())
    assert all(len(r) == 1 for r in results)
    assert (0, 4) == (emb.on_loop, emb.off_loop)
    assert emb.loop_ran.is_set()


def test_threads_sharing_one_store_take_turns(location):
    """Searches, lists and writes from several threads at once on one store: none meets another
    inside the driver (SQLite's apsw refuses a connection busy in another thread) and every
    search finds what it should. Threads switch every microsecond, so that one is often
    stopped between two steps of a statement while another runs its own."""
    interval = sys.getswitchinterval()
    with FactStore(location) as store, contextlib.ExitStack() as restore:
        restore.callback(sys.setswitchinterval, interval)
        for i in range(40):
            store.add("agent", f"Service number {i} deploys from the release branch.", scope="ops")
        store.upsert("user", "editor", "The user edits code in Helix.", user="alice")
        start = threading.Barrier(4)

        def search() -> int:
            start.wait(60)
            found = 0
            for _ in range(300):
                hits = store.search("release branch deploys", scope="ops", limit=5)
                found += len(hits) == 5
                found += len(store.facts(slots=["agent"], scope="ops")) == 40
            return found

        def write() -> int:
            start.wait(60)
            for n in range(300):
                store.upsert("user", "editor", f"The user edits code in Helix {n}.", user="alice")
            return 600

        sys.setswitchinterval(1e-6)
        with ThreadPoolExecutor(4) as pool:
            done = [job.result() for job in [pool.submit(j) for j in (search, search, search, write)]]
        assert [600, 600, 600, 600] == done
        assert "The user edits code in Helix 299." == store.facts(slots=["user"], user="alice")[0].value


def test_aforget_takes_the_owners_forget_takes(tmp_path):
    """aforget(..., user=) forgets only a fact that user sees, as forget does."""
    import inspect

    from ctxslots import FactNotFoundError

    assert list(inspect.signature(FactStore.aforget).parameters) == \
        list(inspect.signature(FactStore.forget).parameters)

    async def run() -> None:
        with FactStore(tmp_path / "a.db", embedder=False) as store:
            alice = await store.aadd("user", "Alice's PIN is 4321.", user="alice")
            try:
                await store.aforget(alice.id, user="bob")
            except FactNotFoundError:
                pass
            else:
                raise AssertionError("bob forgot alice's fact")
            assert store.get(alice.id).archived is False
            gone = await store.aforget(alice.id, reason="asked", user="alice")
            assert gone.archived

    asyncio.run(run())


def test_async_calls_inside_a_batch_are_part_of_it(store):
    """Awaited inside a batch the loop's thread has open, the async calls run as part of it:
    in a worker thread they waited for the batch to end, which waited for them (for ever
    on SQLite; on PostgreSQL an add waited for a lock the batch held, and an upsert landed
    outside the batch, kept when it rolled back)."""

    class Undo(Exception):
        pass

    async def writes() -> list[str]:
        store.add("user", "The user drinks tea.")
        await store.aadd("user", "The user drinks coffee.")
        fact = await store.aupsert("user", "editor", "The user edits code in Helix.")
        await store.aupdate(fact.id, value="The user edits code in Neovim.")
        await store.aforget((await store.aadd("agent", "Deploys run on Fridays.")).id)
        return [h.fact.value for h in await store.asearch("drinks", relaxed=True)]

    async def run(keep: bool) -> list[str]:
        with store.batch():
            found = await asyncio.wait_for(writes(), 60)
            if not keep:
                raise Undo
        return found

    with contextlib.suppress(Undo):
        asyncio.run(run(keep=False))
    assert [] == store.facts()                      # rolled back whole, the async writes too
    found = asyncio.run(run(keep=True))
    assert {"The user drinks tea.", "The user drinks coffee."} == set(found)
    assert {"The user drinks tea.", "The user drinks coffee.", "The user edits code in Neovim."} \
        == {f.value for f in store.facts()}


def test_another_tasks_write_is_no_part_of_a_batch_awaiting_on_the_same_loop(store):
    """In an async server one request awaiting inside its batch lets the loop run another
    request's task on the same thread: that task is not in the batch, and its write stays
    when the batch rolls back (it ran inside the batch, and was rolled back with it after
    the call had returned the stored fact)."""

    class Undo(Exception):
        pass

    async def serve() -> tuple[bool, bool, int]:
        inside, asked, fail = asyncio.Event(), asyncio.Event(), asyncio.Event()
        seen = []

        async def alice() -> None:
            with contextlib.suppress(Undo), store.batch():
                store.add("user", "Alice drinks tea.", user="alice")
                seen.append(store.in_batch)
                inside.set()
                await fail.wait()   # a model call, another service: the loop serves others
                raise Undo

        async def bob() -> int:
            await inside.wait()
            seen.append(store.in_batch)
            asked.set()
            return (await store.aupsert("user", "city", "Bob lives in Oslo.", user="bob")).id

        first = asyncio.create_task(alice())
        second = asyncio.create_task(bob())
        await asked.wait()          # bob's call has begun, alice's batch still open
        fail.set()
        await first
        return seen[0], seen[1], await asyncio.wait_for(second, 60)

    alice_in_batch, bob_in_batch, bob_id = asyncio.run(serve())
    assert [] == store.facts(user="alice")
    assert [(bob_id, "Bob lives in Oslo.")] == [(f.id, f.value) for f in store.facts(user="bob")]
    assert (True, False) == (alice_in_batch, bob_in_batch)


def _in_batch_on_a_thread(store, work, *, keep):
    """``work()`` awaited inside a batch of ``store`` on a loop of a thread of its own,
    the batch rolled back unless ``keep``; its answer, once the thread ended."""

    class Undo(Exception):
        pass

    answers = []

    async def run():
        with contextlib.suppress(Undo), store.batch():
            answers.append(await work())
            if not keep:
                raise Undo

    turn = threading.Thread(target=asyncio.run, args=(run(),), daemon=True)
    turn.start()
    turn.join(60)
    assert not turn.is_alive(), "the call awaited inside the batch never returned"
    return answers[0]


def test_a_memory_tool_call_awaited_inside_a_batch_is_part_of_it(store):
    """Memory.adispatch inside a batch runs on its thread, as part of it: in a worker
    thread it waited for the batch to end, which waited for it (for ever on SQLite)."""
    memory = Memory(store)
    who = RunIdentity(user="alice")

    def remember():
        return memory.adispatch("memory_store", {"slot": "user", "value": "Alice drinks tea."},
                                who)

    assert not _in_batch_on_a_thread(store, remember, keep=False).startswith("Error")
    assert [] == store.facts(user="alice")                  # rolled back with the batch
    _in_batch_on_a_thread(store, remember, keep=True)
    assert ["Alice drinks tea."] == [f.value for f in store.facts(user="alice")]
    found = _in_batch_on_a_thread(
        store, lambda: memory.adispatch("memory_query", {"query": "tea"}, who), keep=True)
    assert "Alice drinks tea." in found
