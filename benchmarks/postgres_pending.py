"""PostgreSQL searches under steady writes: the full-text index's pending list.

    python benchmarks/postgres_pending.py OUT --dev-set conversations-dev.json
    python benchmarks/postgres_pending.py OUT --dev-set DEV --users 10000 --writes 8000

A GIN index keeps new entries in an unsorted pending list until it holds
``gin_pending_list_limit`` kilobytes (or a vacuum runs), and every search reads
the whole list. The store sets the limit of its full-text indexes to
``PENDING_LIST_KB`` (``stores/postgres/_schema.py``, migration 7); PostgreSQL's
default is 4,096. This benchmark loads (or reuses) the owners benchmark's store
of ``--users`` users (``benchmarks/_owners_stores.py``) and, for each setting in
turn (``--rounds`` times), vacuums the table, times the searches of three users'
questions, then writes ``--writes`` upserts of other users' keyed facts in
``--steps`` steps, timing the searches again after each step. Printed: the median
search after the vacuum and after each step, the median and mean upsert (the mean
holds the writes that merged the list), and the search after the last step over
the search after the vacuum. The store's own setting is put back at the end.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import psycopg

from _inputs import positive_int, whole_number
from _owners_stores import build_postgres
from _people import AGENT, Layout, People
from _pg import server
from _record import commit
from _timing import load_average
from ctxslots import FactStore
from ctxslots.stores.postgres._schema import PENDING_LIST_KB

#: PostgreSQL's own ``gin_pending_list_limit``, in kilobytes.
DEFAULT_KB = 4096
TOPICS = ("jazz", "kayaks", "green tea", "chess", "ramen", "Lisbon", "birds", "quilts")


def set_limit(url: str, kilobytes: int) -> None:
    """Give the full-text index of ``facts`` this pending-list limit, then vacuum."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"ALTER INDEX facts_search SET (gin_pending_list_limit = {kilobytes})")
        conn.execute("VACUUM ANALYZE facts")


def one_setting(url: str, people: People, layout: Layout, kilobytes: int, writes: int,
                steps: int, seed: int) -> list[str]:
    """The table row of one setting."""
    set_limit(url, kilobytes)
    with FactStore(url) as store:
        asked = [(user, q) for k in range(3)
                 for user in [people.user(int((k + 0.5) * layout.users / 3), layout)]
                 for q in people.questions_for(user, 10)]

        def searches() -> float:
            times = []
            for user, question in asked * 2:
                start = time.perf_counter()
                store.search(question, user=user.user_id, scope=user.scope, agent=AGENT,
                             limit=10, track_access=False)
                times.append(time.perf_counter() - start)
            return statistics.median(times) * 1e3

        searches()  # every side warm: word counts read, plans made
        found = [searches()]
        draw, written = random.Random(seed), []
        for _ in range(steps):
            for _ in range(writes // steps):
                user = people.user(draw.randrange(layout.users), layout)
                value = (f"{user.first} said something new about {draw.choice(TOPICS)} "
                         f"(note {draw.randrange(10**6)}).")
                start = time.perf_counter()
                store.upsert("user", f"pending.{draw.randrange(50)}", value, user=user.user_id)
                written.append(time.perf_counter() - start)
            found.append(searches())
    return [f"{kilobytes:,} kB", *(f"{ms:.2f}" for ms in found),
            f"{statistics.median(written) * 1e3:.2f} / {statistics.fmean(written) * 1e3:.2f}",
            f"{found[-1] / found[0]:.2f}x"]


def main() -> None:
    """Load (or reuse) the store, time each setting in turn, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder of the private server's data (kept)")
    parser.add_argument("--dev-set", type=Path, required=True,
                        help="conversations in the LoCoMo layout (the owners benchmark's people)")
    parser.add_argument("--users", type=positive_int, default=1000)
    parser.add_argument("--facts-per-user", type=positive_int, default=100)
    parser.add_argument("--writes", type=whole_number, default=8000, help="upserts per setting")
    parser.add_argument("--steps", type=positive_int, default=4)
    parser.add_argument("--rounds", type=positive_int, default=1)
    parser.add_argument("--url", default=os.environ.get("CTXSLOTS_BENCH_POSTGRES_URL"),
                        help="an administrator's URL of a PostgreSQL server with pgvector "
                             "(default: $CTXSLOTS_BENCH_POSTGRES_URL, else a private pgserver)")
    args = parser.parse_args()
    if args.writes < args.steps or args.steps < 1:
        parser.error("--writes must be at least --steps, and --steps at least 1")
    args.out.mkdir(parents=True, exist_ok=True)
    people = People.load(args.dev_set)
    layout = Layout(users=args.users, facts_per_user=args.facts_per_user)
    print(f"commit {commit()}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"load average at start {' '.join(f'{v:.2f}' for v in load_average())} on "
          f"{os.cpu_count()} cpus\n")
    with server(args.url, args.out / "pgdata") as pg:
        url = pg.database(f"owners_{layout.users}")
        build_postgres(url, people, layout)
        per_step = args.writes // args.steps
        print("| pending list | search p50 ms after a vacuum | "
              + " | ".join(f"after {per_step * (n + 1):,} upserts" for n in range(args.steps))
              + " | upsert p50 / mean ms | last / first | load |")
        print("| --- |" + " ---: |" * (args.steps + 4))
        try:
            for round_ in range(args.rounds):
                for kilobytes in (DEFAULT_KB, PENDING_LIST_KB):
                    start = load_average()[0]
                    row = one_setting(url, people, layout, kilobytes, args.writes,
                                      args.steps, seed=round_)
                    print(f"| {' | '.join(row)} | {start:.2f} -> {load_average()[0]:.2f} |",
                          flush=True)
        finally:
            set_limit(url, PENDING_LIST_KB)
    print(f"\nload average at end {' '.join(f'{v:.2f}' for v in load_average())}")


if __name__ == "__main__":
    main()
