"""A batch whose writes take no savepoints (``store.batch(savepoints=False)``, the
flusher's): everything lands, or a failed write fails the whole batch even when the
caller caught its error, and nothing of it is written. On both engines."""

from __future__ import annotations

import pytest

from ctxslots import FactNotFoundError, FactStore, StoreBusyError, StoreError
from ctxslots.stores.engines import BUSY_TIMEOUT_ENV

MISSING = 987654


def test_a_batch_without_savepoints_writes_everything(store):
    with store.batch(savepoints=False):
        store.upsert("user", "city", "Ada lives in Nice.", user="ada")
        store.add("agent", "The CI cache is cold on Mondays.")
        store.upsert("user", "city", "Ada lives in Lyon.", user="ada")
    fact = store.get_by_key("user", "city", user="ada")
    assert "Ada lives in Lyon." == fact.value
    assert ["Ada lives in Nice."] == [h.value for h in store.history(fact.id)]
    assert ["The CI cache is cold on Mondays."] == [f.value for f in store.facts(slots=["agent"])]


def test_a_caught_failure_undoes_the_write_alone_in_a_batch_with_savepoints(store):
    """The default, for comparison: a write that raises is undone alone, and the batch
    goes on and lands."""
    with store.batch():
        store.upsert("user", "city", "Ada lives in Nice.", user="ada")
        with pytest.raises(FactNotFoundError):
            store.update(MISSING, value="Nothing.")
        store.upsert("user", "town", "Ada grew up in Arles.", user="ada")
    assert {"city", "town"} == {f.key for f in store.facts(user="ada")}


def test_a_caught_failure_fails_a_batch_without_savepoints(store):
    """A write that raises cannot be undone alone: the next write says the batch failed,
    the batch raises at its end though both errors were caught, and nothing is written.
    The store takes writes again afterwards."""
    store.upsert("user", "name", "Ada is called Ada.", user="ada")
    with pytest.raises(StoreError, match="nothing in the batch is written") as failed:
        with store.batch(savepoints=False):
            store.upsert("user", "city", "Ada lives in Nice.", user="ada")
            with pytest.raises(FactNotFoundError):
                store.update(MISSING, value="Nothing.")
            with pytest.raises(StoreError, match="FactNotFoundError"):
                store.upsert("user", "town", "Ada grew up in Arles.", user="ada")
    assert isinstance(failed.value.__cause__, FactNotFoundError)
    assert ["name"] == [f.key for f in store.facts(user="ada")]
    store.upsert("user", "city", "Ada lives in Lyon.", user="ada")
    assert {"name", "city"} == {f.key for f in store.facts(user="ada")}


def test_an_uncaught_failure_rolls_a_batch_without_savepoints_back(store):
    with pytest.raises(FactNotFoundError), store.batch(savepoints=False):
        store.upsert("user", "city", "Ada lives in Nice.", user="ada")
        store.update(MISSING, value="Nothing.")
    assert [] == store.facts(user="ada")


def test_a_batch_without_savepoints_inside_a_batch_fails_alone(store):
    """Nested in a batch with savepoints, the failed batch is undone to where it started,
    and the outer batch goes on and lands."""
    with store.batch():
        store.upsert("user", "name", "Ada is called Ada.", user="ada")
        with pytest.raises(StoreError, match="nothing in the batch is written"):
            with store.batch(savepoints=False):
                store.upsert("user", "city", "Ada lives in Nice.", user="ada")
                with store.batch():  # takes no savepoint either
                    store.upsert("user", "town", "Ada grew up in Arles.", user="ada")
                with pytest.raises(FactNotFoundError):
                    store.update(MISSING, value="Nothing.")
        store.upsert("user", "pet", "Ada has a cat.", user="ada")
        with store.batch(savepoints=False):  # the failure is forgotten with its batch
            store.upsert("user", "job", "Ada is a nurse.", user="ada")
    assert {"name", "pet", "job"} == {f.key for f in store.facts(user="ada")}


def test_a_server_error_fails_a_batch_without_savepoints(monkeypatch, pg_url):
    """On PostgreSQL a failed statement aborts the transaction until it rolls back: the
    write that waited too long for a key another batch holds fails the batch, and so
    does any read after it, with the batch's error rather than the server's."""
    monkeypatch.setenv(BUSY_TIMEOUT_ENV, "0.5")
    with FactStore(pg_url) as store, FactStore(pg_url) as other:
        store.upsert("user", "city", "Ada lives in Nice.", user="ada")
        with other.batch():
            assert other.get_by_key("user", "city", user="ada") is not None  # locks its row
            with pytest.raises(StoreError, match="nothing in the batch is written"):
                with store.batch(savepoints=False):
                    store.upsert("user", "town", "Ada grew up in Arles.", user="ada")
                    with pytest.raises(StoreBusyError):
                        store.upsert("user", "city", "Ada lives in Lyon.", user="ada")
                    with pytest.raises(StoreError, match="StoreBusyError"):
                        store.get_by_key("user", "town", user="ada")
        assert ["Ada lives in Nice."] == [f.value for f in store.facts(user="ada")]
        store.upsert("user", "city", "Ada lives in Lyon.", user="ada")
        assert ["Ada lives in Lyon."] == [f.value for f in other.facts(user="ada")]
