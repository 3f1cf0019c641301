"""Access counts written in the background: what a search or an assembly promises about them."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import ctxslots
from _sql import raw
from ctxslots import AssemblyRequest, FactStore, InvalidFactError, PromptAssembler


def _count(location: str, fact_id: int) -> int:
    """The access count as committed, read through a store of its own."""
    with FactStore(location, access_writes="inline") as other:
        fact = other.get(fact_id)
        assert fact is not None
        return fact.access_count


@contextmanager
def _write_lock(store: FactStore) -> Iterator[threading.Event]:
    """Hold the SQLite file's write lock until the yielded event is set (or the block ends)."""
    conn = raw(store)
    conn.raw.execute("BEGIN IMMEDIATE")
    release = threading.Event()
    done = threading.Event()

    def hold() -> None:
        release.wait(30)
        conn.raw.execute("ROLLBACK")
        conn.close()
        done.set()

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        yield release
    finally:
        release.set()
        thread.join(30)
        assert done.is_set()


def test_a_count_lands_after_the_search_returns(location):
    """The hits show the new count at once; the store holds it once the writes are waited for."""
    with FactStore(location, access_writes="background") as store:
        fact = store.add("agent", "The deploy key rotates every ninety days.")
        hits = store.search("deploy key rotates")
        assert [(fact.id, 1)] == [(h.fact.id, h.fact.access_count) for h in hits]
        assert 1 == store.touch([fact.id, fact.id])  # queued once
        assert store.wait_for_writes(30)
        assert 2 == _count(location, fact.id)
        assert store.get(fact.id).last_accessed is not None


def test_close_writes_the_queued_counts(location):
    """Counts still queued when the store closes are written before close returns."""
    store = FactStore(location, access_writes="background")
    ids = [store.add("agent", f"Runbook step {i} restarts the worker.").id for i in range(5)]
    store.search("runbook step restarts worker", limit=5)
    store.close()
    assert [1] * 5 == [_count(location, i) for i in ids]


def test_a_search_does_not_wait_for_its_count(db_path):
    """While another connection holds the write lock, a search still returns; its
    count is written once the lock is free."""
    with FactStore(db_path, access_writes="background") as store:
        fact = store.add("agent", "The queue drains at midnight.")
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with _write_lock(store) as release:
                assert [fact.id] == [h.fact.id for h in store.search("queue drains midnight")]
                assert not store.wait_for_writes(0.2)  # queued behind the lock
                assert 0 == store.get(fact.id).access_count
                release.set()
            assert store.wait_for_writes(30)
        assert 1 == store.get(fact.id).access_count


def test_close_waits_for_a_busy_store(db_path):
    """close() returns only after the queued count is written, even when the lock was taken."""
    store = FactStore(db_path, access_writes="background")
    fact = store.add("agent", "The staging database restarts on Sundays.")
    with _write_lock(store) as release:
        store.search("staging database restarts")
        threading.Timer(0.3, release.set).start()
        store.close()
    assert 1 == _count(str(db_path), fact.id)


def test_exports_and_pruning_wait_for_queued_counts(db_path):
    """An export written while a count is queued includes it."""
    with FactStore(db_path, access_writes="background") as store:
        fact = store.add("agent", "Invoices are sent on the first of the month.")
        with _write_lock(store) as release:
            store.search("invoices first month")
            threading.Timer(0.3, release.set).start()
            out = io.StringIO()
            store.export_jsonl(out)
        records = [json.loads(line) for line in out.getvalue().splitlines()]
        assert [1] == [r["access_count"] for r in records if r.get("id") == fact.id]
        assert store.prune(dry_run=True) is not None


def test_counts_inside_a_batch_join_its_transaction(db_path):
    """Inside batch(), a search's count is part of the batch: committed with it, rolled back with it."""
    with FactStore(db_path, access_writes="background") as store:
        fact = store.add("agent", "The cron job writes to /var/log/cron.")
        with store.batch():
            store.search("cron job writes")
        assert 1 == _count(str(db_path), fact.id)  # no wait: it was written in the batch
        with pytest.raises(RuntimeError), store.batch():
            store.search("cron job writes")
            raise RuntimeError("abandon the batch")
        assert store.wait_for_writes(30)
        assert 1 == _count(str(db_path), fact.id)


def test_auto_counts_in_the_background_for_a_long_running_store(db_path):
    """access_writes="auto": a store opened with lexical_cache=True counts in the
    background (an assembly returns while the lock is held); a plain one counts
    before the call returns."""
    with FactStore(db_path) as plain:
        fact = plain.add("user", "The user prefers short answers.")
        plain.search("short answers")
        assert 1 == _count(str(db_path), fact.id)
    with FactStore(db_path, lexical_cache=True) as store:
        assembler = PromptAssembler(store)
        with _write_lock(store) as release:
            prompt = assembler.assemble(AssemblyRequest("short answers please", budget=500))
            assert "The user prefers short answers." in prompt.text
            assert 1 == _count(str(db_path), fact.id)
            release.set()
        assert store.wait_for_writes(30)
        assert 2 == _count(str(db_path), fact.id)


def test_a_bad_access_writes_value_is_refused_and_creates_nothing(tmp_path):
    """An unknown access_writes is an InvalidFactError naming the field; no file is made."""
    path = tmp_path / "memory.db"
    with pytest.raises(InvalidFactError) as info:
        FactStore(path, access_writes="later")
    assert "access_writes" == info.value.field
    assert not path.exists()


CHILD = """
import sys
from ctxslots import FactStore
store = FactStore(sys.argv[1], access_writes="background")
store.search("certificate renewal")
print("searched", flush=True)
if sys.argv[2] == "exit":
    sys.stdin.readline()  # the parent frees the lock, then lets the process end without close()
else:
    import time
    time.sleep(600)
"""


def _child(db_path: Path, how: str) -> subprocess.Popen[str]:
    src = str(Path(ctxslots.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, "-c", CHILD, str(db_path), how], text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)


def test_a_normal_exit_writes_the_queued_counts(db_path):
    """A process that ends without closing its store still writes its queued counts."""
    with FactStore(db_path) as store:
        fact = store.add("agent", "The certificate renewal runs in March.")
        with _write_lock(store) as release:
            child = _child(db_path, "exit")
            assert "searched" == child.stdout.readline().strip()
            release.set()
        child.communicate("\n", timeout=60)
        assert 0 == child.returncode
        assert 1 == store.get(fact.id).access_count


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX only")
def test_a_crash_loses_only_the_queued_counts(db_path):
    """Killed with a count still queued: that count is lost, the store is intact."""
    with FactStore(db_path) as store:
        fact = store.add("agent", "The certificate renewal runs in March.")
        with _write_lock(store):
            child = _child(db_path, "crash")
            try:
                assert "searched" == child.stdout.readline().strip()
            finally:
                child.send_signal(signal.SIGKILL)
                child.wait(30)
        assert 0 == store.get(fact.id).access_count
        assert store.doctor().ok
        assert ["The certificate renewal runs in March."] == [
            h.fact.value for h in store.search("certificate renewal")]


def test_a_writer_that_cannot_write_warns_once_and_loses_only_counts(tmp_path):
    """When the counts cannot be written (here the file is gone), one warning says
    so, the queue empties, and later counts are dropped without another warning."""
    from ctxslots.stores.engines import open_backend
    from ctxslots.stores.writes.access_writer import AccessWriter

    missing = str(tmp_path / "gone.db")
    writer = AccessWriter(lambda: open_backend(missing, create=False))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        writer.put([1, 2], 1_800_000_000.0)
        assert writer.wait(30)
        writer.put([3], 1_800_000_000.0)
        assert writer.wait(30)
    assert ["access counts could not be written"] == [
        str(w.message)[:34] for w in caught if w.category is RuntimeWarning]
    assert 0 == writer.pending and writer.failure is not None
    writer.close(30)
    assert not Path(missing).exists()


def test_counts_together_writes_once_when_the_block_ends(location):
    """Inside the block a touch gathers; the counts land when it ends, each fact once,
    a nested block joining the outer one."""
    with FactStore(location, access_writes="inline") as store:
        ids = [store.add("agent", f"Release note {n}: the cache warms at nine.").id
               for n in range(3)]
        with store.counts_together():
            assert 2 == store.touch(ids[:2])
            with store.counts_together():
                assert 2 == store.touch(ids[1:])
            assert [0, 0, 0] == [_count(location, i) for i in ids]
        assert [1, 1, 1] == [_count(location, i) for i in ids]


def test_counts_together_writes_its_counts_when_the_block_raises(location):
    """The facts were shown all the same: the block's error goes on, the counts land."""
    with FactStore(location, access_writes="inline") as store:
        fact = store.add("agent", "The staging database restarts on Sundays.")
        with pytest.raises(KeyError, match="boom"), store.counts_together():
            store.touch([fact.id])
            raise KeyError("boom")
        assert 1 == _count(location, fact.id)


def test_counts_together_gathers_only_its_own_threads_counts(location):
    """Another thread's touch during the block is written at once, not held by the block."""
    with FactStore(location, access_writes="inline") as store:
        mine = store.add("agent", "The nightly job rebuilds the search index.").id
        theirs = store.add("agent", "The weekly job rotates the logs.").id
        with store.counts_together():
            store.touch([mine])
            other = threading.Thread(target=store.touch, args=([theirs],))
            other.start()
            other.join(60)
            assert not other.is_alive()
            assert (0, 1) == (_count(location, mine), _count(location, theirs))
        assert (1, 1) == (_count(location, mine), _count(location, theirs))


def test_counts_together_queues_one_entry_for_the_background_writer(location):
    """With counts written in the background, the block's counts still land, once each."""
    with FactStore(location, access_writes="background") as store:
        fact = store.add("agent", "The canary deploy waits for ten minutes.")
        with store.counts_together():
            store.touch([fact.id])
            store.touch([fact.id])
        assert store.wait_for_writes(30)
        assert 1 == _count(location, fact.id)


def test_counts_together_refuses_a_malformed_id_and_counts_the_rest(location):
    """A malformed id raises at its touch, as outside the block; what was gathered lands."""
    with FactStore(location, access_writes="inline") as store:
        fact = store.add("agent", "The billing export runs at midnight.")
        with store.counts_together():
            store.touch([fact.id])
            with pytest.raises(InvalidFactError, match="fact id must be an integer"):
                store.touch(["7"])  # type: ignore[list-item]
        assert 1 == _count(location, fact.id)


def test_a_read_while_another_process_holds_the_write_lock_owes_its_count(db_path):
    """An import or a batch of another process holds the file's write lock: a search
    answers after a short wait for it instead of failing after the busy timeout, warns
    once, and its count (each fact owed once) is written with the next count once the
    lock is free."""
    with FactStore(db_path, access_writes="inline") as store:
        fact = store.add("agent", "The deploy key rotates every ninety days.")
        with _write_lock(store), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            hits = store.search("deploy key rotates")
            store.search("deploy key rotates")
            assert [fact.id] == [h.fact.id for h in hits]
            assert 0 == hits[0].fact.access_count  # owed, not counted
        busy = [w for w in caught if issubclass(w.category, RuntimeWarning)]
        assert 1 == len(busy) and "written with a later count" in str(busy[0].message)
        assert 0 == _count(str(db_path), fact.id)
        other = store.add("agent", "The weekly job rotates the logs.")
        store.touch([other.id])  # the lock is free: the owed count lands with this one
        assert (1, 1) == (_count(str(db_path), fact.id), _count(str(db_path), other.id))
        store.touch([other.id])
    with FactStore(db_path) as store:
        assert (1, 2) == (store.get(fact.id).access_count, store.get(other.id).access_count)


def test_counts_still_owed_are_written_when_the_store_closes(db_path):
    """A count owed while another process held the lock lands when the store closes."""
    store = FactStore(db_path, access_writes="inline")
    fact = store.add("agent", "The staging database restarts on Sundays.")
    with _write_lock(store), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        store.search("staging database restarts")
    store.close()
    assert 1 == _count(str(db_path), fact.id)


def test_on_postgresql_a_count_skips_a_row_another_transaction_is_rewriting(pg_url,
                                                                           monkeypatch):
    """Another process's open transaction rewrote one of a search's hits: the search does
    not wait for that row's lock (nor can deadlock with it); the other hit is counted and
    the locked one goes uncounted for that read."""
    import psycopg

    monkeypatch.setenv("CTXSLOTS_BUSY_TIMEOUT", "5")  # a count that waited would fail
    with FactStore(pg_url, access_writes="inline") as store:
        busy = store.add("agent", "The deploy key rotates every ninety days.")
        free = store.add("agent", "The deploy key lives in the vault.")
        with psycopg.connect(pg_url) as other:
            other.execute("UPDATE facts SET value = value WHERE id = %s", (busy.id,))
            hits = store.search("deploy key")
            assert {busy.id, free.id} == {h.fact.id for h in hits}
            other.rollback()
        assert (0, 1) == (store.get(busy.id).access_count, store.get(free.id).access_count)


def test_the_doctor_finds_no_problem_in_the_stores_own_counts(db_path):
    """A store writing counts in the background asks the doctor right after each search:
    the counts land first, so the full-text check never finds the store's own count
    writer holding the lock it needs (about one doctor in forty did) and reports
    nothing."""
    with FactStore(db_path, access_writes="background") as store:
        fact = store.add("agent", "The zanzibar mirror syncs at dawn.")
        for searched in range(1, 301):
            assert [fact.id] == [h.fact.id for h in store.search("zanzibar mirror")]
            assert () == store.doctor().problems
            assert searched == _count(str(db_path), fact.id)
