"""The PostgreSQL engine's BM25 statement typed out, for the floors that time it by hand.

    hand = HandBM25(conn, facts, mean_length)    # N and mean length read once
    hand.rows(words, users, agents, scopes, now, limit, slot=None, columns="f.id")

The statement is the engine's (``stores/postgres/_lexical.py``): the words stemmed
as the index holds them, matched under the ``simple`` configuration, a match's term
frequencies cut from its tsvector and its context's, BM25 with FTS5's constants.
As the engine does, a table of at least ``EXACT_BELOW`` facts has each word's
document count read once and kept (the statement takes the idf), a smaller one
counts them in the statement.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxslots.stores.postgres import _lexical
from ctxslots.stores.stemming import stemmed_query

__all__ = ["EXACT_BELOW", "HandBM25"]

#: From this many facts on, the engine keeps document counts instead of counting per search.
EXACT_BELOW: int = _lexical._EXACT_BELOW

_COUNTED = """
d AS MATERIALIZED (
    SELECT lexeme, (SELECT count(*)::float8 FROM facts
                    WHERE search @@ quote_literal(lexeme)::tsquery) AS n
    FROM (SELECT DISTINCT unnest(tsvector_to_array(to_tsvector('simple', %s))) AS lexeme) s),
q AS MATERIALIZED (
    SELECT coalesce(array_agg(lexeme), '{}') AS lexemes,
           array_agg(greatest(ln((greatest(%s::float8, n) - n + 0.5) / (n + 0.5)), 1e-6)) AS idf
    FROM d)"""
_KEPT = """
q AS MATERIALIZED (SELECT %s::text[] AS lexemes, %s::float8[] AS idf)"""
_STATEMENT = """
WITH {q},
s AS (
    SELECT f.id, (SELECT sum(q.idf[array_position(q.lexemes, u.lexeme)] * u.tf * 2.2
                             / (u.tf + 1.2 * (0.25 + 0.75 * (f.doc_len + 1)::float8 / %s::float8)))
                  FROM (SELECT a.lexeme, cardinality(a.positions)
                               - 0.5 * coalesce(cardinality(c.positions), 0) AS tf
                        FROM unnest(ts_filter(setweight(f.search, 'A', q.lexemes), '{{a}}')) a
                        LEFT JOIN unnest(ts_filter(setweight(f.context_search, 'A', q.lexemes),
                                                   '{{a}}')) c USING (lexeme)) u) AS bm25
    FROM facts f, q
    WHERE f.search @@ to_tsquery('simple', %s) AND f.user_id = ANY(%s)
      AND f.agent_id = ANY(%s) {slot}AND f.scope = ANY(%s)
      AND (f.expires_at IS NULL OR f.expires_at > %s) AND f.superseded_by IS NULL
    ORDER BY bm25 DESC, f.id LIMIT %s)
SELECT {columns}, -s.bm25 AS _score FROM s JOIN facts f ON f.id = s.id
ORDER BY s.bm25 DESC, s.id
"""


def statement(columns: str, *, slot: bool = False, kept: bool = False,
              context: bool = True) -> str:
    """The statement returning ``columns`` of ``facts f`` and ``_score``; ``slot``: one
    slot's facts; ``kept``: idf passed in; ``context=False``: the context's words not
    joined (a floor doing less than the engine, to show what the join costs)."""
    sql = _STATEMENT.format(q=_KEPT if kept else _COUNTED, columns=columns,
                            slot="AND f.slot = %s " if slot else "")
    if not context:
        sql = sql.replace("""LEFT JOIN unnest(ts_filter(setweight(f.context_search, 'A', q.lexemes),
                                                   '{a}')) c USING (lexeme)""", "")
        sql = sql.replace("- 0.5 * coalesce(cardinality(c.positions), 0) ", "")
    return sql


@dataclass
class HandBM25:
    """The statement on a plain connection, with the table's N and mean length read once
    and, in a large table, each word's document count read once."""

    conn: Any
    facts: int
    mean_length: float
    counts: dict[str, int] = field(default_factory=dict)

    @classmethod
    def open(cls, conn: Any) -> HandBM25:
        """N and the mean document length of ``conn``'s ``facts``."""
        facts, mean = conn.execute(
            "SELECT count(*), coalesce(avg(doc_len), 0)::float8 FROM facts").fetchone()
        return cls(conn, int(facts), float(mean))

    @property
    def kept(self) -> bool:
        """Whether document counts are kept (the engine keeps them from EXACT_BELOW facts)."""
        return self.facts >= EXACT_BELOW

    def _idf(self, stems: list[str]) -> tuple[list[str], list[float]]:
        missing = [s for s in dict.fromkeys(stems) if s not in self.counts]
        if missing:
            self.counts.update((lexeme, int(n)) for lexeme, n in self.conn.execute(
                "SELECT l, (SELECT count(*) FROM facts WHERE search @@ quote_literal(l)::tsquery) "
                "FROM unnest(%s::text[]) AS l", (missing,)).fetchall())
        lexemes = list(dict.fromkeys(stems))
        return lexemes, [max(math.log((max(self.facts, self.counts[s]) - self.counts[s] + 0.5)
                                      / (self.counts[s] + 0.5)), 1e-6) for s in lexemes]

    def params(self, words: Sequence[str]) -> list[Any] | None:
        """The statement's first parameters for ``words`` (up to the OR query), or ``None``
        when no stem is left."""
        stems = stemmed_query(list(words))
        if not stems:
            return None
        head = list(self._idf(stems)) if self.kept else [" ".join(stems), self.facts]
        # Lengths count the owner term, as the engine's do (one more word a fact).
        return [*head, self.mean_length + 1, " | ".join(f"'{s}'" for s in stems)]

    def rows(self, words: Sequence[str], users: list[str], agents: list[str],
             scopes: list[str], now: float, limit: int, *, slot: str | None = None,
             columns: str = "f.id", context: bool = True, prepare: bool | None = None
             ) -> list[Any]:
        """The best ``limit`` facts for ``words`` among those of these owners (and ``slot``);
        ``prepare``: psycopg's (``None``: prepared once used often)."""
        head = self.params(words)
        if head is None:
            return []
        sql = statement(columns, slot=slot is not None, kept=self.kept, context=context)
        return self.conn.execute(sql, [*head, users, agents, *([slot] if slot else []), scopes,
                                       now, limit], prepare=prepare).fetchall()
