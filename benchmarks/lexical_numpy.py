"""How fast BM25 over in-memory postings is, against the store's FTS5 query (a measurement, not a feature).

    python benchmarks/lexical_numpy.py             # 100k facts
    python benchmarks/lexical_numpy.py --size 10000

Loads every fact of the store benchmark's file, stems it as the index does
(``ctxslots.stores.stemming``), keeps term postings and row lengths in numpy arrays, and
scores the same 200 queries with FTS5's BM25 formula (k1 1.2, b 0.75, every column
weighted 1), scope filter included. The floor is the FTS5 query with the same words and
the same filter join (top 50, ``benchmarks/_floors.py``), the two timed message by message
in turn. Prints the load time, p50/p95 of both, the per-message ratio (median, p10-p90) and
the share of FTS5's top 10 the in-memory ranking returns (ties among template-generated
facts break differently; the context column, which FTS5 weighs 0.5, is left out here).
This is the measurement behind the plan for an in-memory lexical leg.
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
from _floors import FtsFloor
from _inputs import positive_int
from _stores import corpus_store
from _timing import in_turn
from ctxslots import FactStore
from ctxslots.stores.stemming import stem_words, stemmed_query

SCOPES = ("repo-alpha", "repo-beta")

K1, B, POOL = 1.2, 0.75, 50


class Postings:
    """Every live fact's stems, as per-term arrays of (row, count), with row lengths."""

    def __init__(self, path: Path) -> None:
        conn = apsw.Connection(str(path))
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
                for stem in stem_words([column or ""]):
                    counts[stem] = counts.get(stem, 0) + 1
            lengths[row_no] = sum(counts.values())
            for stem, count in counts.items():
                rows_of, counts_of = building.setdefault(stem, ([], []))
                rows_of.append(row_no)
                counts_of.append(count)
        self.postings = {stem: (np.array(r, np.int32), np.array(c, np.float32))
                         for stem, (r, c) in building.items()}
        self.norm = K1 * (1 - B + B * lengths / lengths.mean())

    def search(self, tokens: list[str], scope: str) -> np.ndarray:
        """Fact ids of the best ``POOL`` rows by BM25, best first."""
        total = len(self.ids)
        scores = np.zeros(total, np.float32)
        for stem in stemmed_query(tokens):
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


def main() -> None:
    """Load the postings, time both in turn, compare their top tens."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=positive_int, default=100_000)
    parser.add_argument("--repeat", type=positive_int, default=1)
    args = parser.parse_args()
    path = corpus_store(args.size)
    with FactStore(path) as store:
        start = time.perf_counter()
        postings = Postings(path)
        load = time.perf_counter() - start
        floor = FtsFloor.open(path)
        messages = generate_queries(200, seed=1)
        work = [(store.query_words(q), SCOPES[i % 2]) for i, q in enumerate(messages)]
        work = [(words, scope) for words, scope in work if words]
        now = time.time()

        def fts(i: int) -> list[int]:
            words, scope = work[i]
            return floor.ids(words, scope=scope, now=now, limit=POOL)

        print(f"{args.size:,} facts: postings of {len(postings.postings):,} stems loaded in "
              f"{load:.1f} s")
        turns = in_turn({"numpy BM25": lambda i: postings.search(*work[i]), "FTS5 floor": fts},
                        len(work), repeat=args.repeat)
        print(turns.load)
        for name in turns.times:
            print(f"{name:>10}: p50 {turns.p(name):6.2f} ms   p95 {turns.p(name, 95):6.2f} ms")
        print(f"numpy BM25 / FTS5 floor: {turns.ratio('numpy BM25', 'FTS5 floor')}")
        shared = [len(set(fts(i)[:10]) & set(postings.search(*work[i])[:10].tolist()))
                  / len(fts(i)[:10]) for i in range(len(work)) if fts(i)]
        print(f"share of the FTS5 top 10 also in the numpy top 10: {statistics.mean(shared):.3f}")
        floor.close()


if __name__ == "__main__":
    main()
