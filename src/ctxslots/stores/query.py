"""The query plan: what a search looks for, made once from the text.

A search turns its text into a :class:`~ctxslots.stores.backend.QueryPlan`
here and nowhere else: the sanitized words (stop words, and words found in much
of the store, left out), their FTS5 expression, and the query vector when the
vector leg runs. The engines receive the plan and never see the raw text; the
ranking reads the periods the text names from it.
"""

from __future__ import annotations

import attrs
import numpy as np

from .backend import Backend, QueryPlan
from .embedders.binding import EmbedderBinding
from .periods import query_periods
from .sanitize import QueryPolicy, keep_words, query_tokens, to_match

__all__ = ["QUERY_VECTORS_KEPT", "QueryPlanner"]

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

    def words(self, text: str, *, relaxed: bool = False) -> list[str]:
        """The words a search of ``text`` looks for: sanitized, stop words and (unless
        ``relaxed``) words common to much of the store left out."""
        policy = self.policy
        tokens = query_tokens(text, policy)
        if not tokens or relaxed or (policy.max_doc_share >= 1.0
                                     and policy.max_query_share >= 1.0):
            return tokens
        counts = self.backend.document_counts(tokens, min_rows=policy.common_min_facts)
        if counts is None:
            return tokens
        return keep_words(tokens, counts.docs, counts.rows, share=policy.max_doc_share,
                          total_share=policy.max_query_share)

    def plan(self, text: str, *, now: float, lexical: bool, vector: bool,
             periods: bool = True, relaxed: bool = False) -> QueryPlan:
        """The plan of a search of ``text`` ranked at ``now``.

        :param lexical: Whether the lexical leg runs (the words are found).
        :param vector: Whether the vector leg runs (the text is embedded, unless blank).
        :param periods: Whether the periods the text names are found.
        :param relaxed: Keep the words common to much of the store too.
        """
        words = tuple(self.words(text, relaxed=relaxed)) if lexical else ()
        embed = vector and self.embedding.embedder is not None and bool(text.strip())
        return QueryPlan(text=text, words=words, match=to_match(list(words)),
                         vector=self.vector(text) if embed else None,
                         periods=tuple(query_periods(text, now)) if periods else ())

    def vector(self, text: str) -> np.ndarray:
        """The embedding of ``text`` (kept for the next few searches of the same text)."""
        assert self.embedding.embedder is not None
        vectors = self._vectors
        vector = vectors.pop(text, None)
        if vector is None:
            vector = np.array(self.embedding.embedder.embed([text])[0], dtype=np.float32)
            vector.setflags(write=False)
        vectors[text] = vector
        while len(vectors) > QUERY_VECTORS_KEPT:
            del vectors[next(iter(vectors))]
        return vector
