"""The lexical leg of the SQLite engine: BM25 from FTS5, or from an in-memory copy.

The plan's words, stemmed as the indexed columns are
(:mod:`ctxslots.stores.stemming`), are matched against ``facts_fts`` (or
``archive_fts``), joined to the facts so that the filter applies before the
``LIMIT``. When the facts a search may see are a small share of the store (one
user's of many), the match asks for their owner terms too (:data:`._schema.OWNER_TERM`),
so FTS5 scores those facts alone. A store opened with ``lexical_cache=True`` scores the words from an
in-memory copy of the index instead (:mod:`.lexical_cache`, the same scores),
once it is loaded.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from typing import cast

from ...errors import StoreError
from ..backend import FactFilter, FactRow, LexicalCandidate, QueryPlan, TermCounts, rows_in
from ..sanitize import to_match
from ..stemming import stemmed_query
from . import _rows
from ._connection import Connection
from ._loader import CacheSlot
from ._schema import owner_term
from ._sql import ARCHIVE_READ, LIMIT, READ, filter_clause, marks
from ._terms import TermFrequencies
from .lexical_cache import LexicalCache, build_lexical_cache

__all__ = ["LexicalLeg"]

#: The indexed columns a query's words are matched in (never the owner term).
_WORD_COLUMNS = "{stems context_stems}"
#: A match is narrowed to the owner terms a search may see only in a store of at
#: least this many facts (below, scoring every match costs little)...
_OWNERS_MIN_ROWS = 5_000
#: ...when the facts holding those terms are at most this share of the store
#: (matching the terms costs more than it saves above about a third)...
_OWNERS_MAX_SHARE = 0.25
#: ...and when the filter's owners make at most this many terms.
_OWNERS_MAX_TERMS = 64


class LexicalLeg:
    """Word matches for one store, and the document counts of words.

    :param use_copy: Score from an in-memory copy of the index once loaded.
    """

    def __init__(self, *, use_copy: bool) -> None:
        self.use_copy = use_copy
        self._terms = TermFrequencies()
        self._slot: CacheSlot[LexicalCache] = CacheSlot(
            "in-memory lexical index", build_lexical_cache, load_vec=False)
        self._lock = threading.Lock()

    def search(self, conn: Connection, plan: QueryPlan, flt: FactFilter, pool: int, *,
               archived: bool) -> list[LexicalCandidate]:
        """The best ``pool`` matches of the plan's words among facts passing ``flt``."""
        stems = stemmed_query(plan.words)
        if not stems:
            return []
        # Inside a write the index answers, not the copy: the copy takes in only what was
        # committed (a rollback would leave it holding what never was, and the change log's
        # numbers it read would be handed out again).
        if not archived and self.use_copy and flt.scopes is not None and not flt.narrowed \
                and not conn.in_transaction and self._slot.ready(conn) is not None:
            ranked = self._from_copy(conn, plan.words, flt, pool)
            if not ranked:
                return []
            rows = {int(r["id"]): r for r in _rows.rows_by_ids(
                conn, [fid for fid, _ in ranked], flt, archived)}
            return [LexicalCandidate(rows[fid], score) for fid, score in ranked if fid in rows]
        table = "archive" if archived else "facts"
        cond, params = filter_clause(flt, "f.")
        match = f"{_WORD_COLUMNS} : ({to_match(stems)})"
        owners = None if archived else self._owner_terms(conn, flt)
        if owners:
            match = f"owner_term : ({to_match(owners)}) AND {match}"
        # FTS5 scores every row the match finds; the join applies the filters before
        # the LIMIT so they never starve the pool. The subquery sorts ids and scores
        # alone, and only the best ``pool`` rows are then read whole.
        found = conn.rows(
            f"SELECT {ARCHIVE_READ if archived else READ}, top.bm25 AS bm25 FROM "
            f"(SELECT f.id AS fact_id, {table}_fts.rank AS bm25 FROM {table}_fts "
            f"JOIN {table} AS f ON f.id = {table}_fts.rowid "
            f"WHERE {table}_fts MATCH ? AND {cond} "
            f"ORDER BY {table}_fts.rank, f.id {LIMIT}) AS top "
            f"CROSS JOIN {table} ON {table}.id = top.fact_id "
            f"ORDER BY top.bm25, top.fact_id", (match, *params, pool))
        return [LexicalCandidate(cast(FactRow, row), float(row.pop("bm25"))) for row in found]

    def holding(self, conn: Connection, words: Sequence[str], fact_ids: Sequence[int], *,
                archived: bool) -> set[int]:
        """Which of ``fact_ids`` hold a stem of any of ``words`` in their stems or
        their context's (the words their index entry holds)."""
        stems = stemmed_query(words)
        if not stems or not fact_ids:
            return set()
        table = "archive" if archived else "facts"
        spaced = "' ' || coalesce(stems, '') || ' ' || coalesce(context_stems, '') || ' '"
        held = " OR ".join([f"instr({spaced}, ?)"] * len(stems))
        padded = [f" {stem} " for stem in stems]
        out: set[int] = set()
        for chunk in rows_in(fact_ids):
            out.update(int(fid) for (fid,) in conn.execute(
                f"SELECT id FROM {table} NOT INDEXED WHERE id IN ({marks(len(chunk))}) "
                f"AND ({held})", (*chunk, *padded)).fetchall())
        return out

    def _owner_terms(self, conn: Connection, flt: FactFilter) -> list[str] | None:
        """The owner terms of the facts ``flt`` sees, when matching them narrows the
        match enough to pay (see :data:`_OWNERS_MAX_SHARE`), else ``None``."""
        if flt.users is None or flt.agents is None or flt.scopes is None \
                or len(flt.users) * len(flt.agents) * len(flt.scopes) > _OWNERS_MAX_TERMS:
            return None
        terms = [owner_term(*owners)
                 for owners in itertools.product(flt.users, flt.agents, flt.scopes)]
        rows, owned = self._terms.rows_of(conn, terms)
        return terms if rows >= _OWNERS_MIN_ROWS and owned <= rows * _OWNERS_MAX_SHARE else None

    def _from_copy(self, conn: Connection, words: Sequence[str], flt: FactFilter, pool: int
                   ) -> list[tuple[int, float]]:
        copy = self._slot.copy
        if copy is None:
            self.load(conn, None)
            copy = self._slot.copy
        assert copy is not None and flt.scopes is not None
        with self._lock:  # searches from several threads (asearch) share the copy
            copy.sync(conn)
            return copy.search(list(words), flt, pool=pool,
                               now=float("-inf") if flt.live_at is None else flt.live_at)

    def document_counts(self, conn: Connection, words: Sequence[str], *, min_rows: int
                        ) -> TermCounts | None:
        """Live facts holding each word (see :class:`.TermFrequencies`)."""
        return self._terms.counts(conn, list(words), min_rows=min_rows)

    def load(self, conn: Connection, timeout: float | None) -> bool:
        """Load the in-memory copy now; whether it is loaded."""
        if not self.use_copy:
            raise StoreError("this store was opened without lexical_cache=True", path=conn.path)
        return self._slot.load_now(conn, timeout)

    @property
    def copy(self) -> LexicalCache | None:
        """The loaded in-memory copy, or ``None``."""
        return self._slot.copy

    @property
    def loading(self) -> bool:
        """Whether a background load of the copy is under way."""
        return self._slot.loader is not None

    def close(self) -> None:
        """Stop any background load."""
        self._slot.stop()
