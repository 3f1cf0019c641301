"""Hostile import files: each is refused with a clear error and nothing written, or imported
whole into a store that doctor finds sound and whose every live fact a search can reach.

Each file of :data:`CATALOGUE` is imported into a fresh store holding one fact already
(a SQLite file, and a PostgreSQL database when a URL is given), with a vector leg, so that
vectors from the file are stored and searched. A file counts as handled when:

- it is **refused**: a :class:`~ctxslots.errors.CtxslotsError` (one message, not a
  traceback), and the store holds exactly what it held before; or
- it is **imported**: no error, ``doctor`` is ok, every live fact not superseded is
  returned by a search of its own value, and a search that reads vectors answers.

Anything else (another exception, facts left hidden, a broken search) is a failure.
"""

from __future__ import annotations

import base64
import json
import os
import resource
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import numpy as np

from ._table import format_table

__all__ = ["CATALOGUE", "HostileResult", "run_hostile_imports"]

_HEADER = json.dumps({"format": "ctxslots-facts", "version": 1})
_DIM = 32
_MODEL = "hash-v1-32"


def _lines(*records: Any) -> bytes:
    return ("\n".join([_HEADER, *(r if isinstance(r, str) else json.dumps(r)
                                  for r in records)]) + "\n").encode("utf-8")


def _fact(value: str, **fields: Any) -> dict[str, Any]:
    return {"slot": "agent", "value": value, **fields}


def _vector(values: np.ndarray) -> dict[str, Any]:
    data = np.asarray(values, dtype="<f4").tobytes()
    return {"model": _MODEL, "dimension": int(values.shape[0]),
            "data": base64.b64encode(data).decode("ascii")}


def _scaled(scale: float) -> np.ndarray:
    direction = np.linspace(1.0, 2.0, _DIM)
    return np.asarray(direction / direction.max() * scale, dtype=np.float32)


#: ``name -> the file's bytes`` (or a path the file links to), with the suffix it is named by.
CATALOGUE: dict[str, tuple[str, bytes | Path]] = {
    "vector all zeros": ("jsonl", _lines(_fact("Zero vector note.",
                                               vector=_vector(np.zeros(_DIM))))),
    "vector 3e38": ("jsonl", _lines(_fact("Huge vector note.", vector=_vector(_scaled(3e38))))),
    "vector 1e-40 (denormal)": ("jsonl", _lines(_fact("Denormal vector note.",
                                                      vector=_vector(_scaled(1e-40))))),
    "vector NaN": ("jsonl", _lines(_fact("NaN vector note.",
                                         vector=_vector(np.full(_DIM, np.nan))))),
    "vector of another dimension": ("jsonl", _lines(_fact("Short vector note.",
                                                          vector=_vector(np.ones(7))))),
    "superseded_by itself": ("jsonl", _lines(_fact("Hides itself.", id=1, superseded_by=1))),
    "superseded_by loop of 2": ("jsonl", _lines(_fact("Ring one.", id=1, superseded_by=2),
                                                _fact("Ring two.", id=2, superseded_by=1))),
    "superseded_by loop of 3": ("jsonl", _lines(
        *(_fact(f"Ring {i}.", id=i, superseded_by=i % 3 + 1) for i in (1, 2, 3)))),
    "superseded_by a missing id": ("jsonl", _lines(_fact("Points nowhere.", id=1,
                                                         superseded_by=99))),
    "updated_at before created_at": ("jsonl", _lines(_fact(
        "Updated first.", created_at=1_800_000_000, updated_at=1_700_000_000))),
    "history valid_to before valid_from": ("jsonl", _lines(_fact("Backwards history.", history=[
        {"value": "Earlier.", "valid_from": 1_800_000_000, "valid_to": 1_700_000_000}]))),
    "created_at 1e300": ("jsonl", _lines(_fact("Far future.", created_at=1e300))),
    "created_at Infinity": ("jsonl", _lines('{"slot": "agent", "value": "Inf.", '
                                            '"created_at": Infinity}')),
    "confidence NaN": ("jsonl", _lines('{"slot": "agent", "value": "NaN.", "confidence": NaN}')),
    "id of 5,000 digits": ("jsonl", _lines('{"id": ' + "9" * 5000
                                           + ', "slot": "agent", "value": "Big id."}')),
    "an id used twice": ("jsonl", _lines(_fact("First.", id=5), _fact("Second.", id=5))),
    "JSON nested 100,000 deep": ("jsonl", _lines("[" * 100_000 + "]" * 100_000)),
    "not UTF-8": ("jsonl", _lines(_fact("Fine.")) + b'{"slot": "agent", "value": "\xff\xfe"}\n'),
    "NUL bytes in a value": ("jsonl", _lines(_fact("Null\u0000byte\u0000note."))),
    "no header": ("jsonl", json.dumps(_fact("Headless.")).encode() + b"\n"),
    "a newer format version": ("jsonl", (json.dumps({"format": "ctxslots-facts", "version": 99})
                                         + "\n").encode()),
    "a value of 20 MB": ("jsonl", _lines(_fact("x" * 20_000_000))),
    "one line of 80 MB, no line break": ("jsonl", _HEADER.encode() + b"\n" + b"y" * 80_000_000),
    "a link to /dev/zero (JSONL)": ("jsonl", Path("/dev/zero")),
    "a link to /dev/zero (Markdown)": ("md", Path("/dev/zero")),
    "Markdown: one bullet of 80 MB": ("md", b"# Notes\n\n- " + b"z" * 80_000_000),
    "Markdown: not UTF-8": ("md", b"# Notes\n\n- caf\xe9 au lait\n"),
}


@attrs.frozen
class HostileCase:
    """How one file fared on one engine."""

    name: str
    engine: str
    outcome: str  # "refused", "imported" or "FAILED: ..."
    seconds: float
    message: str

    @property
    def ok(self) -> bool:
        return not self.outcome.startswith("FAILED")


@attrs.frozen
class HostileResult:
    """Every case, and the process's peak memory."""

    cases: tuple[HostileCase, ...]
    peak_rss_mb: float

    @property
    def failures(self) -> list[str]:
        return [f"{c.engine} {c.name}: {c.outcome}" for c in self.cases if not c.ok]

    @property
    def ok(self) -> bool:
        return not self.failures

    def table(self) -> str:
        rows = [(c.name, c.engine, c.outcome, c.seconds, c.message[:90]) for c in self.cases]
        return (format_table(["file", "engine", "outcome", "seconds", "message"], rows)
                + f"\n\nPeak memory of the process: {self.peak_rss_mb:.0f} MB")


def _write(folder: Path, index: int, suffix: str, content: bytes | Path) -> Path:
    path = folder / f"hostile-{index:02d}.{suffix}"
    if isinstance(content, Path):
        path.symlink_to(content)
    else:
        path.write_bytes(content)
    return path


def _check_imported(store: Any) -> str | None:
    """What is wrong with a store after an import that succeeded (``None``: nothing)."""
    report = store.doctor()
    if not report.ok:
        return "doctor: " + "; ".join(report.problems)
    for fact in store.facts():
        words = " ".join(fact.value.replace("\x00", " ").split()[:4])[:200]
        if words and fact.id not in {h.fact.id for h in store.search(words, limit=50)}:
            return f"fact {fact.id} is not found by a search of its own words"
    store.search("note vector ring")
    return None


def _one(open_store: Callable[[], Any], path: Path, suffix: str) -> tuple[str, str]:
    from ctxslots.errors import CtxslotsError

    with open_store() as store:
        store.add("agent", "Here before the import.")
        before = sorted((f.id, f.value) for f in store.facts())
        try:
            if suffix == "md":
                report = store.import_markdown(path, slot="agent")
            else:
                with path.open(encoding="utf-8", newline="") as fp:
                    report = store.import_jsonl(fp)
        except CtxslotsError as exc:
            after = sorted((f.id, f.value) for f in store.facts())
            if after != before:
                return "FAILED: refused but wrote something", str(exc)
            return "refused", str(exc).splitlines()[0]
        except Exception as exc:  # noqa: BLE001 - what this check looks for
            return f"FAILED: {type(exc).__name__}", str(exc)[:200]
        problem = _check_imported(store)
        if problem is not None:
            return "FAILED: imported, " + problem[:120], report.summary()
        return "imported", report.summary()


def run_hostile_imports(folder: Path, *, url: str | None = None) -> HostileResult:
    """Import every file of :data:`CATALOGUE` into fresh stores under ``folder`` (and into
    the PostgreSQL database at ``url``, emptied before each file)."""
    from ctxslots import FactStore, RankingPolicy
    from ctxslots.stores.embedders import HashingEmbedder

    folder.mkdir(parents=True, exist_ok=True)
    options = {"embedder": HashingEmbedder(dimension=_DIM),
               "ranking": RankingPolicy(vector_weight=1.0), "vector_writes": "inline"}
    cases = []
    for index, (name, (suffix, content)) in enumerate(CATALOGUE.items()):
        if isinstance(content, Path) and not content.exists():
            continue
        path = _write(folder, index, suffix, content)
        engines: list[tuple[str, Callable[[], Any]]] = [
            ("sqlite", lambda i=index: FactStore(folder / f"store-{i:02d}.db", **options))]
        if url is not None:
            engines.append(("postgresql", lambda: _empty_postgres(url, options)))
        for engine, open_store in engines:
            start = time.perf_counter()
            outcome, message = _one(open_store, path, suffix)
            cases.append(HostileCase(name, engine, outcome, time.perf_counter() - start,
                                     message))
        if not isinstance(content, Path):
            os.unlink(path)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return HostileResult(tuple(cases), peak)


def _empty_postgres(url: str, options: dict[str, Any]) -> Any:
    """The store at ``url``, emptied of every fact (erased for good)."""
    from ctxslots import FactStore

    store = FactStore(url, **options)
    store.reset()
    return store
