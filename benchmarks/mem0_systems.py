"""The systems ``benchmarks/mem0_compare.py`` puts side by side, behind one small interface.

Each system lives in a folder of its own and offers ``add_one(text)``,
``settle()`` (wait for background work), ``load(texts, batched=...)``,
``search(question)``, ``search_known(question)`` (the same with the
question's vector already known), ``close()``, ``cold_script()`` (a new
process opening it and answering one question) and ``embeds``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import importlib.util
import time
import uuid
from pathlib import Path
from typing import Any

import apsw
import numpy as np

from ctxslots import FactStore, Limits, RankingPolicy
from ctxslots.stores.ranking import MODEL_VECTOR_WEIGHT

__all__ = ["NAMESPACE", "Ctxslots", "Known", "Mem0", "folder_bytes", "model_folder",
           "model_spec"]

NAMESPACE = "bench"
LIMIT = 10
#: Facts per transaction (ctxslots) or per batch call (mem0's batch path) while loading.
LOAD_BATCH = 1000


def model_spec(model: str) -> str:
    """The embedder spec of ``--model``: a sentence-transformers model (package or folder), or
    a spec already (``hash:384``)."""
    return model if ":" in model else f"sentence-transformers:{model}"


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
    """Bytes of every file under a folder."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


class Known:
    """The questions' vectors, embedded once beforehand by the model both systems use."""

    def __init__(self, model: Any, questions: list[str]) -> None:
        self.model = model
        vectors = np.asarray(model.embed(questions), dtype=np.float32)
        self._vectors = dict(zip(questions, vectors, strict=True))

    def vector(self, question: str) -> np.ndarray:
        """The vector of a question embedded beforehand."""
        return self._vectors[question]

    def knows(self, text: str) -> bool:
        """Whether ``text`` is one of the questions."""
        return text in self._vectors

    def embedder(self) -> KnownEmbedder:
        """An embedder for a FactStore: the model, answering the questions from memory."""
        return KnownEmbedder(self)


class KnownEmbedder:
    """The model's embedder, with the questions' vectors answered from :class:`Known`."""

    def __init__(self, known: Known) -> None:
        self.known = known
        self.model_id = known.model.model_id
        self.dimension = known.model.dimension

    def embed(self, texts: list[str]) -> np.ndarray:
        """The known vectors of questions; the model's for anything else."""
        if all(self.known.knows(t) for t in texts):
            return np.array([self.known.vector(t) for t in texts], dtype=np.float32)
        return np.asarray(self.known.model.embed(texts), dtype=np.float32)


class Ctxslots:
    """ctxslots' FactStore with the model (or words only), and a twin store whose embedder
    knows the questions' vectors (opened on the same file once loaded); with ``reuse`` the
    folder may hold the store a run before built."""

    def __init__(self, folder: Path, model: str | None, known: Known, *,
                 reuse: bool = False) -> None:
        folder.mkdir(parents=True, exist_ok=reuse)
        self.folder = folder
        self.path = folder / "memory.db"
        self.known = known
        self.embeds = model is not None
        self.spec = model_spec(model) if model else None
        self.options: dict[str, Any] = {"embedder": self.spec} if self.spec else {}
        if self.spec and not self.spec.startswith("sentence-transformers:"):
            # The store leaves the vector leg off for the hashing embedder; on, as for a model.
            self.options["ranking"] = RankingPolicy(vector_weight=MODEL_VECTOR_WEIGHT)
        self.store = FactStore(self.path, limits=Limits(max_batch=LOAD_BATCH), **self.options)
        self.twin: FactStore | None = None

    def add_one(self, text: str) -> None:
        """One fact, one ``add``."""
        self.store.add("agent", text)

    def settle(self) -> None:
        """Wait for the background vector writer."""
        self.store.wait_for_vectors()

    def load(self, texts: list[str], *, batched: bool = True) -> None:
        """The facts in transactions of :data:`LOAD_BATCH`; then the copies in memory."""
        del batched  # ctxslots always loads in batches
        for start in range(0, len(texts), LOAD_BATCH):
            with self.store.batch():
                for text in texts[start:start + LOAD_BATCH]:
                    self.store.add("agent", text)
        self.ready()

    def ready(self) -> None:
        """Wait for the vectors; load the copies in memory and open the twin store."""
        self.store.wait_for_vectors()
        if self.embeds:
            self.store.load_vector_cache()
            self.twin = FactStore(self.path, **{**self.options,
                                                "embedder": self.known.embedder()})
            self.twin.load_vector_cache()

    def search(self, question: str) -> list[str]:
        """A search end to end (no access write: mem0's search writes nothing either)."""
        return [h.fact.value for h in self.store.search(question, limit=LIMIT,
                                                          track_access=False)]

    def search_known(self, question: str) -> list[str]:
        """The same search with the question's vector known."""
        assert self.twin is not None
        return [h.fact.value for h in self.twin.search(question, limit=LIMIT,
                                                         track_access=False)]

    def vectors(self) -> tuple[np.ndarray, np.ndarray]:
        """Every stored vector (unit length) and its fact's id, for the numpy floor."""
        conn = apsw.Connection(str(self.path))
        try:
            pairs = conn.execute("SELECT fact_id, embedding FROM vectors").fetchall()
        finally:
            conn.close()
        ids = np.array([fact_id for fact_id, _ in pairs], np.int64)
        blobs = b"".join(blob for _, blob in pairs)
        return ids, np.frombuffer(blobs, np.float32).reshape(len(pairs), -1).copy()

    def now(self) -> float:
        """The time searches are made at."""
        return time.time()

    def close(self) -> None:
        """Close both stores."""
        if self.twin is not None:
            self.twin.close()
            self.twin = None
        self.store.close()

    def cold_script(self) -> str:
        """Open the store in a new process and answer one question."""
        ranking = (f", ranking=RankingPolicy(vector_weight={MODEL_VECTOR_WEIGHT!r})"
                   if "ranking" in self.options else "")
        return (f"from ctxslots import FactStore, RankingPolicy\n"
                f"s = FactStore({str(self.path)!r}, embedder={self.spec!r}{ranking})\n"
                f"s.search('which deploy step fails on Fridays?', track_access=False)\n")


class Mem0:
    """mem0's Memory, local: huggingface embedder, qdrant on disk, SQLite history."""

    def __init__(self, folder: Path, model: str, known: Known) -> None:
        from mem0 import Memory

        folder.mkdir(parents=True)
        self.folder = folder
        self.known = known
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
        self._embed = self.memory.embedding_model.embed
        self._answer_known = False
        self.memory.embedding_model.embed = self._embedding
        self._closed = False

    def _embedding(self, text: Any, memory_action: Any = None) -> Any:
        if self._answer_known and isinstance(text, str) and self.known.knows(text):
            return self.known.vector(text).tolist()
        return self._embed(text, memory_action)

    def add_one(self, text: str) -> None:
        """One fact, one ``add`` (no LLM)."""
        self.memory.add(text, user_id=NAMESPACE, infer=False)

    def settle(self) -> None:
        """Nothing runs in the background."""

    def load(self, texts: list[str], *, batched: bool) -> None:
        """One ``add`` a fact, or mem0's batch path."""
        if not batched:
            for text in texts:
                self.add_one(text)
            return
        for start in range(0, len(texts), LOAD_BATCH):
            self._insert_batch(texts[start:start + LOAD_BATCH])

    def _insert_batch(self, texts: list[str]) -> None:
        """What ``add(text, infer=False)`` writes, a batch at a time: ``embed_batch``, one
        vector-store insert, one history write."""
        from mem0.utils.lemmatization import lemmatize_for_bm25

        vectors = self.memory.embedding_model.embed_batch(texts, "add")
        ids = [str(uuid.uuid4()) for _ in texts]
        when = dt.datetime.now(dt.UTC).isoformat()
        payloads = [{"user_id": NAMESPACE, "role": "user", "data": text,
                     "hash": hashlib.md5(text.encode()).hexdigest(), "created_at": when,
                     "updated_at": when, "text_lemmatized": lemmatize_for_bm25(text)}
                    for text in texts]
        self.memory.vector_store.insert(vectors=vectors, ids=ids, payloads=payloads)
        self.memory.db.batch_add_history([
            {"memory_id": i, "old_memory": None, "new_memory": text, "event": "ADD",
             "created_at": when, "updated_at": when, "role": "user"}
            for i, text in zip(ids, texts, strict=True)])

    def search(self, question: str) -> list[str]:
        """A search end to end."""
        found = self.memory.search(question, filters={"user_id": NAMESPACE}, top_k=LIMIT)
        return [r["memory"] for r in found["results"]]

    def search_known(self, question: str) -> list[str]:
        """The same search with the question's vector known."""
        self._answer_known = True
        try:
            return self.search(question)
        finally:
            self._answer_known = False

    def close(self) -> None:
        """Close the memory (its vector store client and history), once."""
        if not self._closed:
            self._closed = True
            # Memory.close closes the history only; the local qdrant client holds a lock
            # on its folder until closed, which a new process opening it would meet.
            self.memory.vector_store.client.close()
            self.memory.close()

    def cold_script(self) -> str:
        """Open the memory in a new process and answer one question."""
        return (f"from mem0 import Memory\n"
                f"m = Memory.from_config({self.config!r})\n"
                f"m.search('which deploy step fails on Fridays?', "
                f"filters={{'user_id': {NAMESPACE!r}}}, top_k={LIMIT})\n")
