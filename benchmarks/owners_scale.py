"""Many users in one store: one user's search, assembly and flush, against hand SQL and alone.

    python benchmarks/owners_scale.py OUT --dev-set conversations-dev.json
    python benchmarks/owners_scale.py OUT --dev-set DEV --engines sqlite --sqlite-users 1000
    python benchmarks/owners_scale.py OUT --dev-set DEV --engines postgresql --pg-users 10000
    CTXSLOTS_BENCH_POSTGRES_URL=postgresql://... python benchmarks/owners_scale.py OUT ...

One store holds ``--sqlite-users`` (SQLite, default 1,000) or ``--pg-users``
(PostgreSQL, default 10,000) users of ``--facts-per-user`` facts each (default
100), in workspaces of 50 users sharing 20 project facts and 5 facts of their
agent (``benchmarks/_people.py``: sentences about the user by name, from the
dev set's observations, and keyed profile facts). ``OUT`` keeps the stores: the
SQLite file ``owners-N.db`` and, unless a server is named by ``--url`` or
``$CTXSLOTS_BENCH_POSTGRES_URL``, the data folder of a private PostgreSQL
(``pgserver``) started for the run; a loaded store is reused by the next run
with the same sizes (``benchmarks/_owners_stores.py``). Each run starts by vacuuming a
reused PostgreSQL store and erasing the timed users' notes that earlier runs' flushes
wrote, so that each flush's two new keys are new in the large store as in the solo one.

For ``--timed-users`` users spread over the store, each with a **solo** store of
its own (that user's facts and their workspace's, nothing else), four sides are
timed in turn, request by request (``benchmarks/_timing.py``):

- ``store``: the many-user store, through ``FactStore``;
- ``hand SQL``: the same work in hand-written SQL on the same store
  (``benchmarks/_owners_floors.py`` says what each floor does and leaves out);
- ``solo``: the user's solo store, through ``FactStore``;
- ``solo hand SQL``: the hand SQL on the solo store.

The requests: **search** (``store.search(question, user=, scope=, agent=)``, ten
hits, counted as accessed), **assemble** (``PromptAssembler(store).assemble`` with
the three memory sections, a 2,000-token budget; the floor reads each slot as deep as the store's own
assembly of the request asked, and relaxed where it searched relaxed), and **flush write** (a flush's
transaction: its progress read, five keyed upserts of the user's facts, three
replacing a value and two new, each read by key first, then its progress
written). Questions are the dev set's, asked about the user by name. Before the
searches and assemblies are timed, each side makes every request once untimed, so
each has read and kept its word counts (the hand SQL keeps them as the engine does).

Printed: each side's p50 and p95, the store's p50 and p95 over the hand SQL's
(target at most 1.3x) and over the solo store's (target at most 2x), the median
per-request ratio with its 10th-90th percentiles, the load average, the load
time and the bytes a fact takes.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _inputs import positive_int, whole_number
from _owners_floors import Op, PostgresHand, SqliteHand, Who
from _owners_stores import build_postgres, build_sqlite, postgres_bytes, solo_store, sqlite_bytes
from _people import AGENT, Layout, People, User
from _record import commit
from _timing import Turns, in_turn, load_average
from ctxslots import AssemblyRequest, FactStore, PromptAssembler
from ctxslots.tokens import DEFAULT_ENCODING, get_encoding

BUDGET = 2000
SIDES = ("store", "hand SQL", "solo", "solo hand SQL")
TARGET_HAND, TARGET_SOLO = 1.3, 2.0


@dataclass
class Target:
    """One timed user: who they are, their questions, and their two stores with floors."""

    user: User
    questions: list[str]
    store: FactStore
    solo: FactStore
    hand: Any
    solo_hand: Any
    keys: list[str]

    @property
    def who(self) -> Who:
        """The owners of this user's requests."""
        return Who(self.user.user_id, self.user.scope)


def _flush(store: FactStore, target: Target, ops: list[Op]) -> None:
    """What ``MemoryFlusher`` does to apply a flush (``_apply``), for these operations."""
    user, conversation = target.user.user_id, f"conversation-{target.user.user_id}"
    with store.batch(savepoints=False):
        store.flush_progress(conversation, user=user, agent=AGENT)
        for op in ops:
            store.get_by_key("user", op.key, user=user)
            store.upsert("user", op.key, op.value, user=user, source="flush")
        store.record_flush_progress(conversation, 10, "store", user=user, agent=AGENT)


class Writes:
    """The operations of successive flushes, new keys apart for each side."""

    def __init__(self, people: People, seed: int = 0) -> None:
        self.people = people
        self.calls: dict[str, int] = {}
        self.draw = random.Random(seed)

    def ops(self, side: str, target: Target) -> list[Op]:
        """Three replaced values of the user's keyed facts, two new keyed facts."""
        n = self.calls[side] = self.calls.get(side, 0) + 1
        first = target.user.first
        values = [text.replace("{first}", first) for text in (
            "{first} moved to a new flat near the river last month.",
            "{first} now works from home on Mondays and Fridays.",
            "{first} started learning the guitar with a teacher from the neighbourhood.",
            "{first} would like reminders the evening before every appointment.",
            "{first} is saving up for a trip to Japan next spring.")]
        keys = target.keys
        return [Op(keys[(3 * n + k) % len(keys)], f"{values[k]} (note {n})") for k in range(3)] \
            + [Op(f"note.{side.replace(' ', '-')}.{n}.{k}", f"{values[3 + k]} (note {n})")
               for k in range(2)]


def _work(targets: list[Target]) -> list[tuple[Target, str]]:
    return [(t, q) for t in targets for q in t.questions]


def time_search(targets: list[Target], repeat: int) -> Turns:
    """Each question asked on the four sides in turn, each side first asked every question
    once untimed: the stores counted the words while their words were taken, and the hand
    SQL counts them on first use and keeps them."""
    work = _work(targets)
    words = [(t.store.query_words(q), t.solo.query_words(q)) for t, q in work]
    # A search whose words find nothing looks for the common ones too; so do the floors.
    relaxed = [(t.store.query_words(q, relaxed=True), t.solo.query_words(q, relaxed=True))
               for t, q in work]

    def ask(store_of: Callable[[Target], FactStore]) -> Callable[[int], object]:
        def run(i: int) -> object:
            t, q = work[i]
            return store_of(t).search(q, user=t.user.user_id, scope=t.user.scope, agent=AGENT)
        return run

    return in_turn({
        "store": ask(lambda t: t.store),
        "hand SQL": lambda i: work[i][0].hand.search(words[i][0], work[i][0].who, time.time(),
                                                     relaxed[i][0]),
        "solo": ask(lambda t: t.solo),
        "solo hand SQL": lambda i: work[i][0].solo_hand.search(words[i][1], work[i][0].who,
                                                               time.time(), relaxed[i][1]),
    }, len(work), repeat=repeat, warm=len(work))


@dataclass(frozen=True)
class Made:
    """What the store's own assembly of a request did, for the floor to do the same."""

    text: str
    shown: int
    words: list[str]
    relaxed: list[str]
    reads: dict[tuple[str, bool], int]


class _Noted:
    """A ranked search whose ``hits(limit)`` notes the deepest limit asked."""

    def __init__(self, ranked: Any, key: tuple[str, bool], reads: dict[tuple[str, bool], int]
                 ) -> None:
        self.ranked, self.key, self.reads = ranked, key, reads

    def hits(self, limit: int) -> Any:
        self.reads[self.key] = max(self.reads.get(self.key, 0), limit)
        return self.ranked.hits(limit)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.ranked, name)


@contextmanager
def noted_reads(store: FactStore) -> Iterator[dict[tuple[str, bool], int]]:
    """For each (slot, relaxed) a section searched ``store`` with while the block ran,
    the most hits it asked for (the store's own searches run unchanged)."""
    reads: dict[tuple[str, bool], int] = {}
    ranked = store.search_ranked

    def noting(*args: Any, **kwargs: Any) -> Any:
        slots = kwargs.get("slots") or ("",)
        return _Noted(ranked(*args, **kwargs), (slots[0], bool(kwargs.get("relaxed"))), reads)

    store.search_ranked = noting  # type: ignore[method-assign]
    try:
        yield reads
    finally:
        del store.search_ranked


def time_assembly(targets: list[Target], repeat: int) -> Turns:
    """Each question assembled on the four sides in turn (each side first once on every
    question, untimed, as for searches); the floors count the tokens of the text the store
    assembled and touch as many facts as it showed."""
    work = _work(targets)
    assemblers = {id(s): PromptAssembler(s) for t in targets for s in (t.store, t.solo)}
    encoding = get_encoding(DEFAULT_ENCODING)

    def request(t: Target, q: str) -> AssemblyRequest:
        return AssemblyRequest(q, user=t.user.user_id, scope=t.user.scope, agent=AGENT,
                               budget=BUDGET)

    def made(store_of: Callable[[Target], FactStore]) -> list[Made]:
        out = []
        for t, q in work:
            store = store_of(t)
            with noted_reads(store) as reads:
                prompt = assemblers[id(store)].assemble(request(t, q))
            out.append(Made(prompt.text, len(prompt.kept), store.query_words(q),
                            store.query_words(q, relaxed=True), reads))
        return out

    big, solo = made(lambda t: t.store), made(lambda t: t.solo)

    def floor(i: int, hand: Any, made: Made) -> object:
        hand.assemble(made.words, work[i][0].who, time.time(), made.shown, made.relaxed,
                      made.reads)
        return encoding.encode(made.text)

    return in_turn({
        "store": lambda i: assemblers[id(work[i][0].store)].assemble(request(*work[i])),
        "hand SQL": lambda i: floor(i, work[i][0].hand, big[i]),
        "solo": lambda i: assemblers[id(work[i][0].solo)].assemble(request(*work[i])),
        "solo hand SQL": lambda i: floor(i, work[i][0].solo_hand, solo[i]),
    }, len(work), repeat=repeat, warm=len(work))


def time_writes(targets: list[Target], people: People, per_user: int, repeat: int) -> Turns:
    """Flush-sized writes on the four sides in turn, ``per_user`` rounds per user."""
    work = [t for t in targets for _ in range(per_user)]
    writes = Writes(people)
    return in_turn({
        "store": lambda i: _flush(work[i].store, work[i], writes.ops("store", work[i])),
        "hand SQL": lambda i: work[i].hand.write(writes.ops("hand SQL", work[i]), work[i].who,
                                                 time.time()),
        "solo": lambda i: _flush(work[i].solo, work[i], writes.ops("solo", work[i])),
        "solo hand SQL": lambda i: work[i].solo_hand.write(writes.ops("solo hand SQL", work[i]),
                                                           work[i].who, time.time()),
    }, len(work), repeat=repeat)


def report(engine: str, name: str, turns: Turns) -> dict[str, Any]:
    """Print one row of the table; return its figures."""
    p = {s: (turns.p(s, 50), turns.p(s, 95)) for s in SIDES}
    hand = (p["store"][0] / p["hand SQL"][0], p["store"][1] / p["hand SQL"][1])
    solo = (p["store"][0] / p["solo"][0], p["store"][1] / p["solo"][1])
    per_hand, per_solo = turns.ratio("store", "hand SQL"), turns.ratio("store", "solo")
    cells = " | ".join(f"{p[s][0]:.2f} / {p[s][1]:.2f}" for s in SIDES)
    print(f"| {engine} | {name} | {cells} | {hand[0]:.2f}x / {hand[1]:.2f}x | "
          f"{solo[0]:.2f}x / {solo[1]:.2f}x | {per_hand.median:.2f}x ({per_hand.spread()}) | "
          f"{per_solo.median:.2f}x ({per_solo.spread()}) | {turns.load.short()} |", flush=True)
    return {"p": p, "hand": hand, "solo": solo}


def header() -> None:
    """The table's header."""
    sides = " | ".join(f"{s} p50 / p95 ms" for s in SIDES)
    print(f"| engine | request | {sides} | store / hand SQL, p50 / p95 | store / solo, p50 / p95 "
          f"| store / hand SQL per request (p10-p90) | store / solo per request (p10-p90) "
          f"| load |")
    print("| --- | --- |" + " ---: |" * (len(SIDES) + 5))


def clear_notes(store: FactStore, user_id: str) -> None:
    """Erase the facts earlier runs' flushes added for this user (their keys start with
    ``note.``), so that each flush's two new keys are new again, as in the solo store."""
    for fact in store.facts(user=user_id):
        if fact.key is not None and fact.key.startswith("note."):
            store.delete(fact.id)


def targets_of(people: People, layout: Layout, count: int, questions: int, location: str,
               solo_location: Callable[[int], str], hand: Any, stack: ExitStack) -> list[Target]:
    """The timed users spread over the store, each with a fresh solo store, and the floors."""
    store = stack.enter_context(FactStore(location))
    big_hand = hand.open(location)
    stack.callback(big_hand.close)
    out = []
    for k in range(count):
        user = people.user(int((k + 0.5) * layout.users / count), layout)
        clear_notes(store, user.user_id)
        where = solo_location(k)
        solo_store(where, people, user, layout)
        solo = stack.enter_context(FactStore(where))
        solo_hand = hand.open(where)
        stack.callback(solo_hand.close)
        keys = [r["key"] for r in people.user_facts(user, layout) if "key" in r]
        out.append(Target(user, people.questions_for(user, questions), store, solo, big_hand,
                          solo_hand, keys))
    return out


def run_engine(engine: str, people: People, layout: Layout, args: argparse.Namespace,
               location: str, solo_location: Callable[[int], str], hand: Any,
               loaded_s: float, size: tuple[int, int, dict[str, int]]) -> None:
    """Time the three requests on one engine and print their rows."""
    total, facts, parts = size
    with ExitStack() as stack:
        targets = targets_of(people, layout, args.timed_users, args.questions, location,
                             solo_location, hand, stack)
        header()
        report(engine, "search", time_search(targets, args.repeat))
        report(engine, "assemble", time_assembly(targets, args.repeat))
        report(engine, "flush write", time_writes(targets, people, args.writes, args.repeat))
    detail = ", ".join(f"`{n}` {b / facts:.0f}" for n, b in parts.items())
    print(f"\n{engine}: {layout.users:,} users, {facts:,} facts, loaded in {loaded_s:.0f} s "
          f"({facts / max(loaded_s, 1e-9):,.0f} facts/s); {total / facts:.0f} bytes a fact "
          f"({total / 1e6:.0f} MB; largest parts, bytes a fact: {detail})\n", flush=True)


def sqlite_run(people: People, args: argparse.Namespace, out: Path) -> None:
    """The SQLite store of ``--sqlite-users`` users."""
    layout = Layout(users=args.sqlite_users, facts_per_user=args.facts_per_user)
    path = out / f"owners-{layout.users}.db"
    loaded = build_sqlite(path, people, layout)
    if args.load_only:
        return
    size = sqlite_bytes(path)
    solos = Path(tempfile.mkdtemp(prefix="solo-", dir=out))

    def solo(k: int) -> str:
        return str(solos / f"solo-{k}.db")

    try:
        run_engine("SQLite", people, layout, args, str(path), solo, SqliteHand, loaded, size)
    finally:
        for f in solos.iterdir():
            f.unlink()
        solos.rmdir()


def postgres_run(people: People, args: argparse.Namespace, out: Path) -> None:
    """The PostgreSQL store of ``--pg-users`` users, on the server named or a private one."""
    import psycopg

    from _pg import reachable, with_database

    layout = Layout(users=args.pg_users, facts_per_user=args.facts_per_user)
    admin = args.url
    if admin is None:
        import pgserver  # type: ignore[import-untyped]

        (out / "pgdata").mkdir(exist_ok=True)
        server = pgserver.get_server(out / "pgdata", cleanup_mode="stop")  # stopped at exit
        admin = str(server.get_uri())
    reachable(admin)

    def database(name: str, fresh: bool) -> str:
        with psycopg.connect(admin, autocommit=True) as conn:
            if fresh:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s",
                                 (name,)).fetchone()
            if found is None:
                conn.execute(f'CREATE DATABASE "{name}"')
        return with_database(admin, name)

    url = database(f"owners_{layout.users}", fresh=False)
    loaded = build_postgres(url, people, layout)
    if args.load_only:
        return
    size = postgres_bytes(url)
    run_engine("PostgreSQL", people, layout, args, url,
               lambda k: database(f"owners_solo_{k}", fresh=True), PostgresHand, loaded,
               size)


def main() -> None:
    """Load (or reuse) the stores, time the requests, print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder for the stores (kept for the next run)")
    parser.add_argument("--dev-set", type=Path, required=True,
                        help="conversations in the LoCoMo layout (their observations and "
                             "questions)")
    parser.add_argument("--engines", default="sqlite,postgresql")
    parser.add_argument("--sqlite-users", type=positive_int, default=1000)
    parser.add_argument("--pg-users", type=positive_int, default=10_000)
    parser.add_argument("--facts-per-user", type=positive_int, default=100)
    parser.add_argument("--timed-users", type=positive_int, default=5)
    parser.add_argument("--questions", type=positive_int, default=20,
                        help="questions per timed user")
    parser.add_argument("--writes", type=whole_number, default=10, help="flushes per timed user")
    parser.add_argument("--repeat", type=positive_int, default=2)
    parser.add_argument("--load-only", action="store_true",
                        help="load (or finish loading) the stores, time nothing")
    parser.add_argument("--url", default=os.environ.get("CTXSLOTS_BENCH_POSTGRES_URL"),
                        help="an administrator's URL of a PostgreSQL server with pgvector "
                             "(default: $CTXSLOTS_BENCH_POSTGRES_URL, else a private pgserver)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    people = People.load(args.dev_set)
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    unknown = sorted(set(engines) - {"sqlite", "postgresql"})
    if unknown:
        parser.error(f"unknown engine {', '.join(unknown)}: sqlite or postgresql")
    start = load_average()
    print(f"commit {commit()}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"load average at start {' '.join(f'{v:.2f}' for v in start)} on "
          f"{os.cpu_count()} cpus\n")
    if "sqlite" in engines:
        sqlite_run(people, args, args.out)
    if "postgresql" in engines:
        postgres_run(people, args, args.out)
    print(f"load average at end {' '.join(f'{v:.2f}' for v in load_average())}")


if __name__ == "__main__":
    main()
