"""Cold commands: a fresh ``ctxslots assemble`` against a fresh ``ctxslots stats``, in one run.

    python benchmarks/cold_commands.py benchmarks/out/assemble_100000.db
    python benchmarks/cold_commands.py STORE --rounds 20 --scope repo-alpha

Each round starts, one after the other and in a rotating order, a new Python
process for:

- ``import``: ``python -c "import ctxslots.cli"`` (what every command pays
  before it reads the store);
- ``stats``: ``python -m ctxslots --db STORE stats`` (opens the store, counts
  facts per slot and scope): the floor a command that reads the store costs;
- ``assemble``: ``python -m ctxslots --db STORE assemble MESSAGE --scope SCOPE``
  with a different generated message each round: three searches, the user
  profile, rendering, token counts and the fit.

The goal is ``assemble`` p50 at most 1.3x ``stats`` p50. The store is read,
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
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _corpus import generate_queries

SRC = Path(__file__).resolve().parents[1] / "src"


def timed(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of one process running ``command``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command[:6])} failed: {proc.stderr.strip()[-300:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("store", type=Path, help="an existing SQLite store")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--scope", default="repo-alpha")
    args = parser.parse_args()
    if not args.store.exists():
        raise SystemExit(f"no store at {args.store}")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(SRC), os.environ.get("PYTHONPATH", "")])}
    py = [sys.executable]
    db = ["-m", "ctxslots", "--db", str(args.store)]
    messages = generate_queries(args.rounds, seed=11)
    runs = {
        "import": lambda i: py + ["-c", "import ctxslots.cli"],
        "stats": lambda i: py + db + ["stats"],
        "assemble": lambda i: py + db + ["assemble", messages[i], "--scope", args.scope],
    }
    names = list(runs)
    wall: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    for name in names:  # warm the page cache and the bytecode cache, untimed
        timed(runs[name](0), env)
    for i in range(args.rounds):
        for name in names[i % 3:] + names[:i % 3]:
            w, c = timed(runs[name](i), env)
            wall[name].append(w)
            cpu[name].append(c)
    p50 = statistics.median
    print(f"\ncold commands on {args.store.name} ({args.store.stat().st_size / 1e6:.0f} MB), "
          f"{args.rounds} rounds; python {sys.version.split()[0]}, {os.cpu_count()} cpus\n")
    print(f"{'':<10} {'wall p50':>9} {'min':>8} {'/ stats':>8} | {'cpu p50':>8} {'min':>8} "
          f"{'/ stats':>8}")
    print("-" * 69)
    for name in names:
        print(f"{name:<10} {p50(wall[name]):>8.3f}s {min(wall[name]):>7.3f}s "
              f"{p50(wall[name]) / p50(wall['stats']):>7.2f}x | {p50(cpu[name]):>7.3f}s "
              f"{min(cpu[name]):>7.3f}s {p50(cpu[name]) / p50(cpu['stats']):>7.2f}x")
    print(f"\ngoal: assemble at most 1.3x stats (wall {p50(wall['assemble']) / p50(wall['stats']):.2f}x"
          f", cpu {p50(cpu['assemble']) / p50(cpu['stats']):.2f}x)")


if __name__ == "__main__":
    main()
