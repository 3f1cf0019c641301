"""The lexical leg on PostgreSQL: BM25 over the GIN-indexed ``search`` tsvector.

PostgreSQL ranks text with ``ts_rank``/``ts_rank_cd``, which know nothing of
how rare a word is across the table. On the conversation dev set
``ts_rank_cd`` still came within 0.02 of SQLite's words-only recall@10, but
below it; BM25 matched it (see BENCHMARKS.md) and gives the very scores of
SQLite's FTS5 ``bm25()`` (tested), so a store reads the same on both engines.
The default ranking is therefore BM25 with FTS5's formula (k1 = 1.2,
b = 0.75, idf = ln((N - n + 0.5) / (n + 0.5)), at least 1e-6), from
statistics the backend reads itself:

- ``n``, the facts holding a word: counted through the GIN index, in the
  same statement that scores while the table is small (exact); once it is
  large, counted once and kept with ``N`` (read again when ``N`` is), since
  counting a common word visits every fact holding it, whoever it belongs to;
- ``N`` and the mean document length: ``count(*)`` and ``avg(doc_len)`` of
  the table (``doc_len``, a generated column, counts a fact's tokens; one is
  added to every length for the owner term SQLite's index holds with each
  fact, so the lengths and scores are SQLite's), kept
  per process and read again when they may have changed: while the table is
  small, after any statement that added or removed facts or changed their words
  (``fact_ids`` or ``fact_text_changes`` moved, ``m009``), by whichever process;
  once large, after 20% growth or ten minutes.

Nothing is updated on a write beyond the fact's own row and index entries, so
writers on several hosts never contend for a shared statistics row.
``ranking="ts_rank_cd"`` ranks with PostgreSQL's cover density instead.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Sequence
from typing import Any

import attrs
from psycopg.rows import dict_row

from ..backend import CONTEXT_WEIGHT, FactFilter, LexicalCandidate, QueryPlan, TermCounts
from ..stemming import stemmed_query, token_count
from ._schema import OWNER_TERM, TS_CONFIG
from ._sql import Conn, fact_columns, filter_clause, id_list

__all__ = ["LEXICAL_RANKINGS", "LexicalLeg"]

#: The rankings the leg knows.
LEXICAL_RANKINGS = ("bm25", "ts_rank_cd")

_K1 = 1.2
_B = 0.75
#: Added to each fact's length: SQLite's FTS5 index counts a fact's owner term
#: (one word, matched with no weight) in its length, so the same facts score the same.
_OWNER_TERMS = 1
#: Below this many facts the statistics are read again after every write.
_EXACT_BELOW = 20_000
_GROWTH = 1.2
_MAX_AGE_S = 600.0
#: Above _EXACT_BELOW facts, the id sequence is looked at no more often than this.
_CHECK_EVERY_S = 5.0
#: In a large table, a match is narrowed to the owner terms a search may see
#: (``m006``) when the facts holding them are at most this share of the table
#: (above, matching the terms costs more than it saves)...
_OWNERS_MAX_SHARE = 0.25
#: ...and the filter's owners make at most this many terms.
_OWNERS_MAX_TERMS = 64
#: The owner term of ``o.u``, ``o.a``, ``o.s`` (a user, agent and scope), as
#: :data:`._schema.OWNER_TERM` makes it for a row.
_OWNER_TERM_OF = OWNER_TERM.replace("user_id", "o.u").replace("agent_id", "o.a").replace(
    "scope", "o.s")
#: Document counts kept for the query planner and for BM25 in a large table (each
#: cache starts over past this many words).
_COUNTS_KEPT = 50_000


@attrs.define
class _Stats:
    """``N`` and mean document length of one table, when they were read and last checked."""

    rows: int
    avg_len: float
    top_id: int
    #: ``fact_text_changes`` when they were read.
    changes: int
    read_at: float
    checked_at: float


def index_terms(texts: list[str]) -> list[list[str]]:
    """The terms each text's tsvector holds (its stems, as a fact's text is stored and
    indexed), each once."""
    return [stemmed_query([text]) for text in texts]


def _or_query(tokens: Sequence[str]) -> str:
    """``to_tsquery`` text OR-ing ``tokens`` (letters and digits only, from ``stemmed_query``)."""
    quoted = ("'" + t.replace("\\", " ").replace("'", " ") + "'" for t in tokens)
    return " | ".join(quoted)


@attrs.define
class _Kept:
    """Counts of one table, kept with the statistics they were read with."""

    stats: _Stats
    #: The lexemes of each text counted (a query's stem, a word's stems), and the
    #: facts holding each: the planner's word counts and BM25's idf read the same.
    lexemes: dict[str, list[tuple[str, int]]] = attrs.Factory(dict)
    #: The facts of each ``(user, agent, scope)``: those holding its owner term.
    owners: dict[tuple[str, str, str], int] = attrs.Factory(dict)


@attrs.define
class LexicalLeg:
    """Scores word matches in ``facts`` or ``archive``.

    Attributes:
        ranking: ``"bm25"`` (the default) or ``"ts_rank_cd"``.
    """

    ranking: str = attrs.field(default="bm25",
                               validator=attrs.validators.in_(LEXICAL_RANKINGS))
    _stats: dict[str, _Stats] = attrs.Factory(dict)
    _kept: dict[str, _Kept] = attrs.Factory(dict)

    def stats(self, conn: Conn, table: str) -> _Stats:
        """``N`` and mean length of ``table``, read again when stale."""
        known = self._stats.get(table)
        now = time.monotonic()
        large = known is not None and known.rows >= _EXACT_BELOW
        if known is not None and large and now - known.checked_at < _CHECK_EVERY_S:
            return known
        top, changes = (int(v) for v in conn.execute(
            "SELECT (SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM fact_ids), "
            "ctxslots_text_changes()"
        ).fetchone())
        # The sequences move with the facts table's changes, not the archive's: a small
        # archive is counted again on each of its (rare) searches.
        same = known is not None and known.top_id == top and known.changes == changes \
            and (table == "facts" or large)
        if known is not None and (same or (
                large and top <= known.top_id * _GROWTH and now - known.read_at < _MAX_AGE_S)):
            known.checked_at = now
            return known
        rows, avg_len = conn.execute(
            f"SELECT count(*), coalesce(avg(doc_len), 0)::float8 FROM {table}").fetchone()
        fresh = _Stats(int(rows), float(avg_len), top, changes, now, now)
        self._stats[table] = fresh
        return fresh

    def search(self, conn: Conn, table: str, plan: QueryPlan, flt: FactFilter,
               pool: int) -> list[LexicalCandidate]:
        """The best ``pool`` matches of any of the plan's words in ``table`` passing ``flt``
        (the words stemmed as the indexed ones are, :mod:`ctxslots.stores.stemming`)."""
        tokens = stemmed_query(plan.words)
        if not tokens or pool <= 0:
            return []
        where, params = filter_clause(flt, "f")
        query = _or_query(tokens)
        extra = ", f.archived_at, f.reason" if table == "archive" else ""
        owners = None
        if self.ranking == "ts_rank_cd":
            sql = (f"SELECT {fact_columns('f')}{extra}, -ts_rank_cd(f.search, q) AS _score "
                   f"FROM {table} f, to_tsquery('{TS_CONFIG}', %s) q "
                   f"WHERE f.search @@ q AND {where} ORDER BY _score, f.id LIMIT %s")
            args: list[Any] = [query, *params, pool]
        else:
            stats = self.stats(conn, table)
            if stats.rows < _EXACT_BELOW:
                head: list[Any] = [" ".join(tokens), stats.rows]
            else:
                kept = self._kept_for(table, stats)
                head = list(self._idf(conn, table, kept, tokens))
                if table == "facts":
                    owners = self._owners(conn, table, kept, flt)
            sql = _bm25_sql(table, where, extra, counted=stats.rows < _EXACT_BELOW,
                            owned=owners is not None)
            narrowed = [] if owners is None else [list(column) for column in zip(*owners)]
            args = [*head, stats.avg_len + _OWNER_TERMS, query, *narrowed, *params, pool]
        # Only a match of owner terms and words, filtered by owners alone, keeps its plan:
        # the full-text index is then the best way in for any owners. Any other is planned
        # for its parameters (a user holding most of a store, a time range).
        keep = owners is not None and not flt.narrowed
        with conn.cursor(row_factory=dict_row) as cur:
            rows = cur.execute(sql, args, prepare=keep).fetchall()
        return [LexicalCandidate(row=row, score=float(row.pop("_score"))) for row in rows]

    def _kept_for(self, table: str, stats: _Stats) -> _Kept:
        """The counts kept for ``table``, started over when its statistics were read again."""
        kept = self._kept.get(table)
        if kept is None or kept.stats is not stats \
                or len(kept.lexemes) + len(kept.owners) > _COUNTS_KEPT:
            kept = self._kept[table] = _Kept(stats)
        return kept

    def _lexemes(self, conn: Conn, table: str, kept: _Kept, texts: Sequence[str]
                 ) -> dict[str, list[tuple[str, int]]]:
        """The lexemes of each of ``texts`` and the facts of ``table`` holding each, counted
        once for the statistics ``kept`` goes with."""
        known = kept.lexemes
        missing = [t for t in dict.fromkeys(texts) if t not in known]
        if missing:
            for text in missing:
                known[text] = []
            for text, lexeme, n in conn.execute(
                    f"SELECT u.t, l, (SELECT count(*) FROM {table} "
                    f"WHERE search @@ quote_literal(l)::tsquery) "
                    f"FROM unnest(%s::text[]) AS u(t), "
                    f"unnest(tsvector_to_array(to_tsvector('{TS_CONFIG}', u.t))) AS l",
                    (missing,)).fetchall():
                known[text].append((lexeme, int(n)))
        return known

    def _idf(self, conn: Conn, table: str, kept: _Kept, tokens: Sequence[str]
             ) -> tuple[list[str], list[float]]:
        """The lexemes of ``tokens`` and BM25's idf of each, from the counts kept."""
        known = self._lexemes(conn, table, kept, tokens)
        counts = dict(pair for t in tokens for pair in known[t])
        # N was read a moment earlier: never below a count read now.
        rows = kept.stats.rows
        idf = [max(math.log((max(rows, n) - n + 0.5) / (n + 0.5)), 1e-6)
               for n in counts.values()]
        return list(counts), idf

    def _owners(self, conn: Conn, table: str, kept: _Kept, flt: FactFilter
                ) -> list[tuple[str, str, str]] | None:
        """The ``(user, agent, scope)`` of the facts ``flt`` sees, when matching their
        owner terms narrows the match enough to pay (:data:`_OWNERS_MAX_SHARE`), else ``None``."""
        if flt.users is None or flt.agents is None or flt.scopes is None \
                or len(flt.users) * len(flt.agents) * len(flt.scopes) > _OWNERS_MAX_TERMS:
            return None
        owners = list(itertools.product(flt.users, flt.agents, flt.scopes))
        known = kept.owners
        missing = [o for o in owners if o not in known]
        if missing:
            for user, agent, scope, n in conn.execute(
                    f"SELECT o.u, o.a, o.s, (SELECT count(*) FROM {table} WHERE search @@ "
                    f"to_tsquery('{TS_CONFIG}', {_OWNER_TERM_OF})) "
                    "FROM unnest(%s::text[], %s::text[], %s::text[]) AS o(u, a, s)",
                    [list(column) for column in zip(*missing)]).fetchall():
                known[user, agent, scope] = int(n)
        owned = sum(known[o] for o in owners)
        return owners if owned <= kept.stats.rows * _OWNERS_MAX_SHARE else None

    def holding(self, conn: Conn, words: Sequence[str], fact_ids: Sequence[int], *,
                archived: bool) -> set[int]:
        """Which of ``fact_ids`` hold a stem of any of ``words`` in their ``search``
        tsvector (their text's stems and their context's)."""
        stems = stemmed_query(words)
        if not stems or not fact_ids:
            return set()
        table = "archive" if archived else "facts"
        return {int(fid) for (fid,) in conn.execute(
            f"SELECT id FROM {table} WHERE id = ANY(%s) "
            f"AND search @@ to_tsquery('{TS_CONFIG}', %s)",
            (id_list(fact_ids), _or_query(stems))).fetchall()}

    def document_counts(self, conn: Conn, tokens: Sequence[str], stats: _Stats | None = None
                        ) -> tuple[int, dict[str, int]]:
        """How many facts there are, and how many hold each token (its most common stem).

        Counts are kept until the statistics are read again (after every
        write in a small store; after 20% growth or ten minutes in a large one).
        ``stats``: the table's statistics when the caller has just read them.
        """
        stats = self.stats(conn, "facts") if stats is None else stats
        # Each word's stems as a query looks for them (see token_count).
        stems = {t: " ".join(stemmed_query([t])) for t in tokens}
        known = self._lexemes(conn, "facts", self._kept_for("facts", stats), list(stems.values()))
        return stats.rows, {t: token_count(t, (n for _, n in known[stems[t]])) for t in tokens}

    def counts(self, conn: Conn, words: Sequence[str], *, min_rows: int) -> TermCounts | None:
        """Facts holding each word, or ``None`` in a store smaller than ``min_rows``."""
        if not words:
            return TermCounts(0, {})
        stats = self.stats(conn, "facts")
        if stats.rows < min_rows:
            return None
        # The statistics just read, not read again: in a small store each read
        # is a round trip to the server.
        rows, docs = self.document_counts(conn, words, stats)
        return None if rows < min_rows else TermCounts(rows, docs)


def _bm25_sql(table: str, where: str, extra: str, *, counted: bool, owned: bool = False) -> str:
    """One statement: the query's stems and their idf, the matches, the scores.

    A match's term frequencies come from its tsvector cut down to the query's
    stems in C (``setweight`` marks them, ``ts_filter`` keeps them), so only
    those few entries are unnested; an occurrence in the context (counted
    again in ``context_search``) weighs ``CONTEXT_WEIGHT``, as FTS5's column
    weight does. ``counted``: the statement counts the facts holding each
    stem itself (its first parameters: the tokens joined by spaces and ``N``);
    otherwise its first parameters are the stems and their idf. Then: the mean
    length, the OR query, (``owned``: the users, agents and scopes whose owner
    terms the match also asks for, as three arrays), the filter's parameters,
    the pool size.
    """
    match = f"to_tsquery('{TS_CONFIG}', %s)"
    if owned:
        match = (f"({match} && (SELECT to_tsquery('{TS_CONFIG}', string_agg({_OWNER_TERM_OF}, "
                 "' | ')) FROM unnest(%s::text[], %s::text[], %s::text[]) AS o(u, a, s)))")
    q = f"""
        d AS MATERIALIZED (
            SELECT lexeme, (SELECT count(*)::float8 FROM {table}
                            WHERE search @@ quote_literal(lexeme)::tsquery) AS n
            FROM (SELECT DISTINCT unnest(tsvector_to_array(
                      to_tsvector('{TS_CONFIG}', %s))) AS lexeme) s
        ),
        q AS MATERIALIZED (
            -- N was read a moment earlier: never below a count read now.
            SELECT coalesce(array_agg(lexeme), '{{}}') AS lexemes,
                   array_agg(greatest(ln((greatest(%s::float8, n) - n + 0.5) / (n + 0.5)),
                                      1e-6)) AS idf
            FROM d
        )""" if counted else """
        q AS MATERIALIZED (SELECT %s::text[] AS lexemes, %s::float8[] AS idf)"""
    return f"""
        WITH {q},
        s AS (
            SELECT f.id,
                   (SELECT sum(q.idf[array_position(q.lexemes, u.lexeme)]
                               * u.tf * {_K1 + 1}
                               / (u.tf
                                  + {_K1} * ({1 - _B} + {_B} * (f.doc_len + {_OWNER_TERMS})::float8
                                                  / %s::float8)))
                    FROM (SELECT a.lexeme, cardinality(a.positions)
                                 - {1 - CONTEXT_WEIGHT} * coalesce(cardinality(c.positions), 0)
                                 AS tf
                          FROM unnest(ts_filter(setweight(f.search, 'A', q.lexemes), '{{a}}')) a
                          LEFT JOIN unnest(ts_filter(setweight(f.context_search, 'A',
                                                               q.lexemes), '{{a}}')) c
                          USING (lexeme)) u
                   ) AS bm25
            FROM {table} f, q
            WHERE f.search @@ {match} AND {where}
            ORDER BY bm25 DESC, f.id
            LIMIT %s
        )
        SELECT {fact_columns('f')}{extra}, -s.bm25 AS _score
        FROM s JOIN {table} f ON f.id = s.id
        ORDER BY s.bm25 DESC, s.id
    """
