"""The stores the benchmarks share: the synthetic corpus written into a default store, built once.

    corpus_store(100_000)                 # benchmarks/out/corpus_100000.db, built if missing
    corpus_database(server, 100_000)      # database ctxslots_corpus_100000 on a PostgreSQL server
    vector_store(100_000, embedder, "hash")   # a copy whose facts all have vectors

A store of ``n`` facts from :func:`_corpus.generate_facts` (seed 0) is written
through ``FactStore.add``/``upsert`` in transactions of :data:`CHUNK` facts,
with the default embedder (hashing: words-only search, no vectors kept). A
stamp file beside it records the corpus and how far the build got after each
committed chunk, so an interrupted build resumes where it stopped and a
finished one is reused by every benchmark and run (``benchmarks/out/`` is
not in git; ``$CTXSLOTS_BENCHMARKS_OUT`` names another folder). Delete the
files to build again. On PostgreSQL the same facts go
into database ``ctxslots_corpus_N`` through ``FactStore(url)``, its progress
kept in a table of its own (``bench_progress``), then ``VACUUM ANALYZE``.
"""

from __future__ import annotations

import io
import itertools
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import apsw

from _corpus import CorpusFact, generate_facts
from ctxslots import FactStore, Limits, RankingPolicy

if TYPE_CHECKING:
    from _pg import Server

__all__ = ["CHUNK", "OUT", "corpus_database", "corpus_store", "vector_store", "write_facts"]

#: Where built stores and records are kept (``$CTXSLOTS_BENCHMARKS_OUT`` moves it elsewhere).
OUT = Path(os.environ.get("CTXSLOTS_BENCHMARKS_OUT") or Path(__file__).resolve().parent / "out")
#: Facts written per transaction while building (each chunk is one commit to resume from).
CHUNK = 50_000
#: Facts per transaction on PostgreSQL.
PG_CHUNK = 10_000
#: Bump when the way a store is built changes, so older files are built again.
_BUILD = 2


def write_facts(store: FactStore, facts: Iterator[CorpusFact], count: int) -> None:
    """Write the next ``count`` of ``facts`` into ``store`` in one transaction."""
    with store.batch():
        for fact in itertools.islice(facts, count):
            if fact.key:
                store.upsert(fact.slot, fact.key, fact.value, scope=fact.scope, tags=fact.tags)
            else:
                store.add(fact.slot, fact.value, scope=fact.scope, tags=fact.tags)


def _stamp(path: Path) -> Path:
    return path.with_suffix(".json")


def _progress(path: Path, n: int) -> int:
    """Facts of this corpus already committed to ``path`` (0 when it must start over)."""
    stamp = _stamp(path)
    if not (path.exists() and stamp.exists()):
        return 0
    state = json.loads(stamp.read_text())
    if state.get("facts") != n or state.get("build") != _BUILD:
        return 0
    return int(state.get("done", 0))


def _remove(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    _stamp(path).unlink(missing_ok=True)


def corpus_store(n: int) -> Path:
    """The store of the first ``n`` corpus facts, built (or its build resumed) if needed."""
    OUT.mkdir(exist_ok=True)
    path = OUT / f"corpus_{n}.db"
    done = _progress(path, n)
    if done >= n:
        return path
    if done == 0:
        _remove(path)
    print(f"building {path.name}: {done:,} of {n:,} facts written so far", flush=True)
    started = time.perf_counter()
    facts = itertools.islice(generate_facts(n, seed=0), done, None)
    with FactStore(path, limits=Limits(max_batch=CHUNK)) as store:
        while done < n:
            count = min(CHUNK, n - done)
            write_facts(store, facts, count)
            done += count
            _stamp(path).write_text(json.dumps({"facts": n, "build": _BUILD, "done": done}))
    print(f"built {path.name} in {time.perf_counter() - started:.0f} s", flush=True)
    return path


def vector_store(n: int, embedder: Any, name: str) -> Path:
    """A copy of the ``n``-fact store whose facts all have vectors from ``embedder`` (built
    once: ``reindex`` on a copy; ``name`` tells the copies of two embedders apart)."""
    source = corpus_store(n)
    copy = OUT / f"corpus_{n}_{name.replace('/', '_')}.db"
    if _progress(copy, n) >= n:
        return copy
    _remove(copy)
    conn = apsw.Connection(str(source))
    conn.execute("VACUUM INTO ?", (str(copy),))
    conn.close()
    started = time.perf_counter()
    with FactStore(copy, embedder=embedder, ranking=RankingPolicy(vector_weight=1.0)) as store:
        store.reindex()
    _stamp(copy).write_text(json.dumps({"facts": n, "build": _BUILD, "done": n}))
    print(f"embedded {copy.name} in {time.perf_counter() - started:.0f} s", flush=True)
    return copy


def _records(facts: Iterator[CorpusFact]) -> io.StringIO:
    """``facts`` as an import file (``FactStore.import_jsonl``): the facts
    :func:`write_facts` would write, keys upserted, identical free facts once."""
    lines = [json.dumps({"format": "ctxslots-facts", "version": 1})]
    lines += [json.dumps({"slot": f.slot, "value": f.value, "tags": list(f.tags),
                          **({"scope": f.scope} if f.scope else {}),
                          **({"key": f.key} if f.key else {})}) for f in facts]
    return io.StringIO("\n".join(lines) + "\n")


def _pg_progress(url: str, n: int) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS bench_progress "
                     "(facts integer, build integer, done integer)")
        row = conn.execute("SELECT facts, build, done FROM bench_progress").fetchone()
    return int(row[2]) if row is not None and row[:2] == (n, _BUILD) else 0


def _pg_record(url: str, n: int, done: int) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
        conn.execute("DELETE FROM bench_progress")
        conn.execute("INSERT INTO bench_progress VALUES (%s, %s, %s)", (n, _BUILD, done))


def corpus_database(server: Server, n: int) -> str:
    """The URL of a database holding the first ``n`` corpus facts, built (or resumed) if needed."""
    import psycopg

    name = f"ctxslots_corpus_{n}"
    url = server.database(name)
    done = _pg_progress(url, n)
    if done >= n:
        return url
    if done == 0:
        url = server.fresh(name)
        _pg_progress(url, n)
    print(f"building {name}: {done:,} of {n:,} facts written so far", flush=True)
    started = time.perf_counter()
    facts = itertools.islice(generate_facts(n, seed=0), done, None)
    with FactStore(url, limits=Limits(max_batch=PG_CHUNK)) as store:
        while done < n:
            count = min(PG_CHUNK, n - done)
            # The import path writes a chunk in a few statements; one fact at a time
            # (write_facts) is a round trip or more a fact, about 400 facts/s.
            store.import_jsonl(_records(itertools.islice(facts, count)))
            done += count
            _pg_record(url, n, done)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")
    print(f"built {name} in {time.perf_counter() - started:.0f} s", flush=True)
    return url
