"""Search and assembly latency of two source trees, warm and cold, taking turns.

    python benchmarks/versions_latency.py --before /path/to/other/checkout/src
    python benchmarks/versions_latency.py --before OLD/src --after NEW/src --rounds 8

Each tree builds its own store of ``--facts`` generated facts (benchmarks/_corpus.py)
with the default options, in a temporary folder. Then, round after round, each tree
runs in a fresh process (the order flips every round, so neither always goes first):

- **cold search**: open the store and run one search, in a new process;
- **cold assembly**: open the store and assemble one prompt (2,000 tokens), in
  another new process;
- **warm search** and **warm assembly**: in the first process, after the cold
  search, the median over ``--queries`` messages.

Each is given in wall-clock time and in the process's CPU time (a cold measure's CPU
time counts from the process's start, imports included): on a busy machine the CPU
time is the steadier of the two.

The table gives, per measure, the median of each tree over the rounds and the median
of the per-round ratios (this tree over ``--before``) with their range; a ratio under
1 means this tree is faster. The load average is printed beside it: on a shared
machine read the ratios, not the times.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from _inputs import positive_int

HERE = Path(__file__).resolve().parent
THIS_SRC = HERE.parent / "src"
#: Facts written in one transaction while building (a batch holds at most 10,000).
BATCH = 5000
MEASURES = ("cold search", "cold assembly", "warm search", "warm assembly")
#: Each measure in wall-clock time, then in the process's CPU time (steadier under load).
COLUMNS = tuple(f"{m}{kind}" for kind in ("", " (CPU)") for m in MEASURES)


def _import(src: str) -> Any:
    sys.path.insert(0, src)
    sys.path.insert(0, str(HERE))
    import ctxslots

    if not str(Path(ctxslots.__file__).resolve()).startswith(str(Path(src).resolve())):
        raise SystemExit(f"ctxslots was imported from {ctxslots.__file__}, not {src}")
    return ctxslots


def child_build(src: str, store_path: str, facts: int) -> None:
    """A store of ``facts`` generated facts at ``store_path``, built by the tree at ``src``."""
    ctxslots = _import(src)
    from _corpus import generate_facts

    rows = list(generate_facts(facts, seed=0))
    with ctxslots.FactStore(store_path) as store:
        for start in range(0, len(rows), BATCH):
            with store.batch():
                for f in rows[start:start + BATCH]:
                    owners: dict[str, Any] = {} if f.slot == "user" else {"scope": f.scope}
                    if f.key:
                        store.upsert(f.slot, f.key, f.value, tags=f.tags, **owners)
                    else:
                        store.add(f.slot, f.value, tags=f.tags, **owners)


def child_time(src: str, store_path: str, what: str, queries: int) -> None:
    """Print the timings of ``what`` ("search" or "assembly") as JSON."""
    start = time.perf_counter()
    ctxslots = _import(src)
    from _corpus import generate_queries

    messages = generate_queries(queries + 1, seed=1)
    out: dict[str, float] = {}
    with ctxslots.FactStore(store_path) as store:
        assembler = ctxslots.PromptAssembler(store)

        def assemble(message: str) -> None:
            assembler.assemble(ctxslots.AssemblyRequest(message, scope="repo-alpha", budget=2000))

        if what == "assembly":
            assemble(messages[0])
            out["cold assembly"] = time.perf_counter() - start
            out["cold assembly (CPU)"] = time.process_time()
        else:
            store.search(messages[0], scope="repo-alpha")
            out["cold search"] = time.perf_counter() - start
            out["cold search (CPU)"] = time.process_time()
            taken: dict[str, list[float]] = {c: [] for c in COLUMNS if c.startswith("warm")}
            for message in messages[1:]:
                for name, work in (("warm search", lambda m: store.search(m, scope="repo-alpha")),
                                   ("warm assembly", assemble)):
                    wall, cpu = time.perf_counter(), time.process_time()
                    work(message)
                    taken[name].append(time.perf_counter() - wall)
                    taken[f"{name} (CPU)"].append(time.process_time() - cpu)
            out.update({name: statistics.median(values) for name, values in taken.items()})
    print(json.dumps(out))


def _run(*args: str) -> dict[str, float]:
    done = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True,
                          check=False, env={**os.environ, "PYTHONPATH": ""})
    if done.returncode:
        raise SystemExit(f"child {args[:2]} failed:\n{done.stderr.strip()}")
    lines = done.stdout.strip().splitlines()
    return json.loads(lines[-1]) if lines else {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path,
                        help="the src folder of the tree to compare against")
    parser.add_argument("--after", type=Path, default=THIS_SRC,
                        help="the src folder of the tree measured against it (this one)")
    parser.add_argument("--facts", type=positive_int, default=20000)
    parser.add_argument("--queries", type=positive_int, default=100)
    parser.add_argument("--rounds", type=positive_int, default=6)
    parser.add_argument("--child", choices=("build", "search", "assembly"), help=argparse.SUPPRESS)
    parser.add_argument("--src", help=argparse.SUPPRESS)
    parser.add_argument("--store", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "build":
        child_build(args.src, args.store, args.facts)
        return
    if args.child:
        child_time(args.src, args.store, args.child, args.queries)
        return
    if args.before is None or not (args.before / "ctxslots" / "__init__.py").is_file():
        parser.error(f"--before {args.before}: no ctxslots package there (give its src folder)")
    trees = {"before": str(args.before.resolve()), "this tree": str(args.after.resolve())}
    with tempfile.TemporaryDirectory() as tmp:
        stores = {name: str(Path(tmp) / f"{i}.db") for i, name in enumerate(trees)}
        for name, src in trees.items():
            _run("--child", "build", "--src", src, "--store", stores[name],
                 "--facts", str(args.facts))
        times: dict[str, dict[str, list[float]]] = {n: {c: [] for c in COLUMNS} for n in trees}
        for round_ in range(args.rounds):
            order = list(trees) if round_ % 2 == 0 else list(reversed(trees))
            for name in order:
                for what in ("search", "assembly"):
                    got = _run("--child", what, "--src", trees[name], "--store", stores[name],
                               "--queries", str(args.queries))
                    for measure, value in got.items():
                        times[name][measure].append(value)
    load = os.getloadavg()
    print(f"{args.facts:,} facts, {args.queries} warm queries, {args.rounds} rounds taking turns; "
          f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"{'measure':<22}{'before':>12}{'this tree':>12}{'ratio':>8}{'range':>14}")
    for measure in COLUMNS:
        before, after = times["before"][measure], times["this tree"][measure]
        ratios = [a / b for a, b in zip(after, before, strict=True)]
        print(f"{measure:<22}{statistics.median(before) * 1e3:>10.2f}ms"
              f"{statistics.median(after) * 1e3:>10.2f}ms{statistics.median(ratios):>8.2f}"
              f"{min(ratios):>8.2f}-{max(ratios):<5.2f}")


if __name__ == "__main__":
    main()
