"""How many facts hold each word of a query, from the FTS5 index's own vocabulary.

The query planner leaves out of a query the words found in a large share of
the store (FTS5 scores every row that matches any OR-ed token, so one word in
40% of the facts makes a search scan 40% of the table, while its BM25 weight is
close to nothing). This module reads the document frequency of each word
(stemmed as the index's words are, :mod:`ctxslots.stores.stemming`) from an ``fts5vocab`` view, one term
at a time, and keeps it until the store has grown: reading every term's
frequency up front costs more than the searches of a one-shot command (see
BENCHMARKS.md). At most :data:`COUNTS_KEPT` counts are kept, as the PostgreSQL
engine keeps its own, so a long-lived store searched for new words on every turn
(ids, hashes, names) holds no more. An erasure, in any process, has the counts read
again at the next search: none counts an erased fact (:func:`count_erasure`).
"""

from __future__ import annotations

import time

import attrs

from ..backend import TermCounts
from ..stemming import stemmed_query, token_count
from ._connection import Connection

__all__ = ["COUNTS_KEPT", "TermFrequencies", "count_erasure", "index_terms"]

#: Reload the frequencies when the store has grown by this factor since the last load...
_GROWTH = 1.2
#: ...or when they are older than this many seconds.
_MAX_AGE_S = 600.0
#: Counts kept (words and stems together): past this many they start over.
COUNTS_KEPT = 50_000
#: The ``store_meta`` entry counting erasures.
META_ERASURES = "facts.erasures"


def count_erasure(conn: Connection) -> None:
    """Count an erasure (inside its write): every store's word counts are read again."""
    conn.execute("INSERT INTO store_meta (name, value) VALUES (?, '1') ON CONFLICT(name) "
                 "DO UPDATE SET value = CAST(value AS INTEGER) + 1", (META_ERASURES,))


@attrs.define
class TermFrequencies:
    """Document frequencies of the ``facts`` index, read term by term and read again
    as the store grows."""

    _df: dict[str, int] = attrs.Factory(dict)
    _rows: int = 0
    _top_id: int = -1
    _loaded: float = 0.0
    #: :data:`META_ERASURES` when the counts were read.
    _erasures: str | None = None
    #: Counts by word as the query has it (before stemming), for repeated words.
    _by_word: dict[str, int] = attrs.Factory(dict)

    @property
    def size(self) -> int:
        """How many counts are kept (words and stems): at most :data:`COUNTS_KEPT`,
        and what one search adds to them."""
        return len(self._df) + len(self._by_word)

    def _refresh(self, conn: Connection) -> None:
        row = conn.execute(
            "SELECT (SELECT coalesce(max(id), 0) FROM facts), "
            "(SELECT value FROM store_meta WHERE name = ?)", (META_ERASURES,)).fetchone()
        assert row is not None  # a SELECT of two subqueries has one row
        top, erasures = int(row[0]), row[1]
        fresh = time.monotonic() - self._loaded < _MAX_AGE_S
        if self._top_id >= 0 and top <= self._top_id * _GROWTH and fresh \
                and erasures == self._erasures:
            self._make_room()
            return
        conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.facts_vocab "
                     "USING fts5vocab(main, facts_fts, 'row')")
        self._df = {}
        self._by_word = {}
        self._rows = int(conn.scalar("SELECT count(*) FROM facts"))
        self._top_id = top
        self._erasures = erasures
        self._loaded = time.monotonic()

    def _make_room(self) -> None:
        """Start the counts over once more than :data:`COUNTS_KEPT` are kept."""
        if self.size > COUNTS_KEPT:
            self._df = {}
            self._by_word = {}

    def _frequency(self, conn: Connection, token: str) -> int:
        return token_count(token, (self._docs(conn, stem) for stem in stemmed_query([token])))

    def _docs(self, conn: Connection, term: str) -> int:
        docs = self._df.get(term)
        if docs is None:
            found = conn.scalar("SELECT doc FROM temp.facts_vocab WHERE term = ?", (term,))
            docs = self._df[term] = int(found or 0)
        return docs

    def rows_of(self, conn: Connection, terms: list[str]) -> tuple[int, int]:
        """How many facts there are, and how many hold any of ``terms`` (index terms
        as stored, such as owner terms: not stemmed), as of the last growth check
        (a search's word counts have just made one)."""
        if self._top_id < 0:
            self._refresh(conn)
        self._make_room()
        return self._rows, sum(self._docs(conn, term) for term in dict.fromkeys(terms))

    def counts(self, conn: Connection, words: list[str], *, min_rows: int) -> TermCounts | None:
        """Facts holding each word, or ``None`` in a store smaller than ``min_rows``."""
        self._refresh(conn)
        if self._rows < min_rows:
            return None
        known = self._by_word
        docs = {w: known[w] if w in known else known.setdefault(w, self._frequency(conn, w))
                for w in words}
        return TermCounts(self._rows, docs)


def index_terms(texts: list[str]) -> list[list[str]]:
    """The terms the index holds for each text (its stems, as a fact's text is
    stored and indexed), each once."""
    return [stemmed_query([text]) for text in texts]
