"""Bytes per fact of a default store, by table and index, against a raw floor, in one run.

    python benchmarks/file_size.py                         # 10,000 facts
    python benchmarks/file_size.py --facts 10000,100000 --embedder hash

For each count a fresh store gets that many generated facts (the corpus of
``benchmarks/_corpus.py``: short sentences an agent would store, 30% keyed)
through ``FactStore.add``/``upsert`` in batches, with the default embedder
(the hashing one: words-only search, so no vectors are kept) unless
``--embedder`` names another. The WAL is checkpointed, then:

- ``file``: the database file's size and bytes per fact;
- ``text``: the bytes of the facts' own text (value, key, tags): what any
  store must hold;
- floor ``raw``: a file holding the same rows in a plain table with only
  those columns plus an FTS5 index over them (same tokenizer, external
  content): the least a words-searchable store can weigh;
- per object: the pages each table, index and FTS5 shadow table occupies
  (SQLite's ``dbstat``), in bytes per fact; objects under a byte a fact are
  added up in one line, so the lines add up to the file.

Sizes are exact: the same every run.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _corpus import generate_facts
from _inputs import embedder_spec, positive_ints
from _record import Record
from _timing import Load, load_average
from ctxslots import FactStore, Limits
from ctxslots.stores.sqlite import open_connection
from ctxslots.stores.sqlite._schema import FTS_TOKENIZE


def build(path: Path, n: int, embedder: str | None) -> int:
    """A store of n facts; returns the bytes of their text."""
    text = 0
    chunk = 10_000
    options = {} if embedder is None else {"embedder": embedder}
    with FactStore(path, limits=Limits(max_batch=chunk), **options) as store:
        facts = generate_facts(n, seed=0)
        done = 0
        while done < n:
            with store.batch():
                for fact in (next(facts) for _ in range(min(chunk, n - done))):
                    if fact.key:
                        store.upsert(fact.slot, fact.key, fact.value, scope=fact.scope,
                                     tags=fact.tags)
                    else:
                        store.add(fact.slot, fact.value, scope=fact.scope, tags=fact.tags)
                    text += len(fact.value.encode()) + len((fact.key or "").encode()) + sum(
                        len(t.encode()) for t in fact.tags)
                    done += 1
        store.wait_for_vectors()
    return text


def raw_floor(path: Path, n: int) -> int:
    """Bytes of a file with the same rows in a plain table and an FTS5 index over them."""
    conn = open_connection(path, migrate=False, load_vec=False)
    conn.execute("CREATE TABLE facts (id INTEGER PRIMARY KEY, key TEXT, value TEXT, tags TEXT)")
    conn.execute("CREATE VIRTUAL TABLE facts_fts USING fts5(key, value, tags, content='facts', "
                 f"content_rowid='id', tokenize='{FTS_TOKENIZE}')")
    rows = [(f.key, f.value, "\n".join(f.tags)) for f in generate_facts(n, seed=0)]
    with conn.write():
        conn.executemany("INSERT INTO facts (key, value, tags) VALUES (?, ?, ?)", rows)
        conn.execute("INSERT INTO facts_fts(facts_fts) VALUES ('rebuild')")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
    conn.close()
    return os.path.getsize(path)


def objects(path: Path) -> list[tuple[str, int]]:
    """Bytes of each table and index (dbstat), largest first."""
    conn = open_connection(path, migrate=False)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        return [(str(name), int(size)) for name, size in conn.execute(
            "SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC").fetchall()]
    finally:
        conn.close()


def breakdown(parts: list[tuple[str, int]], size: int, n: int) -> list[tuple[str, int]]:
    """The objects of at least a byte a fact, then the rest together, so the lines add up
    to the file."""
    shown = [(name, value) for name, value in parts if value / n >= 1]
    rest = size - sum(value for _, value in shown)
    return shown + ([("everything else", rest)] if rest else [])


def main() -> None:
    """Build each size, print its table, write the record."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", type=positive_ints, default="10000",
                        help="comma-separated fact counts")
    parser.add_argument("--embedder", type=embedder_spec, default=None,
                        help="an embedder spec (default: the store's default, hashing)")
    parser.add_argument("--json", type=Path, help="also write the figures here (JSON)")
    args = parser.parse_args()
    record = Record("file_size")
    started = load_average()
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.facts:
            path = Path(tmp) / f"store-{n}.db"
            text = build(path, n, args.embedder)
            size = os.path.getsize(path)
            parts = breakdown(objects(path), size, n)
            raw = raw_floor(Path(tmp) / f"raw-{n}.db", n)
            print(f"\n{n:,} facts, embedder {args.embedder or 'default (hash)'}")
            print(f"{'':<28} {'bytes':>12} {'per fact':>9}")
            print("-" * 51)
            for label, value in (("file", size), ("floor: raw table + FTS5", raw),
                                 ("text of the facts", text)):
                print(f"{label:<28} {value:>12,} {value / n:>9.0f}")
            print(f"file / floor: {size / raw:.2f}x; goal at most 800 bytes per fact "
                  f"({size / n:.0f})\n")
            for name, value in parts:
                print(f"  {name:<26} {value:>12,} {value / n:>9.0f}")
            record.figures[str(n)] = {"file": size, "floor": raw, "text": text,
                                      "objects": dict(parts)}
    record.add_load(Load.around(started))
    record.write(args.json)


if __name__ == "__main__":
    main()
