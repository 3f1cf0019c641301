"""Time one source tree's store: facts written per second and the p50 of a search.

    python benchmarks/_store_timing.py SRC LOCATION FACTS QUERIES

Run by ``stemmers.py --store SRC`` in a process of its own, so that two source
trees (before and after a change) are timed in the same run. ``SRC`` is the
``src`` folder whose ``ctxslots`` is imported; ``LOCATION`` a SQLite path or a
PostgreSQL URL of an empty database. Writes: ``FACTS`` facts of
``benchmarks/_corpus.py`` through the engine's ``insert`` in one transaction
(what an import does); searches: ``QUERIES`` generated queries through
``FactStore.search(limit=10)``. Prints one JSON line: writes/s, the search p50
in ms and the mean hits a search returned.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, sys.argv[1])
sys.path.insert(1, str(Path(__file__).resolve().parent))

from _corpus import generate_facts, generate_queries
from ctxslots import FactStore
from ctxslots.stores.engines import open_backend


def main() -> None:
    location, facts, queries = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    values = [f.value for f in generate_facts(facts)]
    now = time.time()
    rows = [{"slot": "user", "scope": "", "key": None, "value": v, "tags": "",
             "source": None, "confidence": 1.0, "score": 0.0, "created_at": now,
             "updated_at": now, "observed_at": now, "last_accessed": None, "access_count": 0,
             "expires_at": None, "superseded_by": None, "context": None, "user_id": "default",
             "agent_id": ""} for v in values]
    FactStore(location, embedder=False).close()  # made and migrated by this tree
    backend = open_backend(location, create=False, vector_cache=False)
    try:
        start = time.perf_counter()
        with backend.transaction():
            for row in rows:
                backend.insert(row)  # type: ignore[arg-type]
        rate = len(rows) / (time.perf_counter() - start)
    finally:
        backend.close()
    with FactStore(location, embedder=False) as store:
        texts = list(generate_queries(queries))
        for text in texts[:20]:  # warm the caches
            store.search(text, limit=10, track_access=False)
        times, hits = [], 0
        for text in texts:
            start = time.perf_counter()
            hits += len(store.search(text, limit=10, track_access=False))
            times.append(time.perf_counter() - start)
    print(json.dumps({"rate": rate, "p50_ms": statistics.median(times) * 1000,
                      "hits": hits / len(texts)}))


if __name__ == "__main__":
    main()
