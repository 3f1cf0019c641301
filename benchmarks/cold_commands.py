"""Cold commands: a fresh ``ctxslots assemble`` against a fresh ``ctxslots stats``, in one run.

    python benchmarks/cold_commands.py benchmarks/out/assemble_100000.db
    python benchmarks/cold_commands.py STORE --rounds 20 --scope repo-alpha

Each round starts, one after the other and in a rotating order
(``benchmarks/_timing.py``, each round a "query"), a new Python process for:

- ``import``: ``python -c "import ctxslots.cli"`` (what every command pays
  before it reads the store);
- ``stats``: ``python -m ctxslots --db STORE stats`` (opens the store, counts
  facts per slot and scope): the floor a command that reads the store costs;
- ``assemble``: ``python -m ctxslots --db STORE assemble MESSAGE --scope SCOPE``
  with a different generated message each round: three searches, the user
  profile, rendering, token counts and the fit.

The goal is ``assemble`` at most 1.3x ``stats``: the median of the per-round
ratios (wall and CPU), with their 10th-90th percentiles. The store is read,
never written by ``stats``; ``assemble`` counts the facts it shows as accessed,
as it always does. Give a copy if the store must stay untouched.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _corpus import generate_queries
from _inputs import positive_int
from _record import Record
from _timing import Ratio, in_turn

SRC = Path(__file__).resolve().parents[1] / "src"


def run(command: list[str], env: dict[str, str]) -> float:
    """Run ``command`` in a new process; its CPU seconds (user + system)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command[:6])} failed: {proc.stderr.strip()[-300:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def commands(store: Path, scope: str, rounds: int) -> dict[str, Callable[[int], list[str]]]:
    """The command of each process, by round."""
    py = [sys.executable]
    db = ["-m", "ctxslots", "--db", str(store)]
    messages = generate_queries(rounds, seed=11)
    return {"import": lambda i: py + ["-c", "import ctxslots.cli"],
            "stats": lambda i: py + db + ["stats"],
            "assemble": lambda i: py + db + ["assemble", messages[i], "--scope", scope]}


def main() -> None:
    """Time the three commands in turn, print the table, write the record."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("store", type=Path, help="an existing SQLite store")
    parser.add_argument("--rounds", type=positive_int, default=15)
    parser.add_argument("--scope", default="repo-alpha")
    parser.add_argument("--json", type=Path, help="also write the figures here (JSON)")
    args = parser.parse_args()
    if not args.store.exists():
        raise SystemExit(f"no store at {args.store}")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(SRC), os.environ.get("PYTHONPATH", "")])}
    made = commands(args.store, args.scope, args.rounds)
    cpu: dict[str, list[float]] = {name: [0.0] * args.rounds for name in made}

    def side(name: str) -> Callable[[int], object]:
        def one(i: int) -> None:
            cpu[name][i] = run(made[name](i), env)
        return one

    # The first round of each, untimed, warms the page cache and the bytecode cache.
    turns = in_turn({name: side(name) for name in made}, args.rounds, warm=1)
    wall = {name: [ms / 1000 for ms in turns.calls(name)] for name in made}
    p50 = statistics.median
    print(f"\ncold commands on {args.store.name} ({args.store.stat().st_size / 1e6:.0f} MB), "
          f"{args.rounds} rounds; python {sys.version.split()[0]}; {turns.load}\n")
    print(f"{'':<10} {'wall p50':>9} {'min':>8} {'/ stats (p10-p90)':>24} | {'cpu p50':>8} "
          f"{'/ stats (p10-p90)':>24}")
    print("-" * 92)
    ratios = {}
    for name in made:
        cpu_ratio = Ratio.of([c / s for c, s in zip(cpu[name], cpu["stats"]) if s > 0])
        ratios[name] = (turns.ratio(name, "stats"), cpu_ratio)
        print(f"{name:<10} {p50(wall[name]):>8.3f}s {min(wall[name]):>7.3f}s "
              f"{ratios[name][0].median:>8.2f}x ({ratios[name][0].spread()}) | "
              f"{p50(cpu[name]):>7.3f}s {cpu_ratio.median:>8.2f}x ({cpu_ratio.spread()})")
    print(f"\ngoal: assemble at most 1.3x stats (wall {ratios['assemble'][0]}; "
          f"cpu {ratios['assemble'][1]})")
    record = Record("cold_commands", figures={
        "store": args.store.name, "load": turns.load.short(),
        **{f"{name} wall p50 s": p50(wall[name]) for name in made},
        "assemble / stats wall": ratios["assemble"][0].as_dict(),
        "assemble / stats cpu": ratios["assemble"][1].as_dict()})
    record.add_load(turns.load)
    record.write(args.json)


if __name__ == "__main__":
    main()
