"""Leave out of a query the words that occur in a large share of the store.

FTS5 scores every row that matches any OR-ed token, so one word present in
40% of the facts makes a search scan 40% of the table, while its BM25 weight
(inverse document frequency) is close to nothing. This module reads the
document frequency of each query term (stemmed with the index's own
tokenizer) from an ``fts5vocab`` view, one term at a time and once until the
store has grown (reading every term's frequency up front took 0.17 s at
100,000 facts, more than the searches of a one-shot command), and drops such
words from the query.
"""

from __future__ import annotations

import time

import apsw
import attrs

from ..sanitize import keep_words
from ._connection import Connection

__all__ = ["CommonTerms"]

#: Reload the frequencies when the store has grown by this factor since the last load...
_GROWTH = 1.2
#: ...or when they are older than this many seconds.
_MAX_AGE_S = 600.0


@attrs.define
class CommonTerms:
    """Document frequencies of the ``facts`` index, read term by term and read again
    as the store grows.

    Attributes:
        tokenize: The FTS5 tokenizer arguments of the index (for stemming).
    """

    tokenize: list[str]
    _df: dict[str, int] = attrs.Factory(dict)
    _rows: int = 0
    _top_id: int = -1
    _loaded: float = 0.0
    _tokenizer: object | None = None
    #: The last answer, for the memory slots an assembly searches with the same words.
    _last: tuple[tuple[object, ...], list[str]] | None = None

    def _refresh(self, conn: Connection) -> None:
        top = int(conn.scalar("SELECT coalesce(max(id), 0) FROM facts"))
        fresh = time.monotonic() - self._loaded < _MAX_AGE_S
        if self._top_id >= 0 and top <= self._top_id * _GROWTH and fresh:
            return
        conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.facts_vocab "
                     "USING fts5vocab(main, facts_fts, 'row')")
        self._df = {}
        self._last = None
        self._rows = int(conn.scalar("SELECT count(*) FROM facts"))
        self._top_id = top
        self._loaded = time.monotonic()
        if self._tokenizer is None:
            self._tokenizer = conn.raw.fts5_tokenizer(self.tokenize[0], self.tokenize[1:])

    def _frequency(self, conn: Connection, token: str) -> int:
        assert self._tokenizer is not None
        stems = self._tokenizer(token.encode("utf-8"), apsw.FTS5_TOKENIZE_QUERY, None)  # type: ignore[operator]
        # A token the tokenizer splits matches rows of any of its parts.
        return max((self._docs(conn, str(stem[2])) for stem in stems), default=0)

    def _docs(self, conn: Connection, term: str) -> int:
        docs = self._df.get(term)
        if docs is None:
            found = conn.scalar("SELECT doc FROM temp.facts_vocab WHERE term = ?", (term,))
            docs = self._df[term] = int(found or 0)
        return docs

    def drop_common(self, conn: Connection, tokens: list[str], *, share: float, min_rows: int,
                    total_share: float = 1.0) -> list[str]:
        """``tokens`` without those found in more than ``share`` of the facts, then
        without the most common until the rest hold at most ``total_share`` of them
        together (see :func:`~ctxslots.stores.sanitize.keep_words`).

        Nothing is dropped in stores smaller than ``min_rows``. When every token
        is common, the rarest one is kept.
        """
        if not tokens:
            return tokens
        self._refresh(conn)
        if self._rows < min_rows:
            return tokens
        asked = (tuple(tokens), share, total_share)
        if self._last is not None and self._last[0] == asked:
            return list(self._last[1])
        docs = {t: self._frequency(conn, t) for t in tokens}
        kept = keep_words(tokens, docs, self._rows, share=share, total_share=total_share)
        self._last = (asked, list(kept))
        return kept
