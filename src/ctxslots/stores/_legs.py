"""The SQL that gathers search candidates, leg by leg.

Each leg returns candidates with what it knows of them; ranking (in
``ranking.py``) never sees SQL, and these functions never score.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs

from ._sqlite import Connection
from .ranking import Candidate

__all__ = ["COLUMNS", "Found", "lexical_leg", "merge_vector_leg", "placeholders", "ranked_candidates"]

COLUMNS = (
    "id, slot, scope, key, value, tags, source, confidence, score, created_at, "
    "updated_at, last_accessed, access_count, expires_at, superseded_by"
)

#: Fact id -> (row, archived) for every candidate a search has seen.
Found = dict[int, tuple[dict[str, Any], bool]]


def placeholders(count: int) -> str:
    """``?,?,...`` for ``count`` parameters."""
    return ",".join("?" * count)


def _candidate(row: dict[str, Any], **legs: Any) -> Candidate:
    return Candidate(fact_id=int(row["id"]), slot=row["slot"], updated_at=row["updated_at"],
                     score=row["score"], confidence=row["confidence"], **legs)


def lexical_leg(
    conn: Connection, table: str, match: str, where: str, params: Sequence[Any], pool: int
) -> list[tuple[Candidate, dict[str, Any]]]:
    """The best ``pool`` BM25 matches of ``match`` in ``table`` that pass ``where``."""
    # FTS5 scores every matching row either way; the join applies slot, scope
    # and expiry before the LIMIT so filters never starve the pool.
    ranked = conn.execute(
        f"SELECT f.id, {table}_fts.rank FROM {table}_fts JOIN {table} AS f "
        f"ON f.id = {table}_fts.rowid WHERE {table}_fts MATCH ? AND {where} "
        f"ORDER BY {table}_fts.rank LIMIT ?",
        (match, *params, pool),
    ).fetchall()
    return ranked_candidates(conn, table, [(int(fid), float(rank)) for fid, rank in ranked])


def ranked_candidates(
    conn: Connection, table: str, ranked: Sequence[tuple[int, float]],
    where: str | None = None, params: Sequence[Any] = (),
) -> list[tuple[Candidate, dict[str, Any]]]:
    """Candidates for ``(fact_id, bm25)`` pairs, best first, read from ``table``.

    With ``where``, rows that no longer pass it (changed since the ranking was
    made) are left out.
    """
    if not ranked:
        return []
    bm25 = dict(ranked)
    position = {fid: i for i, fid in enumerate(bm25, start=1)}
    extra = f" AND {where}" if where else ""
    rows = conn.rows(
        f"SELECT {COLUMNS} FROM {table} AS f WHERE id IN ({placeholders(len(bm25))}){extra}",
        (*bm25, *params))
    return [(_candidate(row, bm25_rank=position[int(row["id"])], bm25=bm25[int(row["id"])]), row)
            for row in rows]


def merge_vector_leg(
    conn: Connection, nearest: Sequence[tuple[int, float]], where: str, params: Sequence[Any],
    by_id: dict[int, Candidate], found: Found,
) -> None:
    """Add the vector leg's ``(fact_id, cosine)`` list, best first, to the candidates.

    Facts the lexical leg did not find are read here, through the same filters.
    """
    missing = [fid for fid, _ in nearest if fid not in found]
    if missing:
        rows = conn.rows(
            f"SELECT {COLUMNS} FROM facts AS f WHERE id IN ({placeholders(len(missing))}) "
            f"AND {where}",
            (*missing, *params),
        )
        for row in rows:
            found[int(row["id"])] = (row, False)
            by_id[int(row["id"])] = _candidate(row)
    for position, (fid, cosine) in enumerate(nearest, start=1):
        if fid in by_id and not found[fid][1]:
            by_id[fid] = attrs.evolve(by_id[fid], vector_rank=position, cosine=cosine)
