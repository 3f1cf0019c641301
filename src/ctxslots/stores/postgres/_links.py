"""Co-recall links on PostgreSQL: one row per pair ``a < b``, carrying a scope and a user."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

from ._sql import Conn, id_list

__all__ = ["all_links", "links_among", "links_and_hidden", "links_of", "links_within",
           "merge_links", "strengthen_links"]

def _of_a(column: str) -> str:
    """A link's scope or user: its first fact's, live or archived ('' when neither exists)."""
    return (f"coalesce((SELECT {column} FROM facts WHERE id = p.a LIMIT 1), "
            f"(SELECT {column} FROM archive WHERE id = p.a LIMIT 1), '')")


_OWNERS_OF_A = f"{_of_a('scope')}, {_of_a('user_id')}"


def strengthen_links(conn: Conn, pairs: Sequence[tuple[int, int]], now: float) -> None:
    """Add one to each ``(a, b)`` link per time it is named, creating it; a pair naming
    a fact that no longer exists (live or archived) is left out."""
    counted = Counter((int(a), int(b)) for a, b in pairs)
    if not counted:
        return
    keys = sorted(counted)
    named = sorted({i for pair in keys for i in pair})
    # The facts are held (FOR KEY SHARE) for the transaction, and one an erase is deleting
    # is skipped (SKIP LOCKED): an erase of one waits for this link, or this link leaves
    # it out at once, so an erase never leaves a link to a fact it removed, and neither
    # waits for the other while holding what the other wants.
    conn.execute(
        "WITH held AS (SELECT id FROM facts WHERE id = ANY(%s) FOR KEY SHARE SKIP LOCKED), "
        "held_archived AS (SELECT id FROM archive WHERE id = ANY(%s) "
        "FOR KEY SHARE SKIP LOCKED), there AS (SELECT id FROM held UNION SELECT id FROM held_archived) "
        f"INSERT INTO fact_links (scope, user_id, a, b, strength, updated_at) "
        f"SELECT {_OWNERS_OF_A}, p.a, p.b, p.n, %s "
        "FROM unnest(%s::bigint[], %s::bigint[], %s::float8[]) AS p(a, b, n) "
        "WHERE p.a IN (SELECT id FROM there) AND p.b IN (SELECT id FROM there) "
        "ON CONFLICT (scope, user_id, a, b) DO UPDATE SET "
        "strength = fact_links.strength + excluded.strength, updated_at = excluded.updated_at",
        (named, named, float(now), [a for a, _ in keys], [b for _, b in keys],
         [float(counted[k]) for k in keys]))


def merge_links(conn: Conn, rows: Sequence[tuple[int, int, float, float]]) -> None:
    """Write ``(a, b, strength, updated_at)`` links; the stronger wins on a clash."""
    best: dict[tuple[int, int], tuple[float, float]] = {}
    for a, b, strength, updated in rows:
        key = (int(a), int(b))
        if key not in best or float(strength) > best[key][0]:
            best[key] = (float(strength), float(updated))
    if not best:
        return
    keys = sorted(best)
    conn.execute(
        f"INSERT INTO fact_links (scope, user_id, a, b, strength, updated_at) "
        f"SELECT {_OWNERS_OF_A}, p.a, p.b, p.s, p.u "
        "FROM unnest(%s::bigint[], %s::bigint[], %s::float8[], %s::float8[]) AS p(a, b, s, u) "
        "ON CONFLICT (scope, user_id, a, b) DO UPDATE SET strength = excluded.strength, "
        "updated_at = excluded.updated_at WHERE excluded.strength > fact_links.strength",
        ([a for a, _ in keys], [b for _, b in keys], [best[k][0] for k in keys],
         [best[k][1] for k in keys]))


def links_of(conn: Conn, fact_id: int) -> dict[int, float]:
    """Every fact linked to ``fact_id``, with the strength."""
    found = conn.execute("SELECT b, strength FROM fact_links WHERE a = %s UNION ALL "
                         "SELECT a, strength FROM fact_links WHERE b = %s",
                         (int(fact_id), int(fact_id))).fetchall()
    return {int(other): float(strength) for other, strength in found}


#: The links at least a strength touching some facts (named parameters: the facts' ids
#: are sent once however often the statement names them).
_AMONG = ("SELECT a, b, strength FROM fact_links WHERE strength >= %(strength)s "
          "AND (a = ANY(%(ids)s) OR b = ANY(%(ids)s))")


def links_among(conn: Conn, fact_ids: Sequence[int], min_strength: float
                ) -> list[tuple[int, int, float]]:
    """``(a, b, strength)`` of links at least ``min_strength`` touching these facts."""
    return links_and_hidden(conn, fact_ids, min_strength, hidden=False)[0]


def links_and_hidden(conn: Conn, fact_ids: Sequence[int], min_strength: float | None, *,
                     hidden: bool = True) -> tuple[list[tuple[int, int, float]], dict[int, int]]:
    """:func:`links_among` (none when ``min_strength`` is ``None``) and, with ``hidden``, how
    many live facts each of these facts hides, in one statement: a search asks both of its
    hits."""
    ids = id_list(fact_ids)
    parts: list[str] = []
    params: dict[str, Any] = {"ids": ids}
    if ids and min_strength is not None:
        parts.append(f"SELECT false, a, b, strength FROM ({_AMONG}) l")
        params["strength"] = float(min_strength)
    if ids and hidden:
        parts.append("SELECT true, superseded_by, 0, count(*)::float8 FROM facts "
                     "WHERE superseded_by = ANY(%(ids)s) GROUP BY superseded_by")
    if not parts:
        return [], {}
    # By ids alone: a plan kept serves any (a search's statement).
    found = conn.execute(" UNION ALL ".join(parts) + " ORDER BY 1, 2, 3", params,
                         prepare=True).fetchall()
    links = [(int(a), int(b), float(n)) for is_count, a, b, n in found if not is_count]
    return links, {int(a): int(n) for is_count, a, _, n in found if is_count}


def links_within(conn: Conn, fact_ids: Sequence[int]) -> list[tuple[int, int, float, float]]:
    """The links both of whose facts are among these, by ``a, b``."""
    ids = id_list(fact_ids)
    return [(int(a), int(b), float(strength), float(updated)) for a, b, strength, updated
            in conn.execute("SELECT a, b, strength, updated_at FROM fact_links "
                            "WHERE a = ANY(%s) AND b = ANY(%s) ORDER BY a, b",
                            (ids, ids)).fetchall()]


def all_links(conn: Conn) -> Iterator[tuple[int, int, float, float]]:
    """Every link, by ``a, b``."""
    for a, b, strength, updated in conn.execute(
            "SELECT a, b, strength, updated_at FROM fact_links ORDER BY a, b").fetchall():
        yield int(a), int(b), float(strength), float(updated)
