"""PromptAssembler.assemble against the raw work it cannot avoid.

    python benchmarks/assemble.py                       # 100k facts, 200 queries
    python benchmarks/assemble.py --facts 10000 --queries 100 --repeat 5

The shared store of ``--facts`` corpus facts (``benchmarks/_stores.py``, built once
under benchmarks/out/) is used. Then, in the same run, on the same file, message by
message, every row in turn (``benchmarks/_timing.py``: the order rotates), after one
untimed pass of every row over every message (each row's caches warm alike):

- ``assemble``: ``PromptAssembler(store).assemble(AssemblyRequest(query,
  scope=..., budget=2000))`` with the three memory contributors, asked in
  placement order with the room the sections before each left: a store search
  for each slot that still has room (sanitizing, candidate SQL, ranking, hits),
  rendering every item, counting pieces (cached), fitting, one exact count of
  the final text, the decisions and traces of every item, and counting the
  facts shown as accessed (a write).
- ``floor``: the three raw FTS5 queries with the same words the store searches
  (sanitized; stop words and words found in most facts left out), each with the
  store's filter join for its slot (``benchmarks/_floors.py``) reading every
  column of ten rows, plus one tiktoken count of the same final text (the floor
  of an assembly that shows ten facts a slot).
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

Each row's ratios to the two floors are the median of per-message ratios with
their 10th-90th percentiles. With ``--lexical-only`` the store is opened without
its vector leg. With ``--model NAME`` it runs on a copy of the store embedded
with that sentence-transformers model (``benchmarks/vector_search.py --model``
builds the same copy), so every search also embeds the message with the real
model.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _corpus import generate_queries
from _floors import FtsFloor
from _inputs import model_name, positive_int
from _record import Record
from _stores import corpus_store, vector_store
from _timing import Turns, in_turn
from ctxslots import AssembledPrompt, AssemblyRequest, FactStore, PromptAssembler
from ctxslots.contributors.memory import NO_ROOM
from ctxslots.tokens import DEFAULT_ENCODING, get_encoding

SCOPES = ("repo-alpha", "repo-beta")
BUDGET = 2000
#: The memory sections and the slot each searches (the user section sees global facts only).
SLOTS = {"user_memory": "user", "project_memory": "project", "agent_memory": "agent"}
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
        """The wrapped contributor's section, remembering ``request``."""
        self.asked = request
        return self.contributor.contribute(request)

    def record_shown(self, items: Any) -> None:
        """Count the shown items, as the wrapped contributor does."""
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
        """The section made earlier."""
        return self.section


def describe(args: argparse.Namespace) -> str:
    """The store the run used, in words."""
    if args.lexical_only:
        return "lexical only"
    if args.model:
        return f"lexical + vector legs, {args.model} embeddings"
    return "default store (hashing embedder: words only)"


def open_stores(args: argparse.Namespace) -> tuple[Path, dict[str, FactStore]]:
    """The store file and the stores opened on it: default, cached, cached with inline counts."""
    options: dict[str, Any] = {"embedder": False} if args.lexical_only else {}
    if args.model:
        from ctxslots.stores.embedders import embedder_from_spec

        options["embedder"] = embedder_from_spec(f"sentence-transformers:{args.model}")
        path = vector_store(args.facts, options["embedder"], args.model)
    else:
        path = corpus_store(args.facts)
    stores = {"plain": FactStore(path, **options),
              "cached": FactStore(path, lexical_cache=True, **options),
              "inline": FactStore(path, lexical_cache=True, access_writes="inline", **options)}
    stores["cached"].load_lexical_cache()
    stores["inline"].load_lexical_cache()
    if args.model:  # the hashing store searches by words only and never loads vectors
        for store in stores.values():
            store.load_vector_cache()
    return path, stores


def offered(prompt: AssembledPrompt) -> dict[str, int]:
    """Facts each memory slot's section offered (its profile left out)."""
    return {SLOTS[sec.name]: sum(1 for d in sec.items if not d.item.profile)
            for sec in prompt.sections if sec.name in SLOTS}


def floors(path: Path, words: list[list[str]], scopes: list[str], texts: list[str],
           offers: list[dict[str, int]]) -> dict[str, Callable[[int], object]]:
    """The two floors: ten rows a slot, and as many rows as each section offered."""
    floor = FtsFloor.open(path)
    encoding = get_encoding(DEFAULT_ENCODING)
    now = time.time()

    def slot_scope(slot: str, i: int) -> str | None:
        return None if slot == "user" else scopes[i]

    def ten(i: int) -> None:
        for slot in ("user", "project", "agent"):
            floor.rows(words[i], scope=slot_scope(slot, i), now=now, limit=10, slot=slot)
        len(encoding.encode_ordinary(texts[i]))

    def same_rows(i: int) -> None:
        for slot, count in offers[i].items():
            if count:
                floor.rows(words[i], scope=slot_scope(slot, i), now=now, limit=count, slot=slot)
        len(encoding.encode_ordinary(texts[i]))

    return {"floor": ten, "floor, same rows": same_rows}


def assemblies(stores: dict[str, FactStore], requests: list[AssemblyRequest]
               ) -> dict[str, Callable[[int], object]]:
    """The assembler rows: as shipped, cached, inline counts, no count, no store, contributors."""
    plain = PromptAssembler(stores["plain"])
    cached = PromptAssembler(stores["cached"])
    inline = PromptAssembler(stores["inline"])
    uncounted = PromptAssembler(stores["cached"],
                                contributors=[Uncounted(c) for c in cached.contributors or ()])
    contributors = list(plain.contributors or ())
    recording = [Recording(c) for c in contributors]
    recorder = PromptAssembler(stores["plain"], contributors=recording)
    asked = []  # the request each contributor got in an assembly (its room set)
    for r in requests:
        recorder.assemble(r)
        asked.append([rec.asked or r for rec in recording])
    no_store = [PromptAssembler(None, contributors=[Given(c, c.contribute(a))
                                                    for c, a in zip(contributors, asks)])
                for asks in asked]

    def searches(i: int) -> None:
        for contributor, request in zip(contributors, asked[i]):
            contributor.contribute(request)

    return {"assemble": lambda i: plain.assemble(requests[i]), "contributors": searches,
            "no store": lambda i: no_store[i].assemble(requests[i]),
            "assemble cached": lambda i: cached.assemble(requests[i]),
            "cached, counts inline": lambda i: inline.assemble(requests[i]),
            "cached, no count": lambda i: uncounted.assemble(requests[i])}


def print_table(turns: Turns) -> None:
    """p50, p95 and the per-message ratios to both floors."""
    print(f"{'':<21} {'p50':>9} {'p95':>9} {'/ floor (p10-p90)':>24} "
          f"{'/ same rows (p10-p90)':>24}")
    print("-" * 91)
    for name in ROWS:
        floor, same = turns.ratio(name, "floor"), turns.ratio(name, "floor, same rows")
        print(f"{name:<21} {turns.p(name):>7.2f}ms {turns.p(name, 95):>7.2f}ms "
              f"{floor.median:>6.2f}x ({floor.spread()}) {same.median:>6.2f}x ({same.spread()})")


def main() -> None:
    """Open the stores, time every row in turn, print the table, write the record."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--facts", type=positive_int, default=100_000)
    parser.add_argument("--queries", type=positive_int, default=200)
    parser.add_argument("--repeat", type=positive_int, default=3)
    parser.add_argument("--lexical-only", action="store_true",
                        help="open the store without its vector leg")
    parser.add_argument("--model", type=model_name,
                        help="a sentence-transformers model folder or package: run on a copy "
                        "of the store embedded with it")
    parser.add_argument("--json", type=Path, help="also write the figures here (JSON)")
    args = parser.parse_args()
    path, stores = open_stores(args)
    queries = generate_queries(args.queries, seed=1)
    scopes = [SCOPES[i % 2] for i in range(len(queries))]
    requests = [AssemblyRequest(q, scope=s, budget=BUDGET) for q, s in zip(queries, scopes)]
    prompts = [PromptAssembler(stores["plain"]).assemble(r) for r in requests]
    words = [stores["plain"].query_words(q) for q in queries]
    texts = [p.text for p in prompts]
    offers = [offered(p) for p in prompts]
    try:
        turns = in_turn({**assemblies(stores, requests),
                         **floors(path, words, scopes, texts, offers)},
                        len(requests), repeat=args.repeat, warm=len(requests))
    finally:
        for store in stores.values():
            store.close()
    encoding = get_encoding(DEFAULT_ENCODING)
    tokens = statistics.mean(len(encoding.encode_ordinary(t)) for t in texts)
    searched = statistics.mean(sum(1 for sec in p.sections if sec.name in SLOTS
                                   and sec.stopped != NO_ROOM) for p in prompts)
    print(f"\nctxslots assemble benchmark: {args.facts:,} facts, {len(queries)} messages "
          f"({sum(1 for w in words if not w)} with no word to search), repeat {args.repeat}, "
          f"budget {BUDGET}, {describe(args)}; {turns.load}")
    print(f"prompts: {tokens:.0f} tokens on average, "
          f"{statistics.mean(sum(o.values()) for o in offers):.0f} facts offered; "
          f"{searched:.2f} memory sections searched a prompt (the others had no room left)\n")
    print_table(turns)
    record = Record("assemble", figures={
        "facts": args.facts, "load": turns.load.short(),
        **{f"{name} p50": turns.p(name) for name in ROWS},
        **{f"{name} / floor": turns.ratio(name, "floor").as_dict() for name in ROWS},
        **{f"{name} / same rows": turns.ratio(name, "floor, same rows").as_dict()
           for name in ROWS}})
    record.add_load(turns.load)
    record.write(args.json)


if __name__ == "__main__":
    main()
