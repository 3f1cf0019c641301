"""Vectors written in the background: what a write promises before and after its vector lands."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import ctxslots
from _sql import raw
from ctxslots import FactStore, RankingPolicy
from ctxslots.stores.embedders import HashingEmbedder

FUSED = RankingPolicy(vector_weight=1.0)


class GatedEmbedder:
    """The hashing embedder, holding every batch of stored values until ``gate`` opens.

    Query embeddings (one text) pass at once, so a search is never held up by the gate.
    """

    def __init__(self) -> None:
        self.inner = HashingEmbedder(dimension=64)
        self.model_id, self.dimension = self.inner.model_id, self.inner.dimension
        self.gate = threading.Event()
        self.batches: list[int] = []

    def embed(self, texts):
        if threading.current_thread().name == "ctxslots-vectors":
            self.gate.wait(30)
            self.batches.append(len(texts))
        return self.inner.embed(texts)


def _vector_count(store) -> int:
    conn = raw(store)
    try:
        return int(conn.scalar("SELECT count(*) FROM vectors"))
    finally:
        conn.close()


def test_a_fact_is_found_by_words_at_once_and_its_vector_follows(db_path):
    """add returns before the vector exists; words find the fact; the vector arrives; a search waits for it."""
    emb = GatedEmbedder()
    with FactStore(db_path, embedder=emb, ranking=FUSED, vector_writes="background") as store:
        fact = store.add("agent", "The nightly backup runs at 02:00 on the replica.")
        assert 0 == _vector_count(store)
        with FactStore(db_path, embedder=emb, ranking=RankingPolicy(vector_weight=0.0)) as other:
            assert [fact.id] == [h.fact.id for h in other.search("nightly backup")]
        assert not store.wait_for_vectors(0.2)  # held by the gate
        emb.gate.set()
        hit = store.search("nightly backup replica")[0]  # waits for the queue first
        assert fact.id == hit.fact.id and hit.trace.cosine is not None
        assert 1 == _vector_count(store)
        assert store.doctor().ok


def test_one_by_one_writes_are_embedded_in_batches(db_path):
    """Facts added one at a time while the writer is busy are embedded together."""
    emb = GatedEmbedder()
    with FactStore(db_path, embedder=emb, ranking=FUSED, vector_writes="background") as store:
        ids = [store.add("agent", f"Release note {i} mentions the billing queue.").id
               for i in range(20)]
        emb.gate.set()
        assert store.wait_for_vectors(10)
        assert 20 == _vector_count(store)
        assert 20 == sum(emb.batches) and len(emb.batches) <= 3
        updated = store.update(ids[0], value="Release note zero moved the billing queue.")
        assert store.wait_for_vectors(10)
        assert updated.id in {h.fact.id for h in store.search("moved billing queue", limit=3)}


def test_close_writes_what_is_queued(db_path):
    """Closing the store writes the queued vectors before it returns."""
    emb = GatedEmbedder()
    emb.gate.set()
    store = FactStore(db_path, embedder=emb, ranking=FUSED, vector_writes="background")
    for i in range(5):
        store.add("agent", f"Cache note {i}.")
    store.close()
    with FactStore(db_path, embedder=emb, ranking=FUSED) as again:
        assert 5 == _vector_count(again) and again.doctor().ok


CHILD = """
import sys, threading, time
from ctxslots import FactStore, RankingPolicy
from ctxslots.stores.embedders import HashingEmbedder

class Stuck(HashingEmbedder):
    def embed(self, texts):
        if threading.current_thread().name == "ctxslots-vectors":
            time.sleep(600)
        return super().embed(texts)

store = FactStore(sys.argv[1], embedder=Stuck(64), ranking=RankingPolicy(vector_weight=1.0),
                  vector_writes="background")
store.add("agent", "The staging certificate expires in March.")
print("added", flush=True)
time.sleep(600)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX only")
def test_a_process_killed_before_the_vector_leaves_a_fact_doctor_reports(db_path):
    """Killed after add returned but before its vector was written: the fact stays, doctor says so, reindex repairs."""
    src = str(Path(ctxslots.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(db_path)], stdout=subprocess.PIPE,
                             text=True, env=env)
    try:
        assert "added" == child.stdout.readline().strip()
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    with FactStore(db_path, embedder=HashingEmbedder(64), ranking=FUSED) as store:
        assert ["The staging certificate expires in March."] == [
            h.fact.value for h in store.search("staging certificate")]
        report = store.doctor()
        assert ["1 fact has no vector: run `ctxslots reindex` to embed it (only it)"] == list(report.problems)
        assert 1 == store.reindex()
        assert store.doctor().ok and 1 == _vector_count(store)


def test_the_doctor_waits_a_bounded_time_for_the_vectors_a_hung_embedder_owes(db_path,
                                                                                monkeypatch):
    """With the embedding server hung, doctor (and the inspector's health page, which asks
    it) waited for every queued batch; it waits DOCTOR_VECTOR_WAIT_S at most, and reports
    the vector still owed as missing. Once the embedder answers, the doctor is content."""
    from ctxslots.stores.upkeep import methods

    monkeypatch.setattr(methods, "DOCTOR_VECTOR_WAIT_S", 0.05)
    embedder = GatedEmbedder()
    with FactStore(db_path, embedder=embedder, ranking=FUSED,
                   vector_writes="background") as store:
        store.add("project", "Deploys run on Fridays.", scope="shop")
        report = store.doctor()  # returns with the gate still shut
        assert not embedder.gate.is_set() and [] == embedder.batches
        assert ["1 fact has no vector"] == [p.split(":")[0] for p in report.problems]
        embedder.gate.set()
        assert store.wait_for_vectors()
        assert store.doctor().ok


AT_EXIT = """
import sys, threading, time
from ctxslots import FactStore, RankingPolicy
from ctxslots.stores.embedders import HashingEmbedder

class UntilExit(HashingEmbedder):
    def embed(self, texts):
        # The vectors are still owed when the script ends: the thread embeds once the
        # interpreter is exiting.
        while threading.current_thread().name == "ctxslots-vectors" and \\
                threading.main_thread().is_alive():
            time.sleep(0.01)
        return super().embed(texts)

store = FactStore(sys.argv[1], embedder=UntilExit(64), ranking=RankingPolicy(vector_weight=1.0),
                  vector_writes="background")
for i in range(5):
    store.add("agent", f"Runbook step {i} restarts the queue.")
if sys.argv[2] == "drop":
    del store
"""


@pytest.mark.parametrize("ending", ["left open", "drop"])
def test_a_normal_exit_writes_the_vectors_still_queued(db_path, ending):
    """A script that ends with its store open (or dropped unclosed) while vectors are
    queued: the interpreter's exit writes them, as it writes queued access counts. The
    thread was killed with the interpreter, and every fact was left without a vector."""
    src = str(Path(ctxslots.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-c", AT_EXIT, str(db_path), ending], env=env,
                          check=False,
                          capture_output=True, text=True, timeout=120)
    assert 0 == done.returncode, done.stderr
    with FactStore(db_path, embedder=HashingEmbedder(64), ranking=FUSED) as store:
        assert 5 == _vector_count(store) and store.doctor().ok


HUNG_AT_EXIT = """
import atexit, sys, threading, time
ended = []
# Registered before ctxslots is imported, so it runs after ctxslots' own exit handler.
atexit.register(lambda: print(f"waited {time.monotonic() - ended[0]:.2f}", flush=True))

from ctxslots import FactStore, RankingPolicy
from ctxslots.stores.embedders import HashingEmbedder
from ctxslots.stores.writes import background

class Hung(HashingEmbedder):
    def embed(self, texts):
        if threading.current_thread().name == "ctxslots-vectors":
            threading.Event().wait()  # a model server that never answers
        return super().embed(texts)

background.EXIT_TIMEOUT = float(sys.argv[2])
store = FactStore(sys.argv[1], embedder=Hung(64), ranking=RankingPolicy(vector_weight=1.0),
                  vector_writes="background")
store.add("agent", "Runbook step 1 restarts the queue.")
ended.append(time.monotonic())
"""


def test_the_exit_waits_for_a_hung_embedder_no_longer_than_its_limit(db_path):
    """A script ends while its vectors' embedder hangs: the exit waits EXIT_TIMEOUT for the
    queue, then ends. It waited that long for the queue and as long again for the thread
    to end (ten seconds where five are promised), the hung embedder still holding it."""
    src = str(Path(ctxslots.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    limit = 4.0  # long enough that a busy machine's scheduling stays within the margin
    done = subprocess.run([sys.executable, "-c", HUNG_AT_EXIT, str(db_path), str(limit)],
                          env=env, check=False, capture_output=True, text=True, timeout=120)
    assert 0 == done.returncode, done.stderr
    waited = float(done.stdout.split("waited ")[1])
    assert limit <= waited < limit + 0.9 * limit, done.stdout


def _writer_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name in ("ctxslots-vectors", "ctxslots-access")}


def test_a_store_dropped_unclosed_ends_its_writer_threads(db_path):
    """A store with background writers dropped without close(): its writers write what is
    queued, then their threads end and close their connections. Each thread waited for
    work for good, holding a connection open: a loop opening such stores ran out of them."""
    before = _writer_threads()
    store = FactStore(db_path, embedder=HashingEmbedder(64), ranking=FUSED,
                      vector_writes="background", access_writes="background")
    store.add("agent", "The on-call rota changes on Mondays.")
    assert 1 == len(store.search("on-call rota"))
    threads = _writer_threads() - before
    assert {"ctxslots-vectors", "ctxslots-access"} == {t.name for t in threads}
    del store
    gc.collect()
    for thread in threads:
        thread.join(30)
    assert not [t.name for t in threads if t.is_alive()]
    with FactStore(db_path, embedder=HashingEmbedder(64), ranking=FUSED) as again:
        assert 1 == _vector_count(again)
        assert [1] == [f.access_count for f in again.facts()]
