"""The query plan: what a search looks for, made once from the text.

A search turns its text into a :class:`~ctxslots.stores.backend.QueryPlan`
here and nowhere else: the sanitized words (stop words, and words found in much
of the store, left out), their FTS5 expression, and the query vector when the
vector leg runs. The engines receive the plan and never see the raw text; the
ranking reads the periods the text names from it.
"""

from __future__ import annotations

import threading
import warnings

import attrs
import numpy as np

from ..errors import EmbedderError
from .backend import Backend, QueryPlan
from .embedders.binding import EmbedderBinding
from .periods import query_periods
from .sanitize import QueryPolicy, keep_words, query_tokens, to_match

__all__ = ["COMMON_MIN_FACTS", "QUERY_VECTORS_KEPT", "QueryPlanner"]

#: A store of fewer facts has no common words: in a handful of facts every word
#: is held by a large share of them.
COMMON_MIN_FACTS = 50

#: Query vectors kept for repeated searches of the same text: a prompt assembly
#: searches each memory slot with the same message, so a real model embeds it
#: once a turn.
QUERY_VECTORS_KEPT = 32


@attrs.define
class QueryPlanner:
    """Makes query plans for one store.

    Attributes:
        backend: The engine, asked how many facts hold each word.
        policy: How text becomes words.
        embedding: The embedder of the vector leg.
    """

    backend: Backend
    policy: QueryPolicy
    embedding: EmbedderBinding
    _vectors: dict[str, np.ndarray] = attrs.field(factory=dict, repr=False)
    _tokens: dict[str, tuple[str, ...]] = attrs.field(factory=dict, repr=False)
    _lock: threading.Lock = attrs.field(factory=threading.Lock, repr=False)

    def words(self, text: str, *, relaxed: bool = False) -> list[str]:
        """The words a search of ``text`` looks for: sanitized, stop words and (unless
        ``relaxed``) words common to much of the store left out."""
        return self._words(text, relaxed=relaxed, common_share=None)[0]

    def _words(self, text: str, *, relaxed: bool, common_share: float | None
               ) -> tuple[list[str], list[str]]:
        """The words a search looks for, and the text's words held by at least
        ``common_share`` of the store's facts (none when ``None``, or in a store of
        fewer than :data:`COMMON_MIN_FACTS`)."""
        policy = self.policy
        tokens = self._query_tokens(text)
        drops = not relaxed and (policy.max_doc_share < 1.0 or policy.max_query_share < 1.0)
        if not tokens or not (drops or common_share is not None):
            return tokens, []
        least = policy.common_min_facts if common_share is None \
            else min(policy.common_min_facts, COMMON_MIN_FACTS)
        counts = self.backend.document_counts(tokens, min_rows=least)
        if counts is None:
            return tokens, []
        common = [] if common_share is None or counts.rows < COMMON_MIN_FACTS else [
            t for t in tokens if counts.docs.get(t, 0) >= common_share * counts.rows]
        if drops and counts.rows >= policy.common_min_facts:
            tokens = keep_words(tokens, counts.docs, counts.rows, share=policy.max_doc_share,
                                total_share=policy.max_query_share)
        return tokens, common

    def _query_tokens(self, text: str) -> list[str]:
        """The text's query tokens (kept for the next few searches of the same text: an
        assembly finds them for each memory slot, and again for its relaxed search)."""
        kept = self._tokens
        with self._lock:
            tokens = kept.pop(text, None) if isinstance(text, str) else None
        if tokens is None:
            tokens = tuple(query_tokens(text, self.policy))
        with self._lock:
            kept[text] = tokens
            while len(kept) > QUERY_VECTORS_KEPT:
                del kept[next(iter(kept))]
        return list(tokens)

    def plan(self, text: str, *, now: float, lexical: bool, vector: bool,
             periods: bool = True, relaxed: bool = False,
             common_share: float | None = None) -> QueryPlan:
        """The plan of a search of ``text`` ranked at ``now``.

        :param lexical: Whether the lexical leg runs (the words are found).
        :param vector: Whether the vector leg runs (the text is embedded, unless blank).
        :param periods: Whether the periods the text names are found.
        :param relaxed: Keep the words common to much of the store too.
        :param common_share: Find the text's words held by at least this share
            of the store's facts (``None``: do not).
        """
        words, common = self._words(text, relaxed=relaxed, common_share=common_share) \
            if lexical else ([], [])
        embed = vector and self.embedding.embedder is not None and bool(text.strip())
        return QueryPlan(text=text, words=tuple(words), match=to_match(words),
                         vector=self._vector_or_words(text, lexical) if embed else None,
                         periods=tuple(query_periods(text, now)) if periods else (),
                         common=tuple(common))

    def _vector_or_words(self, text: str, lexical: bool) -> np.ndarray | None:
        """The text's embedding; ``None`` (a search by words alone, said in a warning)
        when the embedder fails and the words can still be searched."""
        try:
            return self.vector(text)
        except EmbedderError as exc:
            if not lexical:
                raise
            warnings.warn(f"{exc}: this search used words only", RuntimeWarning,
                          stacklevel=2)
            return None

    def vector(self, text: str) -> np.ndarray:
        """The embedding of ``text`` (kept for the next few searches of the same text)."""
        assert self.embedding.embedder is not None
        vectors = self._vectors
        with self._lock:
            vector = vectors.pop(text, None)
        if vector is None:
            vector = self.embedding.embed([text])[0].copy()
            vector.setflags(write=False)
        with self._lock:
            # Two threads trimming at once would both pick the same oldest text.
            vectors[text] = vector
            while len(vectors) > QUERY_VECTORS_KEPT:
                del vectors[next(iter(vectors))]
        return vector
