"""Assembly with a day's memories under one heading, against a date on every line.

    python benchmarks/grouped_dates.py                     # 3,000 facts, 60 messages
    python benchmarks/grouped_dates.py --facts 10000 --queries 100 --repeat 3

A store of ``--facts`` facts in the ``user`` slot, each said on one of the 40
days before the store's clock (so every line has a date to show), each a dozen
words drawn from a small vocabulary (so every message matches hundreds). Then,
message by message, the two rows in turn (``benchmarks/_timing.py``: the order
rotates; the first calls untimed):

- ``grouped``: ``PromptAssembler(store).assemble(AssemblyRequest(message,
  budget=2000))`` with the default user section (``group_dates=True``),
- ``per line``: the same with ``UserMemoryContributor(group_dates=False)``: a
  date at the end of each line, as before grouping (the floor: the same search
  and the same fitting, minus the grouping).

It prints each row's p50, the grouped row's per-message ratio to the other with
its spread, the lines each kept at the median and the load average. Neither row
counts the facts shown as accessed (``record_shown=False``), so every round
reads the same store.
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _inputs import positive_int
from _timing import in_turn
from ctxslots import AssemblyRequest, FactStore, PromptAssembler, UserMemoryContributor

NOW = 1_700_000_000.0
DAY = 86_400.0
#: The days a fact may have been said on, before the store's clock.
DAYS = 40
WORDS = ("deploy", "friday", "billing", "tests", "flaky", "cache", "editor", "helix", "shop",
         "release", "freeze", "migration", "rollback", "owner", "python", "docs", "nate",
         "joanna", "tortoise", "movie")
BUDGET = 2000


def _fill(store: FactStore, facts: int, rng: random.Random) -> None:
    with store.batch():
        for n in range(facts):
            text = " ".join(rng.choice(WORDS) for _ in range(12)) + f" item {n}."
            store.add("user", text, observed_at=NOW - DAY * (1 + rng.randrange(DAYS)))


def main() -> int:
    """Run the benchmark and print its table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=positive_int, default=3000)
    parser.add_argument("--queries", type=positive_int, default=60)
    parser.add_argument("--repeat", type=positive_int, default=2)
    args = parser.parse_args()
    rng = random.Random(3)
    with tempfile.TemporaryDirectory() as folder:
        store = FactStore(Path(folder) / "dated.db", clock=lambda: NOW)
        try:
            _fill(store, args.facts, rng)
            messages = [" ".join(rng.choice(WORDS) for _ in range(4))
                        for _ in range(args.queries)]
            assemblers = {
                "grouped": PromptAssembler(store),
                "per line": PromptAssembler(store, contributors=[
                    UserMemoryContributor(store, group_dates=False)]),
            }
            kept: dict[str, list[int]] = {name: [] for name in assemblers}

            def side(name: str) -> Callable[[int], None]:
                assembler = assemblers[name]

                def run(i: int) -> None:
                    prompt = assembler.assemble(AssemblyRequest(messages[i], budget=BUDGET),
                                                record_shown=False)
                    kept[name].append(len(prompt.kept))
                return run

            turns = in_turn({name: side(name) for name in assemblers}, args.queries,
                            repeat=args.repeat)
        finally:
            store.close()
    print(f"{args.facts} facts said over {DAYS} days, {args.queries} messages x {args.repeat}, "
          f"budget {BUDGET}; {turns.load}")
    print(f"{'row':10s} | {'p50 ms':>7s} | {'p95 ms':>7s} | lines kept (median)")
    for name in assemblers:
        print(f"{name:10s} | {turns.p(name):7.2f} | {turns.p(name, 95):7.2f} | "
              f"{statistics.median(kept[name]):.0f}")
    print(f"grouped / per line, per message: {turns.ratio('grouped', 'per line')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
