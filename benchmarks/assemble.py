"""PromptAssembler.assemble against the raw work it cannot avoid.

    python benchmarks/assemble.py                       # 100k facts, 200 queries
    python benchmarks/assemble.py --facts 10000 --queries 100 --repeat 5

A store of ``--facts`` facts is built once under benchmarks/out/ and reused. Then,
in the same run, on the same file, query by query:

- ``assemble``: ``PromptAssembler(store).assemble(AssemblyRequest(query,
  scope=..., budget=2000))`` with the three memory contributors, asked in
  placement order with the room the sections before each left: a store search
  for each slot that still has room (sanitizing, candidate SQL, ranking, hits),
  rendering every item, counting pieces (cached), fitting, one exact count of
  the final text, the decisions and traces of every item, and counting the
  facts shown as accessed (a write).
- ``floor``: the three raw FTS5 queries with the same words the store searches
  (sanitized; stop words and words found in most facts left out), each
  ``SELECT ... FROM facts_fts JOIN facts ... WHERE facts_fts MATCH ? AND slot = ?
  AND scope IN (?, '') ... ORDER BY rank LIMIT 10``, plus one tiktoken count of
  the same final text (the floor of an assembly that shows ten facts a slot).
- ``floor, same rows``: the same queries reading every column of as many rows
  as the assembled prompt's section offered from that slot (the memory
  sections fill the budget: about 80 facts in a 2,000-token prompt; a slot
  whose section was not searched, for lack of room, is not read), plus the
  same count: the raw reads the prompt is chosen from.
- ``contributors``: the three contributors' ``contribute`` calls alone, each
  with the request ``assemble`` gave it (its room included),
- ``assemble cached``: ``assemble`` over a store opened with
  ``lexical_cache=True`` (the words scored from in-memory postings; its load
  happens before timing), which writes the access counts of the facts shown
  on a background thread (``access_writes="auto"``),
- ``cached, counts inline``: the same with ``access_writes="inline"``: the
  counts written before ``assemble`` returns,
- ``cached, no count``: ``assemble cached`` with contributors that do not
  count the facts shown as accessed (no ``record_shown``), to show what that
  write costs, and
- ``no store``: ``assemble`` over contributors that hand back the same three
  sections ready-made (rendering, counting, fitting, reports), to show how much
  of ``assemble`` is the store and how much the assembler.

With ``--lexical-only`` the store is opened without its vector leg. With
``--model NAME`` it runs on a copy of the store re-embedded with that
sentence-transformers model (``benchmarks/vector_search.py --model`` builds the
same copy), so every search also embeds the message with the real model.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _corpus import generate_facts, generate_queries
from ctxslots import AssemblyRequest, FactStore, PromptAssembler
from ctxslots.contributors.memory import NO_ROOM
from ctxslots.stores.sanitize import to_match
from ctxslots.stores.sqlite import open_connection
from ctxslots.tokens import DEFAULT_ENCODING, get_encoding

OUT = Path(__file__).resolve().parent / "out"
SCOPES = ("repo-alpha", "repo-beta")
BUDGET = 2000
FLOOR_SQL = (
    "SELECT f.id, facts_fts.rank FROM facts_fts JOIN facts AS f ON f.id = facts_fts.rowid "
    "WHERE facts_fts MATCH ? AND f.slot = ? AND f.scope IN (?, '') "
    "ORDER BY facts_fts.rank LIMIT 10"
)
ROWS_SQL = (
    "SELECT f.*, facts_fts.rank FROM facts_fts JOIN facts AS f ON f.id = facts_fts.rowid "
    "WHERE facts_fts MATCH ? AND f.slot = ? AND f.scope IN (?, '') "
    "ORDER BY facts_fts.rank LIMIT ?"
)
SLOTS = {"user_memory": "user", "project_memory": "project", "agent_memory": "agent"}


def _corpus_signature(n: int) -> str:
    facts = generate_facts(n, seed=0)
    head = [next(facts) for _ in range(min(n, 200))]
    return hashlib.sha256(repr((n, head)).encode()).hexdigest()


ROWS = ("assemble", "floor", "floor, same rows", "contributors", "no store", "assemble cached",
        "cached, counts inline", "cached, no count")


class Recording:
    """A contributor that remembers the last request it was asked with (its room)."""

    def __init__(self, contributor: Any) -> None:
        self.contributor = contributor
        self.name, self.priority, self.sticky = (
            contributor.name, contributor.priority, contributor.sticky)
        self.asked: AssemblyRequest | None = None

    def contribute(self, request: AssemblyRequest) -> Any:
        self.asked = request
        return self.contributor.contribute(request)

    def record_shown(self, items: Any) -> None:
        self.contributor.record_shown(items)


class Uncounted:
    """A contributor that offers what another offers but counts no access."""

    def __init__(self, contributor: Any) -> None:
        self.name, self.priority, self.sticky = (
            contributor.name, contributor.priority, contributor.sticky)
        self.contribute = contributor.contribute


class Given:
    """A contributor that hands back a section made earlier (same name, priority, sticky)."""

    def __init__(self, contributor: Any, section: Any) -> None:
        self.name, self.priority, self.sticky = (
            contributor.name, contributor.priority, contributor.sticky)
        self.section = section

    def contribute(self, request: AssemblyRequest) -> Any:
        return self.section


def store_file(n: int) -> Path:
    """The cached store of n facts (built with the default embedder when missing)."""
    OUT.mkdir(exist_ok=True)
    path = OUT / f"assemble_{n}.db"
    stamp = OUT / f"assemble_{n}.corpus"
    signature = _corpus_signature(n)
    if path.exists() and stamp.exists() and stamp.read_text() == signature:
        return path
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    print(f"building {path.name} ({n:,} facts)...", flush=True)
    start = time.perf_counter()
    with FactStore(path) as store:
        facts = generate_facts(n, seed=0)
        done = 0
        while done < n:
            with store.batch():
                for fact in (next(facts) for _ in range(min(10_000, n - done))):
                    if fact.key:
                        store.upsert(fact.slot, fact.key, fact.value, scope=fact.scope,
                                     tags=fact.tags)
                    else:
                        store.add(fact.slot, fact.value, scope=fact.scope, tags=fact.tags)
                    done += 1
    stamp.write_text(signature)
    print(f"built in {time.perf_counter() - start:.0f} s", flush=True)
    return path


def pct(values: list[float], q: int) -> float:
    """The q-th percentile (inclusive method)."""
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def describe(args: argparse.Namespace) -> str:
    """The store the run used, in words."""
    if args.lexical_only:
        return "lexical only"
    if args.model:
        return f"lexical + vector legs, {args.model} embeddings"
    return "default store (lexical + vector legs, hashing embedder: words only)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--lexical-only", action="store_true",
                        help="open the store without its vector leg")
    parser.add_argument("--model", help="a sentence-transformers model folder or package: "
                        "run on a copy of the store re-embedded with it")
    args = parser.parse_args()

    options: dict[str, Any] = {"embedder": False} if args.lexical_only else {}
    if args.model:
        from ctxslots.stores.embedders import embedder_from_spec
        from vector_search import model_store

        options["embedder"] = embedder_from_spec(f"sentence-transformers:{args.model}")
        path = model_store(args.facts, options["embedder"], args.model)
    else:
        path = store_file(args.facts)
    store = FactStore(path, **options)
    cached_store = FactStore(path, lexical_cache=True, **options)
    cached = PromptAssembler(cached_store)
    inline_store = FactStore(path, lexical_cache=True, access_writes="inline", **options)
    inline = PromptAssembler(inline_store)
    uncounted = PromptAssembler(
        cached_store, contributors=[Uncounted(c) for c in cached.contributors or ()])
    conn = open_connection(path)
    assembler = PromptAssembler(store)
    recording = [Recording(c) for c in assembler.contributors or ()]
    recorder = PromptAssembler(store, contributors=recording)
    encoding = get_encoding(DEFAULT_ENCODING)
    queries = generate_queries(args.queries, seed=1)
    work = [(q, SCOPES[i % 2]) for i, q in enumerate(queries)]
    requests = [AssemblyRequest(q, scope=s, budget=BUDGET) for q, s in work]
    cached_store.load_lexical_cache()
    inline_store.load_lexical_cache()
    if args.model:  # the hashing store searches by words only and never loads vectors
        store.load_vector_cache()
        cached_store.load_vector_cache()
        inline_store.load_vector_cache()
    prompts = [assembler.assemble(r) for r in requests]  # also warms caches
    texts = [p.text for p in prompts]
    offered = [{SLOTS[sec.name]: sum(1 for d in sec.items if not d.item.profile)
                for sec in p.sections if sec.name in SLOTS} for p in prompts]
    for r in requests:
        cached.assemble(r)
        inline.assemble(r)
    sanitized = [to_match(store.query_words(q)) for q, _ in work]  # the store's own query

    def floor(i: int) -> None:
        match, scope = sanitized[i], work[i][1]
        if match:
            conn.execute(FLOOR_SQL, (match, "user", "")).fetchall()
            conn.execute(FLOOR_SQL, (match, "project", scope)).fetchall()
            conn.execute(FLOOR_SQL, (match, "agent", scope)).fetchall()
        len(encoding.encode_ordinary(texts[i]))

    def same_rows(i: int) -> None:
        match, scope = sanitized[i], work[i][1]
        if match:
            for slot, where in (("user", ""), ("project", scope), ("agent", scope)):
                if offered[i].get(slot):
                    conn.execute(ROWS_SQL, (match, slot, where, offered[i][slot])).fetchall()
        len(encoding.encode_ordinary(texts[i]))

    contributors = list(assembler.contributors or ())
    asked = []  # the request each contributor got in an assembly (its room set)
    for r in requests:
        recorder.assemble(r)
        asked.append([rec.asked or r for rec in recording])

    def searches(i: int) -> None:
        for contributor, request in zip(contributors, asked[i]):
            contributor.contribute(request)

    ready = [[Given(c, c.contribute(a)) for c, a in zip(contributors, asks)] for asks in asked]
    no_store = [PromptAssembler(None, contributors=given) for given in ready]
    for no_store_assembler, r in zip(no_store, requests):  # warm, as the others are
        no_store_assembler.assemble(r)

    timings: dict[str, list[float]] = {name: [] for name in ROWS}
    runs = {"assemble": lambda i: assembler.assemble(requests[i]), "floor": floor,
            "floor, same rows": same_rows,
            "contributors": searches, "no store": lambda i: no_store[i].assemble(requests[i]),
            "assemble cached": lambda i: cached.assemble(requests[i]),
            "cached, counts inline": lambda i: inline.assemble(requests[i]),
            "cached, no count": lambda i: uncounted.assemble(requests[i])}
    names = list(runs)
    for _ in range(args.repeat):
        for i in range(len(requests)):
            for name in names[i % len(names):] + names[: i % len(names)]:  # no run always goes first
                start = time.perf_counter_ns()
                runs[name](i)
                timings[name].append((time.perf_counter_ns() - start) / 1e6)
    kept = statistics.mean(len(assembler.assemble(r).kept) for r in requests[:20])
    store.close()
    cached_store.close()
    inline_store.close()
    conn.close()

    tokens = statistics.mean(len(encoding.encode_ordinary(t)) for t in texts)
    empty = sum(1 for m in sanitized if not m)
    print(f"\nctxslots assemble benchmark: {args.facts:,} facts, {len(queries)} queries "
          f"({empty} sanitize to nothing), repeat {args.repeat}, budget {BUDGET}, "
          f"{describe(args)}; "
          f"python {sys.version.split()[0]}, {os.cpu_count()} cpus")
    searched = statistics.mean(sum(1 for sec in p.sections if sec.name in SLOTS
                                   and sec.stopped != NO_ROOM) for p in prompts)
    print(f"prompts: {tokens:.0f} tokens and {kept:.1f} kept items on average; "
          f"{searched:.2f} memory sections searched a prompt (the others had no room left)\n")
    f50, f95 = pct(timings["floor"], 50), pct(timings["floor"], 95)
    r50 = pct(timings["floor, same rows"], 50)
    print(f"{'':<21} {'p50':>9} {'p95':>9} {'p50 / floor':>12} {'/ same rows':>12}")
    print("-" * 67)
    for name in ROWS:
        p50, p95 = pct(timings[name], 50), pct(timings[name], 95)
        print(f"{name:<21} {p50:>7.2f}ms {p95:>7.2f}ms {p50 / f50:>11.2f}x {p50 / r50:>11.2f}x")
    a50, c50 = pct(timings["assemble"], 50), pct(timings["assemble cached"], 50)
    offers = statistics.mean(sum(o.values()) for o in offered)
    print(f"\n{offers:.0f} facts offered a prompt on average. goals: assemble p50 within 1.2x "
          f"of its floor ({a50 / f50:.2f}x; {a50 / r50:.2f}x of the same-rows floor) and under "
          f"5 ms warm ({a50:.2f} ms; {c50:.2f} ms with lexical_cache=True); floor p95 "
          f"{f95:.2f} ms")


if __name__ == "__main__":
    main()
