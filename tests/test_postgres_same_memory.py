"""PostgreSQL: two writers adding the same memory at once store it once. No unique index
covers a memory without a key, so the first writer's transaction holds its slot and owners:
the second waits (seen in ``pg_locks``), then finds it."""

from __future__ import annotations

import threading
import time

import pytest

from ctxslots import ANY, FactStore

psycopg = pytest.importorskip("psycopg")

VALUE = "The deploy window is Friday after 16:00."


def test_a_memory_added_by_two_writers_at_once_is_stored_once(pg_url):
    with FactStore(pg_url) as first, FactStore(pg_url) as second, \
            psycopg.connect(pg_url, autocommit=True) as watch:
        added: list[int] = []
        other = threading.Thread(
            target=lambda: added.append(second.add("project", VALUE, scope="shop").id))
        with first.batch():
            mine = first.add("project", VALUE, scope="shop").id
            other.start()
            # Until the other writer waits on this transaction, or has written without waiting.
            while other.is_alive() and not watch.execute(
                    "SELECT count(*) FROM pg_locks WHERE NOT granted").fetchone()[0]:
                time.sleep(0.01)
        other.join()
        assert added == [mine]
        assert [f.id for f in first.facts(slots=["project"], scope="shop")] == [mine]


def test_memories_of_other_owners_do_not_wait(pg_url):
    with FactStore(pg_url) as first, FactStore(pg_url) as second:
        with first.batch():
            mine = first.add("project", VALUE, scope="shop").id
            # The same value of another scope, and of another slot, are written at once.
            theirs = [second.add("project", VALUE, scope="billing").id,
                      second.add("agent", VALUE, scope="shop").id]
        assert len({mine, *theirs}) == 3
        assert len(first.facts(slots=["project", "agent"], scope=ANY)) == 3


def test_a_batch_of_many_memories_holds_one_reservation(pg_url):
    """Ten thousand memories of one user in one batch, beside another such batch: the
    server's lock table holds a reservation a slot and owners, not one a memory."""
    def load(store: FactStore, user: str) -> None:
        with store.batch():
            for n in range(10_000):
                store.add("user", f"Note {n} of {user}.", user=user)

    with FactStore(pg_url) as first, FactStore(pg_url) as second:
        other = threading.Thread(target=load, args=(second, "bob"))
        other.start()
        load(first, "ann")
        other.join()
        assert len(first.facts(slots=["user"], user=ANY)) == 20_000


def test_a_transaction_past_the_servers_lock_table_says_so(pg_url):
    """Run out of shared memory for locks (a transaction holding more than the server's
    lock table), the error says the server ran out, not that the connection was lost."""
    from ctxslots import StoreError
    from ctxslots.stores.postgres._errors import store_error

    with psycopg.connect(pg_url) as conn:
        with pytest.raises(psycopg.errors.OutOfMemory) as caught:
            with conn.transaction():
                for n in range(1_000_000):
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (n,))
        error = store_error(caught.value, "the store")
    assert isinstance(error, StoreError)
    assert "ran out of a resource" in str(error) and "lost the connection" not in str(error)


def test_a_full_server_disk_is_a_store_full_error():
    """PostgreSQL's disk_full (53100) is the StoreFullError a search's access count lets
    pass with a warning, as SQLite's full disk is; other resources stay StoreErrors."""
    from ctxslots import StoreFullError
    from ctxslots.stores.postgres._errors import store_error

    full = store_error(psycopg.errors.DiskFull("could not extend file"), "the store")
    assert isinstance(full, StoreFullError)
    assert str(full).startswith("the disk of the store is full, and the transaction was "
                                "rolled back")
    other = store_error(psycopg.errors.OutOfMemory("out of shared memory"), "the store")
    assert not isinstance(other, StoreFullError)
