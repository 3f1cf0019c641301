"""SQL statements a search and an assembly run on SQLite, counted by apsw's trace.

    python benchmarks/sql_statements.py                 # 5,000 facts, 25 queries
    python benchmarks/sql_statements.py --facts 20000 --queries 50 --by-kind

A store of ``--facts`` generated facts (benchmarks/_corpus.py) is built in a
temporary folder; after five warm-up queries, each query is searched
(``store.search(query, scope=...)``) and assembled (budgets 2,000 and 8,000 tokens)
with every statement the store's connections run counted, on the words-only default
and with the hashing embedder's vector leg fused in. The floor is what the same work
needs at the least, written by hand: one FTS5 ``MATCH`` joined to its rows per slot
searched (one for a search), and one write of the access counts in its own
transaction (``BEGIN``, ``UPDATE``, ``COMMIT``). The table gives the median and the
range of each count and the ratio of the median to the floor; ``--by-kind`` lists what
the statements of the last query were.

Counts, not times: they are the same on a busy machine as on a quiet one.
"""

from __future__ import annotations

import argparse
import collections
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import apsw

from _corpus import generate_facts, generate_queries
from _inputs import positive_int
from ctxslots import AssemblyRequest, FactStore, PromptAssembler, RankingPolicy

#: Short names of statements by a part of their text, for ``--by-kind``.
KINDS = (("coalesce(max(id)", "growth check"), ("MATCH", "match"),
         ("NOT INDEXED WHERE id IN", "rows by id"), ("FROM fact_links", "links"),
         ("superseded_by IS NOT NULL", "near-duplicates"), ("UNION ALL", "profile"),
         ("ORDER BY score DESC", "profile"), ("BEGIN", "begin"), ("COMMIT", "commit"),
         ("UPDATE facts SET access_count", "access counts"), ("vec_", "vectors"),
         ("min(seq)", "log bounds"), ("max(seq)", "log bounds"),
         ("facts_vocab", "document counts"), ("store_meta", "settings"))


def kind(sql: str) -> str:
    """A short name for ``sql``."""
    return next((name for part, name in KINDS if part in sql), " ".join(sql.split())[:60])


class Counter:
    """Every statement run by connections opened while it is installed."""

    def __init__(self) -> None:
        self.seen: list[str] = []
        apsw.connection_hooks.append(self._hook)

    def _hook(self, conn: apsw.Connection) -> None:
        def trace(_cursor: Any, sql: str, _bindings: Any) -> bool:
            self.seen.append(sql)
            return True
        conn.exec_trace = trace

    def take(self) -> list[str]:
        """The statements since the last call."""
        out, self.seen = self.seen, []
        return out


def fill(path: Path, n: int) -> None:
    """``n`` generated facts in a new store at ``path``."""
    with FactStore(path, embedder=False) as store, store.batch():
        for f in generate_facts(n, seed=0):
            owners: dict[str, Any] = {} if f.slot == "user" else {"scope": f.scope}
            if f.key:
                store.upsert(f.slot, f.key, f.value, tags=f.tags, **owners)
            else:
                store.add(f.slot, f.value, tags=f.tags, **owners)


def measure(path: Path, options: dict[str, Any], queries: list[str], counter: Counter
            ) -> tuple[dict[str, list[int]], list[list[str]]]:
    """Statements per search and per assembly, query by query, and the last query's."""
    counts: dict[str, list[int]] = collections.defaultdict(list)
    last: list[list[str]] = []
    with FactStore(path, **options) as store:
        assembler = PromptAssembler(store)
        for i, query in enumerate(queries):
            counter.take()
            store.search(query, scope="repo-alpha")
            searched = counter.take()
            assembled: dict[int, list[str]] = {}
            for budget in (2000, 8000):
                assembler.assemble(AssemblyRequest(query, scope="repo-alpha", budget=budget))
                assembled[budget] = counter.take()
            if i < 5:
                continue  # warm-up: the vocabulary's size, the embedder binding
            counts["search"].append(len(searched))
            counts["assemble, 2,000 tokens"].append(len(assembled[2000]))
            counts["assemble, 8,000 tokens"].append(len(assembled[8000]))
            counts["MATCH per assembly (2,000)"].append(
                sum("MATCH" in s for s in assembled[2000]))
            last = [searched, assembled[2000]]
    return counts, last


#: The least each row can cost, by hand: a MATCH (per slot searched) and the access write.
FLOOR = {"search": 1 + 3, "assemble, 2,000 tokens": 3 + 3, "assemble, 8,000 tokens": 3 + 3,
         "MATCH per assembly (2,000)": 3}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", type=positive_int, default=5000)
    parser.add_argument("--queries", type=positive_int, default=25)
    parser.add_argument("--by-kind", action="store_true",
                        help="List the statements of the last query by kind.")
    args = parser.parse_args()
    queries = generate_queries(args.queries + 5, seed=4)
    counter = Counter()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "statements.db"
        fill(path, args.facts)
        print(f"{args.facts:,} facts, {args.queries} queries (after 5 warm-up), SQLite")
        print(f"{'setting':<12} {'work':<28} {'median':>6} {'range':>9} {'floor':>5} "
              f"{'ratio':>6}")
        for label, options in (("words", {"embedder": False}),
                               ("hash fused", {"ranking": RankingPolicy(vector_weight=1.0)})):
            counts, last = measure(path, options, queries, counter)
            for work, values in counts.items():
                median = statistics.median(values)
                print(f"{label:<12} {work:<28} {median:>6g} {min(values):>4}-{max(values):<4} "
                      f"{FLOOR[work]:>5} {median / FLOOR[work]:>6.2f}")
            if args.by_kind:
                for work, statements in zip(("search", "assembly"), last):
                    print(f"  last {work}:", ", ".join(
                        f"{name} x{n}" if n > 1 else name
                        for name, n in collections.Counter(kind(s) for s in statements).items()))


if __name__ == "__main__":
    main()
