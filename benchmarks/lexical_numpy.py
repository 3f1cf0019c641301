"""How fast BM25 over in-memory postings is, against the store's FTS5 query (a measurement, not a feature).

    python benchmarks/lexical_numpy.py             # 100k facts
    python benchmarks/lexical_numpy.py --size 10000

Loads every fact of the store benchmark's file, tokenizes it with the index's own FTS5
tokenizer (porter unicode61), keeps term postings and row lengths in numpy arrays, and
scores the same 200 queries with FTS5's BM25 formula (k1 1.2, b 0.75, every column
weighted 1), scope filter included. The floor is the FTS5 query with the same words and
the same scope join (top 50). Prints the load time, p50/p95 of both, and the share of
FTS5's top 10 the in-memory ranking returns (ties among template-generated facts break
differently). This is the measurement behind the plan for an in-memory lexical leg.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

import apsw
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _corpus import generate_queries
from ctxslots import FactStore
from ctxslots.stores.sanitize import to_match
from ctxslots.stores.sqlite import open_connection
from ctxslots.stores.sqlite._schema import FTS_TOKENIZE
from store_search import SCOPES, store_file

K1, B, POOL = 1.2, 0.75, 50


class Postings:
    """Every live fact's stems, as per-term arrays of (row, count), with row lengths."""

    def __init__(self, store: FactStore) -> None:
        conn = open_connection(store.path, migrate=False)
        self.tokenize = conn.raw.fts5_tokenizer(FTS_TOKENIZE.split()[0], FTS_TOKENIZE.split()[1:])
        rows = conn.execute("SELECT id, scope, key, value, tags FROM facts ORDER BY id").fetchall()
        self.ids = np.array([r[0] for r in rows], np.int64)
        self.scope_codes: dict[str, int] = {}
        self.scope = np.array([self.scope_codes.setdefault(r[1], len(self.scope_codes))
                               for r in rows], np.int32)
        lengths = np.zeros(len(rows), np.float32)
        building: dict[str, tuple[list[int], list[int]]] = {}
        for row_no, (_, _, key, value, tags) in enumerate(rows):
            counts: dict[str, int] = {}
            for column in (key, value, tags):
                for stem in self.stems(column or "", apsw.FTS5_TOKENIZE_DOCUMENT):
                    counts[stem] = counts.get(stem, 0) + 1
            lengths[row_no] = sum(counts.values())
            for stem, count in counts.items():
                rows_of, counts_of = building.setdefault(stem, ([], []))
                rows_of.append(row_no)
                counts_of.append(count)
        self.postings = {stem: (np.array(r, np.int32), np.array(c, np.float32))
                         for stem, (r, c) in building.items()}
        self.norm = K1 * (1 - B + B * lengths / lengths.mean())

    def stems(self, text: str, reason: int) -> list[str]:
        return [str(t[2]) for t in self.tokenize(text.encode("utf-8"), reason, None)]

    def search(self, tokens: list[str], scope: str) -> np.ndarray:
        """Fact ids of the best ``POOL`` rows by BM25, best first."""
        total = len(self.ids)
        scores = np.zeros(total, np.float32)
        for stem in {s for t in tokens for s in self.stems(t, apsw.FTS5_TOKENIZE_QUERY)}:
            if stem not in self.postings:
                continue
            rows, counts = self.postings[stem]
            idf = max(1e-6, math.log((total - len(rows) + 0.5) / (len(rows) + 0.5)))
            scores[rows] += idf * counts * (K1 + 1) / (counts + self.norm[rows])
        visible = (self.scope == self.scope_codes.get(scope, -1)) | \
            (self.scope == self.scope_codes.get("", -2))
        scores[~visible] = 0
        hit = np.flatnonzero(scores)
        if not len(hit):
            return hit
        take = min(POOL, len(hit))
        top = hit[np.argpartition(-scores[hit], take - 1)[:take]]
        return self.ids[top[np.argsort(-scores[top], kind="stable")]]


def timed(fn, work) -> list[float]:
    for args in work[:20]:
        fn(*args)
    out = []
    for args in work:
        start = time.perf_counter()
        fn(*args)
        out.append((time.perf_counter() - start) * 1000)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=100_000)
    args = parser.parse_args()
    path, _ = store_file(args.size)
    with FactStore(path) as store:
        start = time.perf_counter()
        postings = Postings(store)
        load = time.perf_counter() - start
        conn = open_connection(store.path, migrate=False)
        work = [(store.query_words(q), SCOPES[i % 2])
                for i, q in enumerate(generate_queries(200, seed=1))]

        def fts(tokens: list[str], scope: str) -> list[int]:
            match = to_match(tokens)
            if not match:
                return []
            return [r[0] for r in conn.execute(
                "SELECT f.id FROM facts_fts JOIN facts AS f ON f.id = facts_fts.rowid "
                "WHERE facts_fts MATCH ? AND f.scope IN (?, '') ORDER BY facts_fts.rank LIMIT ?",
                (match, scope, POOL)).fetchall()]

        print(f"{args.size:,} facts: postings of {len(postings.postings):,} stems loaded in {load:.1f} s")
        for name, fn in (("numpy BM25", postings.search), ("FTS5 floor", fts)):
            ms = timed(fn, work)
            print(f"{name:>10}: p50 {statistics.median(ms):6.2f} ms   "
                  f"p95 {statistics.quantiles(ms, n=20)[18]:6.2f} ms")
        shared = [len(set(fts(*a)[:10]) & set(postings.search(*a)[:10].tolist())) / len(fts(*a)[:10])
                  for a in work if fts(*a)]
        print(f"share of the FTS5 top 10 also in the numpy top 10: {statistics.mean(shared):.3f}")


if __name__ == "__main__":
    main()
