"""The PostgreSQL engine's BM25 statement typed out, for the floors that time it by hand.

    hand = HandBM25(conn, facts, mean_length)    # N and mean length read once
    hand.rows(words, users, agents, scopes, now, limit, slot=None, columns="f.id")

The statement is the engine's (``stores/postgres/_lexical.py``): the words stemmed
as the index holds them, matched under the ``simple`` configuration, a match's term
frequencies cut from its tsvector and its context's, BM25 with FTS5's constants.
As the engine does, a table of at least ``EXACT_BELOW`` facts has each word's
document count read once and kept (the statement takes the idf), and its match
narrowed to the owner terms of whom the search sees where they hold a small
share of it; a smaller one counts the words in the statement.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxslots.stores.postgres import _lexical
from ctxslots.stores.stemming import stemmed_query

__all__ = ["EXACT_BELOW", "HandBM25"]

#: From this many facts on, the engine keeps document counts instead of counting per search,
#: and narrows a match to the owner terms a search sees when their facts are at most
#: ``OWNERS_MAX_SHARE`` of the table.
EXACT_BELOW: int = _lexical._EXACT_BELOW
OWNERS_MAX_SHARE: float = _lexical._OWNERS_MAX_SHARE

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
    WHERE f.search @@ {match} AND f.user_id = ANY(%s)
      AND f.agent_id = ANY(%s) {slot}AND f.scope = ANY(%s)
      AND (f.expires_at IS NULL OR f.expires_at > %s) AND f.superseded_by IS NULL
    ORDER BY bm25 DESC, f.id LIMIT %s)
SELECT {columns}, -s.bm25 AS _score FROM s JOIN facts f ON f.id = s.id
ORDER BY s.bm25 DESC, s.id
"""


#: The owner term of ``o.u``, ``o.a``, ``o.s`` (``stores/postgres/_schema.py``, ``m006``).
_TERM = "'o' || md5(o.u || chr(1) || o.a || chr(1) || o.s)"
_OWNED = (f"(to_tsquery('simple', %s) && (SELECT to_tsquery('simple', string_agg({_TERM}, ' | ')) "
          "FROM unnest(%s::text[], %s::text[], %s::text[]) AS o(u, a, s)))")


def statement(columns: str, *, slot: bool = False, kept: bool = False,
              context: bool = True, owned: bool = False) -> str:
    """The statement returning ``columns`` of ``facts f`` and ``_score``; ``slot``: one
    slot's facts; ``kept``: idf passed in; ``context=False``: the context's words not
    joined (a floor doing less than the engine, to show what the join costs);
    ``owned``: the match narrowed to owner terms (three arrays after the OR query)."""
    sql = _STATEMENT.format(q=_KEPT if kept else _COUNTED, columns=columns,
                            slot="AND f.slot = %s " if slot else "",
                            match=_OWNED if owned else "to_tsquery('simple', %s)")
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
    owned: dict[tuple[str, str, str], int] = field(default_factory=dict)

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

    def owners(self, users: list[str], agents: list[str], scopes: list[str]
               ) -> list[tuple[str, str, str]] | None:
        """The owners whose terms the engine's match would ask for (a large table, their
        facts at most its share), counted once each; else ``None``."""
        if not self.kept:
            return None
        combos = list(itertools.product(users, agents, scopes))
        missing = [c for c in combos if c not in self.owned]
        if missing:
            self.owned.update(((u, a, s), int(n)) for u, a, s, n in self.conn.execute(
                f"SELECT o.u, o.a, o.s, (SELECT count(*) FROM facts WHERE search @@ "
                f"to_tsquery('simple', {_TERM})) FROM unnest(%s::text[], %s::text[], "
                "%s::text[]) AS o(u, a, s)", [list(c) for c in zip(*missing)]).fetchall())
        share = sum(self.owned[c] for c in combos)
        return combos if share <= self.facts * OWNERS_MAX_SHARE else None

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
             columns: str = "f.id", context: bool = True, prepare: bool | None = None,
             relaxed: Sequence[str] = ()) -> list[Any]:
        """The best ``limit`` facts for ``words`` among those of these owners (and ``slot``);
        when none match, those for ``relaxed`` (the words with the common ones kept, as
        ``FactStore.search`` looks for them then); ``prepare``: psycopg's (``None``:
        prepared once used often)."""
        found = self._rows(words, users, agents, scopes, now, limit, slot=slot,
                           columns=columns, context=context, prepare=prepare)
        if found or not relaxed or list(relaxed) == list(words):
            return found
        return self._rows(relaxed, users, agents, scopes, now, limit, slot=slot,
                          columns=columns, context=context, prepare=prepare)

    def _rows(self, words: Sequence[str], users: list[str], agents: list[str],
              scopes: list[str], now: float, limit: int, *, slot: str | None,
              columns: str, context: bool, prepare: bool | None) -> list[Any]:
        head = self.params(words)
        if head is None:
            return []
        owners = self.owners(users, agents, scopes)
        narrowed = [] if owners is None else [list(c) for c in zip(*owners)]
        sql = statement(columns, slot=slot is not None, kept=self.kept, context=context,
                        owned=owners is not None)
        return self.conn.execute(sql, [*head, *narrowed, users, agents,
                                       *([slot] if slot else []), scopes, now, limit],
                                 prepare=prepare).fetchall()
