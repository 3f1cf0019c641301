"""Rerun the headline figures and write them into BENCHMARKS.md, each with its provenance.

    python benchmarks/headline.py --out BENCHMARKS.md                     # 10k, 100k, 1M
    python benchmarks/headline.py --out BENCHMARKS.md --sizes 10000 --queries 50 --repeat 1
    python benchmarks/headline.py --out BENCHMARKS.md --resume            # reuse finished runs
    python benchmarks/headline.py --out BENCHMARKS.md --mem0-python .venv-mem0/bin/python

Each headline benchmark runs as its own process with ``--json`` (its figures
and where they came from: command, date, commit, load average; see
``benchmarks/_record.py``), kept under benchmarks/out/headline/. The table
then goes between the markers ``<!-- headline:begin -->`` and
``<!-- headline:end -->`` of ``--out`` (put at the top when missing); the
rest of the file is left as it is. With ``--resume`` a benchmark whose record
was written by the same command at the same commit is not run again, so an
interrupted run of the big sizes goes on where it stopped (the corpus stores
are cached too, see ``benchmarks/_stores.py``).

The benchmarks: store search at each size (``store_search.py``), warm
assembly (``assemble.py``) and cold commands (``cold_commands.py``) on the
100k store (or the largest size asked below it), writes of the default store
against raw INSERTs and with MiniLM (``writes.py``; the MiniLM run when
sentence-transformers is installed), the default file
size (``file_size.py``), the PostgreSQL engine against hand SQL
(``postgres_search.py``, when pgserver or ``--pg-url`` is there) and the
MiniLM path's store share against its floors and against mem0
(``mem0_compare.py``, run with ``--mem0-python``; mem0's rows when mem0ai is
installed there). A benchmark that cannot run here is listed as skipped, with why.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _headline_rows import Row, rows_of
from _inputs import positive_int, positive_ints
from _record import ROOT, Record, command_line, commit
from _stores import OUT

BEGIN, END = "<!-- headline:begin -->", "<!-- headline:end -->"
RECORDS = OUT / "headline"


@dataclass(frozen=True)
class Run:
    """One benchmark process of the headline.

    Attributes:
        name: Its record's file name (and the benchmark's).
        python: The interpreter to run it with.
        args: The script and its arguments (``--json`` is added).
        needs: A module that interpreter must import for it to run.
    """

    name: str
    python: str
    args: tuple[str, ...]
    needs: str | None = None

    def command(self) -> list[str]:
        """The full command line."""
        return [self.python, *self.args, "--json", str(RECORDS / f"{self.name}.json")]

    def shown(self) -> str:
        """The command as a reader would type it from the repository's root."""
        python = "python" if self.python == sys.executable else self.python
        return " ".join([python, *(shlex.quote(a) for a in self.args)])


def shown_path(path: Path) -> str:
    """``path`` from the repository's root when it is inside it."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def plan(args: argparse.Namespace) -> list[Run]:
    """The runs the options ask for."""
    sizes: list[int] = args.sizes
    mid = max([s for s in sizes if s <= 100_000] or [min(sizes)])
    qr = ("--queries", str(args.queries), "--repeat", str(args.repeat))
    py, mem0 = sys.executable, args.mem0_python or sys.executable
    pg = ("--url", args.pg_url) if args.pg_url else ()
    mem0_sizes = ",".join(str(s) for s in args.mem0_sizes or [
        s for s in (1000, 10_000, 100_000) if s <= max(max(sizes), 1000)])
    return [
        Run("store_search", py, ("benchmarks/store_search.py", "--sizes",
                                 ",".join(map(str, sizes)), *qr)),
        Run("assemble", py, ("benchmarks/assemble.py", "--facts", str(mid), *qr)),
        Run("cold_commands", py, ("benchmarks/cold_commands.py", shown_path(
            OUT / f"corpus_{mid}.db"), "--rounds", str(args.cold_rounds))),
        Run("writes_words", py, ("benchmarks/writes.py", "--model", "none", "--facts", "20000",
                                 "--round", "1000")),
        Run("writes", py, ("benchmarks/writes.py",), needs="sentence_transformers"),
        Run("file_size", py, ("benchmarks/file_size.py", "--facts", "10000")),
        Run("postgres_search", py, ("benchmarks/postgres_search.py", "--sizes", str(mid), *qr,
                                    *pg), needs=None if args.pg_url else "pgserver"),
        # Without mem0ai it still measures ctxslots' MiniLM store share against its floors.
        Run("mem0_compare", mem0, ("benchmarks/mem0_compare.py", "--sizes", mem0_sizes, "--queries",
                                   str(args.queries), "--repeat", str(args.repeat)),
            needs="sentence_transformers"),
    ]


def expected_command(run: Run) -> str:
    """The command a run's record says made it (as ``_record.command_line`` writes it)."""
    return "python " + shlex.join(run.command()[1:])


def missing(run: Run) -> str | None:
    """Why ``run`` cannot run with its interpreter, or ``None``."""
    if run.needs is None:
        return None
    found = subprocess.run([run.python, "-c", f"import {run.needs}"], capture_output=True,
                           check=False)
    return None if found.returncode == 0 else f"{run.needs} is not installed for {run.python}"


def execute(run: Run, resume: bool) -> Record | str:
    """The run's record (reused with ``resume`` when the same command made it at this
    commit), or why it was skipped."""
    path = RECORDS / f"{run.name}.json"
    if resume and path.exists():
        record = Record.read(path)
        if record.commit == commit() and record.command == expected_command(run):
            print(f"{run.name}: reusing {path.relative_to(ROOT)} ({record.date})", flush=True)
            return record
    reason = missing(run)
    if reason:
        print(f"{run.name}: skipped, {reason}", flush=True)
        return reason
    print(f"{run.name}: {run.shown()}", flush=True)
    path.unlink(missing_ok=True)
    done = subprocess.run(run.command(), cwd=ROOT, check=False)
    if done.returncode != 0 or not path.exists():
        return f"failed (exit status {done.returncode})"
    return Record.read(path)


def render(runs: list[Run], results: list[Record | str], command: str) -> str:
    """The headline block: the table, then every run with its provenance."""
    lines = [BEGIN, "", "## Headline figures", "",
             (f"Regenerated by `{command}`; do not edit by hand. Each figure names the run "
              "that measured it (below the table: its command, date, commit and the load "
              "average, 1 minute, at its start and end). A ratio is the median of per-query "
              "ratios (per round for cold starts and writes), the two sides timed in turn "
              "in one process, with their 10th-90th percentiles; sizes are exact."), "",
             "| figure | measured | ratio (p10-p90) | run |", "| --- | ---: | ---: | ---: |"]
    table: list[Row] = []
    for number, (run, result) in enumerate(zip(runs, results, strict=True), start=1):
        if isinstance(result, Record):
            table += [r.numbered(number) for r in rows_of(result)]
        else:
            table.append(Row(run.name, f"skipped: {result}", "", number))
    lines += [row.markdown() for row in table]
    busiest = max((max(r.load["start"][0], r.load["end"][0]) for r in results
                   if isinstance(r, Record)), default=0.0)
    cpus = os.cpu_count() or 1
    if busiest > cpus:
        lines += ["", (f"The load average reached {busiest:.1f} on {cpus} cores during these "
                       "runs: other work shared the machine, so the times are slow and the "
                       "spreads wide; read the ratios, and rerun on a quiet machine for the "
                       "times.")]
    lines += ["", "Runs:", ""]
    for number, (run, result) in enumerate(zip(runs, results, strict=True), start=1):
        if isinstance(result, Record):
            load = result.load
            lines.append(f"{number}. `{run.shown()}` — {result.date}, commit {result.commit}, "
                         f"load {load['start'][0]:.2f} -> {load['end'][0]:.2f}")
        else:
            lines.append(f"{number}. `{run.shown()}` — not run: {result}")
    return "\n".join([*lines, "", END])


def write_block(path: Path, block: str) -> None:
    """Put ``block`` between the markers of ``path`` (after its title when they are missing)."""
    text = path.read_text() if path.exists() else "# Benchmarks\n"
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + block + rest.split(END, 1)[1]
    else:
        title, _, body = text.partition("\n")
        text = f"{title}\n\n{block}\n{body}"
    path.write_text(text)


def main() -> None:
    """Run (or reuse) every headline benchmark, write the block."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="the file to write the block in")
    parser.add_argument("--sizes", type=positive_ints, default="10000,100000,1000000")
    parser.add_argument("--queries", type=positive_int, default=200)
    parser.add_argument("--repeat", type=positive_int, default=3)
    parser.add_argument("--cold-rounds", type=positive_int, default=15)
    parser.add_argument("--resume", action="store_true",
                        help="reuse the records the same commands made at this commit")
    parser.add_argument("--mem0-python", help="the interpreter with mem0ai installed")
    parser.add_argument("--mem0-sizes", type=positive_ints,
                        help="sizes for mem0_compare.py (default: 1k, 10k and 100k, those not "
                        "above the largest of --sizes)")
    parser.add_argument("--pg-url", help="a PostgreSQL server (default: a private pgserver)")
    args = parser.parse_args()
    RECORDS.mkdir(parents=True, exist_ok=True)
    runs = plan(args)
    results = [execute(run, args.resume) for run in runs]
    write_block(args.out, render(runs, results, command_line()))
    print(f"wrote the headline block of {args.out}")


if __name__ == "__main__":
    main()
