"""A write lock held by another writer past the busy timeout, and calls on a closed store:
each a CtxslotsError that says what happened, with nothing written."""

from __future__ import annotations

import asyncio
import io
import threading
import time
from pathlib import Path

import attrs
import pytest
from click.testing import CliRunner

from _lock_holders import SQLiteHolder, holder_of, inside_a_sqlite_write
from _sql import stored_rows
from ctxslots import (
    AgentMemoryContributor,
    AssemblyRequest,
    CtxslotsError,
    FactStore,
    Item,
    PromptAssembler,
    Section,
    StoreBusyError,
    StoreClosedError,
    StoreError,
    UserMemoryContributor,
)
from ctxslots.cli import cli
from ctxslots.stores.engines import BUSY_TIMEOUT_ENV


@pytest.fixture(name="short_wait")
def fixture_short_wait(monkeypatch):
    """Writes wait half a second for another writer's lock."""
    monkeypatch.setenv(BUSY_TIMEOUT_ENV, "0.5")


def test_a_write_past_the_busy_timeout_is_a_store_busy_error(short_wait, store):
    """The write fails with StoreBusyError (a CtxslotsError) naming what to do, nothing is
    written, and the same write succeeds once the other writer is done."""
    store.add("agent", "Written before the lock.")
    before = stored_rows(store)
    holder = holder_of(store)
    try:
        with pytest.raises(StoreBusyError) as caught:
            store.add("agent", "Waits for the lock.")
        with pytest.raises(StoreBusyError):
            with store.batch():
                store.add("agent", "Waits in a batch.")
    finally:
        holder.release()
    assert isinstance(caught.value, CtxslotsError)
    assert "is busy" in str(caught.value) and "nothing was written" in str(caught.value)
    assert "CTXSLOTS_BUSY_TIMEOUT" in str(caught.value)
    assert before == stored_rows(store)
    store.add("agent", "Waits for the lock.")
    assert 2 == len(store.facts())


def test_the_sqlite_busy_error_names_the_process_holding_the_lock(short_wait, db_path):
    """On Linux the message names the holder's process id and command line."""
    with FactStore(db_path) as store:
        store.add("agent", "Written before the lock.")
        holder = SQLiteHolder(db_path)
        try:
            with pytest.raises(StoreBusyError) as caught:
                store.add("agent", "Waits for the lock.")
        finally:
            holder.release()
    if not Path("/proc/locks").exists():
        pytest.skip("the system does not list its locks in /proc/locks")
    assert f"process {holder.child.pid}" in str(caught.value)
    assert caught.value.holder is not None and caught.value.waited == 0.5


def test_the_cli_says_busy_in_one_line(short_wait, location):
    """`ctxslots remember` while another writer holds the lock: one line, exit 1, no traceback."""
    with FactStore(location) as store:
        store.add("agent", "Written before the lock.")
        holder = holder_of(store)
    try:
        result = CliRunner().invoke(cli, ["--db", location, "remember", "agent", "Waits."])
    finally:
        holder.release()
    assert 1 == result.exit_code, result.output
    assert "Traceback" not in result.output
    (line,) = result.output.strip().splitlines()
    assert "is busy" in line and "nothing was written" in line


def test_a_write_waiting_for_another_process_lets_the_other_threads_read(db_path):
    """While one thread's write waits for the lock another process holds, the store's
    other threads search, list and read (they do not wait with it); the write lands once
    the lock is let go."""
    with FactStore(db_path) as store:
        kept = store.add("project", "Deploy on Fridays after the freeze.")
        holder = SQLiteHolder(db_path)
        written: list[int] = []
        waiting = threading.Thread(
            target=lambda: written.append(store.add("project", "Waits for the lock.").id))
        try:
            waiting.start()
            while waiting.is_alive() and not inside_a_sqlite_write([waiting]):
                time.sleep(0.001)
            assert [kept.id] == [h.fact.id for h in store.search("deploy", track_access=False)]
            assert [kept.id] == [f.id for f in store.facts()]
            assert kept == store.get(kept.id)
            assert waiting.is_alive() and not written  # still waiting for the lock
        finally:
            holder.release()
            waiting.join(60)
        assert 1 == len(written)
        assert {kept.id, *written} == {f.id for f in store.facts()}


@pytest.mark.parametrize("text", ["soon", "-1", "1e9", "nan"])
def test_a_busy_timeout_that_is_no_number_of_seconds_is_refused(monkeypatch, db_path, text):
    """$CTXSLOTS_BUSY_TIMEOUT must be seconds from 0 to 86400; the error names the variable."""
    monkeypatch.setenv(BUSY_TIMEOUT_ENV, text)
    with pytest.raises(StoreError, match="CTXSLOTS_BUSY_TIMEOUT must be a number of seconds"):
        FactStore(db_path)
    assert not db_path.exists()


# -- a closed store -------------------------------------------------------------

CALLS = {
    "add": lambda s, f: s.add("agent", "After close."),
    "upsert": lambda s, f: s.upsert("agent", "k", "After close."),
    "get": lambda s, f: s.get(f),
    "update": lambda s, f: s.update(f, value="After close."),
    "search": lambda s, f: s.search("anything"),
    "query_words": lambda s, f: s.query_words("anything at all"),
    "facts": lambda s, f: s.facts(),
    "stats": lambda s, f: s.stats(),
    "doctor": lambda s, f: s.doctor(),
    "reindex": lambda s, f: s.reindex(),
    "forget": lambda s, f: s.forget(f),
    "delete": lambda s, f: s.delete(f),
    "reinforce": lambda s, f: s.reinforce(f),
    "history": lambda s, f: s.history(f),
    "export_jsonl": lambda s, f: s.export_jsonl(io.StringIO()),
    "import_jsonl": lambda s, f: s.import_jsonl(io.StringIO(
        '{"format": "ctxslots-facts", "version": 1}\n')),
    "batch": lambda s, f: s.batch().__enter__(),
    "assemble": lambda s, f: PromptAssembler(s).assemble(AssemblyRequest("anything")),
    "aassemble": lambda s, f: asyncio.run(PromptAssembler(s).aassemble(
        AssemblyRequest("anything"))),
    "with": lambda s, f: s.__enter__(),
    "counts_together": lambda s, f: s.counts_together().__enter__(),
    "vector_status": lambda s, f: s.vector_status(f),
    "load_lexical_cache": lambda s, f: s.load_lexical_cache(),
    "load_vector_cache": lambda s, f: s.load_vector_cache(),
    "record_flush_progress": lambda s, f: s.record_flush_progress("chat", 1, "f"),
}


@pytest.mark.parametrize("call", sorted(CALLS))
def test_every_call_on_a_closed_store_is_a_store_closed_error(location, call):
    """Reads, writes, upkeep and assembly on a closed store raise StoreClosedError naming the
    store (an assembly returned an empty prompt, every memory section having failed)."""
    store = FactStore(location)
    fact = store.add("agent", "Written before close.")
    assert not store.closed
    store.close()
    assert store.closed
    store.close()  # closing twice is fine
    with pytest.raises(StoreClosedError, match="is closed"):
        CALLS[call](store, fact.id)
    with FactStore(location) as again:
        assert ["Written before close."] == [f.value for f in again.facts()]


@attrs.frozen
class _Closer:
    """A sticky section placed before the memory sections that closes the store as it is
    asked (a server shutting down while a turn is assembled)."""

    store: FactStore
    name: str = "closer"
    priority: int = 100
    sticky: bool = True

    def contribute(self, request: AssemblyRequest) -> Section:
        self.store.close()
        return Section(title="House rules", name=self.name, priority=self.priority,
                       sticky=True, items=(Item(text="Answer briefly."),))


@attrs.frozen
class _AsyncCloser(_Closer):
    async def contribute(self, request: AssemblyRequest) -> Section:  # type: ignore[override]
        return _Closer.contribute(self, request)


@pytest.mark.parametrize("closer", [_Closer, _AsyncCloser])
def test_a_store_closed_during_an_assembly_raises_instead_of_a_prompt_without_memory(
        location, closer):
    """The store closing while a turn is assembled (after the assembler's first check)
    raises StoreClosedError from assemble and aassemble alike; it returned the prompt with
    every memory section dropped, as if the user had no memory."""
    store = FactStore(location)
    store.upsert("user", "editor", "Alice edits code in Helix.", user="alice")
    assembler = PromptAssembler(store, contributors=[
        closer(store), UserMemoryContributor(store), AgentMemoryContributor(store)])
    request = AssemblyRequest("Which editor do I use?", user="alice")
    with pytest.raises(StoreClosedError, match="is closed"):
        if closer is _AsyncCloser:
            asyncio.run(assembler.aassemble(request))
        else:
            assembler.assemble(request)
    assert store.closed
    with FactStore(location) as again:
        assert ["Alice edits code in Helix."] == [f.value for f in again.facts(user="alice")]


def _close_under_threads(db_path, round_: int) -> tuple[list[BaseException], list[int]]:
    """Four threads writing, searching and batching on a store until it closes under
    them: the errors other than StoreClosedError, and the ids of the writes that returned."""
    store = FactStore(db_path)
    errors: list[BaseException] = []
    written: list[int] = []
    going = [threading.Event() for _ in range(4)]

    def work(n: int) -> None:
        try:
            while True:
                if n == 3:
                    with store.batch():
                        written.extend(store.add("agent", f"Batch {round_} {i}.").id
                                       for i in range(3))
                else:
                    written.append(store.add("agent", f"Note {round_} {n}.").id)
                    store.search("note batch")
                going[n].set()
        except StoreClosedError:
            going[n].set()
        except BaseException as exc:  # reported by the test
            errors.append(exc)
            going[n].set()

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for event in going:
        assert event.wait(60)
    store.close()
    for thread in threads:
        thread.join(60)
    return errors, written


def test_closing_a_store_while_other_threads_use_it_fails_them_with_store_closed_only(db_path):
    """Threads writing, reading and batching while the store closes under them: each gets
    StoreClosedError or finishes, never a driver's error; every write that returned is
    in the file (the close waits for a statement or batch in flight)."""
    for round_ in range(5):
        errors, written = _close_under_threads(db_path, round_)
        assert [] == errors
        with FactStore(db_path) as again:
            assert set(written) <= {f.id for f in again.facts()}


def test_a_batch_the_store_closes_under_fails_with_store_closed_and_keeps_nothing(pg_url):
    """PostgreSQL: a thread inside ``batch()`` when another closes the store: its next
    write raises StoreClosedError, and nothing of the batch is committed."""
    store = FactStore(pg_url)
    half, closed = threading.Event(), threading.Event()
    raised: list[BaseException] = []

    def work() -> None:
        try:
            with store.batch():
                store.add("agent", "Written before the close.", scope="x")
                half.set()
                assert closed.wait(60)
                store.add("agent", "Written after the close.", scope="x")
        except BaseException as exc:  # reported by the test
            raised.append(exc)

    thread = threading.Thread(target=work)
    thread.start()
    assert half.wait(60)
    store.close()
    closed.set()
    thread.join(60)
    assert [StoreClosedError] == [type(e) for e in raised]
    with FactStore(pg_url) as again:
        assert [] == again.facts(scope="x")


def test_a_key_stored_by_another_writer_after_a_batch_read_it_is_replaced(short_wait, pg_url):
    """On PostgreSQL a key with no row is not locked by reading it: another writer may
    store it before the batch does. The batch's upsert then finds it taken, reads it
    again and replaces its value, which history keeps; nothing is lost and the batch,
    with or without savepoints, lands."""
    with FactStore(pg_url) as store, FactStore(pg_url) as other:
        for savepoints, key in ((True, "city"), (False, "town")):
            with store.batch(savepoints=savepoints):
                assert store.get_by_key("user", key, user="ada") is None
                other.upsert("user", key, f"Ada's {key} is Nice.", user="ada")  # no wait
                fact = store.upsert("user", key, f"Ada's {key} is Lyon.", user="ada")
            assert f"Ada's {key} is Lyon." == other.get_by_key("user", key, user="ada").value
            assert [f"Ada's {key} is Nice."] == [h.value for h in other.history(fact.id)]


def test_a_key_read_in_a_batch_keeps_other_writers_of_its_row_waiting(short_wait, pg_url):
    """A key with a row is locked by the batch that read it: another writer of the key
    waits for the batch (here past its busy timeout); a nested batch that fails gives
    the lock back with its savepoint."""
    with FactStore(pg_url) as store, FactStore(pg_url) as other:
        store.upsert("user", "city", "Ada lives in Nice.", user="ada")
        store.upsert("user", "town", "Ada grew up in Arles.", user="ada")
        with store.batch():
            with pytest.raises(RuntimeError), store.batch():
                assert store.get_by_key("user", "town", user="ada") is not None
                raise RuntimeError("the flush failed")
            other.upsert("user", "town", "Ada grew up in Sète.", user="ada")
            assert store.get_by_key("user", "city", user="ada") is not None
            with pytest.raises(StoreBusyError):
                other.upsert("user", "city", "Ada lives in Paris.", user="ada")
            store.upsert("user", "city", "Ada lives in Lyon.", user="ada")
        assert "Ada lives in Lyon." == other.get_by_key("user", "city", user="ada").value
        assert "Ada grew up in Sète." == other.get_by_key("user", "town", user="ada").value


def test_an_upsert_waits_for_another_writer_storing_its_key_and_replaces_it(pg_url):
    """Two writers store a new key at once: the second one's insert waits until the first
    commits, then reads the key again and replaces the value; history keeps the first."""
    import psycopg

    with FactStore(pg_url) as store, FactStore(pg_url) as other, \
            psycopg.connect(pg_url, autocommit=True) as watch:
        first_wrote, second_waits, stop = threading.Event(), threading.Event(), threading.Event()
        errors: list[BaseException] = []

        def first() -> None:
            try:
                with other.batch():
                    other.upsert("user", "city", "Ada lives in Nice.", user="ada")
                    first_wrote.set()
                    assert second_waits.wait(60)
            except BaseException as exc:  # reported by the main thread
                errors.append(exc)
                first_wrote.set()

        thread = threading.Thread(target=first)
        with store.batch(savepoints=False):
            assert store.get_by_key("user", "city", user="ada") is None
            thread.start()
            assert first_wrote.wait(60)

            def unblock_when_waiting() -> None:
                # The event: this store's insert waits on the first writer's transaction.
                while not stop.is_set():
                    if watch.execute("SELECT count(*) FROM pg_locks WHERE NOT granted "
                                     "AND locktype = 'transactionid'").fetchone()[0]:
                        second_waits.set()
                        return
                    time.sleep(0.01)

            watcher = threading.Thread(target=unblock_when_waiting, daemon=True)
            watcher.start()
            try:
                fact = store.upsert("user", "city", "Ada lives in Lyon.", user="ada")
            finally:
                stop.set()
                second_waits.set()  # never leave the first writer waiting
            watcher.join(60)
        thread.join(60)
        assert [] == errors
        assert not watcher.is_alive()
        assert "Ada lives in Lyon." == other.get_by_key("user", "city", user="ada").value
        assert ["Ada lives in Nice."] == [h.value for h in other.history(fact.id)]


def test_the_write_ahead_log_is_cut_back_once_a_long_reader_leaves(db_path, monkeypatch):
    """A reader held open while facts are written lets the write-ahead log grow; once it
    leaves, the next checkpoint empties the log and it is cut back to its limit (SQLite
    kept a grown log's size for good)."""
    import apsw

    from ctxslots.stores.sqlite import _connect

    monkeypatch.setattr(_connect, "WAL_SIZE_LIMIT", 64 * 1024)
    wal = Path(f"{db_path}-wal")
    with FactStore(db_path, access_writes="inline") as store:
        store.add("agent", "The first fact.")
        reader = apsw.Connection(str(db_path))
        reader.execute("BEGIN")
        reader.execute("SELECT count(*) FROM facts").fetchall()
        for n in range(300):
            store.add("agent", f"Fact number {n} written while a reader holds the log.")
        grown = wal.stat().st_size
        reader.execute("COMMIT")
        reader.close()
        for n in range(300):  # past the next automatic checkpoint and the write after it
            store.add("agent", f"Fact number {n} written after the reader left.")
            if wal.stat().st_size <= 1024 * 1024:
                break
        assert grown > 4 * 1024 * 1024
        assert wal.stat().st_size <= 1024 * 1024


def test_closing_a_store_inside_its_own_batch_keeps_nothing_of_it(location):
    """``close()`` inside a batch of the same thread: leaving the batch raises
    StoreClosedError on both engines, and none of its writes is in the store."""
    store = FactStore(location)
    with pytest.raises(StoreClosedError), store.batch():
        store.add("agent", "Written in the batch.", scope="x")
        store.close()
    with FactStore(location) as again:
        assert [] == again.facts(scope="x")


def test_writes_begun_during_an_export_wait_for_it(db_path):
    """Other threads write while exports read their one moment of the file: each write
    waits for the export's read to end (they failed with the driver's 'cannot start a
    transaction within a transaction'), and every export holds a whole moment."""
    with FactStore(db_path) as store:
        with store.batch():
            for n in range(2000):
                store.add("project", f"Deploy note {n} for the shop.")
        stop = threading.Event()
        written: list[int] = []
        errors: list[BaseException] = []

        def write(writer: int) -> None:
            n = 0
            while not stop.is_set():
                n += 1
                try:
                    written.append(store.add("project", f"Written by {writer}, {n}th.").id)
                except BaseException as exc:  # reported below
                    errors.append(exc)
                    return

        writers = [threading.Thread(target=write, args=(k,)) for k in range(2)]
        for writer in writers:
            writer.start()
        try:
            counts = []
            for _ in range(3):
                out = io.StringIO()
                counts.append(store.export_jsonl(out))
        finally:
            stop.set()
            for writer in writers:
                writer.join(60)
        assert [] == [f"{type(e).__name__}: {e}" for e in errors]
        assert counts == sorted(counts) and counts[0] >= 2000
        assert 2000 + len(written) == len(store.facts())
