"""FactStore.update, FactStore.timeline and the batch-size limit, on real files."""

from __future__ import annotations

import pytest

from ctxslots import FactNotFoundError, FactStore, InvalidFactError, Limits


def test_update_changes_only_the_given_fields_and_keeps_history(store, clock):
    fact = store.add("agent", "The CI cache is cold on Mondays.", tags=["ci"], source="chat")
    clock.advance(days=1)
    updated = store.update(fact.id, value="The CI cache is cold on Tuesdays.")
    assert updated.value == "The CI cache is cold on Tuesdays."
    assert updated.tags == ("ci",) and updated.source == "chat" and updated.confidence == 1.0
    assert updated.updated_at > fact.updated_at and updated.created_at == fact.created_at
    assert [h.value for h in store.history(fact.id)] == ["The CI cache is cold on Mondays."]
    assert [h.fact.id for h in store.search("Tuesdays")] == [fact.id]
    assert store.search("Mondays") == []


def test_update_of_tags_and_confidence_keeps_the_value(store):
    fact = store.upsert("user", "editor", "The user edits code in Helix.")
    updated = store.update(fact.id, tags=["tools", "editor"], confidence=0.5)
    assert (updated.value, updated.tags, updated.confidence, updated.key) == (
        fact.value, ("tools", "editor"), 0.5, "editor")
    assert store.get_by_key("user", "editor").tags == ("tools", "editor")


def test_update_rejects_bad_input_and_writes_nothing(store):
    fact = store.add("agent", "Deploys happen on Fridays.", scope="proj")
    with pytest.raises(InvalidFactError) as err:
        store.update(fact.id, value="x" * 5000)
    assert err.value.field == "value"
    with pytest.raises(InvalidFactError):
        store.update(fact.id, confidence=2.0)
    with pytest.raises(InvalidFactError):
        store.update("1", value="nope")  # type: ignore[arg-type]
    with pytest.raises(FactNotFoundError):
        store.update(fact.id + 100, value="nope")
    assert store.get(fact.id) == fact and store.history(fact.id) == []


def test_update_of_an_archived_or_expired_fact_is_not_found(store, clock):
    gone = store.add("agent", "Old lesson.")
    store.forget(gone.id)
    soon = store.add("agent", "Short-lived lesson.", expires_at=clock.now + 60)
    clock.advance(seconds=120)
    for fact_id in (gone.id, soon.id):
        with pytest.raises(FactNotFoundError):
            store.update(fact_id, value="changed")


def test_timeline_returns_neighbours_in_time_order_within_the_scope(store, clock):
    ids = []
    for n in range(8):
        scope = "other" if n % 2 else "proj"
        ids.append(store.add("agent", f"Event number {n}.", scope=scope).id)
        clock.advance(seconds=10)
    glob = store.add("user", "A global fact.").id
    clock.advance(seconds=10)
    later = store.add("agent", "Event after the global one.", scope="proj").id
    proj = [i for n, i in enumerate(ids) if n % 2 == 0]
    timeline = store.timeline(proj[2], before=1, after=2, scope="proj")
    assert [f.id for f in timeline] == [proj[1], proj[2], proj[3], glob]
    assert [f.id for f in store.timeline(later, before=3, after=3, scope="proj")] == [
        proj[2], proj[3], glob, later]
    assert [f.id for f in store.timeline(proj[0], before=0, after=0, scope="proj")] == [proj[0]]


def test_timeline_hides_other_scopes_and_rejects_bad_counts(store):
    fact = store.add("agent", "Visible only in other.", scope="other")
    with pytest.raises(FactNotFoundError):
        store.timeline(fact.id, scope="proj")
    with pytest.raises(FactNotFoundError):
        store.timeline(fact.id)
    for bad in (-1, 101, True, 2.0, "3"):
        with pytest.raises(InvalidFactError):
            store.timeline(fact.id, before=bad, scope="other")  # type: ignore[arg-type]


def test_batch_over_the_limit_writes_nothing(db_path, clock):
    with FactStore(db_path, clock=clock, limits=Limits(max_batch=5)) as store:
        with pytest.raises(InvalidFactError) as err, store.batch():
            for n in range(6):
                store.add("agent", f"Fact {n}.")
        assert err.value.field == "batch"
        assert store.facts() == []
        with store.batch():
            for n in range(5):
                store.add("agent", f"Fact {n}.")
        assert len(store.facts()) == 5
