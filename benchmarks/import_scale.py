"""Import at scale: time and peak memory of importing 10k, 100k and 1M memories.

    python benchmarks/import_scale.py DATA_DIR                          # 10k, 100k, 1M JSONL
    python benchmarks/import_scale.py DATA_DIR --sizes 10000 100000 --format markdown
    python benchmarks/import_scale.py DATA_DIR --db postgresql://...    # a PostgreSQL database
    python benchmarks/import_scale.py DATA_DIR --again                  # and a second import

``DATA_DIR`` receives the generated import files (``memories-N.jsonl`` or
``agent-N.md``: free memories, no keys, from the deterministic corpus of
``benchmarks/_corpus.py``) and the stores; it is reused when the files are
there. Each import runs in a fresh process into a fresh store, so its peak
resident memory is its own (``ru_maxrss``), next to the same process's memory
before the import started. Two floors are measured in the same run, each in
its own process:

- ``parse``: reading the file and ``json.loads`` of every line (JSONL) or
  splitting it into lines (Markdown): what any import pays;
- ``engine``: the same rows inserted through the engine with no check at all
  (``backend.insert`` in one transaction): what the store pays to hold them,
  full-text index included.

With ``--rounds R`` the engine floor and the import run R times each, in turn
(the order alternating), and the ratio is the median of the per-round ratios
with their 10th-90th percentiles; each import is bulk work of its own process,
so it is compared round by round, not query by query. Linear time shows as a
constant ``us/fact`` down the column; bounded memory as a peak that does not
grow with the file.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _inputs import positive_int
from _timing import Load, Ratio, load_average

HEADER = {"format": "ctxslots-facts", "version": 1}
CREATED = 1_700_000_000.0


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def make_file(data: Path, n: int, fmt: str) -> Path:
    """The import file of ``n`` memories (written once, then reused)."""
    from _corpus import generate_facts

    path = data / (f"memories-{n}.jsonl" if fmt == "jsonl" else f"agent-{n}.md")
    if path.exists():
        return path
    temp = path.with_suffix(".partial")
    with temp.open("w", encoding="utf-8") as out:
        if fmt == "jsonl":
            out.write(json.dumps(HEADER) + "\n")
            for i, fact in enumerate(generate_facts(n, seed=15)):
                out.write(json.dumps({
                    "slot": fact.slot, "scope": fact.scope, "value": fact.value,
                    "tags": list(fact.tags), "created_at": CREATED + i}) + "\n")
        else:
            out.write("# agent\n\n")
            for fact in generate_facts(n, seed=15):
                out.write(f"- {fact.value}\n")
    temp.rename(path)
    return path


def child(mode: str, file: str, db: str) -> None:
    """One measurement, in this process: prints a JSON line."""
    from ctxslots import FactStore

    started_rss = 0.0
    if mode == "parse":
        started_rss = _rss_mb()
        start = time.perf_counter()
        count = 0
        with open(file, encoding="utf-8") as fp:
            for count, line in enumerate(fp):
                if file.endswith(".jsonl"):
                    json.loads(line)
        seconds = time.perf_counter() - start
        print(json.dumps({"seconds": seconds, "records": count, "rss": _rss_mb(),
                          "rss_before": started_rss}))
        return
    with FactStore(db) as store:
        started_rss = _rss_mb()
        start = time.perf_counter()
        if mode == "import" and file.endswith(".jsonl"):
            with open(file, encoding="utf-8") as fp:
                report = store.import_jsonl(fp)
            result = {"added": report.added, "skipped": report.skipped_duplicates}
        elif mode == "import":
            report = store.import_markdown(Path(file), slot="agent")
            result = {"added": report.added, "skipped": report.skipped_duplicates}
        else:  # engine: the same rows, inserted with no check
            result = {"added": _engine_inserts(db, file)}
        seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "rss": _rss_mb(), "rss_before": started_rss,
                      **result}))


def _engine_inserts(db: str, file: str) -> int:
    from _engine import open_engine
    from ctxslots.stores.owners import DEFAULT_AGENT, DEFAULT_USER

    # The floor inserts through the engine with no check at all (see benchmarks/_engine.py).
    backend = open_engine(db)
    count = 0
    with backend.transaction(), open(file, encoding="utf-8") as fp:
        for line in fp:
            if file.endswith(".jsonl"):
                data = json.loads(line)
                if "format" in data:
                    continue
                slot, scope, value = data["slot"], data["scope"] or "", data["value"]
                tags, when = "\n".join(data["tags"]), data["created_at"]
            elif line.startswith("- "):
                slot, scope, value, tags, when = "agent", "", line[2:].rstrip("\n"), "", CREATED
            else:
                continue
            backend.insert({"slot": slot, "scope": scope, "key": None, "value": value,
                            "tags": tags, "source": None, "confidence": 1.0, "score": 0.0,
                            "created_at": when, "updated_at": when, "observed_at": when,
                            "last_accessed": None, "access_count": 0, "expires_at": None,
                            "superseded_by": None,
                            "user_id": DEFAULT_USER if slot == "user" else "",
                            "agent_id": DEFAULT_AGENT if slot == "agent" else ""})
            count += 1
    backend.close()
    return count


def measure(mode: str, file: Path, db: str) -> dict[str, float]:
    """Run one measurement in a fresh process."""
    out = subprocess.run([sys.executable, __file__, "--child", mode, str(file), db],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _fresh_db(data: Path, name: str, url: str | None) -> str:
    if url:
        return url
    path = data / name
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return str(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("data", type=Path, help="directory for the generated files and stores")
    parser.add_argument("--sizes", type=positive_int, nargs="+",
                        default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--format", choices=("jsonl", "markdown"), default="jsonl")
    parser.add_argument("--rounds", type=positive_int, default=1,
                        help="times the engine floor and the import each run, in turn")
    parser.add_argument("--db", help="a postgresql:// URL of an empty database (emptied "
                                     "between runs); default: SQLite files in DATA_DIR")
    parser.add_argument("--again", action="store_true",
                        help="import the same file a second time (every fact a duplicate), "
                             "in a fresh process, and report its seconds")
    args = parser.parse_args()
    if args.db:
        from _pg import reachable

        reachable(args.db)
    args.data.mkdir(parents=True, exist_ok=True)
    rows = []
    started = load_average()
    for n in args.sizes:
        file = make_file(args.data, n, args.format)
        parse = measure("parse", file, "")
        engine, run, ratio = in_rounds(args, n, file)
        rows.append((n, run, parse, engine, ratio))
        print(f"{n:>9,} memories: import {run['seconds']:.1f} s, peak {run['rss']:.0f} MB",
              file=sys.stderr)
    print(f"\nImport of free memories ({args.format}, "
          f"{'PostgreSQL' if args.db else 'SQLite'}); each row a fresh process and store, "
          f"{args.rounds} round(s); {Load.around(started)}\n")
    print("| memories | added | skipped | import s | us/fact | facts/s | peak RSS MB "
          "(before import) | floor: parse s | floor: engine inserts s | import / engine "
          "(p10-p90) |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for n, run, parse, engine, ratio in rows:
        print(f"| {n:,} | {run['added']:,} | {run['skipped']:,} | {run['seconds']:.1f} | "
              f"{run['seconds'] / n * 1e6:.0f} | {n / run['seconds']:,.0f} | "
              f"{run['rss']:.0f} ({run['rss_before']:.0f}) | {parse['seconds']:.1f} | "
              f"{engine['seconds']:.1f} | {ratio.median:.1f}x ({ratio.spread()}) |")
    if args.again:
        print("\nThe same file imported again, every fact a duplicate:\n")
        print("| memories | skipped | import again s | us/fact |")
        print("| ---: | ---: | ---: | ---: |")
        for n, run, *_ in rows:
            print(f"| {n:,} | {run['again_skipped']:,} | {run['again']:.1f} | "
                  f"{run['again'] / n * 1e6:.0f} |")


def in_rounds(args: argparse.Namespace, n: int, file: Path
              ) -> tuple[dict[str, float], dict[str, float], Ratio]:
    """The engine floor and the import in turn, ``args.rounds`` times (the order alternating):
    the median round of each and the per-round ratios."""
    engines: list[dict[str, float]] = []
    imports: list[dict[str, float]] = []
    for r in range(args.rounds):
        for mode in ("engine", "import")[::1 if r % 2 == 0 else -1]:
            db = _fresh_db(args.data, f"{mode}-{n}.db", args.db)
            found = measure(mode, file, db)
            if mode == "import" and args.again:
                again = measure("import", file, db)
                found["again"], found["again_skipped"] = again["seconds"], again["skipped"]
            (engines if mode == "engine" else imports).append(found)
            if args.db:
                _empty(args.db)
    ratio = Ratio.of([i["seconds"] / e["seconds"] for i, e in zip(imports, engines)])

    def median(runs: list[dict[str, float]]) -> dict[str, float]:
        return sorted(runs, key=lambda found: found["seconds"])[len(runs) // 2]

    return median(engines), median(imports), ratio


def _empty(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("TRUNCATE facts, archive, fact_history, fact_links, flush_progress")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        main()
