"""Index health: find what is wrong with a store's derived indexes, and rebuild them.

The facts table is the source of truth. The FTS5 indexes and the vector index
are derived from it, so :func:`reindex` can always rebuild them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import apsw
import attrs

from .vectors import IndexState

if TYPE_CHECKING:
    from .fact_store import FactStore

__all__ = ["DoctorReport", "doctor", "reindex"]

Progress = Callable[[int, int], None]


@attrs.frozen
class DoctorReport:
    """What :func:`doctor` found.

    Attributes:
        integrity: The result of ``PRAGMA integrity_check`` (``"ok"`` when sound).
        fts_in_sync: Whether the FTS5 indexes match the facts and archive tables.
        vectors: The vector index compared with the embedder, or ``None`` when
            the store has no vector leg.
        problems: One line per problem; empty when all is well.
    """

    integrity: str
    fts_in_sync: bool
    vectors: IndexState | None
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        """Whether no problem was found."""
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready data."""
        return {
            "ok": self.ok,
            "integrity": self.integrity,
            "fts_in_sync": self.fts_in_sync,
            "vectors": attrs.asdict(self.vectors) if self.vectors else None,
            "problems": list(self.problems),
        }


def _fts_in_sync(store: FactStore) -> bool:
    try:
        for table in ("facts_fts", "archive_fts"):
            store._conn.execute(f"INSERT INTO {table}({table}, rank) VALUES ('integrity-check', 1)")
    except apsw.Error:
        return False
    return True


def doctor(store: FactStore) -> DoctorReport:
    """Check the file's integrity, the FTS indexes and the vector index."""
    problems: list[str] = []
    integrity = "\n".join(str(r[0]) for r in store._conn.execute("PRAGMA integrity_check"))
    if integrity != "ok":
        problems.append(f"integrity check failed: {integrity}")
    fts_ok = _fts_in_sync(store)
    if not fts_ok:
        problems.append("the full-text index is out of sync with the facts: run `ctxslots reindex`")
    state = store._index.state() if store._index is not None else None
    if state is not None:
        if state.stale:
            problems.append(
                f"vectors were built by {state.model_id} ({state.dimension} dimensions), not by "
                f"{state.current_model_id} ({state.current_dimension}): run `ctxslots reindex`"
            )
        else:
            if state.missing:
                problems.append(f"{state.missing} facts have no vector: run `ctxslots reindex`")
            if state.orphans:
                problems.append(f"{state.orphans} vectors belong to no fact: run `ctxslots reindex`")
    return DoctorReport(integrity, fts_ok, state, tuple(problems))


def reindex(store: FactStore, *, progress: Progress | None = None, batch_size: int = 256) -> int:
    """Rebuild the FTS indexes and every vector from the facts table.

    Vectors are written in batches, each in its own transaction, so other
    processes keep working meanwhile and an interrupted run can simply be run
    again. Returns the number of facts embedded.

    :param progress: Called as ``progress(done, total)`` after each batch.
    """
    conn = store._conn
    with conn.write():
        conn.execute("INSERT INTO facts_fts(facts_fts) VALUES ('rebuild')")
        conn.execute("INSERT INTO archive_fts(archive_fts) VALUES ('rebuild')")
        if store._index is not None:
            store._index.rebuild()
    if store._index is None:
        return 0
    ids = [int(r[0]) for r in conn.execute("SELECT id FROM facts ORDER BY id")]
    total = len(ids)
    if progress:
        progress(0, total)
    for start in range(0, total, batch_size):
        chunk = ids[start:start + batch_size]
        rows = conn.rows(
            f"SELECT id, scope, slot, value FROM facts WHERE id IN ({','.join('?' * len(chunk))})",
            chunk,
        )
        vectors = store.embedder.embed([r["value"] for r in rows])
        with conn.write():
            store._index.put([(int(r["id"]), r["scope"], r["slot"]) for r in rows], vectors)
        if progress:
            progress(min(start + batch_size, total), total)
    return total
