"""A store opened before the process forks: the child opens connections of its own."""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections.abc import Callable

import pytest

from ctxslots import FactStore

#: Seconds a child doing a few writes is given before it is taken for hung.
HUNG_AFTER = 120


def _forked_child(target: Callable[[FactStore], None], store: FactStore) -> int | None:
    """Run ``target(store)`` in a forked child; its exit status (the test fails if the
    child is still running after :data:`HUNG_AFTER` seconds)."""
    child = multiprocessing.get_context("fork").Process(target=target, args=(store,))
    child.start()
    child.join(HUNG_AFTER)
    if child.is_alive():
        child.kill()
        pytest.fail("the forked child hung")
    return child.exitcode


def _child_writes_and_closes(store: FactStore) -> None:
    try:
        store.add("agent", "The child deploys on Mondays.")
        assert 2 == len(store.search("deploys"))
        store.close()
    except BaseException:
        os._exit(1)


def test_a_store_opened_before_a_fork_serves_the_child_and_the_parent(location):
    """A child forked after the store opened writes, searches and closes it; the parent's
    store goes on working (the child closing the parent's PostgreSQL connections broke the
    parent's next call; on SQLite the child waited forever at close for the access writer
    thread it did not have)."""
    store = FactStore(location, access_writes="background")
    try:
        store.add("agent", "The parent deploys on Fridays.")
        store.search("deploys")  # the access writer's thread runs in the parent
        assert 0 == _forked_child(_child_writes_and_closes, store)
        store.add("agent", "The parent tests on Thursdays.")
        assert ["The child deploys on Mondays.", "The parent deploys on Fridays."] == sorted(
            h.fact.value for h in store.search("deploys"))
        assert store.wait_for_writes(HUNG_AFTER)
    finally:
        store.close()
    with FactStore(location) as again:
        assert 3 == len(again.facts())


def _child_opens_and_writes(store: FactStore) -> None:
    try:
        store.add("agent", f"Child {os.getpid()} was here.")
        store.close()
    except BaseException:
        os._exit(1)


def test_forks_while_the_access_writer_works_leave_no_child_hung(db_path):
    """Forks right after searches, while the store's access writer thread may be inside
    SQLite: each child opens the store and writes. A child forked with that thread inside
    the library inherited its locks held and hung at its first open (about one fork in
    thirty here); a fork now waits for the store's own threads to leave their engine."""
    store = FactStore(db_path, access_writes="background")
    try:
        store.add("agent", "The parent deploys on Fridays.")
        for _ in range(40):
            assert 1 == len(store.search("deploys"))  # queues an access count to write
            assert 0 == _forked_child(_child_opens_and_writes, store)
        assert store.wait_for_writes(HUNG_AFTER)
        assert 41 == len(store.facts())
    finally:
        store.close()


def test_a_store_closed_before_a_fork_stays_closed_in_the_child(db_path):
    """A store closed before the fork is closed in the child too: nothing is opened again."""
    store = FactStore(db_path)
    store.close()
    child = multiprocessing.get_context("fork").Process(target=_closed_in_child, args=(store,))
    child.start()
    child.join(HUNG_AFTER)
    assert 0 == child.exitcode


def _closed_in_child(store: FactStore) -> None:
    os._exit(0 if store.closed else 1)


def _opens_the_store(path: str) -> None:
    try:
        FactStore(path).close()
    except BaseException:
        os._exit(1)
    os._exit(0)


def test_forks_while_a_copy_loads_in_the_background_leave_no_child_hung(db_path):
    """Forks while a background loader (the thread that builds a store's in-memory copies)
    reads inside SQLite: each child opens the store. A child forked while the loader was
    inside the library inherited its allocator's lock held, and hung at its first open (a
    few forks in a hundred with this read, which allocates on every row); a fork now waits
    for the loader to leave SQLite, for one chunk at most. The read stands in for a copy's
    rows, to keep the loader inside SQLite most of the time."""
    import apsw

    from ctxslots.stores.sqlite._loader import BackgroundLoader, row_chunks

    FactStore(db_path).close()
    conn = apsw.Connection(str(db_path))
    conn.execute("CREATE TABLE numbers(x INTEGER PRIMARY KEY)")
    conn.execute("WITH RECURSIVE s(v) AS (SELECT 1 UNION ALL SELECT v + 1 FROM s LIMIT 5000) "
                 "INSERT INTO numbers SELECT v FROM s")
    conn.close()
    reading = threading.Event()

    def build(conn, cancelled):
        while not cancelled():
            rows = conn.execute("SELECT (SELECT sum(length(randomblob(64 + o.x % 2))) "
                                "FROM numbers) FROM numbers AS o")
            for _ in row_chunks(rows, cancelled, background_size=1):
                reading.set()
        return True

    loader = BackgroundLoader(str(db_path), build, load_vec=False, name="test-copy")
    try:
        assert reading.wait(HUNG_AFTER)
        context = multiprocessing.get_context("fork")
        for _ in range(200):
            child = context.Process(target=_opens_the_store, args=(str(db_path),))
            child.start()
            child.join(10)  # a child opening a store takes milliseconds
            if child.is_alive():
                child.kill()
                pytest.fail("a child forked during the load hung at its first open")
            assert 0 == child.exitcode
    finally:
        loader.cancel()
        assert loader.wait(HUNG_AFTER)
    assert loader.error is None
