"""Co-recall links between facts on SQLite (``fact_links``: ``a < b``, a strength)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from ..backend import rows_in
from ._connection import Connection
from ._sql import marks

__all__ = ["all_links", "links_among", "links_of", "links_within", "merge_links",
           "strengthen_links"]

#: Whether the fact whose id is the parameter ``{}`` exists, live or archived.
_EXISTS = ("(EXISTS (SELECT 1 FROM facts WHERE id = {0}) "
           "OR EXISTS (SELECT 1 FROM archive WHERE id = {0}))")


def strengthen_links(conn: Connection, pairs: Sequence[tuple[int, int]], now: float) -> None:
    """Add one to each link between two facts that exist (live or archived), creating it
    at 1; a pair naming a fact erased meanwhile is left out."""
    conn.executemany(
        "INSERT INTO fact_links (a, b, strength, updated_at) SELECT ?1, ?2, 1, ?3 "
        f"WHERE {_EXISTS.format('?1')} AND {_EXISTS.format('?2')} "
        "ON CONFLICT (a, b) DO UPDATE SET strength = strength + 1, "
        "updated_at = excluded.updated_at", [(a, b, now) for a, b in pairs])


def merge_links(conn: Connection, rows: Sequence[tuple[int, int, float, float]]) -> None:
    """Write links; the stronger one wins."""
    conn.executemany(
        "INSERT INTO fact_links (a, b, strength, updated_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (a, b) DO UPDATE SET strength = excluded.strength, "
        "updated_at = excluded.updated_at WHERE excluded.strength > fact_links.strength", rows)


def links_of(conn: Connection, fact_id: int) -> dict[int, float]:
    """Every fact linked to ``fact_id``, with the strength."""
    return {int(o): float(s) for o, s in conn.execute(
        "SELECT b, strength FROM fact_links WHERE a = ? UNION ALL "
        "SELECT a, strength FROM fact_links WHERE b = ?", (fact_id, fact_id)).fetchall()}


def links_among(conn: Connection, fact_ids: Sequence[int], min_strength: float
                ) -> list[tuple[int, int, float]]:
    """Links at least ``min_strength`` touching these facts."""
    out: list[tuple[int, int, float]] = []
    # Every search asks; a store with no links says so in one probe.
    if conn.scalar("SELECT EXISTS (SELECT 1 FROM fact_links)") == 0:
        return out
    for chunk in rows_in(fact_ids, 400):
        ids = marks(len(chunk))
        out += [(int(a), int(b), float(s)) for a, b, s in conn.execute(
            f"SELECT a, b, strength FROM fact_links WHERE strength >= ? AND "
            f"(a IN ({ids}) OR b IN ({ids}))", (min_strength, *chunk, *chunk)).fetchall()]
    return sorted(set(out))


def links_within(conn: Connection, fact_ids: Sequence[int]
                 ) -> list[tuple[int, int, float, float]]:
    """The links both of whose facts are among these, by ``a, b``."""
    ids = set(fact_ids)
    out: list[tuple[int, int, float, float]] = []
    for chunk in rows_in(sorted(ids), 400):
        out += [(int(a), int(b), float(s), float(u)) for a, b, s, u in conn.execute(
            "SELECT a, b, strength, updated_at FROM fact_links "
            f"WHERE a IN ({marks(len(chunk))})", chunk).fetchall() if int(b) in ids]
    return sorted(out)


def all_links(conn: Connection) -> Iterator[tuple[int, int, float, float]]:
    """Every link, by ``a, b``."""
    for a, b, s, u in conn.execute(
            "SELECT a, b, strength, updated_at FROM fact_links ORDER BY a, b").fetchall():
        yield int(a), int(b), float(s), float(u)
