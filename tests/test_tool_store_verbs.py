"""memory_store says what its own write did: Stored, Replaced, Updated, Kept or Already
stored, decided inside the write's transaction, with other writers racing on both engines,
and tags left out of a call stay on the fact."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from ctxslots import FactStore
from ctxslots.tools import MemoryTools

ROUNDS = 25


def _race(location: str, call: Callable[[MemoryTools, int, int], str]) -> list[list[str]]:
    """Two tool sets, each on a store of its own over ``location``, call at once on each
    round; the answers of each round."""
    FactStore(location).close()
    stores = [FactStore(location, embedder=False) for _ in range(2)]
    tools = [MemoryTools(s, user="alice", scope="shop") for s in stores]
    answers: list[list[str]] = [["", ""] for _ in range(ROUNDS)]
    failures: list[BaseException] = []
    barrier = threading.Barrier(2)

    def work(k: int) -> None:
        try:
            for i in range(ROUNDS):
                barrier.wait()
                answers[i][k] = call(tools[k], k, i)
        except BaseException as exc:
            failures.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=work, args=(k,)) for k in (0, 1)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        for store in stores:
            store.close()
    assert [] == failures
    return answers


def _id(answer: str) -> str:
    return answer.split("[id:", 1)[1].split("]", 1)[0]


def _verbs(answers: list[list[str]]) -> list[list[str]]:
    return [sorted(a.split(" [id:", 1)[0] for a in pair) for pair in answers]


def test_racing_writers_of_one_key_hear_stored_once_and_replaced_once(location):
    """Two writers store different values under the same new key at once: one answer is
    Stored, the other Replaced, every round, on both engines."""
    answers = _race(location, lambda t, k, i: t.dispatch("memory_store", {
        "slot": "project", "key": f"k{i}", "value": f"Value {i} from writer {k}."}))
    assert [["Replaced", "Stored"]] * ROUNDS == _verbs(answers)


def test_racing_writers_of_one_keyed_value_hear_stored_once_and_kept_once(location):
    """Two writers store the same value under the same new key at once: Stored and Kept."""
    answers = _race(location, lambda t, k, i: t.dispatch("memory_store", {
        "slot": "user", "key": f"k{i}", "value": f"Value {i}."}))
    assert [["Kept", "Stored"]] * ROUNDS == _verbs(answers)


def test_racing_writers_of_one_free_memory_hear_stored_once(location):
    """Two writers store the same free memory at once: one is Stored, the other is told
    it is already stored (the same id), and the store holds it once."""
    answers = _race(location, lambda t, k, i: t.dispatch("memory_store", {
        "slot": "user", "value": f"Free memory number {i}."}))
    assert [["Already stored", "Stored"]] * ROUNDS == _verbs(answers)
    assert all(_id(a) == _id(b) for a, b in answers)
    with FactStore(location, embedder=False) as store:
        assert ROUNDS == len(store.facts(user="alice", scope="shop"))


@pytest.fixture(name="tools")
def fixture_tools(store):
    """Memory tools over the store of both engines."""
    return MemoryTools(store, user="alice", scope="shop")


def _store(tools: MemoryTools, **args: object) -> str:
    return tools.dispatch("memory_store", {"slot": "user", "key": "drink", **args})


def test_new_tags_on_the_same_value_are_an_update(tools, store):
    """Storing the same keyed value with other tags answers Updated and keeps the old tags
    in history; the same tags again answer Kept."""
    assert _store(tools, value="Alice likes tea.", tags=["food"]).startswith("Stored [id:1]")
    assert _store(tools, value="Alice likes tea.", tags=["beverage", "pref"]) \
        .startswith("Updated [id:1]")
    assert ("beverage", "pref") == store.get(1).tags
    assert [("food",)] == [h.tags for h in store.history(1)]
    assert _store(tools, value="Alice likes tea.", tags=["beverage", "pref"]) \
        .startswith("Kept [id:1]")
    assert 1 == len(store.history(1))


def test_tags_left_out_stay_on_the_fact(tools, store):
    """A call that does not mention tags keeps them, for the same value (Kept) and a new
    one (Replaced); an empty list clears them (Updated)."""
    _store(tools, value="Alice likes tea.", tags=["food"])
    assert _store(tools, value="Alice likes tea.").startswith("Kept [id:1]")
    assert ("food",) == store.get(1).tags
    assert _store(tools, value="Alice likes green tea.").startswith("Replaced [id:1]")
    assert ("food",) == store.get(1).tags
    assert _store(tools, value="Alice likes green tea.", tags=[]).startswith("Updated [id:1]")
    assert () == store.get(1).tags


def test_a_new_context_on_the_same_value_is_an_update(tools, store):
    """The same keyed value with another context answers Updated; without one, Kept."""
    _store(tools, value="Alice likes tea.", context="What does Alice drink?")
    assert _store(tools, value="Alice likes tea.", context="Tea or coffee?") \
        .startswith("Updated [id:1]")
    assert _store(tools, value="Alice likes tea.").startswith("Kept [id:1]")
    assert "Tea or coffee?" == store.get(1).context


def test_upsert_with_tags_none_keeps_the_stored_tags(store):
    """FactStore.upsert(tags=None) keeps a stored fact's tags; a new fact gets none."""
    assert () == store.upsert("user", "drink", "Tea.", tags=None).tags
    store.upsert("user", "drink", "Tea.", tags=["food"])
    assert ("food",) == store.upsert("user", "drink", "Green tea.", tags=None).tags
    assert () == store.upsert("user", "drink", "Green tea.").tags


def test_write_tells_what_it_did(store):
    """FactStore.write reports inserted, replaced, updated and kept, for keyed facts and
    free memories."""
    changes = [store.write("user", "Tea.", key="drink", tags=["food"]).change,
               store.write("user", "Green tea.", key="drink").change,
               store.write("user", "Green tea.", key="drink", tags=["pref"]).change,
               store.write("user", "Green tea.", key="drink").change,
               store.write("agent", "Cache the wheels.").change,
               store.write("agent", "Cache the wheels.").change]
    assert ["inserted", "replaced", "updated", "kept", "inserted", "kept"] == changes
    assert ("pref",) == store.get_by_key("user", "drink").tags


def test_a_new_source_confidence_or_expiry_is_an_update(store, clock):
    """The same value with another source, confidence or expiry changed the fact: updated;
    only a new time of observation is kept."""
    store.write("user", "Tea.", key="drink", source="cli", confidence=0.4)
    changes = [store.write("user", "Tea.", key="drink", source="tool", confidence=0.4).change,
               store.write("user", "Tea.", key="drink", source="tool").change,
               store.write("user", "Tea.", key="drink", source="tool",
                           expires_at=clock.now + 86400).change,
               store.write("user", "Tea.", key="drink", source="tool",
                           expires_at=clock.now + 86400,
                           observed_at=clock.now - 3600).change]
    assert ["updated", "updated", "updated", "kept"] == changes
