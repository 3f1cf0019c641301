"""Words-only recall@10 of the lexical leg, PostgreSQL (BM25, ts_rank_cd) against SQLite.

    python benchmarks/postgres_lexical.py ../shared/data/conversations-dev.json
    python benchmarks/postgres_lexical.py DATA --url postgresql://user@host/db

The measure of the data set's README: each turn of a conversation stored as
one memory (``"<speaker>: <text> [shares <caption>]"``) in a fresh store per
conversation, each question of categories 1-4 asked, recall@10 = the share of
its evidence turns among the first ten results, averaged over questions.

Both engines get the same words: ``query_tokens`` with the shipped policy
(stop words out), then the words in more than 10% of the facts left out, by
the engine's document counts (from 2,000 facts on). SQLite runs its FTS5
``bm25()`` query (``FactStore`` with no embedder and one clock, so no other
factor reorders the list); PostgreSQL runs ``PostgresBackend.lexical`` with
each ranking.
Without ``--url`` a private PostgreSQL is started from ``pgserver``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _engine import common_words, plan_of, search_filter
from _inputs import read_conversations
from _pg import reachable, server
from ctxslots import FactStore
from ctxslots.stores.owners import DEFAULT_AGENT
from ctxslots.stores.postgres import PostgresBackend
from ctxslots.stores.sanitize import DEFAULT_POLICY, query_tokens

K = 10
NOW = 1_800_000_000.0


def turns(sample: dict[str, Any]) -> list[tuple[str, str]]:
    """``(dia_id, memory text)`` of every turn of one conversation."""
    conv = sample["conversation"]
    out = []
    n = 1
    while f"session_{n}" in conv:
        for turn in conv[f"session_{n}"]:
            text = f"{turn['speaker']}: {turn['text']}"
            if turn.get("blip_caption"):
                text += f" [shares {turn['blip_caption']}]"
            out.append((turn["dia_id"], text))
        n += 1
    return out


def questions(sample: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """``(question, evidence ids)`` of categories 1-4."""
    return [(q["question"], list(q["evidence"])) for q in sample["qa"]
            if q.get("category") in (1, 2, 3, 4) and q.get("evidence")]


def recall(found: list[str], evidence: list[str]) -> float:
    """Share of ``evidence`` among the first K of ``found``."""
    return len(set(found[:K]) & set(evidence)) / len(set(evidence))


def _row(text: str) -> dict[str, Any]:
    return {"slot": "agent", "scope": "", "key": None, "value": text, "tags": "",
            "source": None, "confidence": 1.0, "score": 0.0, "created_at": NOW,
            "updated_at": NOW, "observed_at": NOW, "last_accessed": None, "access_count": 0,
            "expires_at": None, "superseded_by": None, "user_id": "", "agent_id": DEFAULT_AGENT}


def run_sqlite(samples: list[dict[str, Any]], folder: Path) -> tuple[list[float], float]:
    """Recall per question on SQLite, and the mean search time in ms."""
    scores: list[float] = []
    spent = 0.0
    for n, sample in enumerate(samples):
        with FactStore(folder / f"c{n}.db", embedder=False, clock=lambda: NOW) as store:
            ids: dict[int, str] = {}
            with store.batch():
                for dia, text in turns(sample):
                    ids[store.add("agent", text).id] = dia
            for question, evidence in questions(sample):
                started = time.perf_counter()
                hits = store.search(question, limit=K, track_access=False)
                spent += time.perf_counter() - started
                scores.append(recall([ids[h.fact.id] for h in hits], evidence))
    return scores, 1000 * spent / max(1, len(scores))


def run_postgres(samples: list[dict[str, Any]], fresh: Any, ranking: str
                 ) -> tuple[list[float], float]:
    """Recall per question on PostgreSQL with ``ranking``, and the mean search time in ms."""
    scores: list[float] = []
    spent = 0.0
    policy = DEFAULT_POLICY
    for n, sample in enumerate(samples):
        # The engine itself, with the ranking to compare (open_backend takes none).
        backend = PostgresBackend(fresh(f"lexical_{n}"), lexical_ranking=ranking)
        try:
            ids: dict[int, str] = {}
            with backend.transaction():
                for dia, text in turns(sample):
                    ids[backend.insert(_row(text))] = dia
            flt = search_filter(None, now=NOW)
            for question, evidence in questions(sample):
                started = time.perf_counter()
                words = common_words(backend, query_tokens(question, policy), policy)
                found = backend.lexical(plan_of(words), flt, K)
                spent += time.perf_counter() - started
                scores.append(recall([ids[int(c.row["id"])] for c in found], evidence))
        finally:
            backend.close()
    return scores, 1000 * spent / max(1, len(scores))


def main() -> None:
    """Print the recall table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", type=Path, help="conversations JSON (locomo10.json layout)")
    parser.add_argument("--url", help="a PostgreSQL server URL (default: a private pgserver)")
    args = parser.parse_args()
    samples = read_conversations(args.data)
    if args.url:
        reachable(args.url)  # before the SQLite run
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        scores, ms = run_sqlite(samples, Path(tmp))
        rows.append(("SQLite FTS5 bm25()", scores, ms))
    with server(args.url) as fresh:
        for ranking in ("bm25", "ts_rank_cd"):
            scores, ms = run_postgres(samples, fresh, ranking)
            rows.append((f"PostgreSQL {ranking}", scores, ms))
    print(f"{sum(len(questions(s)) for s in samples)} questions (categories 1-4), "
          f"{sum(len(turns(s)) for s in samples)} turns in {len(samples)} conversations\n")
    print("| engine, ranking | recall@10 | vs SQLite | mean search ms |")
    print("| --- | ---: | ---: | ---: |")
    base = sum(rows[0][1]) / len(rows[0][1])
    for name, scores, ms in rows:
        value = sum(scores) / len(scores)
        print(f"| {name} | {value:.3f} | {value - base:+.3f} | {ms:.2f} |")


if __name__ == "__main__":
    main()
